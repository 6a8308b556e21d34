// The XML-style tool-call wires: a block tag around each call (or several),
// the function's name in an opening tag, and one tag per parameter whose
// value is raw text, typed by the tool's schema (./typed-values.ts). Qwen3.5,
// Qwen3-Coder, Nemotron 3 and StepFun write
//
//   <tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>
//
// Seed-OSS the same inside `<seed:tool_call>` without the newline padding,
// GLM `<tool_call>get_weather<arg_key>days</arg_key><arg_value>3</arg_value></tool_call>`,
// MiniMax M2 `<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="days">3</parameter>\n</invoke>\n</minimax:tool_call>`.
// One parser and one grammar builder serve them all, from a description of
// the wire's tags (XmlWire) and of how its template lays a call out (XmlLayout).
import { partialSuffixLength, seekMarker } from "../holdback.ts";
import { callsGrammar, compiledSchema, lit, oneOrMore, repeat, seq, type ToolSpec } from "../tool-grammar.ts";
import { CallWriter, type OpenCall as StartedCall } from "./call-writer.ts";
import { ContentGap } from "./events.ts";
import {
  isStringOnly,
  parameterSchema,
  rawStringGrammar,
  rawValueJson,
  toolParameters,
  withDefinitions,
} from "./typed-values.ts";
import type { ParserOptions, ToolCallEvent, ToolCallParser, ToolDialect } from "./types.ts";

/** The tags a wire's parser looks for. */
export interface XmlWire {
  /** The tags around a block of calls. */
  block: { open: string; close: string };
  /**
   * The call's opening tag around its name (`<function=` … `>`); without it
   * the name follows the block's opening tag and runs to the first newline or
   * parameter (GLM), and the block's closing tag ends the call.
   */
  call?: { open: string; nameEnd: string; close: string };
  /** A parameter's tags: `open` NAME `nameEnd` [`valueOpen`] VALUE `close`. */
  param: { open: string; nameEnd: string; valueOpen?: string; close: string };
  /** Values are written with a newline after the opening tag and one before the closing tag (Qwen). */
  padded: boolean;
}

/** How the template lays out a call, literally: what the forced grammar writes. */
export interface XmlLayout {
  blockOpen: string;
  callOpen: (name: string) => string;
  paramOpen: (name: string) => string;
  paramClose: string;
  callClose: string;
  blockClose: string;
  /** Several calls in one block (MiniMax) rather than a block per call. */
  callsPerBlock: "one" | "many";
  /** Between two blocks (or two calls in one block). */
  between: string;
}

type State =
  | "outside" // content, looking for a block
  | "block" // inside a block, between calls
  | "name" // reading a call's name
  | "call" // inside a call, between parameters
  | "param" // reading a parameter's name
  | "value" // reading a parameter's value
  | "skip"; // a malformed block: dropped up to its closing tag

interface OpenCall extends StartedCall {
  name: string;
  params: number;
}

export class XmlCallParser implements ToolCallParser {
  private state: State = "outside";
  private buf = "";
  private readonly gap = new ContentGap();
  private call: OpenCall | null = null;
  private param = { name: "", schema: undefined as unknown, stringOnly: true, started: false };
  private readonly calls: CallWriter;

  constructor(
    private readonly wire: XmlWire,
    private readonly opts: ParserOptions = {},
  ) {
    this.calls = new CallWriter(opts.newId);
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
    // Cut-off output: a started call ends with its arguments as far as they
    // were written (the reply's finish says it was cut); markup before a
    // call's name is dropped, never content.
    if (this.call) {
      if (this.state === "value") this.sendValue(this.valueSoFar(), out);
      this.endCall(this.call.streamed, out);
    } else if (this.state === "outside") {
      this.gap.flush(out, this.buf);
    }
    this.buf = "";
    this.state = "outside";
    return out;
  }

  /** One step of the state machine; false when it needs more text. */
  private step(out: ToolCallEvent[], final: boolean): boolean {
    switch (this.state) {
      case "outside":
        return this.outside(out, final);
      case "block":
        return this.inBlock();
      case "name":
        return this.readName(out);
      case "call":
        return this.inCall(out);
      case "param":
        return this.readParam(out);
      case "value":
        return this.readValue(out, final);
      case "skip":
        return this.skip();
    }
  }

  private outside(out: ToolCallEvent[], final: boolean): boolean {
    const found = seekMarker(this.buf, this.wire.block.open, final);
    if (this.gap.wait(out, found.before, found.after !== undefined)) return false;
    if (found.after === undefined) {
      this.buf = found.held;
      return false;
    }
    this.buf = found.after;
    this.state = this.wire.call ? "block" : "name";
    return true;
  }

