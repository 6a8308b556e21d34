// DeepSeek V3.2 / V4 "DSML" tool-call wire: detection on the real templates,
// streaming parse with values typed by their string= attribute (and the
// schema), cut and broken calls, the round trip through both templates, and
// the forced grammars.
import { describe, expect, test } from "bun:test";
import { gbnfErrors, parseGbnf } from "../../../grammar/index.ts";
import type { ChatMessage } from "../../../src/codec/index.ts";
import { DSML_BLOCKS, deepseekV32, deepseekV4 } from "../../../src/codec/tool-dialects/deepseek-dsml.ts";
import type { ToolCallEvent, ToolDialect } from "../../../src/codec/tool-dialects/types.ts";
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
          unit: { enum: ["c", "f"] },
          opts: { type: "object" },
          tags: { type: "array", items: { type: "string" } },
          note: { anyOf: [{ type: "string" }, { type: "null" }] },
        },
        required: ["city"],
        additionalProperties: false,
      },
    },
  },
  { type: "function" as const, function: { name: "noop", parameters: { type: "object", properties: {} } } },
];
const SPECS = TOOLS.map((t) => t.function);

const param = (name: string, value: string, string?: boolean) =>
  `<｜DSML｜parameter name="${name}"${string === undefined ? "" : ` string="${string}"`}>${value}</｜DSML｜parameter>\n`;
const invoke = (name: string, ...params: string[]) =>
  `<｜DSML｜invoke name="${name}">\n${params.join("")}</｜DSML｜invoke>\n`;
const V32 = DSML_BLOCKS.v32;
const V4 = DSML_BLOCKS.v4;
const block = (tags: { open: string; close: string }, ...invokes: string[]) =>
  `\n\n${tags.open}\n${invokes.join("")}${tags.close}`;

/** Parsed every way, with the tools' schemas. */
const parse = (dialect: ToolDialect, text: string) => parseAllWays(dialect, text, { tools: SPECS });

describe.skipIf(!haveTemplates)("deepseek DSML detection", () => {
  test("V3.2's template (function_calls) and V4's (tool_calls), no other", () => {
    expect(detectedBy(deepseekV32)).toEqual(["deepseek-ai-DeepSeek-V3.2"]);
    expect(detectedBy(deepseekV4)).toEqual(["deepseek-ai-DeepSeek-V4", "deepseek-ai-DeepSeek-V4-Flash-0731"]);
  });
});

