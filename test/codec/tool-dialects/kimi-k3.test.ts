// Kimi K3 "XTML" wire: detection on the real template, its response and tools
// tags read as markup in every reply, calls with values typed by their type=
// attribute, cut and broken calls, the round trip through the template (with
// thinking on and off), and the forced grammar.
import { describe, expect, test } from "bun:test";
import { gbnfErrors, parseGbnf } from "../../../grammar/index.ts";
import type { ChatMessage } from "../../../src/codec/index.ts";
import { KIMI_K3_TAGS as T, kimiK3 } from "../../../src/codec/tool-dialects/kimi-k3.ts";
import { callsOf, detectedBy, grammarAccepts, haveTemplates, parseAllWays, render, run } from "./parse-harness.ts";

const TOOLS = [
  {
    type: "function" as const,
    function: {
      name: "get_weather",
      parameters: {
        type: "object",
        properties: {
          city: { type: "string" },
          days: { type: "integer" },
          opts: { type: "object" },
          note: { anyOf: [{ type: "string" }, { type: "null" }] },
        },
        required: ["city"],
      },
    },
  },
  { type: "function" as const, function: { name: "noop", parameters: { type: "object", properties: {} } } },
];
const SPECS = TOOLS.map((t) => t.function);

const arg = (key: string, type: string, value: string) =>
  `<|open|>argument key="${key}" type="${type}"<|sep|>${value}<|close|>argument<|sep|>`;
const call = (name: string, index: number, ...args: string[]) =>
  `<|open|>call tool="${name}" index="${index}"<|sep|>${args.join("")}<|close|>call<|sep|>`;
const tools = (...calls: string[]) => `${T.toolsOpen}${calls.join("")}${T.toolsClose}`;
const response = (text: string) => `${T.responseOpen}${text}${T.responseClose}`;
const END = `${T.messageClose}${T.endOfMessage}`;

const parse = (text: string) => parseAllWays(kimiK3, text, { tools: SPECS });

describe.skipIf(!haveTemplates)("kimi-k3 detection", () => {
  test("the K3 template and no other", () => {
    expect(detectedBy(kimiK3)).toEqual(["Kimi-K3"]);
    expect(kimiK3.alwaysParse).toBe(true);
  });
});

describe("kimi-k3 parser", () => {
  test("a reply without calls: the response tags are markup, the prose (tag names and all) content", () => {
    const text = "Use the response tag, then message the handler.";
    expect(parse(`${response(text)}${END}`)).toEqual({ text, reasoning: "", calls: [] });
    // Thinking off: the generation prompt opened the response section.
    expect(parse(`${text}${T.responseClose}${END}`).text).toBe(text);
  });

  test("content, then two calls with values typed by type=", () => {
    const m = parse(
      `${response("On it.")}${tools(
        call(
          "get_weather",
          1,
          arg("city", "string", 'São "P" <b>'),
          arg("days", "number", "3"),
          arg("opts", "object", '{"a": [1, true]}'),
          arg("note", "null", "null"),
        ),
        call("noop", 2),
      )}${END}`,
    );
    expect(m.text).toBe("On it.");
    expect(m.calls.map((c) => [c.id, c.name, JSON.parse(c.end!)])).toEqual([
      ["id0", "get_weather", { city: 'São "P" <b>', days: 3, opts: { a: [1, true] }, note: null }],
      ["id1", "noop", {}],
    ]);
  });

  test("escaped attributes, a JSON block for the arguments, a type the schema overrules", () => {
    const m = parse(
      tools(
        `<|open|>call tool="a&amp;b" index="1"<|sep|><|open|>argument key="say &quot;hi&quot;" type="string"<|sep|>x<|close|>argument<|sep|><|close|>call<|sep|>`,
        `<|open|>call tool="noop" index="2"<|sep|><|open|>json type="object"<|sep|>{"k": [1]}<|close|>json<|sep|><|close|>call<|sep|>`,
        call("get_weather", 3, arg("days", "string", "4"), arg("city", "number", "7")),
      ),
    );
    expect(callsOf(m)).toEqual([
      ["a&b", '{"say \\"hi\\"":"x"}'],
      ["noop", '{"k":[1]}'],
      ["get_weather", '{"days":4,"city":"7"}'],
    ]);
  });

  test("a cut call ends as far as written once its call tag closed; before that it is dropped", () => {
    const opened = `${response("Hi")}${T.toolsOpen}${call("get_weather", 1).slice(0, -"<|close|>call<|sep|>".length)}`;
    expect(callsOf(parse(opened))).toEqual([["get_weather", "{"]]);
    const cut = parse(`${opened}<|open|>argument key="city" type="string"<|sep|>Os`);
    expect(cut.text).toBe("Hi");
    expect(callsOf(cut)).toEqual([["get_weather", '{"city":"Os']]);
    for (const early of [T.toolsOpen, `${T.toolsOpen}<|open|>call tool="get_wea`, "<|open|>too"])
      expect(parse(`${response("Hi")}${early}`)).toEqual({ text: "Hi", reasoning: "", calls: [] });
  });

  test("markup that makes no call is dropped, never content", () => {
    const m = parse(`${response("a")}${tools("junk", '<|open|>call name="x"<|sep|><|close|>call<|sep|>')}${END}`);
    expect(m).toEqual({ text: "a", reasoning: "", calls: [] });
  });
});

