// Mistral-style calls. Three wires share the `[TOOL_CALLS]` marker, each
// written by the templates of one generation of Mistral models:
//   JSON array (Mistral 7B v0.3, Nemo):  [TOOL_CALLS][{"name": "f", "arguments": {...}, "id": "a1b2c3d4e"}, ...]
//   named, with an id (Small 3.2):       [TOOL_CALLS]f[CALL_ID]a1b2c3d4e[ARGS]{...}[TOOL_CALLS]g[CALL_ID]...
//   named (Devstral 2507, Ministral 3):  [TOOL_CALLS]f[ARGS]{...}[TOOL_CALLS]g[ARGS]{...}
// One parser reads all three; each wire has its own dialect entry so that the
// forced grammar writes exactly what its template renders (the Nemo template
// and Small 3.2's refuse a call without an id of exactly 9 alphanumerics;
// Devstral's and Ministral's have no [CALL_ID] at all).
//
// A call starts once its name is known and its arguments object has opened;
// the arguments stream as they are written. An id the model wrote (after
// [CALL_ID], or as a whole array element's "id") becomes the call's id when
// it is 9 alphanumerics not used before in the reply, so the call renders back
// as the model wrote it; otherwise a fresh one is made. Call markup never
// becomes content: a cut or malformed call is dropped or ends as written.
import { jsonStringValue, jsonValueEnd, skipWs } from "../json-scan.ts";
import { seekMarker } from "../holdback.ts";
import {
  callArray,
  forcedCallGrammar,
  jsonObjectCall,
  lit,
  oneOrMore,
  repeat,
  seq,
  SP,
  type CallShape,
} from "../tool-grammar.ts";
import { CallWriter, type OpenCall as StartedCall } from "./call-writer.ts";
import { ContentGap } from "./events.ts";
import { randomAlnum } from "./ids.ts";
import type { ToolCallEvent, ToolCallParser, ToolDialect, ToolSpec } from "./types.ts";

export const MISTRAL_TOOL_CALLS = "[TOOL_CALLS]";
const ARGS = "[ARGS]";
const CALL_ID = "[CALL_ID]";
const MAX_NAME = 256;
const CALL_ID_FORM = /^[A-Za-z0-9]{9}$/;

/** A random call id of exactly 9 alphanumeric characters, as Mistral templates demand. */
export function mistralCallId(): string {
  return randomAlnum(9);
}

const NAME_CHAR = /[A-Za-z0-9_.:-]/;
const ID_CHAR = /[A-Za-z0-9_-]/;

