// Tool calls as JSON inside tags, streaming-safe.
import { describe, expect, test } from "bun:test";
import { TaggedJsonToolParser } from "../../src/codec/tool-dialects/hermes.ts";
import type { ToolCallEvent } from "../../src/codec/tool-dialects/types.ts";

const TAGS = { open: "<tool_call>", close: "</tool_call>" };

interface Call {
  index: number;
  id: string;
  name: string;
  args: string; // concatenated call-args
  end: string | undefined; // call-end arguments
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
      m.calls.push({ index: e.index, id: e.id, name: e.name, args: "", end: undefined });
    } else if (e.type === "call-args") {
      const c = m.calls[e.index]!;
      expect(c.end).toBeUndefined();
      c.args += e.text;
    } else if (e.type === "call-end") {
      const c = m.calls[e.index]!;
      expect(c.end).toBeUndefined();
      c.end = e.arguments;
    }
  }
  for (const c of m.calls) expect(c.args).toBe(c.end!);
  return m;
}

function run(chunks: string[], newId?: () => string): { events: ToolCallEvent[]; parser: TaggedJsonToolParser } {
  const p = new TaggedJsonToolParser({ ...TAGS, newId });
  const events: ToolCallEvent[] = [];
  for (const c of chunks) events.push(...p.push(c));
  events.push(...p.flush());
  return { events, parser: p };
}

function counter(): () => string {
  let n = 0;
  return () => `id${n++}`;
}

/** One push, one character at a time, and every two-chunk cut: all must agree. */
function checkAllSplits(text: string): Merged {
  const whole = merge(run([text], counter()).events);
  expect(merge(run([...text], counter()).events)).toEqual(whole);
  for (let i = 0; i <= text.length; i++) {
    expect(merge(run([text.slice(0, i), text.slice(i)], counter()).events)).toEqual(whole);
  }
  return whole;
}

const ONE = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>';