describe("deepseek DSML parser", () => {
  test("one call, a string parameter", () => {
    const m = parse(deepseekV32, block(V32, invoke("get_weather", param("city", "Tokyo", true))));
    expect(m).toEqual({
      text: "",
      reasoning: "",
      calls: [{ id: "id0", name: "get_weather", args: '{"city":"Tokyo"}', end: '{"city":"Tokyo"}' }],
    });
  });

  test("values typed by string=: numbers, booleans, arrays, objects as JSON; strings as written", () => {
    const m = parse(
      deepseekV4,
      block(
        V4,
        invoke(
          "get_weather",
          param("city", 'São "Paulo"\n<b> \\ 🌧', true),
          param("days", "-14", false),
          param("opts", '{"theme":"dark","level":2.5,"on":true}', false),
          param("tags", '["a", "b"]', false),
          param("note", "null", false),
        ),
      ),
    );
    expect(JSON.parse(m.calls[0]!.end!)).toEqual({
      city: 'São "Paulo"\n<b> \\ 🌧',
      days: -14,
      opts: { theme: "dark", level: 2.5, on: true },
      tags: ["a", "b"],
      note: null,
    });
  });

  test("where the attribute is missing or contradicts the schema, the schema types the value", () => {
    const m = parse(
      deepseekV32,
      block(
        V32,
        invoke(
          "get_weather",
          param("days", "3", true),
          param("city", "Oslo", false),
          param("unit", "c"),
          param("x", "7"),
        ),
      ),
    );
    expect(JSON.parse(m.calls[0]!.end!)).toEqual({ days: 3, city: "Oslo", unit: "c", x: "7" });
    // Without the tools, string="true" is a string and string="false" JSON.
    const bare = parseAllWays(deepseekV32, block(V32, invoke("f", param("a", "3", true), param("b", "3", false))));
    expect(callsOf(bare)).toEqual([["f", '{"a":"3","b":3}']]);
  });

  test("content before (the template's blank line is the wire's), two calls, either block name", () => {
    for (const [dialect, tags] of [
      [deepseekV32, V32],
      [deepseekV4, V4],
      [deepseekV32, V4],
    ] as const) {
      const m = parse(
        dialect,
        `Let me check.${block(tags, invoke("get_weather", param("city", "Paris", true)), invoke("noop", "\n"))}`,
      );
      expect(m.text).toBe("Let me check.");
      expect(callsOf(m)).toEqual([
        ["get_weather", '{"city":"Paris"}'],
        ["noop", "{}"],
      ]);
      expect(m.calls.map((c) => c.id)).toEqual(["id0", "id1"]);
    }
  });

  test("content after reasoning (split out before) and trailing whitespace stay content without calls", () => {
    expect(parse(deepseekV4, "\nThe answer is 4.\n")).toEqual({
      text: "\nThe answer is 4.\n",
      reasoning: "",
      calls: [],
    });
  });

  test("a string parameter streams as it arrives; other values whole at their close", () => {
    const parser = deepseekV32.parser({ tools: SPECS, newId: () => "id" });
    const chunks = [
      `${V32.open}\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" string="true">`,
      "New ",
      'York "NY"</｜DSML｜para',
      'meter>\n<｜DSML｜parameter name="days" string="false">1',
      "0</｜DSML｜parameter>\n</｜DSML｜invoke>\n",
    ];
    const args = chunks.map((c) =>
      parser
        .push(c)
        .filter((e): e is ToolCallEvent & { type: "call-args" } => e.type === "call-args")
        .map((e) => e.text)
        .join(""),
    );
    // The closing quote waits for the whole close tag.
    expect(args).toEqual(['{"city":"', "New ", 'York \\"NY\\"', '"', ',"days":10}']);
  });

  test("a cut call ends as far as it was written; cut before its invoke tag closed, it is dropped", () => {
    const opened = `Hi${block(V32).slice(0, -V32.close.length)}<｜DSML｜invoke name="get_weather">\n`;
    expect(callsOf(parse(deepseekV32, opened))).toEqual([["get_weather", "{"]]);
    expect(callsOf(parse(deepseekV32, `${opened}${param("city", "Paris", true)}`))).toEqual([
      ["get_weather", '{"city":"Paris"'],
    ]);
    const inString = parse(deepseekV32, `${opened}<｜DSML｜parameter name="city" string="true">Par`);
    expect(inString.text).toBe("Hi");
    expect(callsOf(inString)).toEqual([["get_weather", '{"city":"Par']]);
    expect(callsOf(parse(deepseekV32, `${opened}<｜DSML｜parameter name="days" string="false">1`))).toEqual([
      ["get_weather", '{"days":1'],
    ]);
    for (const early of [`\n\n${V32.open}`, `\n\n${V32.open}\n<｜DSML｜invoke name="get_wea`, "\n\n<｜DSML｜functi"])
      expect(parse(deepseekV32, `Hi${early}`)).toEqual({ text: "Hi", reasoning: "", calls: [] });
  });

  test("markup that makes no call is dropped, never content", () => {
    const junk = block(V32, "garbage\n", '<｜DSML｜invoke nam="x">\n</｜DSML｜invoke>\n');
    expect(parse(deepseekV32, `a${junk}`)).toEqual({ text: "a", reasoning: "", calls: [] });
    // Junk between parameters is skipped; an invoke left open ends at the next.
    const m = parse(
      deepseekV32,
      block(V32, `<｜DSML｜invoke name="noop">\nstray text\n`, invoke("get_weather", param("city", "x", true))),
    );
    expect(callsOf(m)).toEqual([
      ["noop", "{}"],
      ["get_weather", '{"city":"x"}'],
    ]);
  });

  test("plain text ending like a tag comes out, unless it holds the DSML token (markup, cut)", () => {
    expect(run(deepseekV4, ["a <", "｜DS"])).toEqual({ text: "a <｜DS", reasoning: "", calls: [] });
    expect(run(deepseekV4, ["a <｜DSML", "｜too"])).toEqual({ text: "a", reasoning: "", calls: [] });
  });
});

const ASSISTANT: ChatMessage = {
  role: "assistant",
  content: "Checking.",
  tool_calls: [
    {
      id: "call_1",
      type: "function",
      function: {
        name: "get_weather",
        arguments: JSON.stringify({ city: 'Oslo "N"\n', days: 2, opts: { a: [1, 2] }, tags: ["x"], note: null }),
      },
    },
    { id: "call_2", type: "function", function: { name: "noop", arguments: "{}" } },
  ],
};

