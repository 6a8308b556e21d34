// DeepSeek R1 / V3 and V3.1 tool calls, written with the models' special
// tokens (fullwidth bars U+FF5C, word separators U+2581). The two differ in
// each call's header:
//   R1, V3: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{ARGS}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>…<｜tool▁calls▁end｜>
//   V3.1:   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{ARGS}<｜tool▁call▁end｜><｜tool▁call▁begin｜>…<｜tool▁calls▁end｜>
// (R1's templates put a newline between calls, V3.1's nothing.) Both headers
// are read by one parser (./sectioned-calls.ts streams the calls); the two
// dialects differ in the grammar that forces a call, which writes each
// template's own layout. DeepSeek V3.2 and V4 use another wire
// (./deepseek-dsml.ts).
import type { Expr } from "../../../grammar/index.ts";
import { forcedCallGrammar, lit, NL, oneOrMore, repeat, seq, type CallShape } from "../tool-grammar.ts";
import { type CallHeader, SectionedCallParser, type SectionedWire } from "./sectioned-calls.ts";
import type { ParserOptions, ToolDialect, ToolSpec } from "./types.ts";

export const DEEPSEEK_MARKERS = {
  callsBegin: "<｜tool▁calls▁begin｜>",
  callsEnd: "<｜tool▁calls▁end｜>",
  callBegin: "<｜tool▁call▁begin｜>",
  callEnd: "<｜tool▁call▁end｜>",
  sep: "<｜tool▁sep｜>",
} as const;

const M = DEEPSEEK_MARKERS;

const NAME = /^[^\s<>]+$/;
// R1's header after `function<｜tool▁sep｜>`: NAME, a newline, a JSON fence, up to the arguments' `{`.
const FENCED_HEAD = /^[ \t]*([^\s`<>]+)[ \t]*\r?\n```(?:json)?[ \t]*\r?\n?\s*(?=\{)/;

/** The header after `<｜tool▁call▁begin｜>`, in either generation's form. */
export function readDeepseekHeader(text: string): CallHeader | "more" | undefined {
  const at = text.indexOf(M.sep);
  if (at < 0) return "more";
  const head = text.slice(0, at).trim();
  const tailAt = at + M.sep.length;
  const tail = text.slice(tailAt);
  const lead = tail.length - tail.trimStart().length;
  // V3.1: the name before the separator, the arguments right after it.
  if (NAME.test(head) && tail[lead] === "{") return { name: head, argsAt: tailAt + lead };
  if (head === "function") {
    const fenced = FENCED_HEAD.exec(tail);
    // Else the fence may still be arriving (a call that never gets there ends at the next marker).
    return fenced ? { name: fenced[1]!, argsAt: tailAt + fenced[0].length } : "more";
  }
  return NAME.test(head) && lead === tail.length ? "more" : undefined;
}

const WIRE: SectionedWire = {
  markers: { sectionBegin: M.callsBegin, sectionEnd: M.callsEnd, callBegin: M.callBegin, callEnd: M.callEnd },
  readHeader: readDeepseekHeader,
};

/** A calls block holding one call (or several when `parallel`, `between` them if anything) laid out by `shape`. */
function callsBlockGrammar(tools: ToolSpec[], parallel: boolean, shape: CallShape, between?: Expr): string {
  return forcedCallGrammar(tools, shape, (call) => {
    const several = between ? oneOrMore(call, true, between) : repeat(call, 1, null);
    return seq(lit(M.callsBegin), parallel ? several : call, lit(M.callsEnd));
  });
}

/** GBNF for an R1/V3-style calls block: fenced JSON, calls a line apart. */
export function deepseekToolGrammar(tools: ToolSpec[], parallel: boolean): string {
  const shape: CallShape = (tool, args) =>
    seq(lit(`${M.callBegin}function${M.sep}${tool.name}\n\`\`\`json\n`), args, lit(`\n\`\`\`${M.callEnd}`));
  return callsBlockGrammar(tools, parallel, shape, NL);
}

/** GBNF for a V3.1-style calls block: bare JSON, calls back to back. */
export function deepseekV31ToolGrammar(tools: ToolSpec[], parallel: boolean): string {
  const shape: CallShape = (tool, args) => seq(lit(`${M.callBegin}${tool.name}${M.sep}`), args, lit(M.callEnd));
  return callsBlockGrammar(tools, parallel, shape);
}

const hasCallsBlock = (template: string): boolean => template.includes("tool▁calls▁begin");
// V3.1's template writes the arguments right after the separator: no JSON fence anywhere.
const isV31 = (template: string): boolean =>
  hasCallsBlock(template) && template.includes("tool▁sep") && !template.includes("```json");

const shared = {
  parser: (opts?: ParserOptions) => new SectionedCallParser(WIRE, opts?.newId),
  trigger: M.callsBegin,
  openers: [M.callsBegin, M.callBegin],
};

export const deepseek: ToolDialect = {
  name: "deepseek",
  detect: (template) => hasCallsBlock(template) && !isV31(template),
  forcedGrammar: (tools, parallel) => deepseekToolGrammar(tools, parallel),
  ...shared,
};

export const deepseekV31: ToolDialect = {
  name: "deepseek-v3.1",
  detect: isV31,
  forcedGrammar: (tools, parallel) => deepseekV31ToolGrammar(tools, parallel),
  ...shared,
};
