// MeetKai Functionary tool calls (Llama 3.1-based models):
//   v3.1: `<function=NAME>{json}</function>`, calls back to back, content
//         before them; the python tool as Llama 3.1's code interpreter,
//         `<|python_tag|>` and then the code itself to the end of the reply
//         (the template renders the call's arguments there as JSON instead).
//   v3.2: every message names its recipient, `>>>RECIPIENT\n…`: `all` is
//         content for the user, a function name is a call with its JSON
//         arguments, `python` is code to run. The generation prompt ends
//         with `>>>`, so the reply starts with its first recipient:
//         `all\nLet me check.>>>get_weather\n{"city": "Oslo"}`.
// Each call starts once its name and the opening of its arguments are
// written and streams as it is written; code streams as the `code` string
// argument. Functionary has no reasoning markers.
import { firstMarker, partialSuffixLength, seekMarker } from "../holdback.ts";
import { jsonValueEnd, markerOutsideStrings, skipWs } from "../json-scan.ts";
import { forcedCallGrammar, lit, oneOrMore, seq } from "../tool-grammar.ts";
import { CallWriter, type OpenCall } from "./call-writer.ts";
import { ContentGap, emitText } from "./events.ts";
import type { ToolCallEvent, ToolCallParser, ToolDialect } from "./types.ts";

const FUNCTION_OPEN = "<function=";
const FUNCTION_CLOSE = "</function>";
const PYTHON_TAG = "<|python_tag|>";
/** v3.2's recipient marker (the generation prompt writes the first one). */
const RECIPIENT = ">>>";
/** The tool Functionary's code interpreter calls, with the code as its `code` argument. */
const PYTHON_TOOL = "python";
const NAME_CHAR = /[\w.-]/;

/** Calls of one reply: JSON ones, and the code interpreter's, whose code streams as the `code` string of its arguments. */
class CallStream extends CallWriter {
  startCode(out: ToolCallEvent[]): OpenCall {
    const call = this.start(PYTHON_TOOL, out);
    this.send(call, '{"code":"', out);
    return call;
  }

  code(call: OpenCall, text: string, out: ToolCallEvent[]): void {
    this.send(call, JSON.stringify(text).slice(1, -1), out);
  }

  endCode(call: OpenCall, out: ToolCallEvent[]): void {
    this.send(call, '"}', out);
    this.end(call, out);
  }
}

/** Where the earliest of `markers` is in `text`, or how much of its end must be held as a possible marker. */
function seekFirst(
  text: string,
  markers: readonly string[],
): { before: string; marker: string; after: string } | { before: string; marker: undefined; held: string } {
  const best = firstMarker(text, markers);
  if (best)
    return { before: text.slice(0, best.at), marker: best.marker, after: text.slice(best.at + best.marker.length) };
  const keep = partialSuffixLength(text, markers);
  return { before: text.slice(0, text.length - keep), marker: undefined, held: text.slice(text.length - keep) };
}

/** Length of the name at the start of `text`. */
function nameLength(text: string): number {
  let i = 0;
  while (i < text.length && NAME_CHAR.test(text[i]!)) i++;
  return i;
}

/**
 * The arguments after the code interpreter's marker: JSON when they start
 * with `{` (as the templates render the call), else the code itself.
 */
function startPython(calls: CallStream, buf: string, out: ToolCallEvent[]): { call: OpenCall; json: boolean } {
  if (buf.startsWith("{")) return { call: calls.start(PYTHON_TOOL, out), json: true };
  return { call: calls.startCode(out), json: false };
}

// ---------------------------------------------------------------------------
// v3.1

type V31State =
  | "text" // content, up to a call's marker
  | "header" // after `<function=`: NAME `>` and the arguments' `{`
  | "args" // the arguments object, up to `</function>`
  | "python" // after `<|python_tag|>`, before its first character
  | "python-json" // the code interpreter's arguments as JSON, to the end of the reply
  | "code" // the code interpreter's code, to the end of the reply
  | "skip"; // a malformed call, dropped up to `</function>`

class FunctionaryV31Parser implements ToolCallParser {
  private readonly calls: CallStream;
  private state: V31State = "text";
  private buf = "";
  private call: OpenCall | null = null;
  private readonly gap = new ContentGap();

  constructor(newId?: () => string) {
    this.calls = new CallStream(newId);
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
    const call = this.call;
    // Cut off by the end of the reply: a call whose arguments began ends as
    // far as it was written; markup before that is dropped. The code
    // interpreter's call always runs to the end of the reply.
    if (this.state === "text") {
      this.gap.flush(out, this.buf);
    } else if (call && this.state === "args")
      this.calls.endJson(
        call,
        this.buf.slice(0, this.buf.length - partialSuffixLength(this.buf, [FUNCTION_CLOSE])),
        out,
      );
    else if (call && this.state === "python-json") this.calls.endJson(call, this.buf, out);
    else if (call && this.state === "code") this.calls.endCode(call, out);
    this.call = null;
    this.state = "text";
    this.buf = "";
    return out;
  }

