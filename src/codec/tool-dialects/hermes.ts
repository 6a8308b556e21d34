// Hermes-style calls (Qwen 2.5/3, Hermes, SmolLM3 and most ChatML models):
// `<tool_call>{"name": "f", "arguments": {...}}</tool_call>`, one block per call.
// The wire's streaming parser (TaggedJsonToolParser) and its dialect entry.
// Text arrives in arbitrary chunks; tags may be split at any character.
import { partialSuffixLength, seekMarker } from "../holdback.ts";
import { jsonStringValue, removeTrailingCommas } from "../json-scan.ts";
import { toolCallGrammar } from "../tool-grammar.ts";
import { CallWriter, type OpenCall as StartedCall } from "./call-writer.ts";
import { ContentGap } from "./events.ts";
import type { ToolCallEvent, ToolDialect } from "./types.ts";

export interface TaggedJsonToolParserOptions {
  open: string;
  close: string;
  newId?: () => string;
}

// `{` "name" : "<name>" , "arguments" : — followed by an object start (only objects stream).
const HEADER = /^\s*\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"arguments"\s*:\s*(?=\{)/;

function parseLoose(text: string): unknown {
  let t = text.trim();
  const fence = /^```[\w-]*[ \t]*\r?\n?([\s\S]*?)\s*```$/.exec(t);
  if (fence) t = fence[1]!.trim();
  try {
    return JSON.parse(t);
  } catch {
    try {
      return JSON.parse(removeTrailingCommas(t));
    } catch {
      return undefined;
    }
  }
}

/** {name, arguments} from a whole call body, or undefined when it is not a valid call. */
function parseCall(body: string): { name: string; args: string } | undefined {
  const v = parseLoose(body);
  if (typeof v !== "object" || v === null || Array.isArray(v)) return undefined;
  const o = v as Record<string, unknown>;
  if (typeof o.name !== "string") return undefined;
  const a = o.arguments;
  if (typeof a === "string") return { name: o.name, args: a };
  if (typeof a === "object" && a !== null && !Array.isArray(a)) return { name: o.name, args: JSON.stringify(a) };
  return undefined;
}

interface OpenCall {
  buf: string; // call body text since the open tag
  started?: StartedCall; // call-start emitted (streaming mode)
  argsStart: number; // offset of the arguments value in buf
}

export class TaggedJsonToolParser {
  private readonly open: string;
  private readonly close: string;
  private readonly calls: CallWriter;
  private pending = ""; // outside text not yet emitted
  private call: OpenCall | null = null;
  private readonly gap = new ContentGap();

  constructor(opts: TaggedJsonToolParserOptions) {
    if (!opts.open || !opts.close) throw new Error("TaggedJsonToolParser: open and close tags must be non-empty");
    this.open = opts.open;
    this.close = opts.close;
    this.calls = new CallWriter(opts.newId);
  }

  /** Calls started so far. */
  get callCount(): number {
    return this.calls.started;
  }

  push(text: string): ToolCallEvent[] {
    const out: ToolCallEvent[] = [];
    if (this.call) this.call.buf += text;
    else this.pending += text;
    this.drain(out);
    return out;
  }

  /** End of output: release held text and finish or give back an unterminated call. */
  flush(): ToolCallEvent[] {
    const out: ToolCallEvent[] = [];
    this.drain(out);
    const call = this.call;
    if (call) {
      this.call = null;
      // Cut-off output: a started call ends with its arguments as far as they
      // can be told; one cut before its name is dropped. Call markup is never
      // content (the reply's finish says it was cut).
      if (call.started) {
        const body = call.buf.slice(0, call.buf.length - partialSuffixLength(call.buf, [this.close]));
        this.finishClosed(call, body, out);
      }
    }
    this.gap.flush(out, this.pending);
    this.pending = "";
    return out;
  }

  private drain(out: ToolCallEvent[]): void {
    for (;;) {
      if (!this.call) {
        const found = seekMarker(this.pending, this.open);
        if (this.gap.wait(out, found.before, found.after !== undefined)) return;
        if (found.after === undefined) {
          this.pending = found.held;
          return;
        }
        this.pending = "";
        this.call = { buf: found.after, argsStart: 0 };
        continue;
      }
      const call = this.call;
      const end = call.buf.indexOf(this.close);
      if (end < 0) {
        this.stream(call, call.buf.length - partialSuffixLength(call.buf, [this.close]), out);
        return;
      }
      const body = call.buf.slice(0, end);
      this.pending = call.buf.slice(end + this.close.length);
      this.call = null;
      this.gap.callEnded();
      this.finishClosed(call, body, out);
    }
  }

  /** Start (if the header is complete) and stream arguments up to `limit` in call.buf. */
  private stream(call: OpenCall, limit: number, out: ToolCallEvent[]): void {
    if (!call.started) {
      const m = HEADER.exec(call.buf);
      if (!m || m[0].length > limit) return;
      const name = jsonStringValue(m[1]!);
      if (name === undefined) return; // odd escapes: decide at the close tag
      call.argsStart = m[0].length;
      call.started = this.calls.start(name, out);
    }
    // Stream the arguments object as far as it is written: up to its closing
    // bracket once that came (whatever follows is the wrapper's), else holding
    // back trailing whitespace and a trailing comma (dropped if a bracket
    // follows: the trailing-comma repair). Commas before a bracket are dropped.
    this.calls.sendJson(call.started, call.buf.slice(call.argsStart, limit), out);
  }

  private finishClosed(call: OpenCall, body: string, out: ToolCallEvent[]): void {
    if (!call.started) this.stream(call, body.length, out); // header may only now be complete
    if (call.started) {
      // The arguments are the JSON object right after the header (trailing
      // commas repaired); keys or text after it belong to the wrapper. If it
      // never closed, the call ends with what was streamed: the caller sees
      // arguments that do not parse and does not treat the reply as a call.
      this.calls.endJson(call.started, body.slice(call.argsStart), out);
      return;
    }
    const parsed = parseCall(body);
    // A malformed block is dropped: call markup is never content.
    if (parsed) this.calls.whole(parsed, out);
  }
}

const WIRE = { open: "<tool_call>", close: "</tool_call>" };

export const hermes: ToolDialect = {
  name: "hermes",
  detect: (template) => template.includes(WIRE.open),
  parser: (opts) => new TaggedJsonToolParser({ ...WIRE, newId: opts?.newId }),
  forcedGrammar: (tools, parallel) => toolCallGrammar(tools, WIRE, parallel),
  trigger: WIRE.open,
  openers: [WIRE.open],
};
