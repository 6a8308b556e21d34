// Llama 3 JSON tool calls and the generic JSON fallback dialect.
import { describe, expect, test } from "bun:test";
import { gbnfErrors, parseGbnf } from "../../../grammar/index.ts";
import { genericJson } from "../../../src/codec/tool-dialects/generic-json.ts";
import { llama3 } from "../../../src/codec/tool-dialects/llama3.ts";
import type { ToolDialect, ToolSpec } from "../../../src/codec/tool-dialects/types.ts";
import { recognizes } from "../../grammar/recognizer.ts";
import { merge, parseAllWays, run } from "./parse-harness.ts";

// A small Llama-3-style template written for these tests (not a real model's).
const LLAMA3_TEMPLATE = [
  "{{- bos_token }}",
  "{%- for m in messages %}",
  "<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n",
  "{%- if m.tool_calls %}",
  "{%- for c in m.tool_calls %}",
  "{{- '{\"name\": \"' + c.function.name + '\", \"parameters\": ' + (c.function.arguments | tojson) + '}' }}",
  "{%- endfor %}",
  "{%- else %}{{ m.content }}{%- endif %}<|eot_id|>",
  "{%- endfor %}",
  "{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{%- endif %}",
].join("\n");

const CHATML_TEMPLATE = [
  "{%- if tools %}<|im_start|>system\nYou may call these tools: {{ tools | tojson }}<|im_end|>\n{%- endif %}",
  "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}",
  "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}",
].join("\n");

const NO_TOOLS_TEMPLATE = "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}";

const noToken = () => false;

const call = (name: string, args: string, id = "id0") => ({ id, name, args, end: args });

describe("llama3 detection", () => {
  test("a Llama-3-style template with JSON calls", () => {
    expect(llama3.detect(LLAMA3_TEMPLATE, noToken)).toBe(true);
  });
  test("a template mentioning <|python_tag|>", () => {
    expect(llama3.detect("{%- if builtin_tools %}<|python_tag|>{%- endif %}", noToken)).toBe(true);
  });
  test("not ChatML", () => {
    expect(llama3.detect(CHATML_TEMPLATE, noToken)).toBe(false);
  });
});