  private drain(out: ToolCallEvent[]): void {
    for (;;) {
      switch (this.state) {
        case "text": {
          const found = seekFirst(this.buf, [FUNCTION_OPEN, PYTHON_TAG]);
          if (this.gap.wait(out, found.before, found.marker !== undefined)) return;
          if (found.marker === undefined) {
            this.buf = found.held;
            return;
          }
          this.buf = found.after;
          this.state = found.marker === FUNCTION_OPEN ? "header" : "python";
          continue;
        }
        case "header": {
          const n = nameLength(this.buf);
          if (n === this.buf.length) return;
          const open = skipWs(this.buf, n + 1);
          if (n > 0 && this.buf[n] === ">" && open === this.buf.length) return;
          if (n === 0 || this.buf[n] !== ">" || this.buf[open] !== "{") {
            this.state = "skip";
            continue;
          }
          this.call = this.calls.start(this.buf.slice(0, n), out);
          this.buf = this.buf.slice(open);
          this.state = "args";
          continue;
        }
        case "args": {
          const call = this.call!;
          const end = markerOutsideStrings(this.buf, [FUNCTION_CLOSE])?.at ?? -1;
          if (end < 0) {
            this.calls.sendJson(
              call,
              this.buf.slice(0, this.buf.length - partialSuffixLength(this.buf, [FUNCTION_CLOSE])),
              out,
            );
            return;
          }
          this.calls.endJson(call, this.buf.slice(0, end), out);
          this.call = null;
          this.gap.callEnded();
          this.buf = this.buf.slice(end + FUNCTION_CLOSE.length);
          this.state = "text";
          continue;
        }
        case "skip": {
          const found = seekMarker(this.buf, FUNCTION_CLOSE);
          if (found.after === undefined) {
            this.buf = found.held;
            return;
          }
          this.buf = found.after;
          this.state = "text";
          continue;
        }
        case "python": {
          this.buf = this.buf.slice(skipWs(this.buf, 0));
          if (this.buf === "") return;
          const { call, json } = startPython(this.calls, this.buf, out);
          this.call = call;
          this.state = json ? "python-json" : "code";
          continue;
        }
        case "python-json":
          this.calls.sendJson(this.call!, this.buf, out);
          return;
        case "code":
          this.calls.code(this.call!, this.buf, out);
          this.buf = "";
          return;
      }
    }
  }
}

// ---------------------------------------------------------------------------
// v3.2

type V32State =
  | "recipient" // a message's recipient line, after `>>>` (or at the start of the reply)
  | "content" // a message to `all`, up to the next recipient
  | "args" // a call's JSON arguments, up to the end of the object
  | "between" // after a call's arguments: whitespace, then the next recipient
  | "python" // after `python\n`, before its first character
  | "code"; // the code interpreter's code, up to the next recipient

class FunctionaryV32Parser implements ToolCallParser {
  private readonly calls: CallStream;
  // The generation prompt ends with `>>>`: the reply opens with a recipient.
  private state: V32State = "recipient";
  private buf = "";
  private call: OpenCall | null = null;
  /** Whether the recipient being read came after a `>>>` in the reply itself. */
  private marked = false;
  /** Where text goes when a `>>>` turns out not to open a message: content, or the code being written. */
  private resume: "content" | "code" = "content";

  constructor(newId?: () => string) {
    this.calls = new CallStream(newId);
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
    const call = this.call;
    // Cut off by the end of the reply: a partial recipient line is dropped
    // (markup), a call whose arguments began ends as far as it was written,
    // and code ends where the reply does.
    if (this.state === "content") emitText(out, this.buf);
    else if (call && this.state === "args") this.calls.endJson(call, this.buf, out);
    else if (call && this.state === "code") {
      this.calls.code(call, this.buf, out);
      this.calls.endCode(call, out);
    } else if (call && this.state === "recipient" && this.resume === "code") this.calls.endCode(call, out);
    this.call = null;
    this.state = "content";
    this.buf = "";
    return out;
  }

