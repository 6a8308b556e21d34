// Mistral tool-call dialects: `[TOOL_CALLS]` + a JSON array (Nemo),
// `[TOOL_CALLS]f[CALL_ID]id[ARGS]{...}` (Small 3.2) and `[TOOL_CALLS]f[ARGS]{...}`
// (Devstral, Ministral 3). One parser reads all three; each dialect's forced
// grammar writes its own template's form.
import { describe, expect, test } from "bun:test";
import { gbnfErrors, parseGbnf } from "../../../grammar/index.ts";
import { ChatTemplate } from "../../../src/codec/index.ts";
import { mistral, mistralCallId, mistralCallIds, mistralNamed } from "../../../src/codec/tool-dialects/mistral.ts";
import type { ToolDialect } from "../../../src/codec/tool-dialects/types.ts";
import { recognizes } from "../../grammar/recognizer.ts";
import { callsOf, cutPoints, detectedBy, haveTemplates, parseAllWays, run, templateSource } from "./parse-harness.ts";

/** Each dialect and the real templates that write its wire. */
const FAMILIES: { dialect: ToolDialect; templates: string[] }[] = [
  { dialect: mistral, templates: ["mistralai-Mistral-Nemo-Instruct-2407"] },
  { dialect: mistralCallIds, templates: ["Mistral-Small-3.2-24B-Instruct-2506"] },
  {
    dialect: mistralNamed,
    templates: ["unsloth-mistral-Devstral-Small-2507", "mistralai-Ministral-3-14B-Reasoning-2512"],
  },
];

const parse = (text: string) => parseAllWays(mistral, text);

describe.skipIf(!haveTemplates)("mistral detection on the real templates", () => {
  for (const { dialect, templates } of FAMILIES) {
    test(`${dialect.name}: its templates and no other`, () => {
      expect(detectedBy(dialect)).toEqual([...templates].sort());
    });
  }

  test("a template that shows [TOOL_CALLS] but renders no call: the vocabulary decides", () => {
    const bare = "{{ '[TOOL_CALLS]' }} tools";
    const vocab = (tokens: string[]) => (t: string) => tokens.includes(t);
    expect(FAMILIES.map((f) => f.dialect.detect(bare, vocab([])))).toEqual([true, false, false]);
    expect(FAMILIES.map((f) => f.dialect.detect(bare, vocab(["[ARGS]"])))).toEqual([false, false, true]);
  });
});

describe("mistral parser: the JSON array (Nemo)", () => {
  test("one call, whole and split at every boundary", () => {
    const m = parse(
      '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}, "id": "a1b2c3d4e"}]',
    );
    expect(m.text).toBe("");
    // The arguments stream, so the id (written after them) comes from newId.
    expect(m.calls).toEqual([
      { id: "id0", name: "get_weather", args: '{"city": "Oslo", "days": 2}', end: '{"city": "Oslo", "days": 2}' },
    ]);
  });

  test("the arguments stream as they are written", () => {
    const p = mistral.parser({ newId: () => "id0" });
    const first = p.push('[TOOL_CALLS][{"name": "f", "arguments": {"q": "abc');
    expect(first.map((e) => e.type)).toEqual(["call-start", "call-args"]);
    expect(p.push('d"}, "id": "a1b2c3d4e"}]').map((e) => e.type)).toEqual(["call-args", "call-end"]);
  });

  test("parallel calls in one array; keys in another order are read whole, with the model's id", () => {
    const m = parse(
      '[TOOL_CALLS] [{"name": "a", "arguments": {"x": [1, "]"]}, "id": "abc123XYZ"}, {"id": "zzzzzzzzz", "name": "b", "arguments": {}}]',
    );
    expect(m.text).toBe("");
    expect(callsOf(m)).toEqual([
      ["a", '{"x": [1, "]"]}'],
      ["b", "{}"],
    ]);
    expect(m.calls.map((c) => c.id)).toEqual(["id0", "zzzzzzzzz"]);
  });

  test("text before the marker is content (reasoning is split out before the parser)", () => {
    const m = parse('Let me check. [TOOL_CALLS][{"name": "f", "arguments": {"q": "[TOOL_CALLS]"}}]');
    expect(m.text).toBe("Let me check. ");
    expect(callsOf(m)).toEqual([["f", '{"q": "[TOOL_CALLS]"}']]);
  });

  test("arguments given as a JSON string are taken as written", () => {
    const m = parse('[TOOL_CALLS][{"name": "f", "arguments": "{\\"a\\": 1}"}]');
    expect(callsOf(m)).toEqual([["f", '{"a": 1}']]);
  });
});

