// Gemma 4 tool calls: `<|tool_call>call:NAME{ARGS}<tool_call|>`, one block per
// call, back to back when there are several. ARGS is Gemma's own value syntax
// (./gemma4-grammar.ts): strings between `<|"|>` tokens, raw; keys bare.
//   <|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>
// The parser turns the arguments into JSON as they stream (call-start once
// the name is known at `{`, then JSON fragments), reading a little more than
// the template writes: quoted keys, spaces between tokens, Python's
// True/False/None, and bare words as strings. Reasoning (the
// `<|channel>thought\n…<channel|>` blocks) is split out before this parser.
import { seekMarker, partialSuffixLength } from "../holdback.ts";
import { skipWs } from "../json-scan.ts";
import { CallWriter, type OpenCall } from "./call-writer.ts";
import { ContentGap } from "./events.ts";
import { GEMMA_QUOTE, gemmaCallGrammar } from "./gemma4-grammar.ts";
import type { ToolCallEvent, ToolCallParser, ToolDialect } from "./types.ts";

export const GEMMA4_MARKERS = { open: "<|tool_call>", close: "<tool_call|>", quote: GEMMA_QUOTE } as const;
const M = GEMMA4_MARKERS;
const CALL_PREFIX = "call:";
const MAX_NAME = 256;
// `call:NAME{`: the name runs to the arguments' brace.
const HEAD = /^call:([^\s{}<>]+)\{/;
const HEAD_SO_FAR = /^(?:c(?:a(?:l(?:l(?::[^\s{}<>]*)?)?)?)?)?$/;
const JSON_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;
const PYTHON_WORDS: Record<string, string> = {
  true: "true",
  false: "false",
  null: "null",
  True: "true",
  False: "false",
  None: "null",
};

/** Arguments read so far: JSON text that only ever grows, and where they ended. */
export interface GemmaArguments {
  /** JSON of the arguments as far as they can be told (the whole object once `end` is set). */
  json: string;
  /** Index just past the arguments' closing brace, once it came. */
  end?: number;
  /** The text stopped being Gemma's syntax; `json` holds what was read before. */
  malformed?: boolean;
}

class NeedMore extends Error {}
class Malformed extends Error {}

/**
 * Converts Gemma-syntax arguments (`text` starting at their `{`) to JSON.
 * Pure: called again with more text, it returns a `json` the earlier one is a
 * prefix of, so the difference can be streamed. Strings stream as they come;
 * keys, numbers and words come out once their end is seen.
 */
export function gemmaArgumentsToJson(text: string): GemmaArguments {
  let i = 0;
  let json = "";
  let comma = false; // a separator read but not yet written (held until the next member writes)
  const write = (s: string) => {
    if (comma) json += ",";
    comma = false;
    json += s;
  };
  const ws = () => {
    i = skipWs(text, i);
    if (i === text.length) throw new NeedMore();
  };

  /** A `<|"|>…<|"|>` string's content; partial content is written as it comes when `stream`. */
  const quoted = (stream: boolean): string => {
    const start = i + M.quote.length;
    const close = text.indexOf(M.quote, start);
    if (close < 0) {
      if (stream) {
        const body = text.slice(start);
        write(JSON.stringify(body.slice(0, body.length - partialSuffixLength(body, [M.quote]))).slice(0, -1));
      }
      throw new NeedMore();
    }
    i = close + M.quote.length;
    return text.slice(start, close);
  };

  const value = (): void => {
    ws();
    const c = text[i]!;
    if (text.startsWith(M.quote, i)) {
      write(JSON.stringify(quoted(true)));
      return;
    }
    if (M.quote.startsWith(text.slice(i)) && c === "<") throw new NeedMore();
    if (c === "{") return object();
    if (c === "[") return list();
    // A scalar runs to the next delimiter; its type is known only then.
    let j = i;
    while (j < text.length && !",}]<".includes(text[j]!)) j++;
    if (j === text.length) throw new NeedMore();
    const word = text.slice(i, j).trim();
    if (!word) throw new Malformed();
    i = j;
    write(JSON_NUMBER.test(word) ? word : (PYTHON_WORDS[word] ?? JSON.stringify(word)));
  };

  const key = (): string => {
    if (text.startsWith(M.quote, i)) return quoted(false);
    if (M.quote.startsWith(text.slice(i)) && text[i] === "<") throw new NeedMore();
    let j = i;
    while (j < text.length && !":,{}[]<".includes(text[j]!)) j++;
    if (j === text.length) throw new NeedMore();
    const name = text.slice(i, j).trim();
    if (!name || text[j] !== ":") throw new Malformed();
    i = j;
    return name;
  };

  /** Members or items up to `close`, each read by `member`. */
  const sequence = (close: string, member: () => void): void => {
    i++; // the opening bracket
    write(close === "}" ? "{" : "[");
    ws();
    if (text[i] === close) {
      i++;
      json += close;
      return;
    }
    for (;;) {
      member();
      ws();
      const c = text[i];
      if (c === close) {
        i++;
        comma = false;
        json += close;
        return;
      }
      if (c !== ",") throw new Malformed();
      i++;
      comma = true;
      ws();
      // A trailing comma before the bracket is forgiven.
      if (text[i] === close) {
        i++;
        comma = false;
        json += close;
        return;
      }
    }
  };

  const object = () =>
    sequence("}", () => {
      const name = key();
      ws();
      if (text[i] !== ":") throw new Malformed();
      i++;
      write(`${JSON.stringify(name)}:`);
      value();
    });
  const list = () => sequence("]", value);

  try {
    if (text[0] !== "{") throw new Malformed();
    object();
    return { json, end: i };
  } catch (err) {
    if (err instanceof NeedMore) return { json };
    if (err instanceof Malformed) return { json, malformed: true };
    throw err;
  }
}

type Mode =
  | "outside" // content, until a call opens
  | "head" // after `<|tool_call>`: `call:NAME{`
  | "args" // the arguments, streaming
  | "close" // after the arguments: `<tool_call|>`
  | "skip"; // a malformed call, dropped up to its closing marker

export class Gemma4ToolParser implements ToolCallParser {
  private readonly calls: CallWriter;
  private readonly gap = new ContentGap();
  private mode: Mode = "outside";
  private buf = ""; // text of the current mode not yet consumed
  private call: OpenCall | null = null;

  constructor(newId?: () => string) {
    this.calls = new CallWriter(newId);
  }

  push(text: string): ToolCallEvent[] {
    const out: ToolCallEvent[] = [];
    this.buf += text;
    while (this.step(out, false));
    return out;
  }

  flush(): ToolCallEvent[] {
    const out: ToolCallEvent[] = [];
    while (this.step(out, true));
    // Cut off by the end of the reply: a call whose arguments began ends as
    // far as they were written; other unfinished markup is dropped.
    if (this.mode === "args" && this.call) this.calls.end(this.call, out);
    else if (this.mode === "outside") this.gap.flush(out, this.buf);
    this.mode = "outside";
    this.buf = "";
    this.call = null;
    return out;
  }

  /** One move of the state machine; false when it must wait for more text. */
  private step(out: ToolCallEvent[], final: boolean): boolean {
    const buf = this.buf;
    switch (this.mode) {
      case "outside": {
        const found = seekMarker(buf, M.open, final);
        // Whitespace after a call (before the next, or the end) is not content.
        if (found.after === undefined) {
          if (final || this.gap.wait(out, found.before, false)) return false;
          this.buf = found.held;
          return false;
        }
        this.gap.wait(out, found.before, true);
        return this.enter("head", found.after);
      }
      case "head": {
        const head = HEAD.exec(buf);
        if (head && head[1]!.length <= MAX_NAME) {
          this.call = this.calls.start(head[1]!, out);
          return this.enter("args", buf.slice(head[0].length - 1));
        }
        if (!final && HEAD_SO_FAR.test(buf) && buf.length <= CALL_PREFIX.length + MAX_NAME) return false;
        return this.enter("skip", buf);
      }
      case "args": {
        const call = this.call!;
        const args = gemmaArgumentsToJson(buf);
        this.calls.sendSoFar(call, args.json, out);
        if (args.end === undefined && !args.malformed) return false;
        this.calls.end(call, out);
        this.call = null;
        return args.malformed ? this.enter("skip", buf) : this.enter("close", buf.slice(args.end));
      }
      case "close": {
        const i = skipWs(buf, 0);
        if (buf.startsWith(M.close, i)) return this.enter("outside", buf.slice(i + M.close.length));
        if (!final && M.close.startsWith(buf.slice(i))) return false;
        // No closing marker: the call stands, what follows is read as usual.
        return this.enter("outside", buf.slice(i));
      }
      case "skip": {
        const at = buf.indexOf(M.close);
        if (at >= 0) return this.enter("outside", buf.slice(at + M.close.length));
        if (final) return this.enter("outside", "");
        // Only what may start the closing marker needs keeping.
        this.buf = buf.slice(buf.length - partialSuffixLength(buf, [M.close]));
        return false;
      }
    }
  }

  private enter(mode: Mode, rest: string): boolean {
    if (mode === "outside" && this.mode !== "outside") this.gap.callEnded();
    this.mode = mode;
    this.buf = rest;
    return true;
  }
}

/** Gemma 4 (google/gemma-4-*): its template writes `'<|tool_call>call:'` before each call. */
export const gemma4: ToolDialect = {
  name: "gemma4",
  detect: (template) => template.includes(M.open + CALL_PREFIX),
  parser: (opts) => new Gemma4ToolParser(opts?.newId),
  forcedGrammar: (tools, parallel) => gemmaCallGrammar(tools, parallel),
  trigger: M.open,
  openers: [M.open],
};
