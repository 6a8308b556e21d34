// Gemma 4 tool-call dialect: `<|tool_call>call:NAME{…}<tool_call|>` with
// Gemma's own value syntax (strings in `<|"|>`, bare keys): detection, the
// streaming parser, the round trip through the real templates, and the
// forced grammar.
import { describe, expect, test } from "bun:test";
import { gbnfErrors, parseGbnf, SchemaError } from "../../../grammar/index.ts";
import { ChatTemplate } from "../../../src/codec/index.ts";
import { gemma4, gemmaArgumentsToJson } from "../../../src/codec/tool-dialects/gemma4.ts";
import { formatGemmaValue } from "../../../src/codec/tool-dialects/gemma4-grammar.ts";
import { recognizes } from "../../grammar/recognizer.ts";
import {
  cutPoints,
  detectedBy,
  haveTemplates,
  type Merged,
  parseAllWays,
  run,
  templateSource,
} from "./parse-harness.ts";

const GEMMA_TEMPLATES = ["google-gemma-4-31B-it", "google-gemma-4-31B-it-interleaved"];

const Q = '<|"|>';
const call = (name: string, args: string) => `<|tool_call>call:${name}${args}<tool_call|>`;

const parse = (text: string) => parseAllWays(gemma4, text);

/** Name and parsed arguments of each call. */
const decoded = (m: Merged) => m.calls.map((c) => [c.name, JSON.parse(c.end!)]);

describe.skipIf(!haveTemplates)("gemma4 detection on the real templates", () => {
  test("its two templates and no other", () => {
    expect(detectedBy(gemma4)).toEqual(GEMMA_TEMPLATES);
  });
});

describe("gemma4 arguments to JSON", () => {
  test("every kind of value the template writes", () => {
    const cases: [string, unknown][] = [
      [`{city:${Q}London${Q}}`, { city: "London" }],
      ["{}", {}],
      ["{arg1:42,neg:-7,pi:3.14,big:1.5e10,small:1e-05}", { arg1: 42, neg: -7, pi: 3.14, big: 1.5e10, small: 1e-5 }],
      ["{on:true,off:false,none:None,nil:null}", { on: true, off: false, none: null, nil: null }],
      [`{todos:[${Q}buy milk${Q},${Q}walk dog${Q}],empty:[]}`, { todos: ["buy milk", "walk dog"], empty: [] }],
      [`{config:{theme:${Q}dark${Q},count:3},deep:{}}`, { config: { theme: "dark", count: 3 }, deep: {} }],
      // Strings are raw: quotes, backslashes, braces, newlines and `<` are content.
      [`{code:${Q}if (a < b) { print("x\\n") }\nend${Q}}`, { code: 'if (a < b) { print("x\\n") }\nend' }],
      // More than the template writes: quoted keys, spaces, Python words, bare words.
      [`{ ${Q}k${Q} : 1 , b: True, c: None, d: Paris }`, { k: 1, b: true, c: null, d: "Paris" }],
      ["{a:1,}", { a: 1 }],
    ];
    for (const [text, value] of cases) {
      const r = gemmaArgumentsToJson(text);
      expect(r.end).toBe(text.length);
      expect(r.malformed).toBeUndefined();
      expect(JSON.parse(r.json)).toEqual(value);
    }
  });

  test("as the text grows the JSON only grows: every prefix's JSON starts the whole's", () => {
    const text = `{a:[1,${Q}x<|y${Q},{b:None}],s:${Q}some <b>long</b> text${Q},n:-12.5e3}`;
    const whole = gemmaArgumentsToJson(text);
    for (let i = 1; i <= text.length; i++) {
      const part = gemmaArgumentsToJson(text.slice(0, i));
      expect(part.malformed).toBeUndefined();
      expect(whole.json.startsWith(part.json)).toBe(true);
    }
    // Strings stream as they come; a possible delimiter start is held back.
    expect(gemmaArgumentsToJson(`{s:${Q}some <`).json).toBe('{"s":"some ');
    expect(gemmaArgumentsToJson(`{s:${Q}some <b`).json).toBe('{"s":"some <b');
  });

  test("what is not Gemma's syntax is malformed, with the JSON read before it", () => {
    expect(gemmaArgumentsToJson("{a:}")).toEqual({ json: '{"a":', malformed: true });
    expect(gemmaArgumentsToJson("{a:1<x}")).toEqual({ json: '{"a":1', malformed: true });
    expect(gemmaArgumentsToJson("[1]")).toEqual({ json: "", malformed: true });
  });
});

