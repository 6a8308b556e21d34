// Grammars of forced tool calls (tool_choice "required" or a named function).
// Each tool's parameter schema is compiled by grammar/ and placed under its
// own rule prefix; a dialect only says how one call is laid out around its
// arguments (JSON object, fenced block, channel header, ...) and how calls
// are wrapped.
import { compileJsonSchema, namespaceGrammar, printGbnf, type Expr, type Rule } from "../../grammar/index.ts";

export interface ToolSpec {
  name: string;
  /** JSON Schema of the arguments (an empty object schema when the tool declares none). */
  parameters: unknown;
}

export const ref = (name: string): Expr => ({ kind: "ref", name });
export const lit = (value: string): Expr => ({ kind: "lit", value });
export const seq = (...items: Expr[]): Expr => ({ kind: "seq", items });
export const repeat = (body: Expr, min: number, max: number | null): Expr => ({ kind: "repeat", body, min, max });

/** Whitespace between a call's JSON tokens, bounded so a model cannot pad forever. */
export const WS = ref("tc-ws");
const WS_RULE: Rule = { name: "tc-ws", body: repeat({ kind: "class", negated: false, ranges: [[32, 32], [10, 10]] }, 0, 4) };

/** Lays out one call to `tool` around `args` (the rule matching its arguments). */
export type CallShape = (tool: ToolSpec, args: Expr) => Expr;

/** `{"name": "<f>", "<argsKey>": <args>}`: the JSON object most wires use. */
export const jsonObjectCall =
  (argsKey = "arguments"): CallShape =>
  (tool, args) =>
    seq(lit("{"), WS, lit('"name"'), WS, lit(":"), WS, lit(JSON.stringify(tool.name)), WS, lit(","), WS, lit(JSON.stringify(argsKey)), WS, lit(":"), WS, args, WS, lit("}"));

/**
 * GBNF (root rule `root`) whose root is `wrap(call)`, where `call` matches one
 * call, laid out by `shape`, to any of `tools`.
 */
export function forcedCallGrammar(tools: ToolSpec[], shape: CallShape, wrap: (call: Expr) => Expr): string {
  if (tools.length === 0) throw new Error("a forced tool call needs at least one tool");
  const rules: Rule[] = [WS_RULE];
  const calls = tools.map((tool, i) => {
    rules.push(...namespaceGrammar(compileJsonSchema(tool.parameters ?? { type: "object" }).grammar, `tc${i}`));
    rules.push({ name: `tc${i}-call`, body: shape(tool, ref(`tc${i}-root`)) });
    return ref(`tc${i}-call`);
  });
  rules.push({ name: "tc-call", body: calls.length === 1 ? calls[0]! : { kind: "alt", alts: calls } });
  return printGbnf({ rules: [{ name: "root", body: wrap(ref("tc-call")) }, ...rules] });
}

/** One call, or when `parallel` one or more separated by `sep`. */
export function oneOrMore(call: Expr, parallel: boolean, sep: Expr = WS): Expr {
  return parallel ? seq(call, repeat(seq(sep, call), 0, null)) : call;
}

/** The JSON-in-tags wire: `<open>{"name", "arguments"}</close>` blocks. */
export function toolCallGrammar(tools: ToolSpec[], wire: { open: string; close: string }, parallel: boolean): string {
  return forcedCallGrammar(tools, jsonObjectCall(), (call) => oneOrMore(seq(lit(wire.open), WS, call, WS, lit(wire.close)), parallel));
}
