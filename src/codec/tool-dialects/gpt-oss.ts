// gpt-oss's Harmony channel format. The generation prompt ends with
// `<|start|>assistant`; the reply is a run of messages, each
//   [<|start|>assistant][ to=RECIPIENT]<|channel|>CHANNEL[ to=RECIPIENT][ <|constrain|>json]<|message|>BODY
// ended by `<|end|>`, `<|call|>` (a tool call) or `<|return|>` (end of the final answer).
//   analysis                  → reasoning events (streamed)
//   final, commentary         → text events (streamed)
//   any channel to=functions.NAME → a tool call whose BODY is the JSON arguments
// The recipient may sit before `<|channel|>` or after the channel name. Text that
// is not inside a recognised header stays content; markers split across chunks are
// held back until they can be told apart.
import { forcedCallGrammar, lit, seq, type CallShape } from "../tool-grammar.ts";
import { partialSuffixLength } from "../holdback.ts";
import type { ToolCallEvent, ToolCallParser, ToolDialect, ToolSpec } from "./types.ts";
import { newCallId } from "./ids.ts";

const START = "<|start|>";
const CHANNEL = "<|channel|>";
const MESSAGE = "<|message|>";
const CONSTRAIN = "<|constrain|>";
const CALL = "<|call|>";
/** Markers that end a message (consumed). */
const TERMINATORS = ["<|end|>", CALL, "<|return|>"] as const;
/** Markers that begin a header (not consumed: the header is parsed from them). */
const STARTERS = [START, CHANNEL] as const;
const BODY_MARKERS = [...TERMINATORS, ...STARTERS];
/** A header is short and on one line; longer candidates are given up on. */
const MAX_HEADER = 256;

// Whole header, up to and including `<|message|>`.
const HEADER_RE =
  /^(?:<\|start\|>assistant)?(?:\s*to=([^\s<]+))?\s*<\|channel\|>(analysis|final|commentary)(?:\s+to=([^\s<]+))?(?:\s*<\|constrain\|>\s*[\w.-]+|\s+[\w.-]+)?\s*<\|message\|>$/;

/** First occurrence of any of `markers` in `text` at or after `from`: [index, marker] or undefined. */
function firstMarker(text: string, markers: readonly string[], from = 0): [number, string] | undefined {
  let best: [number, string] | undefined;
  for (const m of markers) {
    const i = text.indexOf(m, from);
    if (i >= 0 && (!best || i < best[0])) best = [i, m];
  }
  return best;
}

type Mode =
  | { kind: "outside" }
  | { kind: "header"; initial: boolean }
  | { kind: "body"; as: "text" | "reasoning" }
  | { kind: "call"; index: number; args: string };

/** Streaming parser for one Harmony reply (starting right after `<|start|>assistant`). */
export class HarmonyParser implements ToolCallParser {
  private readonly newId: () => string;
  private buf = "";
  private mode: Mode = { kind: "header", initial: true };
  private count = 0;

  constructor(newId?: () => string) {
    this.newId = newId ?? newCallId;
  }

  /** Calls started so far. */
  get callCount(): number {
    return this.count;
  }

  push(text: string): ToolCallEvent[] {
    const out: ToolCallEvent[] = [];
    this.buf += text;
    this.drain(out, false);
    return out;
  }

  flush(): ToolCallEvent[] {
    const out: ToolCallEvent[] = [];
    this.drain(out, true);
    return out;
  }

  private emit(out: ToolCallEvent[], text: string): void {
    if (!text) return;
    const m = this.mode;
    if (m.kind === "call") {
      m.args += text;
      out.push({ type: "call-args", index: m.index, text });
    } else if (m.kind === "body" && m.as === "reasoning") out.push({ type: "reasoning", text });
    else out.push({ type: "text", text });
  }

  private endMessage(out: ToolCallEvent[]): void {
    const m = this.mode;
    if (m.kind === "call") out.push({ type: "call-end", index: m.index, arguments: m.args });
    this.mode = { kind: "outside" };
  }

  /**
   * Give up on the header candidate at the start of buf. A complete header that does not
   * parse is content as a whole; an implausible partial one gives up only its leading
   * marker (or first character), and the rest is scanned again as content.
   */
  private bail(out: ToolCallEvent[], headerLength: number): void {
    let cut = headerLength;
    if (cut === 0) cut = STARTERS.find((s) => this.buf.startsWith(s))?.length ?? 1;
    this.mode = { kind: "outside" };
    this.emit(out, this.buf.slice(0, cut));
    this.buf = this.buf.slice(cut);
  }