describe("gemma4 parser", () => {
  test("one call, whole and split at every boundary", () => {
    const m = parse(call("get_weather", `{city:${Q}San Francisco${Q},days:3}`));
    expect(m).toEqual({
      text: "",
      reasoning: "",
      calls: [
        {
          id: "id0",
          name: "get_weather",
          args: '{"city":"San Francisco","days":3}',
          end: '{"city":"San Francisco","days":3}',
        },
      ],
    });
  });

  test("the call starts at its name, then the arguments stream as JSON", () => {
    const p = gemma4.parser({ newId: () => "id0" });
    expect(p.push("<|tool_call>call:get_wea")).toEqual([]);
    expect(p.push(`ther{city:${Q}Par`)).toEqual([
      { type: "call-start", index: 0, id: "id0", name: "get_weather" },
      { type: "call-args", index: 0, text: '{"city":"Par' },
    ]);
    expect(p.push(`is${Q}}<tool_call|>`)).toEqual([
      { type: "call-args", index: 0, text: 'is"}' },
      { type: "call-end", index: 0, arguments: '{"city":"Paris"}' },
    ]);
    expect(p.flush()).toEqual([]);
  });

  test("text before a call is content (reasoning was split out before the parser)", () => {
    const m = parse(`Hello, world!\nWhat's up?${call("get_time", `{city:${Q}Paris${Q}}`)}`);
    expect(m.text).toBe("Hello, world!\nWhat's up?");
    expect(decoded(m)).toEqual([["get_time", { city: "Paris" }]]);
  });

  test("two calls back to back; whitespace between and after them is not content", () => {
    const two = `${call("get_time", `{city:${Q}London${Q}}`)}\n${call("get_weather", `{city:${Q}Paris${Q}}`)}\n`;
    const m = parse(two);
    // The wire's own (default) ids are distinct too: run checks it.
    expect(run(gemma4, [two], { newId: undefined }).calls).toHaveLength(2);
    expect(m.text).toBe("");
    expect(decoded(m)).toEqual([
      ["get_time", { city: "London" }],
      ["get_weather", { city: "Paris" }],
    ]);
    expect(parse(`${call("f", "{}")} and then`).text).toBe(" and then");
  });

  test("plain text and a partial marker at the end come out as text", () => {
    expect(parse("a < b <|tool")).toEqual({ text: "a < b <|tool", reasoning: "", calls: [] });
  });

  test("a call cut off by the end of the reply ends as far as written, never as content", () => {
    const cut = (s: string) => parse(`Hi ${s}`);
    expect(cut(`<|tool_call>call:f{a:1,s:${Q}abc`)).toEqual({
      text: "Hi ",
      reasoning: "",
      calls: [{ id: "id0", name: "f", args: '{"a":1,"s":"abc', end: '{"a":1,"s":"abc' }],
    });
    expect(cut("<|tool_call>call:f{a:1}").calls.map((c) => c.end)).toEqual(['{"a":1}']);
    for (const s of ["<|tool_call>", "<|tool_call>cal", "<|tool_call>call:get_weath"])
      expect(cut(s)).toEqual({ text: "Hi ", reasoning: "", calls: [] });
  });

  test("cut at any token boundary: no markup in content; once the arguments began, a prefix of them", () => {
    const reply = call("get_weather", `{city:${Q}Oslo${Q},days:3,tags:[${Q}a${Q},None],deep:{x:true}}`);
    const whole = '{"city":"Oslo","days":3,"tags":["a",null],"deep":{"x":true}}';
    const markers = ["<|tool_call>", "<tool_call|>", Q];
    const named = reply.indexOf("{");
    for (const k of cutPoints(reply, markers)) {
      const m = run(gemma4, [reply.slice(0, k)]);
      expect(run(gemma4, [...reply.slice(0, k)])).toEqual(m);
      expect(m.text).toBe("");
      if (k <= named) expect(m.calls).toEqual([]);
      else {
        expect(m.calls.map((c) => c.name)).toEqual(["get_weather"]);
        expect(whole.startsWith(m.calls[0]!.end!)).toBe(true);
      }
    }
  });

  test("a malformed call is dropped: its markup is never content", () => {
    expect(parse(`x<|tool_call>not a call{a:1}<tool_call|>y`)).toEqual({ text: "xy", reasoning: "", calls: [] });
    expect(parse(`x<|tool_call>call:f{a:}<tool_call|>y`)).toEqual({
      text: "xy",
      reasoning: "",
      calls: [{ id: "id0", name: "f", args: '{"a":', end: '{"a":' }],
    });
    expect(parse("x<|tool_call>call:f oops")).toEqual({ text: "x", reasoning: "", calls: [] });
  });
});

