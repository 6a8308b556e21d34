// Calls written as tags whose parameters carry their own type mark, the
// shape DeepSeek V3.2/V4's DSML (./deepseek-dsml.ts) and Kimi K3's XTML
// (./kimi-k3.ts) share:
//   BLOCK_OPEN
//     CALL_TAG(name)  PARAM_TAG(key, mark) value PARAM_CLOSE …  CALL_CLOSE
//     …
//   BLOCK_CLOSE
// The mark says whether the value is a string, written as it is (no quoting,
// no escaping), or JSON: DSML's string="true|false", XTML's type="string|…".
//
// Arguments come out as compact JSON typed by that mark (and, where the
// model's mark contradicts the tool's schema, by the schema:
// ./typed-values.ts). They stream: call-start and `{` once the call's tag is
// read, a string value's text as it arrives, any other value whole once
// closed. Markup is never content: tags the wire puts around content are
// dropped, a malformed call or tag is skipped up to the next tag, and a call
// cut by the end of the reply ends as far as it was written.
import type { Expr } from "../../../grammar/index.ts";
import { firstMarker, partialSuffixLength } from "../holdback.ts";
import { callsGrammar, compiledSchema, type GrammarOut, lit, repeat, seq } from "../tool-grammar.ts";
import { CallWriter, type OpenCall as StartedCall } from "./call-writer.ts";
import { emitText } from "./events.ts";
import {
  isStringOnly,
  parameterSchema,
  rawStringGrammar,
  rawValueJson,
  schemaTypes,
  toolParameters,
  withDefinitions,
} from "./typed-values.ts";
import type { ParserOptions, ToolCallEvent, ToolCallParser, ToolSpec } from "./types.ts";

/** How a parameter's tag marks its value. */
export type ValueMark = "string" | "json" | undefined;

export interface TaggedWire {
  /** Tags that open a block of calls (more than one spelling may be read) and close it. */
  blockOpens: readonly string[];
  blockCloses: readonly string[];
  /** A call's tag: how it starts, the whole tag (group 1: the name), and its closing tag. */
  call: { open: string; tag: RegExp; close: string };
  /** A parameter's tag likewise (group 1: the key), with the value's mark read from the match. */
  param: { open: string; tag: RegExp; close: string; mark: (tag: RegExpExecArray) => ValueMark };
  /** A whole-object alternative to parameters: its tag, and the closing tag after the JSON object. */
  object?: { open: string; tag: RegExp; close: string };
  /** Decodes a name or key as its tag writes it. */
  attribute?: (text: string) => string;
  /** Tags around content that are markup, dropped wherever they come outside a block. */
  markup?: readonly string[];
  /** Special tokens of the tags: a tag cut by the end of the reply once it holds one is markup. */
  tokens: readonly string[];
}

/** A tag is short; a longer run without its end is no tag. */
const MAX_TAG = 512;

interface OpenCall extends StartedCall {
  name: string;
  params: number;
}

interface OpenParam {
  key: string;
  mark: ValueMark;
  schema: unknown;
  /** A value that can only be a string streams as it arrives; any other waits for its close. */
  streams: boolean;
}

type Mode =
  | { kind: "content" }
  | { kind: "block" } // between calls
  | { kind: "call"; call: OpenCall } // between a call's parameters
  | { kind: "param"; call: OpenCall; param: OpenParam }
  | { kind: "object"; call: OpenCall }; // inside a whole-object block

/** The one of `markers` that `text` starts with; "maybe" while more text may make it start with one. */
function startsWithAny(text: string, markers: readonly string[]): string | "maybe" | undefined {
  const found = markers.find((m) => text.startsWith(m));
  if (found) return found;
  return markers.some((m) => m.startsWith(text)) ? "maybe" : undefined;
}

/** A string's text as it goes inside JSON quotes. */
const jsonStringBody = (text: string): string => JSON.stringify(text).slice(1, -1);