  private inBlock(): boolean {
    this.buf = this.buf.trimStart();
    const call = this.wire.call!;
    const tags = [this.wire.block.close, call.open];
    if (this.buf.startsWith(this.wire.block.close)) {
      this.buf = this.buf.slice(this.wire.block.close.length);
      this.leaveBlock();
      return true;
    }
    if (this.buf.startsWith(call.open)) {
      this.buf = this.buf.slice(call.open.length);
      this.state = "name";
      return true;
    }
    if (tags.some((t) => t.startsWith(this.buf))) return false; // a tag not yet whole
    this.state = "skip";
    return true;
  }

  private readName(out: ToolCallEvent[]): boolean {
    const end = this.nameEnd();
    if (end === "wait") return false;
    if (end === "broken") {
      this.state = "skip";
      return true;
    }
    const [at, consumed] = end;
    const name = this.buf.slice(0, at).trim();
    this.buf = this.buf.slice(at + consumed);
    if (!name || /[<>"\s]/.test(name)) {
      this.state = "skip";
      return true;
    }
    this.call = { ...this.calls.start(name, out), name, params: 0 };
    this.sendArgs("{", out);
    this.state = "call";
    return true;
  }

  /**
   * Where the call's name ends in the buffer and how much of the end to
   * consume; "wait" for more text, "broken" when no name can come.
   */
  private nameEnd(): [number, number] | "wait" | "broken" {
    const call = this.wire.call;
    if (call) {
      const at = this.buf.indexOf(call.nameEnd);
      if (at >= 0) return [at, call.nameEnd.length];
      return this.buf.length > 256 || /[<\n]/.test(this.buf) ? "broken" : "wait";
    }
    // GLM: the name runs to the first newline, parameter, or the block's end.
    const at = this.buf.search(/[<\n]/);
    if (at < 0) return this.buf.length > 256 ? "broken" : "wait";
    if (this.buf[at] === "\n") return [at, 1];
    const tags = [this.wire.param.open, this.wire.block.close];
    const rest = this.buf.slice(at);
    if (tags.some((t) => rest.startsWith(t))) return [at, 0];
    return tags.some((t) => t.startsWith(rest)) ? "wait" : "broken";
  }

  private inCall(out: ToolCallEvent[]): boolean {
    this.buf = this.buf.trimStart();
    const { param, block } = this.wire;
    const close = this.wire.call?.close ?? block.close;
    if (this.buf.startsWith(param.open)) {
      this.buf = this.buf.slice(param.open.length);
      this.state = "param";
      return true;
    }
    if (this.buf.startsWith(close)) {
      this.buf = this.buf.slice(close.length);
      this.endCall(`${this.call!.streamed}}`, out);
      if (this.wire.call) this.state = "block";
      else this.leaveBlock();
      return true;
    }
    if (param.open.startsWith(this.buf) || close.startsWith(this.buf)) return false;
    // Something else inside a call: the call ends with the parameters it has,
    // and the rest of the block is dropped.
    this.endCall(`${this.call!.streamed}}`, out);
    this.state = "skip";
    return true;
  }

  private readParam(out: ToolCallEvent[]): boolean {
    const { param } = this.wire;
    const end = this.buf.indexOf(param.nameEnd);
    if (end < 0) {
      if (this.buf.length > 256) this.abandonCall(out);
      return this.state === "skip";
    }
    let rest = this.buf.slice(end + param.nameEnd.length);
    if (param.valueOpen) {
      const trimmed = rest.trimStart();
      if (!trimmed.startsWith(param.valueOpen)) {
        if (param.valueOpen.startsWith(trimmed)) return false;
        this.abandonCall(out);
        return true;
      }
      rest = trimmed.slice(param.valueOpen.length);
    }
    const name = this.buf.slice(0, end).trim();
    this.buf = rest;
    const call = this.call!;
    const schema = parameterSchema(this.opts.tools, call.name, name);
    this.param = { name, schema, stringOnly: isStringOnly(schema), started: false };
    this.sendArgs(`${call.params++ > 0 ? "," : ""}${JSON.stringify(name)}:${this.param.stringOnly ? '"' : ""}`, out);
    this.state = "value";
    return true;
  }

  private readValue(out: ToolCallEvent[], final: boolean): boolean {
    const { close } = this.wire.param;
    if (this.wire.padded && !this.param.started) {
      if (this.buf === "") return false;
      if (this.buf.startsWith("\n")) this.buf = this.buf.slice(1);
    }
    this.param.started = true;
    const at = this.buf.indexOf(close);
    if (at < 0) {
      if (final || !this.param.stringOnly) return false;
      // A string streams as it comes, less a possible closing tag (and the
      // padding newline before it) at the end.
      let keep = partialSuffixLength(this.buf, [close]);
      if (this.wire.padded && this.buf[this.buf.length - keep - 1] === "\n") keep++;
      const settled = this.buf.slice(0, this.buf.length - keep);
      if (settled) this.sendArgs(JSON.stringify(settled).slice(1, -1), out);
      this.buf = this.buf.slice(settled.length);
      return false;
    }
    let value = this.buf.slice(0, at);
    if (this.wire.padded && value.endsWith("\n")) value = value.slice(0, -1);
    this.buf = this.buf.slice(at + close.length);
    this.sendValue(value, out);
    if (this.param.stringOnly) this.sendArgs('"', out);
    this.state = "call";
    return true;
  }

  /** A cut value as far as it was written: less a partial closing tag and the padding newline before it. */
  private valueSoFar(): string {
    let value = this.buf.slice(0, this.buf.length - partialSuffixLength(this.buf, [this.wire.param.close]));
    if (this.wire.padded && value.endsWith("\n")) value = value.slice(0, -1);
    return value;
  }

  /** The rest of a value: escaped into the open string, or as typed JSON. */
  private sendValue(value: string, out: ToolCallEvent[]): void {
    if (this.param.stringOnly) {
      if (value) this.sendArgs(JSON.stringify(value).slice(1, -1), out);
    } else if (value.trim() !== "") {
      this.sendArgs(rawValueJson(value, this.param.schema), out);
    }
  }

  private skip(): boolean {
    const at = this.buf.indexOf(this.wire.block.close);
    if (at < 0) {
      this.buf = this.buf.slice(this.buf.length - partialSuffixLength(this.buf, [this.wire.block.close]));
      return false;
    }
    this.buf = this.buf.slice(at + this.wire.block.close.length);
    this.leaveBlock();
    return true;
  }

  private leaveBlock(): void {
    this.state = "outside";
    this.gap.callEnded();
  }

  /** A call whose markup broke mid-parameter: it ends as written (not valid JSON), the block is dropped. */
  private abandonCall(out: ToolCallEvent[]): void {
    this.endCall(this.call!.streamed, out);
    this.state = "skip";
  }

  private sendArgs(text: string, out: ToolCallEvent[]): void {
    this.calls.send(this.call!, text, out);
  }

  private endCall(args: string, out: ToolCallEvent[]): void {
    this.calls.end(this.call!, out, args);
    this.call = null;
  }
}

/**
 * The forced grammar of an XML-style wire: each call as the template lays it
 * out, its parameters in the schema's order (required ones always, optional
 * ones may be left out). A string parameter is raw text that cannot close its
 * tag (an enum, as one of its values; a length bound, as plain characters
 * without `<`); any other parameter is JSON held to its schema. Patterns and
 * formats of string parameters are not held on these wires: their raw text
 * has no quoting for the regex compiler to work inside.
 */
export function xmlCallsGrammar(tools: ToolSpec[], wire: XmlWire, layout: XmlLayout, parallel: boolean): string {
  return callsGrammar(
    tools,
    (tool, i, out) => {
      const { root, props, required } = toolParameters(tool);
      const names = [...Object.keys(props), ...[...required].filter((r) => !Object.hasOwn(props, r))];
      const params = names.map((name, j) => {
        const schema = withDefinitions(props[name] ?? {}, root);
        const value = isStringOnly(schema)
          ? rawStringGrammar(schema, wire.param.close, out.rules)
          : compiledSchema(schema, `tc${i}-p${j}`, out);
        const param = seq(lit(layout.paramOpen(name)), value, lit(layout.paramClose));
        return required.has(name) ? param : repeat(param, 0, 1);
      });
      return seq(lit(layout.callOpen(tool.name)), ...params, lit(layout.callClose));
    },
    (call) =>
      layout.callsPerBlock === "many"
        ? seq(lit(layout.blockOpen), oneOrMore(call, parallel, lit(layout.between)), lit(layout.blockClose))
        : oneOrMore(seq(lit(layout.blockOpen), call, lit(layout.blockClose)), parallel, lit(layout.between)),
  );
}

/** The dialect entry of an XML-style wire: its parser and forced grammar, triggered and opened by the block's tag. */
export function xmlDialect(name: string, wire: XmlWire, layout: XmlLayout, detect: ToolDialect["detect"]): ToolDialect {
  return {
    name,
    detect,
    parser: (opts) => new XmlCallParser(wire, opts),
    forcedGrammar: (tools, parallel) => xmlCallsGrammar(tools, wire, layout, parallel),
    trigger: wire.block.open,
    openers: [wire.block.open],
  };
}