// ---------------------------------------------------------------------------
// The real templates and the forced grammar.

const TOOLS = [
  {
    name: "get_weather",
    parameters: {
      type: "object",
      properties: {
        city: { type: "string" },
        days: { type: "integer", minimum: 1, maximum: 14 },
        Units: { enum: ["c", "f"] },
        detail: {
          type: "object",
          properties: {
            hourly: { type: "boolean" },
            fields: { type: "array", items: { type: "string" }, maxItems: 3 },
          },
          required: ["hourly"],
        },
        note: { type: ["string", "null"] },
      },
      required: ["city"],
    },
  },
  { name: "noop", parameters: { type: "object", properties: {} } },
];
const ARGUMENTS = {
  city: 'Paris "Rive" {gauche} <b>',
  days: 3,
  Units: "c",
  detail: { hourly: false, fields: ["wind", "rain"] },
  note: null,
};

/** From the first call to the end of the last, as `template` renders the assistant's call turn. */
function renderedCalls(template: string, calls: { name: string; arguments: Record<string, unknown> }[]): string {
  const text = new ChatTemplate(templateSource(template), { bosToken: "<bos>" }).render({
    messages: [
      { role: "user", content: "Weather in Paris?" },
      {
        role: "assistant",
        content: "",
        tool_calls: calls.map((c, i) => ({ id: `call_${i}`, type: "function", function: c })),
      },
    ],
    tools: TOOLS.map((t) => ({ type: "function", function: { description: "", ...t } })),
    addGenerationPrompt: false,
  }).text;
  const close = "<tool_call|>";
  return text.slice(text.indexOf("<|tool_call>"), text.lastIndexOf(close) + close.length);
}

describe.skipIf(!haveTemplates)("gemma4 round trip through the real templates", () => {
  for (const template of GEMMA_TEMPLATES) {
    test(`${template}.jinja: rendered calls parse back; the forced grammar writes them`, () => {
      const calls = [
        { name: "get_weather", arguments: ARGUMENTS },
        { name: "noop", arguments: {} },
      ];
      const wire = renderedCalls(template, calls);
      expect(wire).toBe(calls.map((c) => call(c.name, formatGemmaValue(c.arguments))).join(""));
      const m = parse(wire);
      expect(m.text).toBe("");
      expect(decoded(m)).toEqual(calls.map((c) => [c.name, c.arguments]));

      const one = parseGbnf(gemma4.forcedGrammar(TOOLS, false));
      const many = parseGbnf(gemma4.forcedGrammar(TOOLS, true));
      expect(gbnfErrors(one)).toEqual([]);
      expect(gbnfErrors(many)).toEqual([]);
      const single = renderedCalls(template, calls.slice(0, 1));
      expect(recognizes(one, single)).toBe(true);
      expect(recognizes(many, single)).toBe(true);
      expect(recognizes(one, wire)).toBe(false);
      expect(recognizes(many, wire)).toBe(true);
    });
  }
});

