// LFM2 / LFM2.5 tool calls, `<|tool_call_start|>[f(a=1, b='x'), …]<|tool_call_end|>`:
// canonical model outputs (the shapes llama.cpp's LFM2 tests use, and the
// LFM2.5 template's own rendering) parse into calls with JSON arguments,
// whole and split anywhere; cut and broken calls leave no markup in the
// content; the forced grammar accepts what the template writes and its
// output parses back; the real templates are detected as this wire and no
// other template is.
import { describe, expect, test } from "bun:test";
import { gbnfErrors, parseGbnf, SchemaError } from "../../../grammar/index.ts";
import { ChatTemplate } from "../../../src/codec/index.ts";
import { lfm2 } from "../../../src/codec/tool-dialects/lfm2.ts";
import { pythonNumberJson } from "../../../src/codec/tool-dialects/python-calls.ts";
import type { ToolSpec } from "../../../src/codec/tool-grammar.ts";
import { recognizes } from "../../grammar/recognizer.ts";
import { detectedBy, haveTemplates, parseAllWays, templateSource } from "./parse-harness.ts";

const START = "<|tool_call_start|>";
const END = "<|tool_call_end|>";

const parse = (text: string) => parseAllWays(lfm2, text);

/** Names and parsed arguments of the calls in `text`. */
function calls(text: string): [string, unknown][] {
  return parse(text).calls.map((c) => [c.name, JSON.parse(c.args)]);
}