/** A conversation ending in an assistant tool-call turn, rendered; what the model wrote after the generation prompt. */
function renderedReply(thinking: boolean, assistant: ChatMessage): string {
  const text = render("Kimi-K3", [{ role: "user", content: "weather?" }, assistant], TOOLS, { thinking });
  const turn = text.slice(text.lastIndexOf('<|open|>message role="assistant"<|sep|>'));
  const prompt = `<|open|>message role="assistant"<|sep|>${thinking ? T.thinkOpen : T.responseOpen}`;
  expect(turn.startsWith(prompt)).toBe(true);
  return turn.slice(prompt.length);
}

const ASSISTANT: ChatMessage = {
  role: "assistant",
  content: "Checking.",
  tool_calls: [
    {
      id: "call_1",
      type: "function",
      function: {
        name: "get_weather",
        arguments: JSON.stringify({ city: 'Oslo "N"\n', days: 2, opts: { a: [1] }, note: null }),
      },
    },
    { id: "call_2", type: "function", function: { name: "noop", arguments: "{}" } },
  ],
};

describe.skipIf(!haveTemplates)("kimi-k3 round trip through the template", () => {
  for (const thinking of [true, false]) {
    test(`thinking ${thinking ? "on" : "off"}: the rendered turn parses back, and the grammar accepts its calls`, () => {
      // With thinking on, the think section (empty here) is what a reasoning split takes out first.
      const reply = renderedReply(thinking, ASSISTANT).replace(T.thinkClose, "");
      const m = parse(reply);
      expect(m.text).toBe("Checking.");
      expect(m.calls.map((c) => [c.name, JSON.parse(c.end!)])).toEqual(
        ASSISTANT.tool_calls!.map((c) => [c.function.name, JSON.parse(c.function.arguments as string)]),
      );
      // Forced from the first token (the turn has no content): the whole reply is the grammar's.
      const forced = renderedReply(thinking, { ...ASSISTANT, content: "" });
      expect(grammarAccepts(kimiK3.forcedGrammar(SPECS, true), forced)).toBe(true);
      expect(grammarAccepts(kimiK3.forcedGrammar(SPECS, false), forced)).toBe(false); // two calls
      const one = renderedReply(thinking, { ...ASSISTANT, content: "", tool_calls: ASSISTANT.tool_calls!.slice(0, 1) });
      expect(grammarAccepts(kimiK3.forcedGrammar(SPECS, false), one)).toBe(true);
    });
  }
});

describe("kimi-k3 forced grammar", () => {
  for (const parallel of [false, true]) {
    test(`values held to the schema, read back (parallel=${parallel})`, () => {
      const gbnf = kimiK3.forcedGrammar(SPECS, parallel);
      expect(gbnfErrors(parseGbnf(gbnf))).toEqual([]);
      const accepts = (...calls: string[]) => grammarAccepts(gbnf, `${tools(...calls)}${END}`);
      expect(accepts(call("get_weather", 1, arg("city", "string", "Oslo")))).toBe(true);
      expect(accepts(call("get_weather", 1, arg("city", "string", "Oslo"), arg("days", "number", "3")))).toBe(true);
      expect(accepts(call("get_weather", 1, arg("city", "string", "Oslo"), arg("note", "null", "null")))).toBe(true);
      expect(accepts(call("get_weather", 1, arg("days", "number", "3")))).toBe(false); // city is required
      expect(accepts(call("get_weather", 1, arg("city", "string", "Oslo"), arg("days", "number", "x")))).toBe(false);
      expect(accepts(call("get_weather", 1, arg("city", "number", "5")))).toBe(false);
      expect(accepts(call("other", 1, arg("city", "string", "Oslo")))).toBe(false);
      expect(accepts(call("get_weather", 1, arg("city", "string", "Oslo")), call("noop", 2))).toBe(parallel);
      expect(kimiK3.trigger).toBe(T.toolsOpen);
      const one = `${tools(call("get_weather", 1, arg("city", "string", "Oslo"), arg("days", "number", "3")))}${END}`;
      expect(callsOf(run(kimiK3, [one], { tools: SPECS }))).toEqual([["get_weather", '{"city":"Oslo","days":3}']]);
    });
  }
});
