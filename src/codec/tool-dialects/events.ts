// Building a parser's event list: adjacent text merges into one event, and a
// call known whole comes out as start, arguments and end.
import type { ToolCallEvent } from "./types.ts";

export function emitText(out: ToolCallEvent[], text: string): void {
  if (!text) return;
  const last = out[out.length - 1];
  if (last && last.type === "text") last.text += text;
  else out.push({ type: "text", text });
}

export function emitCall(out: ToolCallEvent[], index: number, id: string, call: { name: string; args: string }): void {
  out.push({ type: "call-start", index, id, name: call.name });
  if (call.args) out.push({ type: "call-args", index, text: call.args });
  out.push({ type: "call-end", index, arguments: call.args });
}

/**
 * Content around a wire's calls. Whitespace right after a call (the
 * template's newline between calls) is the wire's: held, it is content only
 * if more content follows.
 */
export class ContentGap {
  /** Only whitespace since the last call. */
  private afterCall = false;

  /** A call (or a block of them) ended. */
  callEnded(): void {
    this.afterCall = true;
  }

  /** Content: out it goes, and whitespace after it is content again. */
  text(out: ToolCallEvent[], text: string): void {
    emitText(out, text);
    this.afterCall = false;
  }

  /**
   * The text `before` a call marker (`found`) or before what may start one
   * goes out, unless it is only whitespace after a call. True when it is and
   * no marker came: the caller keeps all its text and waits for more.
   */
  wait(out: ToolCallEvent[], before: string, found: boolean): boolean {
    if (!(this.afterCall && before.trim() === "")) this.text(out, before);
    else if (!found) return true;
    return false;
  }

  /** The end of the reply: the rest is content unless it is only whitespace after a call. */
  flush(out: ToolCallEvent[], rest: string): void {
    if (!(this.afterCall && rest.trim() === "")) emitText(out, rest);
  }
}
