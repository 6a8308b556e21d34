// DeepSeek V3 / R1 / V3.1 tool calls, written with the models' special tokens
// (fullwidth bars U+FF5C, word separators U+2581):
// V3/R1:
// <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{ARGS}\n```<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>
//   V3.1:  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{ARGS}<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>
// Calls come out whole when their call-end token arrives; a call cut off by
// the end of the reply once its arguments began comes out as far as it was
// written (./cut-call.ts). Markup that does not make a call (a malformed
// call, an empty block, a call cut before its arguments) is dropped: call
// markup is never content.
import { forcedCallGrammar, lit, oneOrMore, repeat, seq, type CallShape } from "../tool-grammar.ts";
import { partialSuffixLength, seekMarker } from "../holdback.ts";
import { isJsonObjectText } from "../json-scan.ts";
import type { ToolCallEvent, ToolCallParser, ToolDialect, ToolSpec } from "./types.ts";
import { newCallId } from "./ids.ts";
import { emitCall, emitText } from "./events.ts";
import { argumentsSoFar, type CutCall } from "./cut-call.ts";

export const DEEPSEEK_MARKERS = {
  callsBegin: "<｜tool▁calls▁begin｜>",
  callsEnd: "<｜tool▁calls▁end｜>",
  callBegin: "<｜tool▁call▁begin｜>",
  callEnd: "<｜tool▁call▁end｜>",
  sep: "<｜tool▁sep｜>",
} as const;

const M = DEEPSEEK_MARKERS;

// V3/R1 body after `function<｜tool▁sep｜>`: NAME, newline, a fenced JSON block.
const FENCE_OPEN = /^[ \t]*([^\s`<>]+)[ \t]*\r?\n```(?:json)?[ \t]*\r?\n?/;
const FENCED = new RegExp(`${FENCE_OPEN.source}([\\s\\S]*?)\\s*\`\`\`\\s*$`);
/** The same, cut off once its JSON object began. */
const FENCED_CUT = new RegExp(`${FENCE_OPEN.source}\\s*(?=\\{)`);
const NAME = /^[^\s<>]+$/;

/** The text of a call before and after its separator, or undefined without one. */
function splitAtSeparator(body: string): { head: string; tail: string } | undefined {
  const at = body.indexOf(M.sep);
  return at < 0 ? undefined : { head: body.slice(0, at).trim(), tail: body.slice(at + M.sep.length) };
}

/** {name, args} from the text between call-begin and call-end, or undefined when malformed. */
export function parseDeepseekCall(body: string): { name: string; args: string } | undefined {
  const parts = splitAtSeparator(body);
  if (!parts) return undefined;
  const { head, tail } = parts;
  if (head === "function") {
    const m = FENCED.exec(tail);
    if (m) {
      const args = m[2]!.trim();
      if (isJsonObjectText(args)) return { name: m[1]!, args };
    }
  }
  // V3.1: the name before the separator, bare JSON after it.
  const args = tail.trim();
  if (NAME.test(head) && isJsonObjectText(args)) return { name: head, args };
  return undefined;
}

/** A call cut off by the end of the reply once its arguments began (./cut-call.ts). */
function cutDeepseekCall(body: string): CutCall | undefined {
  const parts = splitAtSeparator(body);
  if (!parts) return undefined;
  const { head, tail } = parts;
  const fenced = head === "function" ? FENCED_CUT.exec(tail) : null;
  if (fenced) return { name: fenced[1]!, args: argumentsSoFar(tail.slice(fenced[0].length)) };
  const bare = tail.trimStart();
  return NAME.test(head) && bare.startsWith("{") ? { name: head, args: argumentsSoFar(bare) } : undefined;
}

class DeepseekToolParser implements ToolCallParser {
  private readonly newId: () => string;
  private inBlock = false;
  private buf = ""; // outside: text not yet emitted; in a block: block text not yet consumed
  private count = 0;

  constructor(newId?: () => string) {
    this.newId = newId ?? newCallId;
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
    if (this.inBlock) {
      const lead = this.buf.length - this.buf.trimStart().length;
      const rest = this.buf.slice(lead);
      if (rest.startsWith(M.callBegin)) {
        // An unclosed last call: finish it if it is complete.
        let body = rest.slice(M.callBegin.length);
        body = body.slice(0, body.length - partialSuffixLength(body, [M.callEnd]));
        const call = parseDeepseekCall(body) ?? cutDeepseekCall(body);
        if (call) this.emitCall(call, out);
      }
      this.inBlock = false;
      this.buf = "";
    } else if (this.buf) {
      emitText(out, this.buf);
      this.buf = "";
    }
    return out;
  }

  private drain(out: ToolCallEvent[]): void {
    for (;;) {
      if (!this.inBlock) {
        const found = seekMarker(this.buf, M.callsBegin);
        emitText(out, found.before);
        if (found.after === undefined) {
          this.buf = found.held;
          return;
        }
        this.buf = found.after;
        this.inBlock = true;
        continue;
      }
      const lead = this.buf.length - this.buf.trimStart().length;
      const rest = this.buf.slice(lead);
      if (rest === "") return;
      if (rest.startsWith(M.callsEnd)) {
        this.buf = rest.slice(M.callsEnd.length);
        this.inBlock = false;
        continue;
      }
      if (rest.startsWith(M.callBegin)) {
        const end = rest.indexOf(M.callEnd, M.callBegin.length);
        if (end < 0) return; // wait for the call's end
        const whole = rest.slice(0, end + M.callEnd.length);
        const call = parseDeepseekCall(rest.slice(M.callBegin.length, end));
        if (call) this.emitCall(call, out);
        this.buf = rest.slice(whole.length);
        continue;
      }
      if (M.callBegin.startsWith(rest) || M.callsEnd.startsWith(rest)) return; // a marker still arriving
      // Something else inside the block: markup up to the block's end, dropped.
      const blockEnd = rest.indexOf(M.callsEnd);
      if (blockEnd < 0) return;
      this.buf = rest.slice(blockEnd + M.callsEnd.length);
      this.inBlock = false;
    }
  }

  private emitCall(call: { name: string; args: string }, out: ToolCallEvent[]): void {
    emitCall(out, this.count++, this.newId(), call);
  }
}

/** GBNF for a V3/R1-style calls block holding one call (or several when `parallel`) to `tools`. */
export function deepseekToolGrammar(tools: ToolSpec[], parallel: boolean): string {
  const shape: CallShape = (tool, args) =>
    seq(lit(`${M.callBegin}function${M.sep}${tool.name}\n\`\`\`json\n`), args, lit(`\n\`\`\`${M.callEnd}`));
  return forcedCallGrammar(tools, shape, (call) =>
    seq(lit(M.callsBegin), oneOrMore(call, parallel, repeat(lit("\n"), 0, 1)), lit(M.callsEnd)),
  );
}

export const deepseek: ToolDialect = {
  name: "deepseek",
  detect: (template) => template.includes("tool▁calls▁begin"),
  parser: (newId) => new DeepseekToolParser(newId),
  forcedGrammar: (tools, parallel) => deepseekToolGrammar(tools, parallel),
  trigger: M.callsBegin,
  openers: [M.callsBegin, M.callBegin],
};
