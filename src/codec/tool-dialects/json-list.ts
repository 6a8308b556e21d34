// Wires where a marker opens a JSON list of calls, optionally closed by a
// second marker:
//   Granite 3.x      <|tool_call|>[{"name": "f", "arguments": {...}}, ...]
//   FireFunction v2   functools[{"name": "f", "arguments": {...}}, ...]
//   Apertus          <|tools_prefix|>[{"f": {...}}, ...]<|tools_suffix|>
//   Command R7B      <|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f", "parameters": {...}}, ...]<|END_ACTION|>
//   Command R+       Action:\n```json\n[{"tool_name": "f", "parameters": {...}}, ...]```
// One streaming parser for all of them, told the markers and where a call
// object keeps its name and arguments. Text before the list is content; each
// call starts once its name is known and its arguments object streams as it
// is written. A list element that is not a call is dropped (the rest of the
// list still counts); a list that stops being a list of objects is skipped to
// its closing bracket, or, after a plain-text opener and before any of its
// calls started, is content. Call markup is never content.
import { partialSuffixLength } from "../holdback.ts";
import { isJsonObjectText, jsonStringValue, jsonValueEnd, removeTrailingCommas, skipWs } from "../json-scan.ts";
import { forcedCallGrammar, lit, oneOrMore, seq, type CallShape } from "../tool-grammar.ts";
import type { Expr } from "../../../grammar/index.ts";
import { CallWriter, type OpenCall as StartedCall } from "./call-writer.ts";
import { ContentGap } from "./events.ts";
import type { ToolCallEvent, ToolCallParser, ToolSpec } from "./types.ts";

/** Where a call object keeps its name and arguments. */
export type ListCallShape =
  /** `{"<name>": "f", "<args>": {...}}`, other keys (ids) ignored, in any order. */
  | { kind: "keyed"; name: string; args: string }
  /** `{"f": {...}}`: the function's name is the object's one key (Apertus). */
  | { kind: "name-as-key" };

export interface JsonListWire {
  /** Texts that open a list; the earliest in the reply wins. One ending in `[` opens the list itself. */
  openers: readonly string[];
  /**
   * The openers are ordinary text, not special tokens: one that no list follows
   * is content (FireFunction's ` functools[`, Command R+'s `Action:`).
   */
  plainOpeners?: boolean;
  /** The list may sit in a ``` fence (```json) after the opener; the fence's closing ``` then ends it (Command R+). */
  fenced?: boolean;
  /** The marker that follows the list's `]`, where the wire has one. */
  closer?: string;
  shape: ListCallShape;
}