const isHighSurrogate = (code: number): boolean => code >= 0xd800 && code <= 0xdbff;

/** Whether a declared parameter takes strings only (an undeclared one is as its mark says). */
const declaredStringOnly = (schema: unknown): boolean => schema !== undefined && isStringOnly(schema);

/** A value as JSON: marked JSON is JSON (unless the schema takes only strings); else raw text typed by the schema. */
function valueJson(raw: string, param: OpenParam): string {
  if (param.mark === "json" && !declaredStringOnly(param.schema)) {
    try {
      return JSON.stringify(JSON.parse(raw.trim()));
    } catch {
      // not JSON after all: typed as raw text
    }
  }
  return rawValueJson(raw, param.schema);
}

export class TaggedParamParser implements ToolCallParser {
  private readonly calls: CallWriter;
  private readonly tools: ToolSpec[] | undefined;
  private readonly contentTags: readonly string[];
  private readonly callEnds: readonly string[];
  private mode: Mode = { kind: "content" };
  private buf = "";

  constructor(
    private readonly wire: TaggedWire,
    opts?: ParserOptions,
  ) {
    this.calls = new CallWriter(opts?.newId);
    this.tools = opts?.tools;
    this.contentTags = [...wire.blockOpens, ...(wire.markup ?? [])];
    // A call ends at its closing tag or, left open, where the next call or the block's end begins.
    this.callEnds = [wire.call.close, wire.call.open, ...wire.blockCloses];
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
      // A tag cut once it holds one of its special tokens is markup, as is the
      // whitespace before it; whitespace after the last block is the wire's.
      const held = partialSuffixLength(this.buf, this.contentTags);
      const tail = this.buf.slice(this.buf.length - held);
      const text = this.wire.tokens.some((t) => tail.includes(t)) ? this.buf.slice(0, -held).trimEnd() : this.buf;
      if (!(this.calls.started > 0 && text.trim() === "")) emitText(out, text);
    } else if (mode.kind === "call" || mode.kind === "object") {
      this.calls.end(mode.call, out);
    } else if (mode.kind === "param") {
      // Cut inside a value: the arguments as far as they were written.
      const { call, param } = mode;
      const held = this.buf.slice(0, this.buf.length - partialSuffixLength(this.buf, [this.wire.param.close]));
      if (param.streams) this.calls.send(call, jsonStringBody(held), out);
      else this.calls.send(call, `${this.keyPrefix(call, param.key)}${held.trim()}`, out);
      this.calls.end(call, out);
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
    if (mode.kind === "content") return this.content(out);
    if (mode.kind === "param") return this.paramValue(mode.call, mode.param, out);
    if (mode.kind === "object") return this.objectValue(mode.call, out);
    const lead = this.buf.length - this.buf.trimStart().length;
    const rest = this.buf.slice(lead);
    if (rest === "") {
      this.buf = "";
      return false;
    }
    return mode.kind === "block" ? this.betweenCalls(rest, out) : this.betweenParams(mode.call, rest, out);
  }

  private content(out: ToolCallEvent[]): boolean {
    const hit = firstMarker(this.buf, this.contentTags);
    const before = hit
      ? this.buf.slice(0, hit.at)
      : this.buf.slice(0, this.buf.length - partialSuffixLength(this.buf, this.contentTags));
    // Whitespace next to a tag (DeepSeek's blank line before its block) is
    // the wire's: trailing whitespace waits to see whether content goes on.
    const text = before.trimEnd();
    if (!(this.calls.started > 0 && text === "")) emitText(out, text);
    if (!hit) {
      this.buf = this.buf.slice(text.length);
      return false;
    }
    this.buf = this.buf.slice(hit.at + hit.marker.length);
    if (this.wire.blockOpens.includes(hit.marker)) this.mode = { kind: "block" };
    return true;
  }