/** The assistant turn as a template renders it, from its content to the block's end. */
function renderedTurn(template: string, assistant: ChatMessage): string {
  const text = render(template, [{ role: "user", content: "weather?" }, assistant], TOOLS);
  return text.slice(text.lastIndexOf("</think>") + "</think>".length, text.lastIndexOf("<｜end▁of▁sentence｜>"));
}

const ROUND_TRIPS: [string, ToolDialect][] = [
  ["deepseek-ai-DeepSeek-V3.2", deepseekV32],
  ["deepseek-ai-DeepSeek-V4", deepseekV4],
  ["deepseek-ai-DeepSeek-V4-Flash-0731", deepseekV4],
];

describe.skipIf(!haveTemplates)("deepseek DSML round trip through the templates", () => {
  for (const [template, dialect] of ROUND_TRIPS) {
    test(`${template}: the rendered turn parses back, and ${dialect.name}'s grammar accepts its calls`, () => {
      const turn = renderedTurn(template, ASSISTANT);
      const m = parse(dialect, turn);
      expect(m.text).toBe("Checking.");
      expect(m.calls.map((c) => [c.name, JSON.parse(c.end!)])).toEqual(
        ASSISTANT.tool_calls!.map((c) => [c.function.name, JSON.parse(c.function.arguments as string)]),
      );
      const calls = turn.slice("Checking.".length);
      expect(grammarAccepts(dialect.forcedGrammar(SPECS, true), calls)).toBe(true);
      expect(grammarAccepts(dialect.forcedGrammar(SPECS, false), calls)).toBe(false); // two calls
      for (const one of ASSISTANT.tool_calls!) {
        const single = renderedTurn(template, { ...ASSISTANT, content: "", tool_calls: [one] });
        expect(grammarAccepts(dialect.forcedGrammar(SPECS, false), single)).toBe(true);
      }
    });
  }
});

describe("deepseek DSML forced grammars", () => {
  for (const [dialect, tags, other] of [
    [deepseekV32, V32, V4],
    [deepseekV4, V4, V32],
  ] as const) {
    for (const parallel of [false, true]) {
      test(`${dialect.name} (parallel=${parallel}): its own block, values held to the schema`, () => {
        const gbnf = dialect.forcedGrammar(SPECS, parallel);
        expect(gbnfErrors(parseGbnf(gbnf))).toEqual([]);
        const accepts = (...invokes: string[]) => grammarAccepts(gbnf, block(tags, ...invokes));
        const weather = (...params: string[]) => invoke("get_weather", ...params);
        expect(accepts(weather(param("city", "Oslo", true)))).toBe(true);
        expect(accepts(weather(param("city", "Oslo", true), param("days", "3", false), param("unit", "f", true)))).toBe(
          true,
        );
        expect(accepts(weather(param("city", "Oslo", true), param("note", "null", false)))).toBe(true);
        expect(accepts(weather(param("city", "Oslo", true), param("note", "text", true)))).toBe(true);
        expect(accepts(weather(param("days", "3", false)))).toBe(false); // city is required
        expect(accepts(weather(param("city", "Oslo", true), param("days", "x", false)))).toBe(false);
        expect(accepts(weather(param("city", "Oslo", true), param("days", "3", true)))).toBe(false);
        expect(accepts(weather(param("city", "Oslo", true), param("unit", "k", true)))).toBe(false);
        expect(accepts(weather(param("city", "a</｜DSML｜parameter>", true)))).toBe(false);
        expect(accepts(invoke("other", param("city", "Oslo", true)))).toBe(false);
        expect(grammarAccepts(gbnf, block(other, weather(param("city", "Oslo", true))))).toBe(false);
        expect(accepts(weather(param("city", "Oslo", true)), invoke("noop"))).toBe(parallel);
        expect(gbnf.length).toBeGreaterThan(0);
        expect(dialect.trigger).toBe(tags.open);
        // What the grammar writes, the parser reads back.
        const one = block(tags, weather(param("city", "Oslo", true), param("days", "3", false)));
        expect(callsOf(run(dialect, [one], { tools: SPECS }))).toEqual([["get_weather", '{"city":"Oslo","days":3}']]);
      });
    }
  }
});
