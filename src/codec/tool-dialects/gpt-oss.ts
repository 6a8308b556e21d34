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
import { firstMarker, partialSuffixLength } from "../holdback.ts";
import { CallWriter, type OpenCall } from "./call-writer.ts";
import type { ToolCallEvent, ToolCallParser, ToolDialect, ToolSpec } from "./types.ts";

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

type Mode =
  | { kind: "outside" }
  | { kind: "header"; initial: boolean }
  | { kind: "body"; as: "text" | "reasoning" }
  | { kind: "call"; call: OpenCall };

/** Streaming parser for one Harmony reply (starting right after `<|start|>assistant`). */
export class HarmonyParser implements ToolCallParser {
  private readonly calls: CallWriter;
  private buf = "";
  private mode: Mode = { kind: "header", initial: true };

  constructor(newId?: () => string) {
    this.calls = new CallWriter(newId);
  }

  /** Calls started so far. */
  get callCount(): number {
    return this.calls.started;
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
    if (m.kind === "call") this.calls.send(m.call, text, out);
    else if (m.kind === "body" && m.as === "reasoning") out.push({ type: "reasoning", text });
    else out.push({ type: "text", text });
  }

  private endMessage(out: ToolCallEvent[]): void {
    const m = this.mode;
    if (m.kind === "call") this.calls.end(m.call, out);
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
            this.mode = { kind: "call", call: this.calls.start(recipient.replace(/^functions\./, ""), out) };
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
          this.emit(out, this.buf.slice(0, hit.at));
          this.buf = this.buf.slice(hit.at);
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
        this.emit(out, this.buf.slice(0, hit.at));
        const isStarter = (STARTERS as readonly string[]).includes(hit.marker);
        this.buf = this.buf.slice(hit.at + (isStarter ? 0 : hit.marker.length));
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
  parser: (opts) => new HarmonyParser(opts?.newId),
  forcedGrammar: (tools, parallel) => harmonyCallGrammar(tools, parallel),
  trigger: `${CHANNEL}commentary`,
};