  private betweenCalls(rest: string, out: ToolCallEvent[]): boolean {
    const tag = this.tag(rest, this.wire.call.open, this.wire.call.tag);
    if (tag === "more") return false;
    if (tag) {
      const name = this.attribute(tag[1]!);
      const call: OpenCall = { ...this.calls.start(name, out), name, params: 0 };
      this.calls.send(call, "{", out);
      this.buf = rest.slice(tag[0].length);
      this.mode = { kind: "call", call };
      return true;
    }
    const close = startsWithAny(rest, this.wire.blockCloses);
    if (close === "maybe") return false;
    if (close) {
      this.buf = rest.slice(close.length);
      this.mode = { kind: "content" };
      return true;
    }
    return this.skipTo(rest, [this.wire.call.open, ...this.wire.blockCloses]);
  }

  private betweenParams(call: OpenCall, rest: string, out: ToolCallEvent[]): boolean {
    const { param: p, object } = this.wire;
    const tag = this.tag(rest, p.open, p.tag);
    if (tag === "more") return false;
    if (tag) {
      const key = this.attribute(tag[1]!);
      const mark = p.mark(tag);
      const schema = parameterSchema(this.tools, call.name, key);
      // Marked a string under a schema that admits strings, or unmarked where only a string fits.
      const streams =
        mark === "string" ? schemaTypes(schema).has("string") : mark === undefined && declaredStringOnly(schema);
      if (streams) this.calls.send(call, `${this.keyPrefix(call, key)}"`, out);
      this.buf = rest.slice(tag[0].length);
      this.mode = { kind: "param", call, param: { key, mark, schema, streams } };
      return true;
    }
    const whole = object ? this.tag(rest, object.open, object.tag) : undefined;
    if (whole === "more") return false;
    if (whole) {
      this.buf = rest.slice(whole[0].length);
      this.mode = { kind: "object", call };
      return true;
    }
    const end = startsWithAny(rest, this.callEnds);
    if (end === "maybe") return false;
    if (end) {
      this.buf = end === this.wire.call.close ? rest.slice(end.length) : rest;
      this.calls.end(call, out, `${call.streamed}}`);
      this.mode = { kind: "block" };
      return true;
    }
    return this.skipTo(rest, [p.open, ...(object ? [object.open] : []), ...this.callEnds]);
  }

  private paramValue(call: OpenCall, param: OpenParam, out: ToolCallEvent[]): boolean {
    const close = this.wire.param.close;
    const end = this.buf.indexOf(close);
    if (end < 0) {
      if (param.streams) {
        let ready = this.buf.length - partialSuffixLength(this.buf, [close]);
        // Half a surrogate pair waits for its other half.
        if (ready > 0 && isHighSurrogate(this.buf.charCodeAt(ready - 1))) ready--;
        this.calls.send(call, jsonStringBody(this.buf.slice(0, ready)), out);
        this.buf = this.buf.slice(ready);
      }
      return false;
    }
    const raw = this.buf.slice(0, end);
    if (param.streams) this.calls.send(call, `${jsonStringBody(raw)}"`, out);
    else this.calls.send(call, `${this.keyPrefix(call, param.key)}${valueJson(raw, param)}`, out);
    call.params++;
    this.buf = this.buf.slice(end + close.length);
    this.mode = { kind: "call", call };
    return true;
  }

  /** A whole-object block: its members join the call's arguments; anything but an object is dropped. */
  private objectValue(call: OpenCall, out: ToolCallEvent[]): boolean {
    const close = this.wire.object!.close;
    const end = this.buf.indexOf(close);
    if (end < 0) return false;
    let members: Record<string, unknown> = {};
    try {
      const value: unknown = JSON.parse(this.buf.slice(0, end));
      if (typeof value === "object" && value !== null && !Array.isArray(value)) members = value as typeof members;
    } catch {
      // not an object: no arguments from it
    }
    for (const [key, value] of Object.entries(members)) {
      this.calls.send(call, `${this.keyPrefix(call, key)}${JSON.stringify(value)}`, out);
      call.params++;
    }
    this.buf = this.buf.slice(end + close.length);
    this.mode = { kind: "call", call };
    return true;
  }