// An array element's head: `{"name": "<f>", "arguments": ` before the arguments' `{`.
const ELEMENT_HEAD = /^\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"arguments"\s*:\s*(?=\{)/;

/** A call's head after `[TOOL_CALLS]`: its name and tags up to the arguments. */
type NamedHead =
  | { state: "incomplete" }
  | { state: "invalid"; drop: number } // drop this much markup, then read on as content
  | { state: "done"; name: string; id: string | undefined; argsAt: number };

/**
 * Reads `name[ARGS]` or `name[CALL_ID]id[ARGS]` (then optional whitespace and
 * `{`). At the end of the reply (`final`) a head still incomplete was cut off:
 * all of it is dropped.
 */
function readNamedHead(buf: string, final: boolean): NamedHead {
  const head = readHead(buf);
  return head.state === "incomplete" && final ? { state: "invalid", drop: buf.length } : head;
}

function readHead(buf: string): NamedHead {
  const incomplete: NamedHead = { state: "incomplete" };
  let i = 0;
  while (i < buf.length && NAME_CHAR.test(buf[i]!)) i++;
  const name = buf.slice(0, i);
  // No name, or a name not followed by a tag: only the marker was call markup.
  const notACall: NamedHead = { state: "invalid", drop: 0 };
  if (name.length > MAX_NAME) return notACall;
  if (i === buf.length) return incomplete;
  if (!name) return notACall;
  /** Whether `tag` is next (undefined: the text ends inside it). */
  const tagAt = (tag: string): boolean | undefined => {
    const rest = buf.slice(i, i + tag.length);
    if (rest === tag) return true;
    return tag.startsWith(rest) ? undefined : false;
  };
  let id: string | undefined;
  const hasId = tagAt(CALL_ID);
  if (hasId === undefined) return incomplete;
  if (hasId) {
    i += CALL_ID.length;
    const idStart = i;
    while (i < buf.length && ID_CHAR.test(buf[i]!)) i++;
    if (i - idStart > MAX_NAME) return { state: "invalid", drop: i };
    if (i === buf.length) return incomplete;
    id = buf.slice(idStart, i);
  }
  const hasArgs = tagAt(ARGS);
  if (hasArgs === undefined) return incomplete;
  if (!hasArgs) return hasId ? { state: "invalid", drop: i } : notACall;
  i = skipWs(buf, i + ARGS.length);
  if (i === buf.length) return incomplete;
  if (buf[i] !== "{") return { state: "invalid", drop: i };
  return { state: "done", name, id, argsAt: i };
}

/** {name, arguments, id} of a whole array element, or undefined when it is not a call. */
function readWholeElement(text: string): { name: string; args: string; id: unknown } | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) return undefined;
  const o = v as Record<string, unknown>;
  if (typeof o.name !== "string") return undefined;
  const a = o.arguments;
  if (typeof a === "string") return { name: o.name, args: a, id: o.id };
  if (typeof a === "object" && a !== null && !Array.isArray(a))
    return { name: o.name, args: JSON.stringify(a), id: o.id };
  return undefined;
}

/** End (exclusive) of an object or array whose opening bracket was already read, or -1. */
function closeOf(open: "{" | "[", rest: string): number {
  const end = jsonValueEnd(open + rest, 0);
  return end < 0 ? -1 : end - 1;
}

interface OpenCall extends StartedCall {
  inArray: boolean; // an array element: the rest of the element follows the arguments
}

type Mode =
  | "outside" // content, until a marker
  | "section" // after a marker: an array or a name follows
  | "named" // reading name[CALL_ID]id[ARGS]
  | "array" // in a call array, between elements
  | "args" // streaming a call's arguments object
  | "element-rest"; // after an element's arguments, up to its closing brace

export class MistralToolParser implements ToolCallParser {
  private readonly newId: () => string;
  private readonly calls: CallWriter;
  private readonly gap = new ContentGap();
  private readonly usedIds = new Set<string>();
  private mode: Mode = "outside";
  private buf = ""; // text of the current mode not yet consumed
  private call: OpenCall | null = null;

  constructor(newId?: () => string) {
    this.newId = newId ?? mistralCallId;
    this.calls = new CallWriter(this.newId);
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
    // Cut off by the end of the reply: a call whose arguments began ends as
    // written (./cut-call.ts); markup before that point is dropped.
    if (this.mode === "args" && this.call) this.calls.end(this.call, out);
    else if (this.mode === "outside") this.gap.flush(out, this.buf);
    this.call = null;
    this.mode = "outside";
    this.buf = "";
    return out;
  }

  /** Consumes what can be decided; returns when more text is needed. */
  private drain(out: ToolCallEvent[], final: boolean): void {
    while (this.step(out, final));
  }