describe("llama3 parser", () => {
  test("one call, whole and split at every boundary", () => {
    const m = parseAllWays(llama3, '{"name": "get_weather", "parameters": {"city": "Oslo", "days": [1, 2]}}');
    expect(m).toEqual({ text: "", reasoning: "", calls: [call("get_weather", '{"city": "Oslo", "days": [1, 2]}')] });
  });
  test("<|python_tag|> prefix and leading whitespace", () => {
    const m = parseAllWays(llama3, '\n<|python_tag|>{"name": "f", "parameters": {"q": "a } b"}}');
    expect(m).toEqual({ text: "", reasoning: "", calls: [call("f", '{"q": "a } b"}')] });
  });
  test('"arguments" in place of "parameters"', () => {
    const m = parseAllWays(llama3, '{"name": "f", "arguments": {}}');
    expect(m).toEqual({ text: "", reasoning: "", calls: [call("f", "{}")] });
  });
  test("plain content untouched and streamed at once", () => {
    const text = "The weather in Oslo is {probably} fine; <|python_ nothing here.";
    expect(parseAllWays(llama3, text)).toEqual({ text, reasoning: "", calls: [] });
    const p = llama3.parser({ newId: () => "id0" });
    expect(p.push("Hello")).toEqual([{ type: "text", text: "Hello" }]);
  });
  test("a call is held until its object closes", () => {
    const p = llama3.parser({ newId: () => "id0" });
    expect(p.push('{"name": "f", "parameters": {"a": 1}')).toEqual([]);
    expect(merge(p.push("}"))).toEqual({ text: "", reasoning: "", calls: [call("f", '{"a": 1}')] });
    expect(p.flush()).toEqual([]);
  });
  test("malformed or non-call JSON stays content", () => {
    for (const text of [
      '{"name": "f", "parameters": {"a": 1,}}',
      '{"name": "f", "parameters": [1]}',
      '{"city": "Oslo"} is the answer',
      '<|python_tag|>brave_search.call(query="x")',
    ]) {
      expect(parseAllWays(llama3, text)).toEqual({ text, reasoning: "", calls: [] });
    }
  });
  test("a call cut off by the end of the reply is a partial call once its arguments began, else dropped", () => {
    expect(parseAllWays(llama3, '{"name": "f", "parameters": {"a": 1}')).toEqual({
      text: "",
      reasoning: "",
      calls: [call("f", '{"a": 1}')],
    });
    // Issue #34 (3): the reply a cap cut in a forced call's 190-digit number.
    expect(parseAllWays(llama3, '<|python_tag|>{"name":"add","parameters":{"a":4572999')).toEqual({
      text: "",
      reasoning: "",
      calls: [call("add", '{"a":4572999')],
    });
    expect(parseAllWays(llama3, '{"name": "a", "parameters": {}}; {"name": "b", "arguments": {"x": [1, ')).toEqual({
      text: "",
      reasoning: "",
      calls: [call("a", "{}"), call("b", '{"x": [1', "id1")],
    });
    for (const cut of [
      '{"name": "get_wea',
      '{"name": "f", "parameters": ',
      "<|python_tag|>",
      '<|python_tag|>{"na',
      "{",
    ]) {
      expect(parseAllWays(llama3, cut)).toEqual({ text: "", reasoning: "", calls: [] });
    }
  });
  test("two calls separated by ';' or a newline", () => {
    for (const sep of ["; ", ";", "\n", "\n<|python_tag|>"]) {
      const m = parseAllWays(llama3, `{"name": "a", "parameters": {"x": 1}}${sep}{"name": "b", "parameters": {}}\n`);
      expect(m).toEqual({ text: "", reasoning: "", calls: [call("a", '{"x": 1}'), call("b", "{}", "id1")] });
    }
  });
  test("text after a call is content", () => {
    const m = parseAllWays(llama3, '{"name": "a", "parameters": {}}\nDone.');
    expect(m).toEqual({ text: "\nDone.", reasoning: "", calls: [call("a", "{}")] });
  });
});

const TOOLS: ToolSpec[] = [
  {
    name: "get_weather",
    parameters: {
      type: "object",
      properties: { city: { type: "string" } },
      required: ["city"],
      additionalProperties: false,
    },
  },
  { name: "now", parameters: { type: "object", properties: {} } },
];

function grammarOf(d: ToolDialect, parallel: boolean) {
  const g = parseGbnf(d.forcedGrammar(TOOLS, parallel));
  expect(gbnfErrors(g)).toEqual([]);
  return g;
}

describe("forced grammars", () => {
  test("llama3: one call", () => {
    const g = grammarOf(llama3, false);
    expect(recognizes(g, '{"name": "get_weather", "parameters": {"city": "Oslo"}}')).toBe(true);
    expect(recognizes(g, '{"name": "get_weather", "parameters": {"city": 3}}')).toBe(false);
    expect(recognizes(g, '{"name": "get_weather", "parameters": {}}')).toBe(false);
    expect(recognizes(g, '{"name": "nope", "parameters": {}}')).toBe(false);
    expect(recognizes(g, '{"name": "now", "parameters": {}}; {"name": "now", "parameters": {}}')).toBe(false);
  });
  test("llama3: parallel calls joined by '; '", () => {
    const g = grammarOf(llama3, true);
    const text = '{"name": "now", "parameters": {}}; {"name": "get_weather", "parameters": {"city": "Oslo"}}';
    expect(recognizes(g, text)).toBe(true);
    expect(recognizes(g, text.replace('"Oslo"', "true"))).toBe(false);
    // What the grammar produces, the parser reads back as calls.
    expect(run(llama3, [text]).calls.map((c) => c.name)).toEqual(["now", "get_weather"]);
  });
  test("genericJson: one call and an array when parallel", () => {
    const one = grammarOf(genericJson, false);
    expect(recognizes(one, '{"name": "get_weather", "arguments": {"city": "Oslo"}}')).toBe(true);
    expect(recognizes(one, '{"name": "get_weather", "arguments": {"city": null}}')).toBe(false);
    const many = grammarOf(genericJson, true);
    const text = '[{"name": "now", "arguments": {}}, {"name": "get_weather", "arguments": {"city": "Oslo"}}]';
    expect(recognizes(many, text)).toBe(true);
    expect(recognizes(many, text.replace('"Oslo"', "1"))).toBe(false);
    expect(run(genericJson, [text]).calls.map((c) => c.name)).toEqual(["now", "get_weather"]);
  });
});