  /**
   * A whole tag of the kind `open` starts (its match), "more" while it may
   * still arrive, or undefined when `rest` starts with no such tag.
   */
  private tag(rest: string, open: string, whole: RegExp): RegExpExecArray | "more" | undefined {
    const opens = startsWithAny(rest, [open]);
    if (opens === "maybe") return "more";
    if (!opens) return undefined;
    const m = whole.exec(rest);
    if (m) return m;
    // A tag that cannot still become whole: another tag began after it, or it ran too long.
    return firstMarker(rest, this.wire.tokens, open.length) || rest.length > MAX_TAG ? undefined : "more";
  }

  /** Drops text that is not the wire's, up to the next of `markers` (or all but a possible start of one). */
  private skipTo(rest: string, markers: readonly string[]): boolean {
    const hit = firstMarker(rest, markers, 1);
    if (hit) {
      this.buf = rest.slice(hit.at);
      return true;
    }
    this.buf = rest.slice(rest.length - partialSuffixLength(rest, markers));
    return false;
  }

  private attribute(text: string): string {
    return this.wire.attribute ? this.wire.attribute(text) : text;
  }

  private keyPrefix(call: OpenCall, key: string): string {
    return `${call.params > 0 ? "," : ""}${JSON.stringify(key)}:`;
  }
}

// --- The forced grammar -------------------------------------------------

/** How a template writes a call: the literal text the forced grammar holds a model to. */
export interface TaggedLayout {
  /** The call's opening tag. */
  callOpen: (name: string) => Expr;
  /** A parameter's opening tag, marking its value a string or JSON of one of `types`. */
  paramOpen: (key: string, value: { string: true } | { string: false; types: string[] }) => Expr;
  /** A parameter's closing tag (a string value never holds it), and what follows it. */
  paramClose: string;
  paramAfter: string;
  /** What ends a call (after its parameters). */
  callClose: Expr;
  /** The block around the calls (one, or one or more). */
  block: (calls: Expr) => Expr;
}

/** One parameter and its value, as the template writes it for the value's type. */
function parameterGrammar(key: string, schema: unknown, layout: TaggedLayout, prefix: string, out: GrammarOut): Expr {
  const types = [...schemaTypes(schema)];
  const asText = () =>
    seq(layout.paramOpen(key, { string: true }), rawStringGrammar(schema, layout.paramClose, out.rules));
  const others = types.filter((t) => t !== "string");
  const asJson = () =>
    seq(layout.paramOpen(key, { string: false, types: others }), compiledSchema(schema, prefix, out));
  const value =
    others.length === 0
      ? asText()
      : types.includes("string")
        ? { kind: "alt" as const, alts: [asText(), asJson()] }
        : asJson();
  return seq(value, lit(`${layout.paramClose}${layout.paramAfter}`));
}

/**
 * GBNF for a block holding one call (or several when `parallel`) to `tools`:
 * each declared parameter in the schema's order, the required ones always (a
 * tool that declares no properties takes none). Patterns and formats of
 * string values are not held: their raw text has no quoting for the regex
 * compiler to work inside.
 */
export function taggedCallsGrammar(tools: ToolSpec[], parallel: boolean, layout: TaggedLayout): string {
  return callsGrammar(
    tools,
    (tool, i, out) => {
      const { root, props, required } = toolParameters(tool);
      const params = Object.keys(props).map((key, k) => {
        const param = parameterGrammar(key, withDefinitions(props[key], root), layout, `tc${i}-p${k}`, out);
        return required.has(key) ? param : repeat(param, 0, 1);
      });
      return seq(layout.callOpen(tool.name), ...params, layout.callClose);
    },
    (call) => layout.block(parallel ? repeat(call, 1, null) : call),
  );
}