  /** One move of the state machine; false when it must wait for more text. */
  private step(out: ToolCallEvent[], final: boolean): boolean {
    const buf = this.buf;
    switch (this.mode) {
      case "outside": {
        const found = seekMarker(buf, MISTRAL_TOOL_CALLS, final);
        // Whitespace after a call (before the next one, or the end) is not
        // content; it is held until something else follows.
        if (found.after === undefined) {
          if (final || this.gap.wait(out, found.before, false)) return false;
          this.buf = found.held;
          return false;
        }
        this.gap.wait(out, found.before, true);
        return this.enter("section", found.after);
      }
      case "section": {
        const i = skipWs(buf, 0);
        if (i === buf.length) return this.waitOrDrop(final);
        return buf[i] === "[" ? this.enter("array", buf.slice(i + 1)) : this.enter("named", buf.slice(i));
      }
      case "named": {
        const head = readNamedHead(buf, final);
        if (head.state === "incomplete") return false;
        if (head.state === "invalid") return this.enter("outside", buf.slice(head.drop));
        this.startCall(head.name, head.id, false, out);
        return this.enter("args", buf.slice(head.argsAt));
      }
      case "array":
        return this.arrayStep(buf, out, final);
      case "args": {
        const call = this.call!;
        const end = jsonValueEnd(buf, 0);
        if (end < 0) {
          this.calls.sendJson(call, buf, out);
          return false;
        }
        this.calls.endJson(call, buf.slice(0, end), out);
        this.call = null;
        return this.enter(call.inArray ? "element-rest" : "outside", buf.slice(end));
      }
      case "element-rest": {
        // The element's other keys (its "id") after the arguments.
        const end = closeOf("{", buf);
        if (end < 0) return this.waitOrDrop(final);
        return this.enter("array", buf.slice(end));
      }
    }
  }

  /** In a call array: the next element, a separator, or the closing bracket. */
  private arrayStep(buf: string, out: ToolCallEvent[], final: boolean): boolean {
    const i = skipWs(buf, 0);
    const c = buf[i];
    if (c === undefined) return this.waitOrDrop(final);
    if (c === ",") return this.enter("array", buf.slice(i + 1));
    if (c === "]") return this.enter("outside", buf.slice(i + 1));
    if (c === "{") {
      const head = ELEMENT_HEAD.exec(buf.slice(i));
      const name = head ? jsonStringValue(head[1]!) : undefined;
      if (head && name !== undefined) {
        this.startCall(name, undefined, true, out);
        return this.enter("args", buf.slice(i + head[0].length));
      }
      // Keys in another order: the element is read whole once it closed.
      const end = jsonValueEnd(buf, i);
      if (end < 0) return this.waitOrDrop(final);
      const whole = readWholeElement(buf.slice(i, end));
      // A malformed element is dropped, and the array read on.
      if (whole) this.calls.whole(whole, out, this.takeId(whole.id));
      return this.enter("array", buf.slice(end));
    }
    // Not a call array after all: it is dropped whole (call markup is never content).
    const end = closeOf("[", buf);
    if (end < 0) return this.waitOrDrop(final);
    return this.enter("outside", buf.slice(end));
  }

  private enter(mode: Mode, rest: string): boolean {
    if (mode === "outside" && this.mode !== "outside") this.gap.callEnded();
    this.mode = mode;
    this.buf = rest;
    return true;
  }

  /** Waits for more text; at the end of the reply the unfinished markup is dropped. */
  private waitOrDrop(final: boolean): boolean {
    if (!final) return false;
    return this.enter("outside", "");
  }

  /** The model's own id when it is a valid Mistral id not used yet in this reply, else a fresh one. */
  private takeId(written: unknown): string {
    let id = typeof written === "string" && CALL_ID_FORM.test(written) && !this.usedIds.has(written) ? written : "";
    while (!id || this.usedIds.has(id)) id = this.newId();
    this.usedIds.add(id);
    return id;
  }

  private startCall(name: string, id: string | undefined, inArray: boolean, out: ToolCallEvent[]): void {
    this.call = { ...this.calls.start(name, out, this.takeId(id)), inArray };
  }
}

// ---------------------------------------------------------------------------
// Forced grammars: each wire exactly as its template renders a call turn.

