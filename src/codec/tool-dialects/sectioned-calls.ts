// Calls between special-token markers with JSON arguments, the shape Kimi K2
// and DeepSeek R1 / V3.1 share:
//   [SECTION_BEGIN] CALL_BEGIN header {arguments} [trailer] [CALL_END] … [SECTION_END]
// The header names the call (how is each wire's own: ./kimi-k2.ts,
// ./deepseek.ts); the arguments are a JSON object, streamed as written.
//
// Models slip out of the section markers (llama.cpp's Kimi K2 tests show a
// call-begin without its section, and calls without their call-end), so a
// call-begin opens a call wherever it comes, and a call ends when its
// arguments object closes; what follows it up to the next marker (R1's
// closing fence, junk) is dropped. Whatever lies between the markers is
// never content: a malformed call is dropped up to the next marker, a call
// cut by the end of the reply once its arguments began ends as far as they
// were written (./cut-call.ts), one cut before that is dropped.
import { firstMarker, partialSuffixLength } from "../holdback.ts";
import { jsonValueEnd, markerOutsideStrings } from "../json-scan.ts";
import { CallWriter, type OpenCall } from "./call-writer.ts";
import { ContentGap } from "./events.ts";
import { newCallId } from "./ids.ts";
import type { ToolCallEvent, ToolCallParser } from "./types.ts";

export interface SectionMarkers {
  sectionBegin: string;
  sectionEnd: string;
  callBegin: string;
  callEnd: string;
}

/** A call's header, read from the text after its call-begin marker. */
export interface CallHeader {
  name: string;
  /** The call's id when the wire writes one (Kimi's `functions.NAME:IDX`). */
  id?: string;
  /** Offset of the arguments object's `{` in the text. */
  argsAt: number;
}

export interface SectionedWire {
  markers: SectionMarkers;
  /**
   * Reads the text after a call-begin marker (up to the next marker, if one
   * came): the header once its arguments object has begun, "more" while the
   * text may still become one, undefined when it cannot.
   */
  readHeader(text: string, index: number): CallHeader | "more" | undefined;
}

/** A header is a name and a few markers; a longer run without arguments is no call. */
const MAX_HEADER = 512;

type Mode =
  | { kind: "content" }
  // Markup between calls, or a dropped call's rest: nothing until the next marker.
  | { kind: "markup"; inSection: boolean }
  | { kind: "header"; inSection: boolean }
  | { kind: "args"; inSection: boolean; call: OpenCall };

export class SectionedCallParser implements ToolCallParser {
  private readonly markers: readonly string[];
  private readonly newId: () => string;
  private readonly calls: CallWriter;
  private readonly gap = new ContentGap();
  private mode: Mode = { kind: "content" };
  private buf = ""; // text not yet consumed in the current mode
  private readonly usedIds = new Set<string>();

  constructor(
    private readonly wire: SectionedWire,
    newId?: () => string,
  ) {
    const m = wire.markers;
    this.markers = [m.sectionBegin, m.sectionEnd, m.callBegin, m.callEnd];
    this.newId = newId ?? newCallId;
    this.calls = new CallWriter(this.newId);
  }

  push(text: string): ToolCallEvent[] {
    const out: ToolCallEvent[] = [];
    this.buf += text;
    this.drain(out);
    return out;
  }

  flush(): ToolCallEvent[] {
    const out: ToolCallEvent[] = [];
    this.drain(out);
    const mode = this.mode;
    if (mode.kind === "content") {
      // Whitespace after the last call is the wire's, not content.
      this.gap.flush(out, this.buf);
    } else if (mode.kind === "args") {
      // Cut by the end of the reply: the arguments as far as they were written.
      this.calls.sendJson(mode.call, this.buf.slice(0, this.buf.length - this.heldBack()), out);
      this.calls.end(mode.call, out);
    }
    this.buf = "";
    this.mode = { kind: "content" };
    return out;
  }