describe("mistral parser: named calls (Small 3.2, Devstral, Ministral)", () => {
  test("[ARGS] calls back to back, whole and split at every boundary", () => {
    const m = parse('[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{"tz": "CET"}');
    expect(m.text).toBe("");
    expect(callsOf(m)).toEqual([
      ["get_weather", '{"city": "Paris"}'],
      ["get_time", '{"tz": "CET"}'],
    ]);
  });

  test("[CALL_ID]: the model's id is the call's id when it is 9 alphanumerics, not used before", () => {
    const m = parse(
      '[TOOL_CALLS]f[CALL_ID]a1b2c3d4e[ARGS]{"k": 1}[TOOL_CALLS]g[CALL_ID]a1b2c3d4e[ARGS]{}[TOOL_CALLS]h[CALL_ID]short[ARGS]{}',
    );
    expect(m.calls.map((c) => [c.id, c.name, c.end])).toEqual([
      ["a1b2c3d4e", "f", '{"k": 1}'],
      ["id0", "g", "{}"],
      ["id1", "h", "{}"],
    ]);
  });

  test("the call starts once the name and the arguments' opening are known, then streams", () => {
    const p = mistral.parser({ newId: () => "id0" });
    expect(p.push("[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]")).toEqual([]);
    expect(p.push('{"city": "Par')).toEqual([
      { type: "call-start", index: 0, id: "a1b2c3d4e", name: "get_weather" },
      { type: "call-args", index: 0, text: '{"city": "Par' },
    ]);
    expect(p.push('is"}')).toEqual([
      { type: "call-args", index: 0, text: 'is"}' },
      { type: "call-end", index: 0, arguments: '{"city": "Paris"}' },
    ]);
    expect(p.flush()).toEqual([]);
  });

  test("text before the calls is content; whitespace between and after them is not", () => {
    const m = parse('I will check.\n[TOOL_CALLS]a[ARGS]{"x": 1}\n[TOOL_CALLS]b[ARGS]{}\n');
    expect(m.text).toBe("I will check.\n");
    expect(callsOf(m)).toEqual([
      ["a", '{"x": 1}'],
      ["b", "{}"],
    ]);
    expect(parse("[TOOL_CALLS]a[ARGS]{} and more").text).toBe(" and more");
  });
});

