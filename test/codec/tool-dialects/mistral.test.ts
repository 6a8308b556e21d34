// Mistral tool-call dialect: `[TOOL_CALLS]` + a JSON array, or `[TOOL_CALLS]f[ARGS]{...}`.
import { describe, expect, test } from "bun:test";
import { gbnfErrors, parseGbnf } from "../../../grammar/index.ts";
import type { ToolCallEvent } from "../../../src/codec/tool-dialects/types.ts";
import { mistral, mistralCallId } from "../../../src/codec/tool-dialects/mistral.ts";
import { recognizes } from "../../grammar/recognizer.ts";

// A small Mistral-style template, written for this test.
const MISTRAL_TEMPLATE = `{{ bos_token }}{% for m in messages %}
{% if m.role == 'user' %}[INST]{{ m.content }}[/INST]
{% elif m.role == 'assistant' and m.tool_calls %}[TOOL_CALLS][{% for c in m.tool_calls %}{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}, "id": "{{ c.id }}"}{% if not loop.last %}, {% endif %}{% endfor %}]{{ eos_token }}
{% elif m.role == 'assistant' %}{{ m.content }}{{ eos_token }}
{% elif m.role == 'tool' %}[TOOL_RESULTS]{"call_id": "{{ m.tool_call_id }}", "content": {{ m.content | tojson }}}[/TOOL_RESULTS]
{% endif %}{% endfor %}`;

const CHATML_TEMPLATE = `{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}`;

interface Call {
  id: string;
  name: string;
  args: string;
  end: string | undefined;
}
interface Merged {
  text: string;
  calls: Call[];
}

function merge(events: ToolCallEvent[]): Merged {
  const m: Merged = { text: "", calls: [] };
  for (const e of events) {
    if (e.type === "text") m.text += e.text;
    else if (e.type === "call-start") {
      expect(e.index).toBe(m.calls.length);
      m.calls.push({ id: e.id, name: e.name, args: "", end: undefined });
    } else if (e.type === "call-args") m.calls[e.index]!.args += e.text;
    else if (e.type === "call-end") {
      const c = m.calls[e.index]!;
      expect(c.end).toBeUndefined();
      c.end = e.arguments;
    }
  }
  for (const c of m.calls) expect(c.args).toBe(c.end!);
  return m;
}

function counter(): () => string {
  let n = 0;
  return () => `id${n++}`;
}

function run(chunks: string[], newId?: () => string): Merged {
  const p = mistral.parser(newId);
  const events: ToolCallEvent[] = [];
  for (const c of chunks) events.push(...p.push(c));
  events.push(...p.flush());
  return merge(events);
}

/** Whole, one character at a time, and every two-chunk cut: all must agree. */
function checkAllSplits(text: string): Merged {
  const whole = run([text], counter());
  expect(run([...text], counter())).toEqual(whole);
  for (let i = 0; i <= text.length; i++) expect(run([text.slice(0, i), text.slice(i)], counter())).toEqual(whole);
  return whole;
}

describe("mistral detection", () => {
  test("a Mistral-style template is detected, ChatML is not", () => {
    expect(mistral.detect(MISTRAL_TEMPLATE, () => false)).toBe(true);
    expect(mistral.detect(CHATML_TEMPLATE, () => false)).toBe(false);
  });
});

