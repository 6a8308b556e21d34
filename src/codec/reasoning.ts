// Splits model output into reasoning (between `<think>` and `</think>`, or
// whatever markers the model uses) and content, while streaming.
//
// - Markers never appear in either output, even when split across pushes: a
//   tail that might be the start of a marker is held back until it is decided.
// - Whitespace right after the closing marker is dropped from content (Qwen3
//   writes "</think>\n\n" before its answer).
// - Reasoning is stripped of leading and trailing whitespace (the "<think>\n"
//   ... "\n</think>" padding), so it can be replayed through a template that
//   adds that padding back. Trailing whitespace is held until it turns out to
//   be inside the reasoning rather than at its end.
// - An opening marker later in the content starts a new reasoning block; a
//   closing marker outside one is dropped.
import { partialSuffixLength } from "./holdback.ts";

export interface ReasoningOptions {
  open: string;
  close: string;
  /** The prompt left a reasoning block open (renderToTokens' endsInReasoning): output starts inside it. */
  startInside: boolean;
}

export interface SplitText {
  content: string;
  reasoning: string;
}

export class ReasoningSplitter {
  private readonly open: string;
  private readonly close: string;
  private inside: boolean;
  private held = "";
  /** Drop whitespace until the first other character of the current reasoning block / content. */
  private trimReasoning: boolean;
  private trimContent = false;

  constructor(opts: ReasoningOptions) {
    if (opts.open === "" || opts.close === "") throw new Error("reasoning markers must not be empty");
    this.open = opts.open;
    this.close = opts.close;
    this.inside = opts.startInside;
    this.trimReasoning = opts.startInside;
  }

  /** Whether the text so far ends inside a reasoning block. */
  get inReasoning(): boolean {
    return this.inside;
  }

  push(text: string): SplitText {
    const out: SplitText = { content: "", reasoning: "" };
    let buf = this.held + text;
    this.held = "";
    for (;;) {
      if (this.inside) {
        const at = buf.indexOf(this.close);
        if (at >= 0) {
          out.reasoning += this.reasoningText(buf.slice(0, at).trimEnd());
          buf = buf.slice(at + this.close.length);
          this.inside = false;
          this.trimContent = true;
          continue;
        }
        const keep = partialSuffixLength(buf, [this.close]);
        const body = this.reasoningText(buf.slice(0, buf.length - keep));
        const settled = body.trimEnd();
        out.reasoning += settled;
        this.held = body.slice(settled.length) + buf.slice(buf.length - keep);
        return out;
      }
      const open = buf.indexOf(this.open);
      const close = buf.indexOf(this.close);
      const opening = open >= 0 && (close < 0 || open <= close);
      const at = opening ? open : close;
      if (at >= 0) {
        out.content += this.contentText(buf.slice(0, at));
        buf = buf.slice(at + (opening ? this.open : this.close).length);
        if (opening) {
          this.inside = true;
          this.trimReasoning = true;
        } else {
          this.trimContent = true;
        }
        continue;
      }
      const keep = partialSuffixLength(buf, [this.open, this.close]);
      out.content += this.contentText(buf.slice(0, buf.length - keep));
      this.held = buf.slice(buf.length - keep);
      return out;
    }
  }

  /** Ends the stream: a held partial marker was text after all; held trailing reasoning whitespace is dropped. */
  flush(): SplitText {
    const rest = this.held;
    this.held = "";
    if (this.inside) return { content: "", reasoning: this.reasoningText(rest).trimEnd() };
    return { content: this.contentText(rest), reasoning: "" };
  }

  private reasoningText(text: string): string {
    if (!this.trimReasoning) return text;
    const trimmed = text.trimStart();
    if (trimmed !== "") this.trimReasoning = false;
    return trimmed;
  }

  private contentText(text: string): string {
    if (!this.trimContent) return text;
    const trimmed = text.trimStart();
    if (trimmed !== "") this.trimContent = false;
    return trimmed;
  }
}

/** Splits a whole text at once. */
export function splitReasoning(text: string, opts: ReasoningOptions): SplitText {
  const splitter = new ReasoningSplitter(opts);
  const a = splitter.push(text);
  const b = splitter.flush();
  return { content: a.content + b.content, reasoning: a.reasoning + b.reasoning };
}
