// Kimi K2 tool-call wire: detection on the real templates, streaming parse of
// the calls K2 writes (with the ids it writes), cut and broken calls, the
// round trip through the template, and the forced grammar.
import { describe, expect, test } from "bun:test";
import { gbnfErrors, parseGbnf } from "../../../grammar/index.ts";
import type { ChatMessage } from "../../../src/codec/index.ts";
import { KIMI_K2_MARKERS as K, kimiK2 } from "../../../src/codec/tool-dialects/kimi-k2.ts";
import { callsOf, detectedBy, grammarAccepts, haveTemplates, parseAllWays, render, run } from "./parse-harness.ts";

/** One call as the templates write it: `functions.NAME:IDX` is its id. */
const call = (id: string, args: string) => `${K.callBegin}${id}${K.argumentBegin}${args}${K.callEnd}`;
const section = (...calls: string[]) => `${K.sectionBegin}${calls.join("")}${K.sectionEnd}`;

const TOOLS = [
  {
    type: "function" as const,
    function: {
      name: "get_weather",
      description: "Current weather",
      parameters: {
        type: "object",
        properties: { city: { type: "string" }, days: { type: "integer" } },
        required: ["city"],
        additionalProperties: false,
      },
    },
  },
  { type: "function" as const, function: { name: "noop", parameters: { type: "object", properties: {} } } },
];

describe.skipIf(!haveTemplates)("kimi-k2 detection", () => {
  test("the K2 templates and no other (K3 has another wire)", () => {
    expect(detectedBy(kimiK2)).toEqual(["Kimi-K2-Instruct", "Kimi-K2-Thinking", "moonshotai-Kimi-K2"]);
  });
});

describe("kimi-k2 parser", () => {
  test("one call: the wire's id is the call's id", () => {
    const args = '{"city": "Oslo", "days": 3}';
    const m = parseAllWays(kimiK2, section(call("functions.get_weather:0", args)));
    expect(m).toEqual({
      text: "",
      reasoning: "",
      calls: [{ id: "functions.get_weather:0", name: "get_weather", args, end: args }],
    });
  });

  test("text before, two calls numbered on from earlier turns", () => {
    const m = parseAllWays(
      kimiK2,
      `Let me check both.${section(call("functions.get_weather:2", '{"city": "Oslo"}'), call("functions.noop:3", "{}"))}`,
    );
    expect(m.text).toBe("Let me check both.");
    expect(m.calls.map((c) => [c.id, c.name, c.end])).toEqual([
      ["functions.get_weather:2", "get_weather", '{"city": "Oslo"}'],
      ["functions.noop:3", "noop", "{}"],
    ]);
  });

  test("content after reasoning (the reasoning split out before) reads as content", () => {
    // Kimi-K2-Thinking writes <think>…</think> first; the tool parser sees what follows.
    const m = parseAllWays(kimiK2, `\nSure.${section(call("functions.noop:0", "{}"))}`);
    expect(m.text).toBe("\nSure.");
    expect(callsOf(m)).toEqual([["noop", "{}"]]);
  });

  test("calls without their section or call-end markers (as K2 Thinking writes them at times)", () => {
    const m = parseAllWays(
      kimiK2,
      `${K.callBegin}functions.get_weather:0${K.argumentBegin}{"city": "Oslo"}${K.callBegin}functions.noop:1${K.argumentBegin}{}`,
    );
    expect(m.calls.map((c) => [c.id, c.end])).toEqual([
      ["functions.get_weather:0", '{"city": "Oslo"}'],
      ["functions.noop:1", "{}"],
    ]);
    expect(m.text).toBe("");
  });

  test("ids stay distinct and canonical when the model repeats or shortens one", () => {
    const m = parseAllWays(
      kimiK2,
      section(call("functions.noop:0", "{}"), call("functions.noop:0", "{}"), call("get_weather", '{"city": "x"}')),
    );
    expect(m.calls.map((c) => c.id)).toEqual(["functions.noop:0", "id0", "functions.get_weather:2"]);
    expect(m.calls.map((c) => c.name)).toEqual(["noop", "noop", "get_weather"]);
  });

  test("arguments may quote the wire's markers", () => {
    const args = `{"text": "${K.callEnd}${K.sectionEnd}"}`;
    expect(callsOf(parseAllWays(kimiK2, section(call("functions.say:0", args))))).toEqual([["say", args]]);
  });

  test("a cut call ends as far as written once its arguments began; cut before that, it is dropped", () => {
    const opened = `${K.sectionBegin}${K.callBegin}functions.get_weather:0${K.argumentBegin}`;
    const cut = parseAllWays(kimiK2, `Hi${opened}{"city": "Os`);
    expect(cut.text).toBe("Hi");
    expect(cut.calls.map((c) => [c.id, c.end])).toEqual([["functions.get_weather:0", '{"city": "Os']]);
    for (const early of [K.sectionBegin, `${K.sectionBegin}${K.callBegin}functions.get_wea`, opened])
      expect(parseAllWays(kimiK2, `Hi${early}`)).toEqual({ text: "Hi", reasoning: "", calls: [] });
  });

  test("malformed calls are dropped: call markup is never content", () => {
    // No argument marker, arguments that are no object, an empty section.
    const noArgs = `${K.callBegin}functions.f:0${K.callEnd}`;
    const notObject = call("functions.f:1", '"x"');
    expect(parseAllWays(kimiK2, `a${section(noArgs, notObject)}b`)).toEqual({ text: "ab", reasoning: "", calls: [] });
    expect(parseAllWays(kimiK2, `a${K.sectionBegin}junk${K.sectionEnd}`)).toEqual({
      text: "a",
      reasoning: "",
      calls: [],
    });
    // A call whose arguments break off at the next marker ends there (not valid JSON: a broken call).
    const broken = parseAllWays(kimiK2, section(call("functions.f:0", '{"a": 1,'), call("functions.g:1", "{}")));
    expect(callsOf(broken)).toEqual([
      ["f", '{"a": 1'],
      ["g", "{}"],
    ]);
  });

  test("plain text and a partial marker at the end come out", () => {
    expect(run(kimiK2, ["a <|tool_", "call"])).toEqual({ text: "a <|tool_call", reasoning: "", calls: [] });
  });
});