  private drain(out: ToolCallEvent[]): void {
    for (;;) {
      switch (this.state) {
        case "recipient":
          if (!this.readRecipient(out)) return;
          continue;
        case "content":
        case "code": {
          const found = seekMarker(this.buf, RECIPIENT);
          if (this.state === "content") emitText(out, found.before);
          else this.calls.code(this.call!, found.before, out);
          if (found.after === undefined) {
            this.buf = found.held;
            return;
          }
          this.buf = found.after;
          this.marked = true;
          this.resume = this.state;
          this.state = "recipient";
          continue;
        }
        case "args": {
          const end = jsonValueEnd(this.buf, 0);
          if (end < 0) {
            this.calls.sendJson(this.call!, this.buf, out);
            return;
          }
          this.calls.endJson(this.call!, this.buf.slice(0, end), out);
          this.call = null;
          this.buf = this.buf.slice(end);
          this.state = "between";
          continue;
        }
        case "between": {
          // The template writes the next message right after; whitespace is held.
          const at = skipWs(this.buf, 0);
          const rest = this.buf.slice(at);
          if (rest === "" || (rest.length < RECIPIENT.length && RECIPIENT.startsWith(rest))) return;
          if (rest.startsWith(RECIPIENT)) {
            this.buf = rest.slice(RECIPIENT.length);
            this.marked = true;
            this.resume = "content";
            this.state = "recipient";
          } else this.state = "content"; // text after a call without a recipient: still content
          continue;
        }
        case "python": {
          this.buf = this.buf.slice(skipWs(this.buf, 0));
          if (this.buf === "") return;
          const { call, json } = startPython(this.calls, this.buf, out);
          this.call = call;
          this.state = json ? "args" : "code";
          continue;
        }
      }
    }
  }

  /**
   * Reads `NAME\n` (and, for a function, up to its arguments' `{`). False
   * while it is still arriving. What is not a recipient after all goes back
   * to where the text was going, with its `>>>`.
   */
  private readRecipient(out: ToolCallEvent[]): boolean {
    const n = nameLength(this.buf);
    if (n === this.buf.length) return false;
    const name = this.buf.slice(0, n);
    let open = -1;
    if (n > 0 && this.buf[n] === "\n" && name !== "all" && name !== PYTHON_TOOL) {
      open = skipWs(this.buf, n + 1);
      if (open === this.buf.length) return false;
    }
    const isRecipient = n > 0 && this.buf[n] === "\n" && (open < 0 || this.buf[open] === "{");
    if (!isRecipient) {
      const marker = this.marked ? RECIPIENT : "";
      if (this.resume === "content") emitText(out, marker);
      else this.calls.code(this.call!, marker, out);
      this.state = this.resume;
      return true;
    }
    // A new message ends the code before it.
    if (this.resume === "code") {
      this.calls.endCode(this.call!, out);
      this.call = null;
    }
    this.resume = "content";
    if (name === "all") {
      this.buf = this.buf.slice(n + 1);
      this.state = "content";
    } else if (name === PYTHON_TOOL) {
      this.buf = this.buf.slice(n + 1);
      this.state = "python";
    } else {
      this.call = this.calls.start(name, out);
      this.buf = this.buf.slice(open);
      this.state = "args";
    }
    return true;
  }
}

export const functionaryV31: ToolDialect = {
  name: "functionary-v3.1",
  // Tag-wrapped JSON calls; the XML-style wires that also write `<function=`
  // (Qwen3-Coder, Qwen3.5, Nemotron, Seed-OSS, StepFun) write `<parameter=` inside.
  detect: (template) =>
    template.includes(FUNCTION_OPEN) && template.includes(FUNCTION_CLOSE) && !template.includes("<parameter="),
  parser: (opts) => new FunctionaryV31Parser(opts?.newId),
  // Calls back to back, as the template renders them. The code
  // interpreter's free-form code is not a call a schema can hold.
  forcedGrammar: (tools, parallel) =>
    forcedCallGrammar(
      tools,
      (tool, args) => seq(lit(`${FUNCTION_OPEN}${tool.name}>`), args, lit(FUNCTION_CLOSE)),
      (call) => oneOrMore(call, parallel, seq()),
    ),
  trigger: FUNCTION_OPEN,
  openers: [FUNCTION_OPEN, PYTHON_TAG],
};

export const functionaryV32: ToolDialect = {
  name: "functionary-v3.2",
  detect: (template) => template.includes(`${RECIPIENT}all`),
  parser: (opts) => new FunctionaryV32Parser(opts?.newId),
  // The first call right after the prompt's `>>>`, each further one after its own.
  forcedGrammar: (tools, parallel) =>
    forcedCallGrammar(
      tools,
      (tool, args) => seq(lit(`${tool.name}\n`), args),
      (call) => oneOrMore(call, parallel, lit(RECIPIENT)),
    ),
  // Even content comes behind a recipient (`all\n`): every reply is parsed.
  alwaysParse: true,
};
