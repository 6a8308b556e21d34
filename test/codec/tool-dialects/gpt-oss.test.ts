// gpt-oss Harmony wire: channels, tool calls, streaming splits, forced grammar.
import { describe, expect, test } from "bun:test";
import { gbnfErrors, parseGbnf } from "../../../grammar/index.ts";
import { gptOss, HarmonyParser } from "../../../src/codec/tool-dialects/gpt-oss.ts";
import { recognizes } from "../../grammar/recognizer.ts";
import { parseAllWays, run } from "./parse-harness.ts";

// A small Harmony-style template written for these tests (not the real one).
const HARMONY_TEMPLATE = `{%- for m in messages -%}
{%- if m.role == "assistant" and m.tool_calls -%}
<|start|>assistant<|channel|>commentary to=functions.{{ m.tool_calls[0].function.name }} <|constrain|>json<|message|>{{ m.tool_calls[0].function.arguments }}<|call|>
{%- elif m.role == "assistant" -%}
<|start|>assistant<|channel|>final<|message|>{{ m.content }}<|end|>
{%- else -%}
<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}<|start|>assistant{%- endif -%}`;

const CHATML_TEMPLATE = `{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}`;

const parse = (text: string) => parseAllWays(gptOss, text);

describe("gpt-oss detection", () => {
  const noTokens = () => false;
  test("Harmony-style template is detected", () => {
    expect(gptOss.detect(HARMONY_TEMPLATE, noTokens)).toBe(true);
  });
  test("ChatML template is not", () => {
    expect(gptOss.detect(CHATML_TEMPLATE, noTokens)).toBe(false);
  });
});

describe("gpt-oss parser", () => {
  test("analysis becomes reasoning, final becomes content", () => {
    const r = parse(
      "<|channel|>analysis<|message|>User greets. Reply.<|end|><|start|>assistant<|channel|>final<|message|>Hello there!<|return|>",
    );
    expect(r).toEqual({ text: "Hello there!", reasoning: "User greets. Reply.", calls: [] });
  });

  test("reasoning streams before the message ends", () => {
    const p = new HarmonyParser(() => "id0");
    const ev = p.push("<|channel|>analysis<|message|>Thinking about it");
    expect(ev).toEqual([{ type: "reasoning", text: "Thinking about it" }]);
    expect(p.push(" more<|e")).toEqual([{ type: "reasoning", text: " more" }]);
    expect(p.push("nd|>")).toEqual([]);
    expect(p.flush()).toEqual([]);
  });

  test("analysis then a tool call", () => {
    const args = '{"city": "Oslo", "unit": "c"}';
    const r = parse(
      `<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>${args}<|call|>`,
    );
    expect(r.reasoning).toBe("Need weather.");
    expect(r.text).toBe("");
    expect(r.calls).toEqual([{ id: "id0", name: "get_weather", args, end: args }]);
  });

  test("call-start comes once the header is complete; args stream", () => {
    const p = new HarmonyParser(() => "id1");
    expect(p.push("<|channel|>commentary to=functions.f <|constrain|>json<|mess")).toEqual([]);
    expect(p.push('age|>{"a":')).toEqual([
      { type: "call-start", index: 0, id: "id1", name: "f" },
      { type: "call-args", index: 0, text: '{"a":' },
    ]);
    expect(p.push("1}<|call|>")).toEqual([
      { type: "call-args", index: 0, text: "1}" },
      { type: "call-end", index: 0, arguments: '{"a":1}' },
    ]);
    expect(p.callCount).toBe(1);
  });

  test("recipient before the channel, at the reply start and after <|start|>", () => {
    const first = parse(' to=functions.f<|channel|>commentary <|constrain|>json<|message|>{"x":1}<|call|>');
    expect(first.calls).toEqual([{ id: "id0", name: "f", args: '{"x":1}', end: '{"x":1}' }]);
    const later = parse(
      "<|channel|>analysis<|message|>hm<|end|><|start|>assistant to=functions.g<|channel|>commentary json<|message|>{}<|call|>",
    );
    expect(later).toEqual({ text: "", reasoning: "hm", calls: [{ id: "id0", name: "g", args: "{}", end: "{}" }] });
  });

  test("commentary without a recipient is content", () => {
    const r = parse("<|channel|>commentary<|message|>Working on it.<|end|>");
    expect(r).toEqual({ text: "Working on it.", reasoning: "", calls: [] });
  });

  test("an unterminated call ends at flush", () => {
    const r = run(gptOss, ['<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"a":1}']);
    expect(r.calls).toEqual([{ id: "id0", name: "f", args: '{"a":1}', end: '{"a":1}' }]);
  });

  test("plain text without headers stays content", () => {
    expect(parse("Just an answer.")).toEqual({ text: "Just an answer.", reasoning: "", calls: [] });
  });

  test("malformed headers stay content", () => {
    for (const bad of [
      "<|channel|>bogus<|message|>hi",
      "<|channel|>final hello there\nmore",
      "<|start|>user<|channel|>final<|message|>x",
      "<|channel|>analysis<|end|>after",
    ]) {
      const r = parse(bad);
      expect(r.calls).toEqual([]);
      expect(r.reasoning).toBe("");
      expect(r.text).toBe(bad);
    }
  });

  test("a good message after a malformed header is still parsed", () => {
    const r = parse("<|channel|>bogus<|message|>x <|channel|>final<|message|>ok<|return|>");
    expect(r).toEqual({ text: "<|channel|>bogus<|message|>x ok", reasoning: "", calls: [] });
  });
});

describe("gpt-oss forced grammar", () => {
  const tools = [
    {
      name: "get_weather",
      parameters: {
        type: "object",
        properties: { city: { type: "string" } },
        required: ["city"],
        additionalProperties: false,
      },
    },
    { name: "noop", parameters: { type: "object", properties: {} } },
  ];

  for (const parallel of [false, true]) {
    test(`parses cleanly and recognizes one call (parallel=${parallel})`, () => {
      const g = parseGbnf(gptOss.forcedGrammar(tools, parallel));
      expect(gbnfErrors(g)).toEqual([]);
      const head = "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>";
      expect(recognizes(g, `${head}{"city":"Oslo"}<|call|>`)).toBe(true);
      expect(recognizes(g, `<|channel|>commentary to=functions.noop <|constrain|>json<|message|>{}<|call|>`)).toBe(
        true,
      );
      // Breaks the schema: missing required field, wrong type, unknown property.
      expect(recognizes(g, `${head}{}<|call|>`)).toBe(false);
      expect(recognizes(g, `${head}{"city":3}<|call|>`)).toBe(false);
      expect(recognizes(g, `${head}{"city":"Oslo","x":1}<|call|>`)).toBe(false);
      // Unknown tool, missing terminator, and (this wire) no second call.
      expect(recognizes(g, `<|channel|>commentary to=functions.other <|constrain|>json<|message|>{}<|call|>`)).toBe(
        false,
      );
      expect(recognizes(g, `${head}{"city":"Oslo"}`)).toBe(false);
      expect(recognizes(g, `${head}{"city":"Oslo"}<|call|>${head}{"city":"Rome"}<|call|>`)).toBe(false);
    });
  }

  test("no tools is an error", () => {
    expect(() => gptOss.forcedGrammar([], false)).toThrow();
  });
});
