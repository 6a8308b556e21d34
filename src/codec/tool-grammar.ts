// Grammars of forced tool calls (tool_choice "required" or a named function).
// Each tool's parameter schema is compiled by grammar/ and placed under its
// own rule prefix; a dialect only says how one call is laid out around its
// arguments (JSON object, fenced block, channel header, ...) and how calls
// are wrapped.
//
// Calls are held to the layout chat templates give them when they render a
// call: compact JSON (one optional space after `:` and `,`, none elsewhere)
// and only the template's own separators around and between calls. A small
// model given room for whitespace spends its tokens on it (a newline and
// twenty tabs between every pair of JSON tokens, call after call).
import {
  CompileBudget,
  compileJsonSchema,
  gbnfErrors,
  namespaceGrammar,
  printGbnf,
  type Expr,
  type Grammar,
  type Rule,
} from "../../grammar/index.ts";

export interface ToolSpec {
  name: string;
  /** JSON Schema of the arguments (an empty object schema when the tool declares none). */
  parameters: unknown;
}

export const ref = (name: string): Expr => ({ kind: "ref", name });
export const lit = (value: string): Expr => ({ kind: "lit", value });
export const seq = (...items: Expr[]): Expr => ({ kind: "seq", items });
export const repeat = (body: Expr, min: number, max: number | null): Expr => ({ kind: "repeat", body, min, max });

/** The one optional space compact JSON allows after `:` and `,`. */
export const SP = repeat(lit(" "), 0, 1);
/** One optional newline: where a template puts a call on its own line. */
export const NL = repeat(lit("\n"), 0, 1);

/** Lays out one call to `tool` around `args` (the rule matching its arguments). */
export type CallShape = (tool: ToolSpec, args: Expr) => Expr;

/** `{"name": "<f>", "<argsKey>": <args>}`: the JSON object most wires use. */
export const jsonObjectCall =
  (argsKey = "arguments"): CallShape =>
  (tool, args) =>
    seq(
      lit('{"name":'),
      SP,
      lit(JSON.stringify(tool.name)),
      lit(","),
      SP,
      lit(`${JSON.stringify(argsKey)}:`),
      SP,
      args,
      lit("}"),
    );

/**
 * GBNF (root rule `root`) whose root is `wrap(call)`, where `call` matches one
 * call, laid out by `shape`, to any of `tools`.
 */
export function forcedCallGrammar(tools: ToolSpec[], shape: CallShape, wrap: (call: Expr) => Expr): string {
  if (tools.length === 0) throw new Error("a forced tool call needs at least one tool");
  const rules: Rule[] = [];
  // One budget for the whole tool list: many tools may not add up to more work than one may do.
  const budget = new CompileBudget();
  const calls = tools.map((tool, i) => {
    budget.at = `/tools/${i}/function/parameters`;
    rules.push(
      ...namespaceGrammar(
        compileJsonSchema(tool.parameters ?? { type: "object" }, { layout: "compact", budget }).grammar,
        `tc${i}`,
      ),
    );
    rules.push({ name: `tc${i}-call`, body: shape(tool, ref(`tc${i}-root`)) });
    return ref(`tc${i}-call`);
  });
  rules.push({ name: "tc-call", body: calls.length === 1 ? calls[0]! : { kind: "alt", alts: calls } });
  const grammar: Grammar = { rules: [{ name: "root", body: wrap(ref("tc-call")) }, ...rules] };
  // Each schema passed its own checks; what llama.cpp would make of them together is checked once more.
  const over = gbnfErrors(grammar).find((p) => p.limit);
  if (over) throw budget.error(over.limit!, "tools", "", `the tools' call grammar is too costly: ${over.message}`);
  return printGbnf(grammar);
}

/** One call, or when `parallel` one or more separated by `sep`. */
export function oneOrMore(call: Expr, parallel: boolean, sep: Expr): Expr {
  return parallel ? seq(call, repeat(seq(sep, call), 0, null)) : call;
}

/** A JSON array of calls, `[call, call]`, as compact JSON lays it out. */
export function callArray(call: Expr): Expr {
  return seq(lit("["), oneOrMore(call, true, seq(lit(","), SP)), lit("]"));
}

/**
 * The JSON-in-tags wire: `<open>\n{"name", "arguments"}\n</close>` blocks, one
 * per line (each newline optional: the templates write them, models may not).
 */
export function toolCallGrammar(tools: ToolSpec[], wire: { open: string; close: string }, parallel: boolean): string {
  return forcedCallGrammar(tools, jsonObjectCall(), (call) =>
    oneOrMore(seq(lit(wire.open), NL, call, NL, lit(wire.close)), parallel, NL),
  );
}