  private drain(out: ToolCallEvent[]): void {
    while (this.step(out));
  }

  /** One step of the current mode; false when it needs more text. */
  private step(out: ToolCallEvent[]): boolean {
    const mode = this.mode;
    if (mode.kind === "args") return this.args(mode.call, mode.inSection, out);
    const hit = firstMarker(this.buf, this.markers);
    if (mode.kind === "content") return this.content(hit, out);
    if (mode.kind === "header") return this.header(mode.inSection, hit, out);
    if (!hit) {
      this.buf = this.buf.slice(this.buf.length - this.heldBack());
      return false;
    }
    this.atMarker(hit, mode.inSection);
    return true;
  }

  private content(hit: { at: number; marker: string } | undefined, out: ToolCallEvent[]): boolean {
    const before = hit ? this.buf.slice(0, hit.at) : this.buf.slice(0, this.buf.length - this.heldBack());
    // Whitespace after a call is held: content only if more content follows.
    const waiting = this.gap.wait(out, before, hit !== undefined);
    if (hit) {
      this.atMarker(hit, false);
      return true;
    }
    if (!waiting) this.buf = this.buf.slice(before.length);
    return false;
  }

  private header(inSection: boolean, hit: { at: number; marker: string } | undefined, out: ToolCallEvent[]): boolean {
    const text = hit ? this.buf.slice(0, hit.at) : this.buf;
    const header = this.wire.readHeader(text, this.calls.started);
    if (header !== undefined && header !== "more") {
      this.startCall(header, inSection, out);
      this.buf = this.buf.slice(header.argsAt);
      return true;
    }
    // Not a call: its markup is dropped up to the next marker.
    if (header === undefined || hit || text.length > MAX_HEADER) {
      this.mode = { kind: "markup", inSection };
      return true;
    }
    return false;
  }

  /** The arguments object (from its `{`): the call ends when it closes, or where a marker (outside its strings) breaks it off. */
  private args(call: OpenCall, inSection: boolean, out: ToolCallEvent[]): boolean {
    const end = jsonValueEnd(this.buf, 0);
    const broken = end < 0 ? markerOutsideStrings(this.buf, this.markers) : undefined;
    if (end >= 0) {
      this.calls.endJson(call, this.buf.slice(0, end), out);
      this.gap.callEnded();
      this.buf = this.buf.slice(end);
    } else if (broken) {
      this.calls.endJson(call, this.buf.slice(0, broken.at), out);
      this.gap.callEnded();
      this.buf = this.buf.slice(broken.at);
    } else {
      this.calls.sendJson(call, this.buf.slice(0, this.buf.length - this.heldBack()), out);
      return false;
    }
    this.mode = { kind: "markup", inSection };
    return true;
  }

  /** Length of the buffer's end that may be the start of a marker. */
  private heldBack(): number {
    return partialSuffixLength(this.buf, this.markers);
  }

  /** Consumes the marker `hit` found in the buffer and enters the mode it opens. */
  private atMarker(hit: { at: number; marker: string }, inSection: boolean): void {
    this.buf = this.buf.slice(hit.at + hit.marker.length);
    const m = this.wire.markers;
    if (hit.marker === m.sectionBegin) this.mode = { kind: "markup", inSection: true };
    else if (hit.marker === m.callBegin) this.mode = { kind: "header", inSection };
    else if (hit.marker === m.callEnd && inSection) this.mode = { kind: "markup", inSection: true };
    else this.mode = { kind: "content" }; // a section's end, or a call's end outside a section
  }

  private startCall(header: CallHeader, inSection: boolean, out: ToolCallEvent[]): void {
    // The wire's own id when it writes one (unless it repeats one of this reply's).
    const id = header.id !== undefined && !this.usedIds.has(header.id) ? header.id : this.newId();
    this.usedIds.add(id);
    this.mode = { kind: "args", inSection, call: this.calls.start(header.name, out, id) };
  }
}