describe("mistral parser: plain, cut and malformed replies", () => {
  test("plain text, and a partial marker at the end, come out as text", () => {
    expect(parse("Hello [TOOL")).toEqual({ text: "Hello [TOOL", reasoning: "", calls: [] });
  });

  test("a malformed call is dropped: its markup is never content", () => {
    expect(parse('[TOOL_CALLS][{"arguments": {}}] after')).toEqual({ text: " after", reasoning: "", calls: [] });
    expect(parse('[TOOL_CALLS][{"name": "f", "arguments": 3}]')).toEqual({ text: "", reasoning: "", calls: [] });
    expect(parse("[TOOL_CALLS][1, 2] after")).toEqual({ text: " after", reasoning: "", calls: [] });
    expect(parse("[TOOL_CALLS]f[ARGS]nope")).toEqual({ text: "nope", reasoning: "", calls: [] });
    expect(parse("[TOOL_CALLS]f[CALL_ID]abc[XYZ]")).toEqual({ text: "[XYZ]", reasoning: "", calls: [] });
    // A marker with no call after it: only the marker was markup.
    expect(parse("[TOOL_CALLS]not a call")).toEqual({ text: "not a call", reasoning: "", calls: [] });
  });

  test("arguments that are not JSON end the call as written (the caller does not run it)", () => {
    const m = parse('[TOOL_CALLS][{"name": "f", "arguments": {"a": }}] after');
    expect(m).toEqual({
      text: " after",
      reasoning: "",
      calls: [{ id: "id0", name: "f", args: '{"a": }', end: '{"a": }' }],
    });
  });

  test("a call cut off by the end of the reply ends as far as written, never as content", () => {
    const partial = (s: string) => callsOf(parse(`Hi ${s}`));
    expect(partial('[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}')).toEqual([["f", '{"a": 1}']]);
    expect(partial('[TOOL_CALLS][{"name": "f", "arguments": {}}, {"name": "g", "arguments": {"b": ')).toEqual([
      ["f", "{}"],
      ["g", '{"b":'],
    ]);
    expect(partial('[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}, "id": "abc')).toEqual([["f", '{"a": 1}']]);
    expect(partial('[TOOL_CALLS]f[ARGS]{"a": ')).toEqual([["f", '{"a":']]);
    expect(partial('[TOOL_CALLS]f[CALL_ID]abc123XYZ[ARGS]{"a": [')).toEqual([["f", '{"a": [']]);
    for (const s of [
      "[TOOL_CALLS]",
      '[TOOL_CALLS][{"na',
      "[TOOL_CALLS]f",
      "[TOOL_CALLS]f[AR",
      "[TOOL_CALLS]f[CALL_ID]abc",
      "[TOOL_CALLS]f[ARGS]",
      '[TOOL_CALLS][{"name": "f", "arguments": ',
    ]) {
      expect(parse(`Hi ${s}`)).toEqual({ text: "Hi ", reasoning: "", calls: [] });
    }
  });

  test("cut at any token boundary: no markup in content; once the arguments began, a prefix of them", () => {
    const args = '{"city": "Oslo", "unit": "c"}';
    const replies = [
      `[TOOL_CALLS][{"name": "get_weather", "arguments": ${args}, "id": "a1b2c3d4e"}]`,
      `[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]${args}`,
      `[TOOL_CALLS]get_weather[ARGS]${args}`,
    ];
    const markers = ["[TOOL_CALLS]", "[CALL_ID]", "[ARGS]"];
    for (const reply of replies) {
      const begun = reply.indexOf(args) + 1;
      for (const k of cutPoints(reply, markers)) {
        const m = run(mistral, [reply.slice(0, k)]);
        expect(run(mistral, [...reply.slice(0, k)])).toEqual(m);
        expect(m.text).toBe("");
        if (k < begun) expect(m.calls).toEqual([]);
        else {
          expect(m.calls.map((c) => c.name)).toEqual(["get_weather"]);
          expect(args.startsWith(m.calls[0]!.end!)).toBe(true);
        }
      }
    }
  });

  test("default ids are 9 alphanumerics and distinct", () => {
    const m = run(mistral, ['[TOOL_CALLS][{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]'], {
      newId: undefined,
    });
    expect(m.calls).toHaveLength(2);
    for (const c of m.calls) expect(c.id).toMatch(/^[A-Za-z0-9]{9}$/);
    expect(m.calls[0]!.id).not.toBe(m.calls[1]!.id);
    const ids = new Set(Array.from({ length: 200 }, mistralCallId));
    expect(ids.size).toBe(200);
    for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9]{9}$/);
  });
});

// ---------------------------------------------------------------------------
// The real templates: what they render for a call turn parses back, and is
// what each dialect's forced grammar writes.

const TOOLS = [
  {
    name: "get_weather",
    parameters: {
      type: "object",
      properties: { city: { type: "string" }, days: { type: "integer" } },
      required: ["city"],
      additionalProperties: false,
    },
  },
  { name: "noop", parameters: { type: "object", properties: {}, additionalProperties: false } },
];
const CALLS = [
  { id: "a1b2c3d4e", name: "get_weather", arguments: { city: 'Paris "Rive" <gauche>', days: 3 } },
  { id: "f5g6h7i8j", name: "noop", arguments: {} },
];

