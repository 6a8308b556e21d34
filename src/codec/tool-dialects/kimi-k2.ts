// Kimi K2 (Instruct, Thinking, the first K2 template) tool calls, written
// with the model's special tokens:
//   <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{ARGS}<|tool_call_end|>…<|tool_calls_section_end|>
// The templates write the calls back to back, with no separator, right after
// the turn's content. `functions.NAME:IDX` is the call's id: the first K2
// template numbers a turn's calls from 0 and names each tool result by its
// `tool_call_id`; the Instruct and Thinking templates count calls across the
// whole conversation and name each result by the id they recompute. So the
// id the model writes is the id we return (as llama.cpp and Moonshot's own
// API do): a client that sends it back renders exactly what the model wrote.
import { forcedCallGrammar, lit, repeat, seq } from "../tool-grammar.ts";
import type { Expr } from "../../../grammar/index.ts";
import { type CallHeader, SectionedCallParser, type SectionedWire } from "./sectioned-calls.ts";
import type { ToolDialect, ToolSpec } from "./types.ts";

export const KIMI_K2_MARKERS = {
  sectionBegin: "<|tool_calls_section_begin|>",
  sectionEnd: "<|tool_calls_section_end|>",
  callBegin: "<|tool_call_begin|>",
  callEnd: "<|tool_call_end|>",
  argumentBegin: "<|tool_call_argument_begin|>",
} as const;

const M = KIMI_K2_MARKERS;

// `functions.NAME:IDX`; a model that drops the prefix or the index still names the tool.
const CALL_ID = /^(?:functions\.)?([^\s<>]+?)(?::(\d+))?$/;

/** The header after `<|tool_call_begin|>`: `functions.NAME:IDX<|tool_call_argument_begin|>` then `{`. */
export function readKimiHeader(text: string, index: number): CallHeader | "more" | undefined {
  const at = text.indexOf(M.argumentBegin);
  if (at < 0) return "more";
  const id = CALL_ID.exec(text.slice(0, at).trim());
  if (!id) return undefined;
  const rest = text.slice(at + M.argumentBegin.length);
  const argsAt = rest.length - rest.trimStart().length;
  if (argsAt === rest.length) return "more";
  if (rest[argsAt] !== "{") return undefined;
  const name = id[1]!;
  // The id in its canonical form, numbered by the reply's call count where the model left the number out.
  return { name, id: `functions.${name}:${id[2] ?? index}`, argsAt: at + M.argumentBegin.length + argsAt };
}

const WIRE: SectionedWire = { markers: M, readHeader: readKimiHeader };

// The call number is the model's to write (the Instruct and Thinking templates
// count across the conversation); a few digits bound it.
const DIGIT: Expr = { kind: "class", negated: false, ranges: [[0x30, 0x39]] };
const CALL_NUMBER = repeat(DIGIT, 1, 4);

/** GBNF for a calls section holding one call (or several when `parallel`) to `tools`, as the templates write it. */
export function kimiK2ToolGrammar(tools: ToolSpec[], parallel: boolean): string {
  return forcedCallGrammar(
    tools,
    (tool, args) =>
      seq(lit(`${M.callBegin}functions.${tool.name}:`), CALL_NUMBER, lit(M.argumentBegin), args, lit(M.callEnd)),
    (call) => seq(lit(M.sectionBegin), parallel ? repeat(call, 1, null) : call, lit(M.sectionEnd)),
  );
}

export const kimiK2: ToolDialect = {
  name: "kimi-k2",
  detect: (template) => template.includes(M.sectionBegin) && template.includes(M.callBegin),
  parser: (opts) => new SectionedCallParser(WIRE, opts?.newId),
  forcedGrammar: (tools, parallel) => kimiK2ToolGrammar(tools, parallel),
  trigger: M.sectionBegin,
  openers: [M.sectionBegin, M.callBegin],
};