/** A call id as the templates demand: 9 alphanumerics. */
const CALL_ID_CHARS = repeat(
  {
    kind: "class",
    negated: false,
    ranges: [
      [0x30, 0x39],
      [0x41, 0x5a],
      [0x61, 0x7a],
    ],
  },
  9,
  9,
);

/** `{"name": "<f>", "arguments": <args>, "id": "<9 alphanumerics>"}` (the Nemo template appends the id). */
const arrayElementCall: CallShape = jsonObjectCall("arguments", [
  lit(","),
  SP,
  lit('"id":'),
  SP,
  lit('"'),
  CALL_ID_CHARS,
  lit('"'),
]);

/** `f[ARGS]<args>`, or `f[CALL_ID]<id>[ARGS]<args>` where the template writes call ids. */
const namedCall =
  (withId: boolean): CallShape =>
  (tool, args) =>
    seq(lit(tool.name), ...(withId ? [lit(CALL_ID), CALL_ID_CHARS] : []), lit(ARGS), args);

/** GBNF: `[TOOL_CALLS]` and a JSON array of one call (several when `parallel`) to one of `tools`. */
export function mistralArrayGrammar(tools: ToolSpec[], parallel: boolean): string {
  return forcedCallGrammar(tools, arrayElementCall, (call) =>
    seq(lit(MISTRAL_TOOL_CALLS), parallel ? callArray(call) : seq(lit("["), call, lit("]"))),
  );
}

/** GBNF: `[TOOL_CALLS]name…[ARGS]{…}`, once or (when `parallel`) repeated back to back. */
export function mistralNamedGrammar(tools: ToolSpec[], parallel: boolean, withId: boolean): string {
  return forcedCallGrammar(tools, namedCall(withId), (call) =>
    oneOrMore(seq(lit(MISTRAL_TOOL_CALLS), call), parallel, seq()),
  );
}

// ---------------------------------------------------------------------------
// Dialects. Which wire a template writes is read from the template itself;
// for one that shows `[TOOL_CALLS]` but renders no call, the vocabulary's
// `[ARGS]` token tells the named wire from the array.

const showsCalls = (template: string) => template.includes(MISTRAL_TOOL_CALLS);
const namedWire = (template: string, hasToken: (text: string) => boolean) =>
  template.includes(ARGS) || (!template.includes("[TOOL_CALLS][") && hasToken(ARGS));

const WIRE = { trigger: MISTRAL_TOOL_CALLS, openers: [MISTRAL_TOOL_CALLS] };

/** `[TOOL_CALLS][{"name", "arguments", "id"}, …]`: Mistral 7B v0.3, Nemo. */
export const mistral: ToolDialect = {
  name: "mistral",
  detect: (template, hasToken) => showsCalls(template) && !namedWire(template, hasToken),
  parser: (opts) => new MistralToolParser(opts?.newId),
  forcedGrammar: (tools, parallel) => mistralArrayGrammar(tools, parallel),
  ...WIRE,
};

/** `[TOOL_CALLS]name[CALL_ID]id[ARGS]{…}`: Mistral Small 3.2. */
export const mistralCallIds: ToolDialect = {
  name: "mistral-call-id",
  detect: (template, hasToken) => showsCalls(template) && namedWire(template, hasToken) && template.includes(CALL_ID),
  parser: (opts) => new MistralToolParser(opts?.newId),
  forcedGrammar: (tools, parallel) => mistralNamedGrammar(tools, parallel, true),
  ...WIRE,
};

/** `[TOOL_CALLS]name[ARGS]{…}`: Devstral Small 2507, Ministral 3 / Magistral. */
export const mistralNamed: ToolDialect = {
  name: "mistral-args",
  detect: (template, hasToken) => showsCalls(template) && namedWire(template, hasToken) && !template.includes(CALL_ID),
  parser: (opts) => new MistralToolParser(opts?.newId),
  forcedGrammar: (tools, parallel) => mistralNamedGrammar(tools, parallel, false),
  ...WIRE,
};