const FENCE = "```";
const FENCE_LINE = /^```[\w-]*[ \t]*\r?\n/;
const FENCE_LINE_SO_FAR = /^`{0,3}$|^```[\w-]*[ \t]*\r?$/;

/** How far the head of a call object (the text before its arguments object) tells the call. */
type Head =
  | { kind: "wait" } // not written far enough
  | { kind: "stream"; name: string; argsStart: number } // name known, the arguments object starts at argsStart
  | { kind: "whole" } // read once the object closes (arguments before the name, or as a string)
  | { kind: "invalid" }; // not a call object

const WAIT: Head = { kind: "wait" };
const WHOLE: Head = { kind: "whole" };
const INVALID: Head = { kind: "invalid" };

/** Reads the members of the call object at text[start] (a `{`) up to its arguments object. */
function readHead(text: string, start: number, shape: ListCallShape): Head {
  let i = skipWs(text, start + 1);
  let name: string | undefined;
  for (;;) {
    if (i >= text.length) return WAIT;
    if (text[i] === "}") return WHOLE; // no arguments object: the whole object decides
    if (text[i] !== '"') return INVALID;
    const keyEnd = jsonValueEnd(text, i);
    if (keyEnd < 0) return WAIT;
    const key = jsonStringValue(text.slice(i, keyEnd));
    if (key === undefined) return INVALID;
    i = skipWs(text, keyEnd);
    if (i >= text.length) return WAIT;
    if (text[i] !== ":") return INVALID;
    i = skipWs(text, i + 1);
    if (i >= text.length) return WAIT;
    if (shape.kind === "name-as-key") return text[i] === "{" ? { kind: "stream", name: key, argsStart: i } : INVALID;
    if (key === shape.args)
      return text[i] === "{" && name !== undefined ? { kind: "stream", name, argsStart: i } : WHOLE;
    const valueEnd = jsonValueEnd(text, i);
    if (valueEnd < 0) return WAIT;
    if (key === shape.name) {
      name = jsonStringValue(text.slice(i, valueEnd));
      if (name === undefined) return INVALID;
    }
    i = skipWs(text, valueEnd);
    if (i >= text.length) return WAIT;
    if (text[i] === ",") i = skipWs(text, i + 1);
    else if (text[i] !== "}") return INVALID;
  }
}

/** A whole call object's name and arguments (compact JSON), or undefined when it is not a call. */
function readWhole(element: string, shape: ListCallShape): { name: string; args: string } | undefined {
  let v: unknown;
  try {
    v = JSON.parse(removeTrailingCommas(element));
  } catch {
    return undefined;
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) return undefined;
  const o = v as Record<string, unknown>;
  let name: unknown;
  let args: unknown;
  if (shape.kind === "name-as-key") {
    const keys = Object.keys(o);
    if (keys.length !== 1) return undefined;
    name = keys[0];
    args = o[keys[0]!];
  } else {
    name = o[shape.name];
    args = o[shape.args];
  }
  if (typeof name !== "string") return undefined;
  // Some models write the arguments as a JSON string, as OpenAI sends them.
  if (typeof args === "string") return isJsonObjectText(args) ? { name, args } : undefined;
  if (typeof args !== "object" || args === null || Array.isArray(args)) return undefined;
  return { name, args: JSON.stringify(args) };
}

/** The call object being read: from list.text[start]. */
interface OpenCall {
  start: number;
  /** Set once call-start went out. */
  started?: StartedCall;
  argsStart: number;
  ended: boolean; // call-end sent (the arguments object closed)
}

/** A list being read: its text from the `[` on. */
interface OpenList {
  lead: string; // the opener and what came between it and the `[`
  firstIndex: number; // the index its first call gets
  text: string;
  pos: number; // where reading goes on
  afterElement: boolean; // an element was read: `,` or `]` comes next
  call: OpenCall | null;
  broken: boolean; // not a list of calls after all: skipped to its closing bracket
  closer: string | undefined; // what follows the `]`
}

type State =
  | { mode: "text" }
  | { mode: "opened"; opener: string } // after an opener, before the `[`
  | { mode: "list"; list: OpenList }
  | { mode: "after"; closer: string | undefined }; // after the `]`, before the closer

export class JsonListToolParser implements ToolCallParser {
  private state: State = { mode: "text" };
  private buf = ""; // text not yet consumed outside a list (in a list: list.text)
  private readonly gap = new ContentGap();
  private readonly calls: CallWriter;

  constructor(
    private readonly wire: JsonListWire,
    newId?: () => string,
  ) {
    this.calls = new CallWriter(newId);
  }

  push(text: string): ToolCallEvent[] {
    const out: ToolCallEvent[] = [];
    if (this.state.mode === "list") this.state.list.text += text;
    else this.buf += text;
    this.drain(out, false);
    return out;
  }

  flush(): ToolCallEvent[] {
    const out: ToolCallEvent[] = [];
    this.drain(out, true);
    const state = this.state;
    // Cut off by the end of the reply: a call whose arguments began ends with
    // them as far as they were written (./cut-call.ts); anything else of the
    // call markup is dropped, and so is whitespace after the calls.
    const call = state.mode === "list" ? state.list.call : null;
    if (call?.started && !call.ended) this.calls.end(call.started, out);
    this.buf = "";
    this.state = { mode: "text" };
    return out;
  }

  private drain(out: ToolCallEvent[], final: boolean): void {
    for (;;) {
      const state = this.state;
      if (state.mode === "text") {
        if (!this.seekOpener(out, final)) return;
      } else if (state.mode === "opened") {
        if (!this.openList(state.opener, out, final)) return;
      } else if (state.mode === "list") {
        if (!this.readList(state.list, out)) return;
      } else if (!this.readCloser(state.closer, final)) return;
    }
  }

  /** Text mode: content up to the first opener. False when more text is needed. */
  private seekOpener(out: ToolCallEvent[], final: boolean): boolean {
    let at = -1;
    let opener = "";
    for (const o of this.wire.openers) {
      const k = this.buf.indexOf(o);
      if (k >= 0 && (at < 0 || k < at || (k === at && o.length > opener.length))) {
        at = k;
        opener = o;
      }
    }
    const keep = at >= 0 || final ? 0 : partialSuffixLength(this.buf, this.wire.openers);
    const before = this.buf.slice(0, at >= 0 ? at : this.buf.length - keep);
    if (this.gap.wait(out, before, at >= 0)) return false;
    if (at < 0) {
      this.buf = this.buf.slice(before.length);
      return false;
    }
    const after = this.buf.slice(at + opener.length);
    // An opener that ends in `[` opened the list itself.
    this.buf = opener.endsWith("[") ? `[${after}` : after;
    this.state = { mode: "opened", opener: opener.endsWith("[") ? opener.slice(0, -1) : opener };
    return true;
  }

  /** After an opener: whitespace, a fence where the wire allows one, then `[`. */
  private openList(opener: string, out: ToolCallEvent[], final: boolean): boolean {
    let i = skipWs(this.buf, 0);
    let fenced = false;
    if (this.wire.fenced && this.buf.startsWith("`", i)) {
      const line = FENCE_LINE.exec(this.buf.slice(i));
      if (line) {
        fenced = true;
        i = skipWs(this.buf, i + line[0].length);
      } else if (!FENCE_LINE_SO_FAR.test(this.buf.slice(i))) {
        return this.notAList(opener, out);
      } else i = this.buf.length; // the fence line is still arriving
    }
    if (i >= this.buf.length) {
      if (!final) return false;
      // Cut off right after the opener: call markup, dropped.
      this.buf = "";
      this.state = { mode: "text" };
      return true;
    }
    if (this.buf[i] !== "[") return this.notAList(opener, out);
    const list: OpenList = {
      lead: opener + this.buf.slice(0, i),
      firstIndex: this.calls.started,
      text: this.buf.slice(i),
      pos: 1,
      afterElement: false,
      call: null,
      broken: false,
      closer: fenced ? FENCE : this.wire.closer,
    };
    this.buf = "";
    this.state = { mode: "list", list };
    return true;
  }

  /** An opener no list follows: a plain one is content, a special token is dropped. */
  private notAList(opener: string, out: ToolCallEvent[]): boolean {
    // What follows the opener is scanned afresh.
    if (this.wire.plainOpeners) this.gap.text(out, opener);
    this.state = { mode: "text" };
    return true;
  }

  /** Reads list elements as far as they are written. False when more text is needed. */
  private readList(list: OpenList, out: ToolCallEvent[]): boolean {
    const text = list.text;
    for (;;) {
      if (list.broken) {
        if (this.isContent(list, out)) return true;
        const end = jsonValueEnd(text, 0);
        if (end < 0) return false;
        return this.endList(text.slice(end), list.closer);
      }
      if (list.call) {
        if (!this.readCall(list, list.call, out)) return false;
        continue;
      }
      const i = skipWs(text, list.pos);
      if (i >= text.length) return false;
      const c = text[i];
      if (c === "]") return this.endList(text.slice(i + 1), list.closer);
      if (!list.afterElement && c === "{") list.call = { start: i, argsStart: 0, ended: false };
      else if (list.afterElement && c === ",") {
        list.pos = i + 1;
        list.afterElement = false;
      } else list.broken = true;
    }
  }

  /** Reads the call object being written. False when more text is needed. */
  private readCall(list: OpenList, call: OpenCall, out: ToolCallEvent[]): boolean {
    const text = list.text;
    if (!call.started) {
      const head = readHead(text, call.start, this.wire.shape);
      if (head.kind === "wait") return false;
      if (head.kind === "stream") {
        call.started = this.calls.start(head.name, out);
        call.argsStart = head.argsStart;
      } else {
        const end = jsonValueEnd(text, call.start);
        if (end < 0) return false;
        // Read whole; an element that is not a call is dropped.
        const whole = head.kind === "whole" ? readWhole(text.slice(call.start, end), this.wire.shape) : undefined;
        if (whole) this.calls.whole(whole, out);
        return this.elementRead(list, end);
      }
    }
    if (!call.ended) {
      // Stream the arguments object as far as it is written (./cut-call.ts).
      const argsEnd = jsonValueEnd(text, call.argsStart);
      if (argsEnd < 0) {
        this.calls.sendJson(call.started, text.slice(call.argsStart), out);
        return false;
      }
      this.calls.endJson(call.started, text.slice(call.argsStart, argsEnd), out);
      call.ended = true;
    }
    // Keys after the arguments object (an id) are the wire's: the call is done once its object closes.
    const end = jsonValueEnd(text, call.start);
    if (end < 0) return false;
    return this.elementRead(list, end);
  }

  /**
   * After a plain opener, a list that breaks off being a list of objects
   * before any of its calls started is ordinary text (`Action: [see below]`):
   * it goes out as content, and what follows it is scanned afresh. True when
   * that is so.
   */
  private isContent(list: OpenList, out: ToolCallEvent[]): boolean {
    if (!this.wire.plainOpeners || this.calls.started > list.firstIndex) return false;
    this.gap.text(out, list.lead);
    this.buf = list.text;
    this.state = { mode: "text" };
    return true;
  }

  private elementRead(list: OpenList, end: number): boolean {
    list.call = null;
    list.pos = end;
    list.afterElement = true;
    return true;
  }

  private endList(rest: string, closer: string | undefined): boolean {
    this.buf = rest;
    this.gap.callEnded();
    this.state = { mode: "after", closer };
    return true;
  }

  /** After the `]`: whitespace and the wire's closing marker, if it comes. */
  private readCloser(closer: string | undefined, final: boolean): boolean {
    if (closer) {
      const i = skipWs(this.buf, 0);
      if (this.buf.startsWith(closer, i)) this.buf = this.buf.slice(i + closer.length);
      else if (closer.startsWith(this.buf.slice(i))) {
        if (!final) return false; // still arriving
        this.buf = ""; // a cut closer is markup
      }
    }
    this.state = { mode: "text" };
    return true;
  }
}

/** Where a forced list of calls puts its markers: `open`, the calls separated by `sep`, `close`. */
export interface CallListLayout {
  open: string;
  sep: Expr;
  close: string;
}

/** GBNF (root `root`) for a list of one call (one or more when `parallel`) to `tools`, laid out by `shape`. */
export function callListGrammar(
  tools: ToolSpec[],
  shape: CallShape,
  layout: CallListLayout,
  parallel: boolean,
): string {
  return forcedCallGrammar(tools, shape, (call) =>
    seq(lit(layout.open), oneOrMore(call, parallel, layout.sep), lit(layout.close)),
  );
}
