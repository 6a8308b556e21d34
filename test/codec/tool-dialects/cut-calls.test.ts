// Every wire: a reply cut anywhere inside a call (as max_tokens cuts it, at a
// token boundary, so never inside a special-token marker) leaves no call
// markup in the content: the cut call is a partial call or nothing. And once
// the call's name and the opening of its arguments were written, the cut
// call is a partial call (issue #34: the Llama 3 wire dropped it), the same
// whether the reply came in one piece or token by token.
import { describe, expect, test } from "bun:test";
import { DEEPSEEK_MARKERS as D } from "../../../src/codec/tool-dialects/deepseek.ts";
import { TOOL_DIALECTS } from "../../../src/codec/tool-dialects/index.ts";

const ARGS = '{"city": "Oslo", "unit": "c"}';

/**
 * A whole reply holding one call to get_weather, and the markers a cut may
 * not fall inside.
 */
const REPLIES: Record<string, { reply: string; markers: string[] }> = {
  hermes: {
    reply: `<tool_call>\n{"name": "get_weather", "arguments": ${ARGS}}\n</tool_call>`,
    markers: ["<tool_call>", "</tool_call>"],
  },
  llama3: { reply: `<|python_tag|>{"name": "get_weather", "parameters": ${ARGS}}`, markers: ["<|python_tag|>"] },
  mistral: { reply: `[TOOL_CALLS][{"name": "get_weather", "arguments": ${ARGS}}]`, markers: ["[TOOL_CALLS]"] },
  deepseek: {
    reply: `${D.callsBegin}${D.callBegin}function${D.sep}get_weather\n\`\`\`json\n${ARGS}\n\`\`\`${D.callEnd}${D.callsEnd}`,
    markers: Object.values(D),
  },
  "gpt-oss": {
    reply: `<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>${ARGS}<|call|>`,
    markers: ["<|channel|>", "<|constrain|>", "<|message|>", "<|call|>"],
  },
  "generic-json": { reply: `{"name": "get_weather", "arguments": ${ARGS}}`, markers: [] },
};

/** Cut points of `reply` that do not fall strictly inside a marker. */
function cutPoints(reply: string, markers: string[]): number[] {
  const inside = new Set<number>();
  for (const m of markers) {
    for (let at = reply.indexOf(m); at >= 0; at = reply.indexOf(m, at + 1))
      for (let k = at + 1; k < at + m.length; k++) inside.add(k);
  }
  return Array.from({ length: reply.length }, (_, k) => k + 1).filter((k) => !inside.has(k));
}

describe("a call cut anywhere leaves no markup in content", () => {
  for (const dialect of TOOL_DIALECTS) {
    const sample = REPLIES[dialect.name];
    test(dialect.name, () => {
      expect(sample).toBeDefined();
      const { reply, markers } = sample!;
      let whole = 0;
      for (const k of cutPoints(reply, markers)) {
        const parser = dialect.parser();
        const events = [...parser.push(reply.slice(0, k)), ...parser.flush()];
        const text = events.map((e) => (e.type === "text" ? e.text : "")).join("");
        if (text !== "")
          throw new Error(`cut at ${k} (${JSON.stringify(reply.slice(0, k))}) left content ${JSON.stringify(text)}`);
        for (const e of events) if (e.type === "call-start") expect(e.name).toBe("get_weather");
        if (events.some((e) => e.type === "call-end" && e.arguments === ARGS)) whole++;
      }
      // The uncut reply is the call itself.
      expect(whole).toBeGreaterThan(0);
    });
  }
});

/** The calls a parser reads from `chunks`, merged: name and the arguments as streamed and as ended. */
function callsOf(dialect: (typeof TOOL_DIALECTS)[number], chunks: string[]) {
  const parser = dialect.parser();
  const events = [...chunks.flatMap((c) => parser.push(c)), ...parser.flush()];
  const calls: { name: string; streamed: string; end?: string }[] = [];
  for (const e of events) {
    if (e.type === "call-start") calls[e.index] = { name: e.name, streamed: "" };
    if (e.type === "call-args") calls[e.index]!.streamed += e.text;
    if (e.type === "call-end") calls[e.index]!.end = e.arguments;
  }
  return calls;
}

describe("a call cut after its name is a partial call, streamed equal to whole", () => {
  for (const dialect of TOOL_DIALECTS) {
    test(dialect.name, () => {
      const { reply, markers } = REPLIES[dialect.name]!;
      const named = reply.indexOf(ARGS) + 1;
      let checked = 0;
      for (const k of cutPoints(reply, markers).filter((k) => k >= named)) {
        const cut = reply.slice(0, k);
        const whole = callsOf(dialect, [cut]);
        const context = `cut at ${k} (${JSON.stringify(cut)})`;
        if (whole.length !== 1) throw new Error(`${context}: ${whole.length} calls`);
        expect(whole[0]!.name).toBe("get_weather");
        // The arguments as far as they were written: a prefix of the whole arguments.
        expect(whole[0]!.end).toBeDefined();
        if (!ARGS.startsWith(whole[0]!.end!)) throw new Error(`${context}: arguments ${JSON.stringify(whole[0]!.end)}`);
        expect(whole[0]!.streamed).toBe(whole[0]!.end!);
        expect(callsOf(dialect, [...cut])).toEqual(whole);
        checked++;
      }
      expect(checked).toBeGreaterThan(ARGS.length - 2);
    });
  }
});