describe.skipIf(!haveTemplates)("kimi-k2 round trip through the template", () => {
  const assistant: ChatMessage = {
    role: "assistant",
    content: "Checking.",
    tool_calls: [
      {
        id: "functions.get_weather:0",
        type: "function",
        function: { name: "get_weather", arguments: '{"city":"Oslo \\"N\\"","days":2}' },
      },
      { id: "functions.noop:1", type: "function", function: { name: "noop", arguments: "{}" } },
    ],
  };
  const user: ChatMessage = { role: "user", content: "weather?" };

  test("moonshotai-Kimi-K2: the rendered calls parse back to the same calls, ids included", () => {
    const text = render("moonshotai-Kimi-K2", [user, assistant], TOOLS);
    const turn = text.slice(text.lastIndexOf("<|im_middle|>") + "<|im_middle|>".length, text.lastIndexOf("<|im_end|>"));
    const m = parseAllWays(kimiK2, turn);
    expect(m.text).toBe("Checking.");
    expect(m.calls.map((c) => [c.id, c.name, JSON.parse(c.end!)])).toEqual([
      ["functions.get_weather:0", "get_weather", { city: 'Oslo "N"', days: 2 }],
      ["functions.noop:1", "noop", {}],
    ]);
    // The ids sent back name the tool results as the model saw its own calls named.
    const results = m.calls.map((c): ChatMessage => ({ role: "tool", tool_call_id: c.id, content: "ok" }));
    const next = render("moonshotai-Kimi-K2", [user, assistant, ...results], TOOLS);
    expect(next).toContain("## Return of functions.get_weather:0");
    expect(next).toContain("## Return of functions.noop:1");
  });

  test("the forced grammar accepts the template's own calls", () => {
    const text = render("moonshotai-Kimi-K2", [user, assistant], TOOLS);
    const calls = text.slice(text.indexOf(K.sectionBegin), text.indexOf(K.sectionEnd) + K.sectionEnd.length);
    const tools = TOOLS.map((t) => t.function);
    expect(grammarAccepts(kimiK2.forcedGrammar(tools, true), calls)).toBe(true);
    expect(grammarAccepts(kimiK2.forcedGrammar(tools, false), calls)).toBe(false); // two calls
  });
});

describe("kimi-k2 forced grammar", () => {
  const tools = TOOLS.map((t) => t.function);
  for (const parallel of [false, true]) {
    test(`parses, holds arguments to the schema, and reads back (parallel=${parallel})`, () => {
      const gbnf = kimiK2.forcedGrammar(tools, parallel);
      expect(gbnfErrors(parseGbnf(gbnf))).toEqual([]);
      const one = section(call("functions.get_weather:0", '{"city": "Oslo"}'));
      expect(grammarAccepts(gbnf, one)).toBe(true);
      expect(grammarAccepts(gbnf, section(call("functions.get_weather:17", '{"city":"Oslo","days":3}')))).toBe(true);
      expect(grammarAccepts(gbnf, section(call("functions.get_weather:0", '{"city": 5}')))).toBe(false);
      expect(grammarAccepts(gbnf, section(call("functions.other:0", '{"city": "Oslo"}')))).toBe(false);
      expect(grammarAccepts(gbnf, section(call("get_weather:0", '{"city": "Oslo"}')))).toBe(false);
      const two = section(call("functions.get_weather:0", '{"city": "Oslo"}'), call("functions.noop:1", "{}"));
      expect(grammarAccepts(gbnf, two)).toBe(parallel);
      expect(gbnf.startsWith("root ::= ") && kimiK2.trigger === K.sectionBegin).toBe(true);
      // What the grammar writes, the parser reads back.
      expect(callsOf(run(kimiK2, [one]))).toEqual([["get_weather", '{"city": "Oslo"}']]);
    });
  }
});