describe("TaggedJsonToolParser", () => {
  test("one call in one push", () => {
    const { events, parser } = run([ONE]);
    expect(events.map((e) => e.type)).toEqual(["call-start", "call-args", "call-end"]);
    const m = merge(events);
    expect(m.text).toBe("");
    expect(m.calls).toHaveLength(1);
    expect(m.calls[0]!.name).toBe("get_weather");
    expect(m.calls[0]!.end).toBe('{"city": "Oslo"}');
    expect(m.calls[0]!.id).toMatch(/^call_[a-zA-Z0-9]{24}$/);
    expect(parser.callCount).toBe(1);
  });

  test("split at every character boundary gives the same result", () => {
    const text =
      'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "units": {"t": "C"}, "s": "a}b"} }\n</tool_call>\nDone <tool_c not a tag <tool';
    const m = checkAllSplits(text);
    expect(m.text).toBe("Let me check.\n\nDone <tool_c not a tag <tool");
    expect(m.calls.map((c) => [c.name, c.end])).toEqual([
      ["get_weather", '{"city": "Oslo", "units": {"t": "C"}, "s": "a}b"}'],
    ]);
  });

  test("arguments stream incrementally", () => {
    const p = new TaggedJsonToolParser(TAGS);
    const ev1 = p.push('<tool_call>{"name": "f", "arguments": {"a": 1');
    expect(ev1.map((e) => e.type)).toEqual(["call-start", "call-args"]);
    expect(p.callCount).toBe(1);
    const ev2 = p.push(', "b": {"c": 2}}');
    // the arguments object is now balanced: it streams through its own closing brace
    expect(ev2).toEqual([{ type: "call-args", index: 0, text: ', "b": {"c": 2}}' }]);
    const ev3 = p.push("}</tool_");
    expect(ev3).toEqual([]); // the wrapper's `}`: nothing more for the arguments
    const ev4 = p.push("call>");
    expect(ev4).toEqual([{ type: "call-end", index: 0, arguments: '{"a": 1, "b": {"c": 2}}' }]);
  });

  test("two parallel calls", () => {
    const text =
      '<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>\n<tool_call>\n{"name": "b", "arguments": {}}\n</tool_call>';
    const m = checkAllSplits(`${text}\n`);
    // The newlines between and after calls are the wire's, not content.
    expect(m.text).toBe("");
    expect(m.calls.map((c) => [c.index, c.name, c.end])).toEqual([
      [0, "a", '{"x": 1}'],
      [1, "b", "{}"],
    ]);
  });

  test("whitespace after a call is content only when more content follows", () => {
    expect(checkAllSplits(`${ONE}\n\nDone.`).text).toBe("\n\nDone.");
    expect(checkAllSplits(`Hi\n${ONE}\n `).text).toBe("Hi\n");
  });

  test("text before and after", () => {
    const m = checkAllSplits(`Sure! ${ONE} Anything else?`);
    expect(m.text).toBe("Sure!  Anything else?");
    expect(m.calls).toHaveLength(1);
  });

  test("split open tag that is not a tag", () => {
    const p = new TaggedJsonToolParser(TAGS);
    expect(p.push("a <tool_c")).toEqual([{ type: "text", text: "a " }]);
    expect(p.push("ar> b")).toEqual([{ type: "text", text: "<tool_car> b" }]);
    expect(p.push("<")).toEqual([]);
    expect(p.flush()).toEqual([{ type: "text", text: "<" }]);
    expect(p.callCount).toBe(0);
  });

  test("arguments before name", () => {
    const m = checkAllSplits('<tool_call>{"arguments": {"q": "x y"}, "name": "search"}</tool_call>');
    expect(m.calls.map((c) => [c.name, c.end])).toEqual([["search", '{"q":"x y"}']]);
  });

  test("fenced JSON", () => {
    const m = checkAllSplits('<tool_call>\n```json\n{"name": "f", "arguments": {"a": [1, 2]}}\n```\n</tool_call>');
    expect(m.text).toBe("");
    expect(m.calls.map((c) => [c.name, c.end])).toEqual([["f", '{"a":[1,2]}']]);
  });

  test("trailing comma", () => {
    const m = checkAllSplits('<tool_call>{"arguments": {"a": 1, "b": [2,],}, "name": "f",}</tool_call>');
    expect(m.calls.map((c) => [c.name, c.end])).toEqual([["f", '{"a":1,"b":[2]}']]);
  });

  test("string-encoded arguments", () => {
    const m = checkAllSplits('<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call>');
    expect(m.calls.map((c) => [c.name, c.end])).toEqual([["f", '{"a": 1}']]);
  });

  test("a malformed call is dropped: call markup is never content", () => {
    const bad = '<tool_call>{"name": "f" "arguments": {}</tool_call>';
    const m = checkAllSplits(`x ${bad} y`);
    expect(m.calls).toHaveLength(0);
    expect(m.text).toBe("x  y");
    const noName = '<tool_call>{"arguments": {}}</tool_call>';
    expect(merge(run([noName]).events)).toEqual({ text: "", calls: [] });
  });

  test("keys or text after the arguments object belong to the wrapper, not the arguments", () => {
    const m = merge(run(['<tool_call>{"name": "f", "arguments": {"a": 1}, "b": }</tool_call>']).events);
    expect(m.calls).toHaveLength(1);
    expect(m.calls[0]!.name).toBe("f");
    expect(m.calls[0]!.end).toBe('{"a": 1}');
    for (const body of ['{"name":"f","arguments":{"a":1},"id":"x"}', '{"name":"f","arguments":{"a":1}} trailing']) {
      const split = merge(run([...`<tool_call>${body}</tool_call>`]).events);
      expect(split.calls[0]!.end).toBe('{"a":1}');
    }
  });

  test("a trailing comma is repaired even after the call has started streaming", () => {
    for (const chunks of [
      ['<tool_call>{"name":"f","arguments":{"a":[1,2,]}}</tool_call>'],
      [...'<tool_call>{"name":"f","arguments":{"a":[1,2,]}}</tool_call>'],
    ]) {
      const m = merge(run(chunks).events);
      expect(m.calls[0]!.end).toBe('{"a":[1,2]}');
    }
  });

  test("unterminated call with a known name is finished at flush", () => {
    const m = checkAllSplits('Hi <tool_call>{"name": "f", "arguments": {"a": "long te');
    expect(m.text).toBe("Hi ");
    expect(m.calls.map((c) => [c.name, c.end])).toEqual([["f", '{"a": "long te']]);
    const full = checkAllSplits('<tool_call>{"name": "f", "arguments": {"a": 1}}\n</tool_');
    expect(full.calls.map((c) => c.end)).toEqual(['{"a": 1}']);
  });

  test("a call cut off before its name is known is dropped, never content", () => {
    for (const cut of [
      "<tool_call>",
      "<tool_call>  \n",
      '<tool_call>{"name"   : "get_weathe',
      '<tool_call>{"name": "get_wea',
    ]) {
      const m = checkAllSplits(`Hi ${cut}`);
      expect(m.calls).toHaveLength(0);
      expect(m.text).toBe("Hi ");
    }
  });

  test("ids are distinct", () => {
    const text = Array.from({ length: 5 }, (_, i) => `<tool_call>{"name": "f${i}", "arguments": {}}</tool_call>`).join(
      "\n",
    );
    const { events, parser } = run([text]);
    const m = merge(events);
    expect(parser.callCount).toBe(5);
    expect(new Set(m.calls.map((c) => c.id)).size).toBe(5);
    const custom = merge(run([text], counter()).events);
    expect(custom.calls.map((c) => c.id)).toEqual(["id0", "id1", "id2", "id3", "id4"]);
  });
});
