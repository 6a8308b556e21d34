// DeepSeek R1/V3 and V3.1 tool-call wires: detection on the real templates,
// streaming parse of either header form, cut and broken calls, the round trip
// through the templates, and each generation's forced grammar.
import { describe, expect, test } from "bun:test";
import { gbnfErrors, parseGbnf } from "../../../grammar/index.ts";
import type { ChatMessage } from "../../../src/codec/index.ts";
import { DEEPSEEK_MARKERS as D, deepseek, deepseekV31 } from "../../../src/codec/tool-dialects/deepseek.ts";
import type { ToolDialect } from "../../../src/codec/tool-dialects/types.ts";
import { callsOf, detectedBy, grammarAccepts, haveTemplates, parseAllWays, render, run } from "./parse-harness.ts";

const { callsBegin: CB, callsEnd: CE, callBegin: B, callEnd: E, sep: S } = D;

/** R1/V3: `function` header, the name, a fenced JSON block. */
const r1 = (name: string, args: string) => `${B}function${S}${name}\n\`\`\`json\n${args}\n\`\`\`${E}`;
/** V3.1: the name, the bare JSON. */
const v31 = (name: string, args: string) => `${B}${name}${S}${args}${E}`;

const TOOLS = [
  {
    type: "function" as const,
    function: {
      name: "get_weather",
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

describe.skipIf(!haveTemplates)("deepseek detection", () => {
  test("R1 templates (fenced calls) and V3.1 (bare calls) apart, no other template", () => {
    expect(detectedBy(deepseek)).toEqual([
      "deepseek-ai-DeepSeek-R1-Distill-Llama-8B",
      "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
      "llama-cpp-deepseek-r1",
    ]);
    expect(detectedBy(deepseekV31)).toEqual(["deepseek-ai-DeepSeek-V3.1"]);
  });
});

// Both dialects read both header forms (one parser).
for (const dialect of [deepseek, deepseekV31]) {
  describe(`${dialect.name} parser`, () => {
    test("R1 style, one call", () => {
      const args = '{"city": "Oslo", "days": 3}';
      expect(callsOf(parseAllWays(dialect, `${CB}${r1("get_weather", args)}${CE}`))).toEqual([["get_weather", args]]);
    });

    test("R1 style with the closing fence on the arguments' line (as llama.cpp's R1 tests write it)", () => {
      const m = parseAllWays(dialect, `${CB}${B}function${S}special_function\n\`\`\`json\n{"arg1": 1}\`\`\`${E}${CE}`);
      expect(callsOf(m)).toEqual([["special_function", '{"arg1": 1}']]);
    });

    test("V3.1 style, one call", () => {
      const args = '{"q": "a<b"}';
      expect(callsOf(parseAllWays(dialect, `${CB}${v31("search", args)}${CE}`))).toEqual([["search", args]]);
    });

    test("text before, two calls, each generation's separators", () => {
      const m = parseAllWays(dialect, `Let me check.\n${CB}${r1("a", '{"x": 1}')}\n${r1("b", "{}")}${CE}`);
      expect(m.text).toBe("Let me check.\n");
      expect(callsOf(m)).toEqual([
        ["a", '{"x": 1}'],
        ["b", "{}"],
      ]);
      expect(m.calls.map((c) => c.id)).toEqual(["id0", "id1"]);
      const v = parseAllWays(dialect, `OK${CB}${v31("a", '{"x":1}')}${v31("b", '{"y":2}')}${CE}`);
      expect(v.text).toBe("OK");
      expect(callsOf(v)).toEqual([
        ["a", '{"x":1}'],
        ["b", '{"y":2}'],
      ]);
    });

    test("arguments stream as they are written", () => {
      const parser = dialect.parser({ newId: () => "id" });
      const events = [CB, B, "get_weather", S, '{"city"', ': "Os', 'lo"}', E, CE].flatMap((c) => parser.push(c));
      expect(events.filter((e) => e.type === "call-args").map((e) => (e.type === "call-args" ? e.text : ""))).toEqual([
        '{"city"',
        ': "Os',
        'lo"}',
      ]);
      expect(parser.flush()).toEqual([]);
    });

    test("malformed calls are dropped; markup is never content", () => {
      // Not a call: no separator, arguments that are no object, junk in the block.
      expect(parseAllWays(dialect, `hi ${CB}${B}f${E}${v31("g", '"x"')}not a call${CE}`)).toEqual({
        text: "hi ",
        reasoning: "",
        calls: [],
      });
      // A call whose arguments never close ends where its call-end comes: a broken call, not content.
      const broken = parseAllWays(dialect, `hi ${CB}${v31("f", '{"x": ')}${CE}`);
      expect(broken.text).toBe("hi ");
      expect(callsOf(broken)).toEqual([["f", '{"x":']]);
    });

    test("plain text and partial markers come out", () => {
      expect(run(dialect, ["a <｜tool", "▁ca"])).toEqual({ text: "a <｜tool▁ca", reasoning: "", calls: [] });
    });

    test("flush: a complete unclosed call is finished, a cut one is partial once its arguments began, else dropped", () => {
      expect(callsOf(run(dialect, [`${CB}${v31("f", '{"a": 1}').slice(0, -E.length)}`]))).toEqual([["f", '{"a": 1}']]);
      expect(callsOf(parseAllWays(dialect, `${CB}${B}f${S}{"a": `))).toEqual([["f", '{"a":']]);
      expect(callsOf(parseAllWays(dialect, `${CB}${B}function${S}f\n\`\`\`json\n{"a": 1, "b`))).toEqual([
        ["f", '{"a": 1, "b'],
      ]);
      for (const cut of [CB, `${CB}${B}`, `${CB}${B}get_wea`, `${CB}${B}f${S}`, `${CB}${B}function${S}f\n\`\`\``])
        expect(parseAllWays(dialect, cut)).toEqual({ text: "", reasoning: "", calls: [] });
    });
  });
}

/** The calls block of the assistant turn a template renders (the last: R1's system prompt shows an example). */
function renderedCalls(template: string, assistant: ChatMessage): string {
  const text = render(template, [{ role: "user", content: "weather?" }, assistant], TOOLS);
  return text.slice(text.lastIndexOf(CB), text.lastIndexOf(CE) + CE.length);
}

const ASSISTANT: ChatMessage = {
  role: "assistant",
  content: "",
  tool_calls: [
    {
      id: "call_1",
      type: "function",
      function: { name: "get_weather", arguments: '{"city":"Oslo \\"N\\"","days":2}' },
    },
    { id: "call_2", type: "function", function: { name: "noop", arguments: "{}" } },
  ],
};

const ROUND_TRIPS: [string, ToolDialect][] = [
  ["deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", deepseek],
  ["llama-cpp-deepseek-r1", deepseek],
  ["deepseek-ai-DeepSeek-V3.1", deepseekV31],
];

describe.skipIf(!haveTemplates)("deepseek round trip through the templates", () => {
  for (const [template, dialect] of ROUND_TRIPS) {
    test(`${template}: the rendered calls parse back, and ${dialect.name}'s grammar accepts them`, () => {
      const block = renderedCalls(template, ASSISTANT);
      const m = parseAllWays(dialect, block);
      expect(m.text).toBe("");
      expect(m.calls.map((c) => [c.name, JSON.parse(c.end!)])).toEqual([
        ["get_weather", { city: 'Oslo "N"', days: 2 }],
        ["noop", {}],
      ]);
      const tools = TOOLS.map((t) => t.function);
      expect(grammarAccepts(dialect.forcedGrammar(tools, true), block)).toBe(true);
      expect(grammarAccepts(dialect.forcedGrammar(tools, false), block)).toBe(false); // two calls
      const one = renderedCalls(template, { ...ASSISTANT, tool_calls: ASSISTANT.tool_calls!.slice(0, 1) });
      expect(grammarAccepts(dialect.forcedGrammar(tools, false), one)).toBe(true);
    });
  }
});

describe("deepseek forced grammars", () => {
  const tools = TOOLS.map((t) => t.function);
  const layouts: [ToolDialect, (name: string, args: string) => string, string][] = [
    [deepseek, r1, "\n"],
    [deepseekV31, v31, ""],
  ];
  for (const [dialect, call, sep] of layouts) {
    for (const parallel of [false, true]) {
      test(`${dialect.name} (parallel=${parallel}): its own layout, arguments held to the schema`, () => {
        const gbnf = dialect.forcedGrammar(tools, parallel);
        expect(gbnfErrors(parseGbnf(gbnf))).toEqual([]);
        const good = `${CB}${call("get_weather", '{"city": "Oslo"}')}${CE}`;
        expect(grammarAccepts(gbnf, good)).toBe(true);
        expect(grammarAccepts(gbnf, `${CB}${call("get_weather", '{"city": 5}')}${CE}`)).toBe(false);
        expect(grammarAccepts(gbnf, `${CB}${call("other", '{"city": "Oslo"}')}${CE}`)).toBe(false);
        // The other generation's layout is not this one's.
        const other = call === r1 ? v31 : r1;
        expect(grammarAccepts(gbnf, `${CB}${other("get_weather", '{"city": "Oslo"}')}${CE}`)).toBe(false);
        const two = `${CB}${call("get_weather", '{"city": "Oslo"}')}${sep}${call("noop", "{}")}${CE}`;
        expect(grammarAccepts(gbnf, two)).toBe(parallel);
        expect(dialect.trigger).toBe(CB);
        // What the grammar produces, the parser reads back.
        expect(callsOf(run(dialect, [good]))).toEqual([["get_weather", '{"city": "Oslo"}']]);
      });
    }
  }
});