describe("lfm2 parser", () => {
  test("content without calls is content", () => {
    expect(parse("Hello, world!\nWhat's up?")).toEqual({ text: "Hello, world!\nWhat's up?", reasoning: "", calls: [] });
    // Brackets and parentheses in prose are not calls.
    const links = "Use this format: [link text](url). Example: [Wikipedia](https://www.wikipedia.org).";
    expect(parse(links)).toEqual({ text: links, reasoning: "", calls: [] });
  });

  test("one call, its arguments converted from Python literals to JSON", () => {
    expect(calls(`${START}[special_function(arg1=1)]${END}`)).toEqual([["special_function", { arg1: 1 }]]);
    expect(calls(`${START}[get_time(city="XYZCITY")]${END}`)).toEqual([["get_time", { city: "XYZCITY" }]]);
    expect(calls(`${START}[get_time(city='Oslo')]${END}`)).toEqual([["get_time", { city: "Oslo" }]]);
    expect(calls(`${START}[toggle(enabled=True)]${END}`)).toEqual([["toggle", { enabled: true }]]);
    expect(calls(`${START}[set_nullable(value=None)]${END}`)).toEqual([["set_nullable", { value: null }]]);
    expect(calls(`${START}[empty_args()]${END}`)).toEqual([["empty_args", {}]]);
    const m = parse(`${START}[special_function(arg1=1)]${END}`);
    expect(m).toEqual({
      text: "",
      reasoning: "",
      calls: [{ id: "id0", name: "special_function", args: '{"arg1":1}', end: '{"arg1":1}' }],
    });
  });

  test("nested values: Python and JSON literals, lists, tuples, dicts, a dotted name", () => {
    expect(calls(`${START}[set_config(config={"enabled": True, 'count': 3, "note": null})]${END}`)).toEqual([
      ["set_config", { config: { enabled: true, count: 3, note: null } }],
    ]);
    expect(
      calls(
        `${START}[Calendar.create_event(title="demo", participants=["Alice", 'Bob'], span=(1, 2.5), ` +
          `metadata={"priority": "high", "reminder": true})]${END}`,
      ),
    ).toEqual([
      [
        "Calendar.create_event",
        {
          title: "demo",
          participants: ["Alice", "Bob"],
          span: [1, 2.5],
          metadata: { priority: "high", reminder: true },
        },
      ],
    ]);
    expect(calls(`${START}[f(a = -1_000 , b=0x1F, c=.5, d=5., e=1e-3, f=[], g={}, h=[1, 2,],)]${END}`)).toEqual([
      ["f", { a: -1000, b: 31, c: 0.5, d: 5, e: 0.001, f: [], g: {}, h: [1, 2] }],
    ]);
  });

  test("string escapes decode to their characters", () => {
    expect(calls(`${START}[python(code="def hello():\\n    print('hey')")]${END}`)).toEqual([
      ["python", { code: "def hello():\n    print('hey')" }],
    ]);
    expect(calls(`${START}[python(code="First line\\nSecond line\\tindented")]${END}`)).toEqual([
      ["python", { code: "First line\nSecond line\tindented" }],
    ]);
    expect(calls(`${START}[python(code="print(\\"hi\\")", q='it\\'s', u="\\u00e9\\x41\\101\\q\\\\")]${END}`)).toEqual([
      ["python", { code: 'print("hi")', q: "it's", u: "éAA\\q\\" }],
    ]);
    // Characters JSON must escape, written raw (the LFM2.5 template does not escape).
    expect(calls(`${START}[note(text='a "b"\nc\td')]${END}`)).toEqual([["note", { text: 'a "b"\nc\td' }]]);
  });

  test("text before the call is content (the reasoning before it was split off earlier)", () => {
    const m = parse(`Let me check the time.${START}[get_time(city="Paris")]${END}`);
    expect(m.text).toBe("Let me check the time.");
    expect(m.calls.map((c) => [c.name, c.args])).toEqual([["get_time", '{"city":"Paris"}']]);
  });

  test("several calls in one list, and in several lists, get increasing indexes and distinct ids", () => {
    const m = parse(`${START}[special_function(arg1=1), special_function_with_opt(arg1=1, arg2=2)]${END}`);
    expect(m.calls).toEqual([
      { id: "id0", name: "special_function", args: '{"arg1":1}', end: '{"arg1":1}' },
      { id: "id1", name: "special_function_with_opt", args: '{"arg1":1,"arg2":2}', end: '{"arg1":1,"arg2":2}' },
    ]);
    // Whitespace between and after lists is not content; text after them is.
    const two = parse(`${START}[a(x=1)]${END}\n${START}[b(y="2")]${END}\n`);
    expect(two.text).toBe("");
    expect(two.calls.map((c) => c.name)).toEqual(["a", "b"]);
    expect(parse(`${START}[a(x=1)]${END} Done.`).text).toBe(" Done.");
  });

  test("a call cut by the end of the reply ends with its arguments as far as written", () => {
    const cut = (s: string) => parse(`Hi ${s}`).calls.map((c) => [c.name, c.args]);
    expect(cut(`${START}[special_function(arg1=`)).toEqual([["special_function", '{"arg1":']]);
    expect(cut(`${START}[special_function(arg1=12`)).toEqual([["special_function", '{"arg1":12']]);
    expect(cut(`${START}[get_weather(city="Os`)).toEqual([["get_weather", '{"city":"Os']]);
    expect(cut(`${START}[a(x=1), b(y=[1, `)).toEqual([
      ["a", '{"x":1}'],
      ["b", '{"y":[1'],
    ]);
    // Cut before a call's name is complete: nothing, and no markup in the content.
    for (const s of [`${START}`, `${START}[`, `${START}[get_wea`, `${START}[get_weather`]) {
      expect(parse(`Hi ${s}`)).toEqual({ text: "Hi ", reasoning: "", calls: [] });
    }
    // The cut arguments are never valid JSON: the reply is not offered as a call to run.
    expect(() => JSON.parse(parse(`${START}[f(a=1`).calls[0]!.args)).toThrow();
  });

  test("malformed calls leave no markup in the content", () => {
    for (const s of [
      `${START}not a call${END}`,
      `${START}[f("positional")]${END}`,
      `${START}[f(a=undefined_name)]${END}`,
      `${START}[f(a=1) g(b=2)]${END}`,
      `${START}[f(a=1)] trailing${END}`,
    ]) {
      const m = parse(`Before. ${s} After.`);
      expect(m.text).toBe("Before.  After.");
      // A call whose name was read ends, but with arguments that do not parse (never run).
      for (const c of m.calls) if (c.name !== "f") expect(() => JSON.parse(c.args)).toThrow();
    }
    expect(parse(`${START}[f("positional")]${END}`).calls.map((c) => c.args)).toEqual(["{"]);
  });

  test("Python number literals", () => {
    expect(
      ["0", "-0", "007", "1_000", "0b101", "0o17", "-0x1f", "3.", ".25", "1E5", "+2"].map(pythonNumberJson),
    ).toEqual(["0", "-0", "7", "1000", "5", "15", "-31", "3", "0.25", "1e5", "2"]);
    for (const bad of ["", ".", "e5", "1__0", "_1", "0x", "abc", "1.2.3", "--1"])
      expect(pythonNumberJson(bad)).toBeUndefined();
  });
});

const TOOLS: ToolSpec[] = [
  {
    name: "get_weather",
    parameters: {
      type: "object",
      properties: {
        city: { type: "string", maxLength: 12 },
        unit: { enum: ["c", "f"] },
        days: { type: "integer", minimum: 1, maximum: 7 },
        hourly: { type: "boolean" },
      },
      required: ["city"],
    },
  },
  {
    name: "search",
    parameters: {
      type: "object",
      properties: {
        query: { type: "string" },
        filters: { type: "object", properties: { safe: { type: "boolean" } }, required: ["safe"] },
        limit: { anyOf: [{ type: "integer" }, { type: "null" }] },
      },
      required: ["query"],
    },
  },
  { name: "noop", parameters: { type: "object", properties: {} } },
];

