// gpt-oss Harmony wire: channels, tool calls, streaming splits, forced grammar.
import { describe, expect, test } from "bun:test";
import { gbnfErrors, parseGbnf } from "../../../grammar/index.ts";
import { gptOss, HarmonyParser } from "../../../src/codec/tool-dialects/gpt-oss.ts";
import type { ToolCallEvent } from "../../../src/codec/tool-dialects/types.ts";
import { recognizes } from "../../grammar/recognizer.ts";

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

interface Merged {
  text: string;
  reasoning: string;
  calls: { id: string; name: string; args: string; end: string | undefined }[];
}

function merge(events: ToolCallEvent[]): Merged {
  const m: Merged = { text: "", reasoning: "", calls: [] };
  for (const e of events) {
    if (e.type === "text") m.text += e.text;
    else if (e.type === "reasoning") m.reasoning += e.text;
    else if (e.type === "call-start") {
      expect(e.index).toBe(m.calls.length);
      m.calls.push({ id: e.id, name: e.name, args: "", end: undefined });
    } else if (e.type === "call-args") {
      expect(m.calls[e.index]!.end).toBeUndefined();
      m.calls[e.index]!.args += e.text;
    } else {
      expect(m.calls[e.index]!.end).toBeUndefined();
      m.calls[e.index]!.end = e.arguments;
    }
  }
  for (const c of m.calls) expect(c.args).toBe(c.end!);
  return m;
}

let n = 0;
const ids = () => `call_${n++}`;

function parse(chunks: string[]): Merged {
  n = 0;
  const p = gptOss.parser(ids);
  const events: ToolCallEvent[] = [];
  for (const c of chunks) events.push(...p.push(c));
  events.push(...p.flush());
  return merge(events);
}

/** Same merged result for the whole text and for every two-way split of it. */
function parseAllSplits(text: string): Merged {
  const whole = parse([text]);
  for (let i = 1; i < text.length; i++) expect(parse([text.slice(0, i), text.slice(i)])).toEqual(whole);
  expect(parse([...text])).toEqual(whole);
  return whole;
}

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
    const r = parseAllSplits(
      "<|channel|>analysis<|message|>User greets. Reply.<|end|><|start|>assistant<|channel|>final<|message|>Hello there!<|return|>",
    );
    expect(r).toEqual({ text: "Hello there!", reasoning: "User greets. Reply.", calls: [] });
  });

  test("reasoning streams before the message ends", () => {
    const p = new HarmonyParser(ids);
    const ev = p.push("<|channel|>analysis<|message|>Thinking about it");
    expect(ev).toEqual([{ type: "reasoning", text: "Thinking about it" }]);
    expect(p.push(" more<|e")).toEqual([{ type: "reasoning", text: " more" }]);
    expect(p.push("nd|>")).toEqual([]);
    expect(p.flush()).toEqual([]);
  });

  test("analysis then a tool call", () => {
    const args = '{"city": "Oslo", "unit": "c"}';
    const r = parseAllSplits(
      `<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>${args}<|call|>`,
    );
    expect(r.reasoning).toBe("Need weather.");
    expect(r.text).toBe("");
    expect(r.calls).toEqual([{ id: "call_0", name: "get_weather", args, end: args }]);
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
    const first = parseAllSplits(' to=functions.f<|channel|>commentary <|constrain|>json<|message|>{"x":1}<|call|>');
    expect(first.calls).toEqual([{ id: "call_0", name: "f", args: '{"x":1}', end: '{"x":1}' }]);
    const later = parseAllSplits(
      "<|channel|>analysis<|message|>hm<|end|><|start|>assistant to=functions.g<|channel|>commentary json<|message|>{}<|call|>",
    );
    expect(later).toEqual({ text: "", reasoning: "hm", calls: [{ id: "call_0", name: "g", args: "{}", end: "{}" }] });
  });

  test("commentary without a recipient is content", () => {
    const r = parseAllSplits("<|channel|>commentary<|message|>Working on it.<|end|>");
    expect(r).toEqual({ text: "Working on it.", reasoning: "", calls: [] });
  });

  test("an unterminated call ends at flush", () => {
    const r = parse(['<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"a":1}']);
    expect(r.calls).toEqual([{ id: "call_0", name: "f", args: '{"a":1}', end: '{"a":1}' }]);
  });

  test("plain text without headers stays content", () => {
    expect(parseAllSplits("Just an answer.")).toEqual({ text: "Just an answer.", reasoning: "", calls: [] });
  });

  test("malformed headers stay content", () => {
    for (const bad of [
      "<|channel|>bogus<|message|>hi",
      "<|channel|>final hello there\nmore",
      "<|start|>user<|channel|>final<|message|>x",
      "<|channel|>analysis<|end|>after",
    ]) {
      const r = parseAllSplits(bad);
      expect(r.calls).toEqual([]);
      expect(r.reasoning).toBe("");
      expect(r.text).toBe(bad);
    }
  });

  test("a good message after a malformed header is still parsed", () => {
    const r = parseAllSplits("<|channel|>bogus<|message|>x <|channel|>final<|message|>ok<|return|>");
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
