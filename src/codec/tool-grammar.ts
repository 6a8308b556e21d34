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
  parseGbnf,
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

/**
 * `{"name": "<f>", "<argsKey>": <args>}`: the JSON object most wires use;
 * `more` are members written after the arguments (Mistral Nemo's `"id"`).
 */
export const jsonObjectCall =
  (argsKey = "arguments", more: Expr[] = []): CallShape =>
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
      ...more,
      lit("}"),
    );

/**
 * GBNF (root rule `root`) whose root is `wrap(call)`, where `call` matches one
 * call, laid out by `shape`, to any of `tools`.
 */
export function forcedCallGrammar(tools: ToolSpec[], shape: CallShape, wrap: (call: Expr) => Expr): string {
  return callsGrammar(
    tools,
    (tool, i, out) => shape(tool, compiledSchema(tool.parameters ?? { type: "object" }, `tc${i}`, out)),
    wrap,
  );
}

/** Where a call's grammar puts the rules it compiles, under one budget for the whole tool list. */
export interface GrammarOut {
  rules: Rule[];
  budget: CompileBudget;
}

/** Compiles a JSON schema (compact layout) into `out` under rule prefix `prefix`; a reference to its root. */
export function compiledSchema(schema: unknown, prefix: string, out: GrammarOut): Expr {
  out.rules.push(
    ...namespaceGrammar(compileJsonSchema(schema, { layout: "compact", budget: out.budget }).grammar, prefix),
  );
  return ref(`${prefix}-root`);
}

/**
 * GBNF (root rule `root`) whose root is `wrap(call)`, where `call` matches one
 * call to any of `tools`, as `callRule` lays out the call to tool `i` (its
 * rules named `tc<i>-…`).
 */
export function callsGrammar(
  tools: ToolSpec[],
  callRule: (tool: ToolSpec, i: number, out: GrammarOut) => Expr,
  wrap: (call: Expr) => Expr,
): string {
  if (tools.length === 0) throw new Error("a forced tool call needs at least one tool");
  // One budget for the whole tool list: many tools may not add up to more work than one may do.
  const out: GrammarOut = { rules: [], budget: new CompileBudget() };
  const calls = tools.map((tool, i) => {
    out.budget.at = `/tools/${i}/function/parameters`;
    out.rules.push({ name: `tc${i}-call`, body: callRule(tool, i, out) });
    return ref(`tc${i}-call`);
  });
  out.rules.push({ name: "tc-call", body: calls.length === 1 ? calls[0]! : { kind: "alt", alts: calls } });
  const grammar: Grammar = { rules: [{ name: "root", body: wrap(ref("tc-call")) }, ...out.rules] };
  // Each schema passed its own checks; what llama.cpp would make of them together is checked once more.
  const over = gbnfErrors(grammar).find((p) => p.limit);
  if (over) throw out.budget.error(over.limit!, "tools", "", `the tools' call grammar is too costly: ${over.message}`);
  return printGbnf(grammar);
}

/**
 * Rules for any text that does not contain `delimiter` (a raw argument value
 * up to its closing tag), named `<name>-0` … : the delimiter's matching
 * automaton (as Knuth-Morris-Pratt builds it), each state a rule that may end
 * or take a character into the next state, so the text can never complete
 * the delimiter. Returns a reference to the start state.
 */
export function textWithout(delimiter: string, name: string, rules: Rule[]): Expr {
  if (rules.some((r) => r.name === `${name}-0`)) return ref(`${name}-0`);
  const n = delimiter.length;
  // next(state, c): the longest prefix of the delimiter that ends the text matched so far plus c.
  const next = (state: number, c: string): number => {
    const s = delimiter.slice(0, state) + c;
    for (let k = Math.min(n, s.length); k > 0; k--) if (s.endsWith(delimiter.slice(0, k))) return k;
    return 0;
  };
  const chars = [...new Set(delimiter)];
  for (let state = 0; state < n; state++) {
    const alts: Expr[] = [seq()];
    const leaving = new Map<number, string[]>(); // next state (not 0) → the characters that go there
    for (const c of chars) {
      const to = next(state, c);
      if (to === n) continue; // would complete the delimiter
      if (to !== 0) leaving.set(to, [...(leaving.get(to) ?? []), c]);
    }
    // Every other character (the delimiter's own ones included) returns to the start.
    const forbidden = chars.filter((c) => next(state, c) === n);
    const elsewhere = [...leaving.values()].flat();
    alts.push(seq(charClass([...elsewhere, ...forbidden], true), ref(`${name}-0`)));
    for (const [to, cs] of leaving) alts.push(seq(charClass(cs, false), ref(`${name}-${to}`)));
    rules.push({ name: `${name}-${state}`, body: { kind: "alt", alts } });
  }
  return ref(`${name}-0`);
}

function charClass(chars: string[], negated: boolean): Expr {
  return {
    kind: "class",
    negated,
    ranges: chars.map((c) => [c.codePointAt(0)!, c.codePointAt(0)!] as [number, number]),
  };
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

/**
 * A grammar that holds a whole reply, for a prompt that left a reasoning
 * block open (Qwen3.5 and other thinking templates end the generation prompt
 * in `<think>`): the model first finishes its reasoning, any text up to the
 * closing marker, and the grammar holds what follows. Held from the first
 * token instead, it would write its call or JSON inside the reasoning block.
 */
export function afterReasoning(gbnf: string, close: string): string {
  const rules = namespaceGrammar(parseGbnf(gbnf), "answer");
  const reasoning = textWithout(close, "reasoning", rules);
  const gap = repeat(
    {
      kind: "class",
      negated: false,
      ranges: [
        [10, 10],
        [32, 32],
      ],
    },
    0,
    2,
  );
  return printGbnf({ rules: [{ name: "root", body: seq(reasoning, lit(close), gap, ref("answer-root")) }, ...rules] });
}