/** The assistant's call turn as `template` renders it, from `[TOOL_CALLS]` to the end of the turn. */
function renderedCalls(template: string, calls: typeof CALLS): string {
  const text = new ChatTemplate(templateSource(template), { bosToken: "<s>", eosToken: "</s>" }).render({
    messages: [
      { role: "user", content: "Weather in Paris?" },
      {
        role: "assistant",
        content: "",
        tool_calls: calls.map((c) => ({
          id: c.id,
          type: "function",
          function: { name: c.name, arguments: c.arguments },
        })),
      },
    ],
    tools: TOOLS.map((t) => ({ type: "function", function: t })),
    addGenerationPrompt: false,
  }).text;
  const start = text.lastIndexOf("[/INST]") + "[/INST]".length;
  expect(text.endsWith("</s>")).toBe(true);
  return text.slice(start, -"</s>".length);
}

describe.skipIf(!haveTemplates)("mistral round trip through the real templates", () => {
  for (const { dialect, templates } of FAMILIES) {
    for (const template of templates) {
      test(`${template}.jinja: the rendered calls parse back; the forced grammar writes them`, () => {
        const wire = renderedCalls(template, CALLS);
        const parsed = parse(wire);
        expect(parsed.text).toBe("");
        expect(parsed.calls.map((c) => [c.name, JSON.parse(c.end!)])).toEqual(CALLS.map((c) => [c.name, c.arguments]));
        if (dialect === mistralCallIds) expect(parsed.calls.map((c) => c.id)).toEqual(CALLS.map((c) => c.id));

        const one = parseGbnf(dialect.forcedGrammar(TOOLS, false));
        const many = parseGbnf(dialect.forcedGrammar(TOOLS, true));
        expect(gbnfErrors(one)).toEqual([]);
        expect(gbnfErrors(many)).toEqual([]);
        const single = renderedCalls(template, CALLS.slice(0, 1));
        expect(recognizes(one, single)).toBe(true);
        expect(recognizes(many, single)).toBe(true);
        expect(recognizes(one, wire)).toBe(false);
        expect(recognizes(many, wire)).toBe(true);
        // The other Mistral wires' renders are not this one's.
        for (const other of FAMILIES.filter((f) => f.dialect !== dialect))
          expect(recognizes(many, renderedCalls(other.templates[0]!, CALLS))).toBe(false);
      });
    }
  }
});

describe("mistral forced grammars", () => {
  const cases: [ToolDialect, (name: string, args: string) => string][] = [
    [mistral, (name, args) => `[TOOL_CALLS][{"name": "${name}", "arguments": ${args}, "id": "a1b2c3d4e"}]`],
    [mistralCallIds, (name, args) => `[TOOL_CALLS]${name}[CALL_ID]a1b2c3d4e[ARGS]${args}`],
    [mistralNamed, (name, args) => `[TOOL_CALLS]${name}[ARGS]${args}`],
  ];
  for (const [dialect, call] of cases) {
    test(`${dialect.name}: arguments are held to the schema, ids to 9 alphanumerics`, () => {
      const g = parseGbnf(dialect.forcedGrammar(TOOLS, false));
      expect(recognizes(g, call("get_weather", '{"city": "Oslo", "days": 2}'))).toBe(true);
      expect(recognizes(g, call("get_weather", '{"city":"Oslo"}'))).toBe(true);
      expect(recognizes(g, call("get_weather", '{"city": 3}'))).toBe(false);
      expect(recognizes(g, call("get_weather", "{}"))).toBe(false);
      expect(recognizes(g, call("other", "{}"))).toBe(false);
      if (dialect !== mistralNamed) expect(recognizes(g, call("noop", "{}").replace("a1b2c3d4e", "a1b2"))).toBe(false);
      // What the grammar admits, the parser reads back.
      expect(callsOf(run(mistral, [call("noop", "{}")]))).toEqual([["noop", "{}"]]);
      expect(dialect.trigger).toBe("[TOOL_CALLS]");
      expect(() => dialect.forcedGrammar([], false)).toThrow();
    });
  }
});