describe("lfm2 forced grammar", () => {
  const one = parseGbnf(lfm2.forcedGrammar(TOOLS, false));
  const many = parseGbnf(lfm2.forcedGrammar(TOOLS, true));

  test("compiles cleanly", () => {
    expect(gbnfErrors(one)).toEqual([]);
    expect(gbnfErrors(many)).toEqual([]);
  });

  test("writes the call list as the template does, values held to the schema", () => {
    const ok = [
      `${START}[get_weather(city='Oslo', unit='c')]${END}`, // the LFM2.5 template's rendering
      `${START}[get_weather(city="Oslo", days=3, hourly=True)]${END}`, // Liquid's LFM2 examples
      `${START}[search(query='it\\'s', filters={"safe": true}, limit=None)]${END}`,
      `${START}[search(query="x", limit=5)]${END}`,
      `${START}[noop()]${END}`,
    ];
    for (const text of ok) {
      expect(recognizes(one, text)).toBe(true);
      expect(parse(text).calls).toHaveLength(1);
    }
    const bad = [
      `${START}[get_weather(unit='c')]${END}`, // a required argument missing
      `${START}[get_weather(city='Oslo', days=9)]${END}`, // out of range
      `${START}[get_weather(city='Oslo', unit='k')]${END}`, // not one of the values
      `${START}[get_weather(city='Oslo is far too long')]${END}`, // over maxLength
      `${START}[get_weather(unit='c', city='Oslo')]${END}`, // arguments in the schema's order
      `${START}[get_weather(city='Oslo', hourly=true)]${END}`, // a boolean argument is Python's
      `${START}[get_weather(city='Oslo',unit='c')]${END}`, // ", " between arguments
      `${START}[other()]${END}`,
      `${START}[noop(), noop()]${END}`,
    ];
    for (const text of bad) expect(recognizes(one, text)).toBe(false);
  });

  test("parallel calls are one list", () => {
    const text = `${START}[get_weather(city='Oslo'), search(query='Oslo events'), noop()]${END}`;
    expect(recognizes(many, text)).toBe(true);
    expect(parse(text).calls.map((c) => [c.name, JSON.parse(c.args)])).toEqual([
      ["get_weather", { city: "Oslo" }],
      ["search", { query: "Oslo events" }],
      ["noop", {}],
    ]);
  });

  test("a parameters schema a keyword-argument list cannot be held to is refused", () => {
    const refuse = (parameters: unknown) => () => lfm2.forcedGrammar([{ name: "f", parameters }], false);
    expect(refuse({ type: "object", anyOf: [{ required: ["a"] }, { required: ["b"] }] })).toThrow(SchemaError);
    expect(refuse({ type: "array" })).toThrow(SchemaError);
    expect(refuse({ type: "object", properties: { a: { type: "string", pattern: "(?=x)" } } })).toThrow(
      /properties\/a/,
    );
    // Bounds the arguments meet anyway are fine, as are no parameters at all.
    expect(refuse({ type: "object", properties: { a: {} }, required: ["a"], minProperties: 1 })).not.toThrow();
    expect(() => lfm2.forcedGrammar([{ name: "f", parameters: undefined }], false)).not.toThrow();
  });
});

const LFM2_TEMPLATES = ["LFM2-8B-A1B", "LFM2.5-8B-A1B", "LFM2.5-Instruct"];

describe.skipIf(!haveTemplates)("lfm2 against the real templates", () => {
  test("the LFM2 templates are detected, no other template is", () => {
    expect(detectedBy(lfm2)).toEqual(LFM2_TEMPLATES);
  });

  test("LFM2.5-8B-A1B: a rendered tool-call turn parses back to the same calls, and the grammar accepts it", () => {
    const args = [
      { city: "Oslo", days: 3, hourly: false },
      { query: "Oslo events", filters: { safe: true }, limit: null },
    ];
    const text = new ChatTemplate(templateSource("LFM2.5-8B-A1B")).render({
      messages: [
        { role: "user", content: "Weather and events in Oslo?" },
        {
          role: "assistant",
          content: "",
          tool_calls: [
            { id: "c1", type: "function", function: { name: "get_weather", arguments: JSON.stringify(args[0]) } },
            { id: "c2", type: "function", function: { name: "search", arguments: JSON.stringify(args[1]) } },
          ],
        },
      ],
      tools: TOOLS.map((t) => ({ type: "function", function: t })),
    }).text;
    const wire = text.slice(text.indexOf(START), text.indexOf(END) + END.length);
    expect(wire).toBe(
      `${START}[get_weather(city='Oslo', days=3, hourly=False), ` +
        `search(query='Oslo events', filters={"safe": true}, limit=None)]${END}`,
    );
    expect(calls(wire)).toEqual([
      ["get_weather", args[0]],
      ["search", args[1]],
    ]);
    expect(recognizes(parseGbnf(lfm2.forcedGrammar(TOOLS, true)), wire)).toBe(true);
  });
});