  private drain(out: ToolCallEvent[], final: boolean): void {
    for (;;) {
      const m = this.mode;
      if (m.kind === "header") {
        const end = this.buf.indexOf(MESSAGE);
        if (end >= 0) {
          const header = this.buf.slice(0, end + MESSAGE.length);
          const h = HEADER_RE.exec(header);
          if (!h) {
            this.bail(out, header.length);
            continue;
          }
          this.buf = this.buf.slice(header.length);
          const recipient = h[1] ?? h[3];
          if (recipient) {
            const index = this.count++;
            out.push({ type: "call-start", index, id: this.newId(), name: recipient.replace(/^functions\./, "") });
            this.mode = { kind: "call", index, args: "" };
          } else this.mode = { kind: "body", as: h[2] === "analysis" ? "reasoning" : "text" };
          continue;
        }
        if (!this.plausibleHeader(m.initial) || final) {
          if (final && (this.buf.includes(CHANNEL) || this.buf.includes(START))) {
            // A header cut off by the end of the reply: wire markup, never content.
            this.buf = "";
            this.mode = { kind: "outside" };
            return;
          }
          if (this.buf) {
            this.bail(out, 0);
            continue;
          }
          this.mode = { kind: "outside" };
        }
        return;
      }
      if (m.kind === "outside") {
        const hit = firstMarker(this.buf, STARTERS);
        if (hit) {
          this.emit(out, this.buf.slice(0, hit[0]));
          this.buf = this.buf.slice(hit[0]);
          this.mode = { kind: "header", initial: false };
          continue;
        }
        const hold = final ? 0 : partialSuffixLength(this.buf, STARTERS);
        this.emit(out, this.buf.slice(0, this.buf.length - hold));
        this.buf = this.buf.slice(this.buf.length - hold);
        return;
      }
      // Inside a message body (text, reasoning or call arguments).
      const hit = firstMarker(this.buf, BODY_MARKERS);
      if (hit) {
        this.emit(out, this.buf.slice(0, hit[0]));
        const isStarter = (STARTERS as readonly string[]).includes(hit[1]);
        this.buf = this.buf.slice(hit[0] + (isStarter ? 0 : hit[1].length));
        this.endMessage(out);
        if (isStarter) this.mode = { kind: "header", initial: false };
        continue;
      }
      const hold = final ? 0 : partialSuffixLength(this.buf, BODY_MARKERS);
      this.emit(out, this.buf.slice(0, this.buf.length - hold));
      this.buf = this.buf.slice(this.buf.length - hold);
      if (final) this.endMessage(out);
      return;
    }
  }

  /** Whether buf (holding no `<|message|>` yet) may still grow into a header. */
  private plausibleHeader(initial: boolean): boolean {
    const b = this.buf;
    if (b.length > MAX_HEADER || b.includes("\n")) return false;
    if (firstMarker(b, TERMINATORS)) return false;
    if (b.indexOf(START, 1) >= 0 || b.indexOf(CHANNEL, b.indexOf(CHANNEL) + 1) > 0) return false;
    if (initial) {
      // Right after `<|start|>assistant`: a recipient or the channel comes first.
      const t = b.trimStart();
      return t === "" || ["to=", CHANNEL, START].some((s) => t.startsWith(s) || s.startsWith(t));
    }
    return true;
  }
}

/**
 * GBNF for one forced call: `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>ARGS<|call|>`.
 * `parallel` is accepted but still yields exactly one call: in Harmony a call ends the
 * turn at `<|call|>`, and the next call comes only after the tool's result.
 */
export function harmonyCallGrammar(tools: ToolSpec[], _parallel: boolean): string {
  const shape: CallShape = (tool, args) =>
    seq(lit(`${CHANNEL}commentary to=functions.${tool.name} ${CONSTRAIN}json${MESSAGE}`), args, lit(CALL));
  return forcedCallGrammar(tools, shape, (call) => call);
}

export const gptOss: ToolDialect = {
  name: "gpt-oss",
  detect: (template) => template.includes(CHANNEL) && template.includes(MESSAGE),
  parser: (newId) => new HarmonyParser(newId),
  forcedGrammar: (tools, parallel) => harmonyCallGrammar(tools, parallel),
  trigger: `${CHANNEL}commentary`,
};