describe("mistral parser", () => {
  test("one call, in one piece and split at every boundary", () => {
    const m = checkAllSplits('[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}]');
    expect(m.text).toBe("");
    expect(m.calls).toEqual([
      { id: "id0", name: "get_weather", args: '{"city": "Oslo", "days": 2}', end: '{"city": "Oslo", "days": 2}' },
    ]);
  });

  test("parallel calls in one array (an id key may be present)", () => {
    const m = checkAllSplits(
      '[TOOL_CALLS] [{"name": "a", "arguments": {"x": [1, "]"]}, "id": "abc123XYZ"}, {"id": "zzzzzzzzz", "name": "b", "arguments": {}}]',
    );
    expect(m.text).toBe("");
    expect(m.calls.map((c) => [c.name, c.end])).toEqual([
      ["a", '{"x": [1, "]"]}'],
      ["b", "{}"],
    ]);
  });

  test("the [ARGS] style, including parallel calls", () => {
    const m = checkAllSplits('[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{"tz": "CET"}');
    expect(m.text).toBe("");
    expect(m.calls.map((c) => [c.name, c.end])).toEqual([
      ["get_weather", '{"city": "Paris"}'],
      ["get_time", '{"tz": "CET"}'],
    ]);
    const withId = run(['[TOOL_CALLS]f[CALL_ID]a1b2c3d4e[ARGS]{"k": 1}'], counter());
    expect(withId.calls.map((c) => [c.name, c.end])).toEqual([["f", '{"k": 1}']]);
  });

  test("text before the marker is content", () => {
    const m = checkAllSplits('Let me check. [TOOL_CALLS][{"name": "f", "arguments": {"q": "[TOOL_CALLS]"}}]');
    expect(m.text).toBe("Let me check. ");
    expect(m.calls.map((c) => [c.name, c.end])).toEqual([["f", '{"q": "[TOOL_CALLS]"}']]);
  });

  test("plain text, and a partial marker at the end, come out as text", () => {
    expect(checkAllSplits("Hello [TOOL")).toEqual({ text: "Hello [TOOL", calls: [] });
  });

  test("the marker of a malformed section is dropped, what follows it is content", () => {
    for (const s of [
      '[TOOL_CALLS][{"name": "f", "arguments": {"a": }}] after',
      '[TOOL_CALLS][{"arguments": {}}]',
      "[TOOL_CALLS]not a call",
      "[TOOL_CALLS]f[ARGS]nope",
    ]) {
      expect(checkAllSplits(s)).toEqual({ text: s.slice("[TOOL_CALLS]".length), calls: [] });
    }
  });

  test("a section cut off by the end of the reply keeps the calls whose arguments began, never content", () => {
    const partial = (s: string) => checkAllSplits(`Hi ${s}`).calls.map((c) => [c.name, c.end]);
    expect(partial('[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}')).toEqual([["f", '{"a": 1}']]);
    expect(partial('[TOOL_CALLS][{"name": "f", "arguments": {}}, {"name": "g", "arguments": {"b": ')).toEqual([
      ["f", "{}"],
      ["g", '{"b":'],
    ]);
    expect(partial('[TOOL_CALLS]f[ARGS]{"a": ')).toEqual([["f", '{"a":']]);
    expect(partial('[TOOL_CALLS]f[CALL_ID]abc123XYZ[ARGS]{"a": [')).toEqual([["f", '{"a": [']]);
    for (const s of [
      "[TOOL_CALLS]",
      '[TOOL_CALLS][{"na',
      "[TOOL_CALLS]f[AR",
      '[TOOL_CALLS][{"name": "f", "arguments": ',
    ]) {
      expect(checkAllSplits(`Hi ${s}`)).toEqual({ text: "Hi ", calls: [] });
    }
  });

  test("default ids are 9 alphanumerics and distinct", () => {
    const m = run(['[TOOL_CALLS][{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]']);
    expect(m.calls).toHaveLength(2);
    for (const c of m.calls) expect(c.id).toMatch(/^[A-Za-z0-9]{9}$/);
    expect(m.calls[0]!.id).not.toBe(m.calls[1]!.id);
    const ids = new Set(Array.from({ length: 200 }, mistralCallId));
    expect(ids.size).toBe(200);
    for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9]{9}$/);
  });
});

describe("mistral forced grammar", () => {
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
    { name: "noop", parameters: { type: "object", properties: {}, additionalProperties: false } },
  ];

  test("one call", () => {
    const g = parseGbnf(mistral.forcedGrammar(tools, false));
    expect(gbnfErrors(g)).toEqual([]);
    expect(recognizes(g, '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo"}}]')).toBe(true);
    expect(recognizes(g, '[TOOL_CALLS][{"name": "noop", "arguments": {}}]')).toBe(true);
    expect(recognizes(g, '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": 3}}]')).toBe(false);
    expect(recognizes(g, '[TOOL_CALLS][{"name": "get_weather", "arguments": {}}]')).toBe(false);
    expect(recognizes(g, '[TOOL_CALLS][{"name": "other", "arguments": {}}]')).toBe(false);
    expect(recognizes(g, '[TOOL_CALLS][{"name": "noop", "arguments": {}}, {"name": "noop", "arguments": {}}]')).toBe(
      false,
    );
  });

  test("parallel calls", () => {
    const g = parseGbnf(mistral.forcedGrammar(tools, true));
    expect(gbnfErrors(g)).toEqual([]);
    const text =
      '[TOOL_CALLS][{"name": "noop", "arguments": {}}, {"name": "get_weather", "arguments": {"city": "Oslo"}}]';
    expect(recognizes(g, text)).toBe(true);
    // What the grammar admits, the parser reads back.
    expect(run([text], counter()).calls.map((c) => c.name)).toEqual(["noop", "get_weather"]);
    expect(() => mistral.forcedGrammar([], false)).toThrow();
  });
});
