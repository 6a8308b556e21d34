// DeepSeek V3/R1/V3.1 tool-call dialect: detection, streaming parse, forced grammar.
import { describe, expect, test } from "bun:test";
import { gbnfErrors, parseGbnf } from "../../../grammar/index.ts";
import { deepseek } from "../../../src/codec/tool-dialects/deepseek.ts";
import type { ToolCallEvent } from "../../../src/codec/tool-dialects/types.ts";
import { recognizes } from "../../grammar/recognizer.ts";

const CB = "<｜tool▁calls▁begin｜>";
const CE = "<｜tool▁calls▁end｜>";
const B = "<｜tool▁call▁begin｜>";
const E = "<｜tool▁call▁end｜>";
const S = "<｜tool▁sep｜>";

const v3 = (name: string, args: string) => `${B}function${S}${name}\n\`\`\`json\n${args}\n\`\`\`${E}`;
const v31 = (name: string, args: string) => `${B}${name}${S}${args}${E}`;

// A small template of our own in the DeepSeek shape (not a real model's).
const TEMPLATE = `{% for m in messages %}{% if m.role == 'user' %}<｜User｜>{{ m.content }}{% elif m.tool_calls %}<｜Assistant｜><｜tool▁calls▁begin｜>{% for c in m.tool_calls %}<｜tool▁call▁begin｜>{{ c.function.name }}<｜tool▁sep｜>{{ c.function.arguments }}<｜tool▁call▁end｜>{% endfor %}<｜tool▁calls▁end｜>{% else %}<｜Assistant｜>{{ m.content }}{% endif %}{% endfor %}`;
const CHATML = `{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}<tool_call>`;

interface Merged {
  text: string;
  calls: { name: string; args: string; end: string | undefined }[];
}

function merge(events: ToolCallEvent[]): Merged {
  const m: Merged = { text: "", calls: [] };
  for (const e of events) {
    if (e.type === "text") m.text += e.text;
    else if (e.type === "call-start") {
      expect(e.index).toBe(m.calls.length);
      m.calls.push({ name: e.name, args: "", end: undefined });
    } else if (e.type === "call-args") m.calls[e.index]!.args += e.text;
    else if (e.type === "call-end") m.calls[e.index]!.end = e.arguments;
  }
  for (const c of m.calls) expect(c.args).toBe(c.end!);
  return m;
}

function run(chunks: string[]): Merged {
  let n = 0;
  const p = deepseek.parser(() => `id${n++}`);
  const events: ToolCallEvent[] = [];
  for (const c of chunks) events.push(...p.push(c));
  events.push(...p.flush());
  return merge(events);
}

/** Same result whole, per character, and split at every boundary. */
function parseAllWays(text: string): Merged {
  const whole = run([text]);
  expect(run([...text])).toEqual(whole);
  for (let i = 1; i < text.length; i++) expect(run([text.slice(0, i), text.slice(i)])).toEqual(whole);
  return whole;
}

describe("deepseek detection", () => {
  test("detects its template, not ChatML", () => {
    expect(deepseek.detect(TEMPLATE, () => false)).toBe(true);
    expect(deepseek.detect(CHATML, () => false)).toBe(false);
  });
});

describe("deepseek parser", () => {
  test("V3/R1 style, one call", () => {
    const args = '{"city": "Oslo", "days": 3}';
    const m = parseAllWays(`${CB}${v3("get_weather", args)}${CE}`);
    expect(m).toEqual({ text: "", calls: [{ name: "get_weather", args, end: args }] });
  });

  test("V3.1 style, one call", () => {
    const args = '{"q": "a<b"}';
    const m = parseAllWays(`${CB}${v31("search", args)}${CE}`);
    expect(m).toEqual({ text: "", calls: [{ name: "search", args, end: args }] });
  });

  test("two calls with text before", () => {
    const m = parseAllWays(`Let me check.\n${CB}${v3("a", '{"x": 1}')}\n${v3("b", "{}")}${CE}`);
    expect(m.text).toBe("Let me check.\n");
    expect(m.calls.map((c) => [c.name, c.end])).toEqual([
      ["a", '{"x": 1}'],
      ["b", "{}"],
    ]);
  });

  test("two V3.1 calls", () => {
    const m = parseAllWays(`${CB}${v31("a", '{"x":1}')}${v31("b", '{"y":2}')}${CE}`);
    expect(m.calls.map((c) => [c.name, c.end])).toEqual([
      ["a", '{"x":1}'],
      ["b", '{"y":2}'],
    ]);
  });

  test("a malformed call is dropped: call markup is never content", () => {
    const bad = `${CB}${B}function${S}f\n\`\`\`json\n{"x": \n\`\`\`${E}${CE}`;
    expect(parseAllWays(`hi ${bad}`)).toEqual({ text: "hi ", calls: [] });
    const junk = `${CB}not a call${CE}`;
    expect(parseAllWays(junk)).toEqual({ text: "", calls: [] });
  });

  test("plain text and partial markers come out", () => {
    expect(run(["a <｜tool", "▁ca"])).toEqual({ text: "a <｜tool▁ca", calls: [] });
  });

  test("flush: complete unclosed call is finished, a cut one is partial once its arguments began, else dropped", () => {
    const m = run([`${CB}${v31("f", '{"a": 1}').slice(0, -E.length)}`]);
    expect(m.calls.map((c) => [c.name, c.end])).toEqual([["f", '{"a": 1}']]);
    const partial = (cut: string) => run([cut]).calls.map((c) => [c.name, c.end]);
    expect(partial(`${CB}${B}f${S}{"a": `)).toEqual([["f", '{"a":']]);
    expect(partial(`${CB}${B}function${S}f\n\`\`\`json\n{"a": 1, "b`)).toEqual([["f", '{"a": 1, "b']]);
    for (const cut of [CB, `${CB}${B}`, `${CB}${B}get_wea`, `${CB}${B}f${S}`, `${CB}${B}function${S}f\n\`\`\``])
      expect(run([cut])).toEqual({ text: "", calls: [] });
  });
});

describe("deepseek forced grammar", () => {
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
    test(`parses and recognizes (parallel=${parallel})`, () => {
      const g = parseGbnf(deepseek.forcedGrammar(tools, parallel));
      expect(gbnfErrors(g)).toEqual([]);
      const good = `${CB}${v3("get_weather", '{"city": "Oslo"}')}${CE}`;
      expect(recognizes(g, good)).toBe(true);
      expect(recognizes(g, `${CB}${v3("get_weather", '{"city": 5}')}${CE}`)).toBe(false);
      expect(recognizes(g, `${CB}${v3("other", '{"city": "Oslo"}')}${CE}`)).toBe(false);
      const two = `${CB}${v3("get_weather", '{"city": "Oslo"}')}\n${v3("noop", "{}")}${CE}`;
      expect(recognizes(g, two)).toBe(parallel);
      // What the grammar produces, the parser reads back.
      expect(run([good]).calls.map((c) => c.name)).toEqual(["get_weather"]);
    });
  }
});