describe("genericJson", () => {
  test("detection: any mention of tools", () => {
    expect(genericJson.detect(CHATML_TEMPLATE, noToken)).toBe(true);
    expect(genericJson.detect(NO_TOOLS_TEMPLATE, noToken)).toBe(false);
  });
  test("a call object, whole and split", () => {
    const m = parseAllWays(genericJson, ' {"name": "f", "arguments": {"a": [1, {"b": 2}]}}\n');
    expect(m).toEqual({ text: "", reasoning: "", calls: [call("f", '{"a": [1, {"b": 2}]}')] });
  });
  test("an array of calls in a ```json fence", () => {
    const m = parseAllWays(
      genericJson,
      '```json\n[{"name": "a", "parameters": {}}, {"name": "b", "arguments": {"x": "y"}}]\n```',
    );
    expect(m).toEqual({ text: "", reasoning: "", calls: [call("a", "{}"), call("b", '{"x": "y"}', "id1")] });
  });
  test("anything else is content", () => {
    for (const text of [
      "Just text.",
      '{"answer": 42}',
      '{"name": "f", "arguments": {}} and more',
      "[]",
      '[{"name": "f", "arguments": {}}, 3]',
      "```python\nprint(1)\n```",
    ]) {
      expect(parseAllWays(genericJson, text)).toEqual({ text, reasoning: "", calls: [] });
    }
  });
  test("a call cut off by the end of the reply is a partial call once its arguments began, else dropped", () => {
    expect(parseAllWays(genericJson, '{"name": "f", "arguments": {}')).toEqual({
      text: "",
      reasoning: "",
      calls: [call("f", "{}")],
    });
    expect(parseAllWays(genericJson, '```json\n{"name": "f", "parameters": {"a": "b')).toEqual({
      text: "",
      reasoning: "",
      calls: [call("f", '{"a": "b')],
    });
    expect(parseAllWays(genericJson, '[{"name": "f", "arguments": {}}, {"name": "g", "arguments": {"a": 1,')).toEqual({
      text: "",
      reasoning: "",
      calls: [call("f", "{}"), call("g", '{"a": 1', "id1")],
    });
    // The calls that closed stay; the one cut before its arguments is dropped.
    expect(parseAllWays(genericJson, '[{"name": "f", "arguments": {}}, {"na')).toEqual({
      text: "",
      reasoning: "",
      calls: [call("f", "{}")],
    });
    for (const cut of ["{", '{"nam', '{"name": "f", "arguments": ']) {
      expect(parseAllWays(genericJson, cut)).toEqual({ text: "", reasoning: "", calls: [] });
    }
    expect(parseAllWays(genericJson, '{"answer": 4')).toEqual({ text: '{"answer": 4', reasoning: "", calls: [] });
  });
  test("non-call JSON is released as soon as it closes", () => {
    const p = genericJson.parser({ newId: () => "id0" });
    expect(p.push('{"answer": ')).toEqual([]);
    expect(p.push("42}")).toEqual([{ type: "text", text: '{"answer": 42}' }]);
  });
});