describe("gemma4 forced grammar", () => {
  const g = parseGbnf(gemma4.forcedGrammar(TOOLS, false));
  const accepts = (args: string, name = "get_weather") => recognizes(g, call(name, args));

  test("arguments are held to the schema, in the template's key order", () => {
    expect(accepts(`{city:${Q}Oslo${Q}}`)).toBe(true);
    expect(accepts(`{city:${Q}Oslo${Q},days:14,Units:${Q}f${Q}}`)).toBe(true);
    expect(accepts(`{city:${Q}Oslo${Q},detail:{fields:[],hourly:true},note:None}`)).toBe(true);
    expect(accepts(`{city:${Q}Oslo${Q},note:null}`)).toBe(true);
    expect(accepts("{}", "noop")).toBe(true);
    // Wrong types, bounds, keys, order or quoting are not written.
    expect(accepts("{}")).toBe(false);
    expect(accepts("{city:3}")).toBe(false);
    expect(accepts(`{city:${Q}Oslo${Q},days:15}`)).toBe(false);
    expect(accepts(`{city:${Q}Oslo${Q},Units:${Q}k${Q}}`)).toBe(false);
    expect(accepts(`{days:3,city:${Q}Oslo${Q}}`)).toBe(false);
    expect(accepts(`{city:${Q}Oslo${Q},other:1}`)).toBe(false);
    expect(accepts(`{city:${Q}Oslo${Q},detail:{}}`)).toBe(false);
    expect(accepts(`{city:${Q}Oslo${Q},detail:{fields:[${Q}a${Q},${Q}b${Q},${Q}c${Q},${Q}d${Q}],hourly:true}}`)).toBe(
      false,
    );
    expect(accepts('{"city":"Oslo"}')).toBe(false);
    expect(accepts(`{city:${Q}Oslo${Q}}`, "other")).toBe(false);
  });

  test("strings hold any text but their closing delimiter", () => {
    for (const s of ["", "a<b", "<", "<<|", '<|"', '<|"|', "<|x", 'x<|"|y', "ends with <", "{[,:]}\n\"'\\"])
      expect({ s, ok: accepts(`{city:${Q}${s}${Q}}`) }).toEqual({ s, ok: true });
    expect(accepts(`{city:${Q}a${Q}b${Q}}`)).toBe(false);
  });

  test("length limits count characters (which then leave out `<`)", () => {
    const short = parseGbnf(
      gemma4.forcedGrammar(
        [
          {
            name: "f",
            parameters: {
              type: "object",
              properties: { s: { type: "string", minLength: 2, maxLength: 3 } },
              required: ["s"],
            },
          },
        ],
        false,
      ),
    );
    const ok = (s: string) => recognizes(short, call("f", `{s:${Q}${s}${Q}}`));
    expect([ok("a"), ok("ab"), ok("abc"), ok("abcd"), ok("a<")]).toEqual([false, true, true, false, false]);
  });

  test("what the grammar writes, the parser reads back", () => {
    const text = call("get_weather", formatGemmaValue({ city: "Oslo", detail: { fields: ["x"], hourly: true } }));
    expect(recognizes(g, text)).toBe(true);
    expect(decoded(run(gemma4, [text]))).toEqual([
      ["get_weather", { city: "Oslo", detail: { fields: ["x"], hourly: true } }],
    ]);
  });

  test("$ref, anyOf and open objects compile; keywords it cannot honour are refused", () => {
    const refs = {
      type: "object",
      $defs: { point: { type: "object", properties: { x: { type: "number" } }, required: ["x"] } },
      properties: { at: { $ref: "#/$defs/point" }, any: {}, maybe: { anyOf: [{ type: "integer" }, { type: "null" }] } },
      required: ["at"],
    };
    const gr = parseGbnf(gemma4.forcedGrammar([{ name: "f", parameters: refs }], true));
    expect(gbnfErrors(gr)).toEqual([]);
    expect(recognizes(gr, call("f", `{any:{k:[1,${Q}v${Q}]},at:{x:-1.5},maybe:None}`))).toBe(true);
    expect(recognizes(gr, call("f", "{at:{x:1},maybe:2.5}"))).toBe(false);
    for (const bad of [
      { type: "object", properties: { s: { type: "string", pattern: "^a" } } },
      { type: "object", properties: { s: { type: "string", format: "date" } } },
      { type: "object", properties: { "a b": { type: "string" } } },
      { type: "object", minProperties: 1 },
      { type: "string" },
    ])
      expect(() => gemma4.forcedGrammar([{ name: "f", parameters: bad }], false)).toThrow(SchemaError);
    expect(() => gemma4.forcedGrammar([], false)).toThrow();
    expect(gemma4.trigger).toBe("<|tool_call>");
  });
});
