// The grammar as llama.cpp's parser (src/llama-grammar.cpp) turns it into
// rules, for the cost checks of ./cost.ts. It reads the text ./print.ts
// writes: every parenthesised group becomes a rule of its own, and a
// repetition x{m,n} becomes m inline copies of x plus n - m rules
// `S'(k) ::= x S'(k-1) | ` (x{m,} is m copies plus `S' ::= x S' | `).

import type { Expr } from "./ast.ts";

/** The alternatives of a rule body or a group. */
export function alternatives(e: Expr): Expr[] {
  return e.kind === "alt" ? e.alts : [e];
}

/** The symbols of one alternative. */
export function symbols(e: Expr): Expr[] {
  return e.kind === "seq" ? e.items : [e];
}

/** Whether a symbol is a rule (reference, group, repetition) rather than characters. */
export function isRule(e: Expr): boolean {
  return e.kind === "ref" || e.kind === "seq" || e.kind === "alt" || e.kind === "repeat";
}

/** Whether x{m,n} repeats a group (printed in parentheses) rather than a single symbol. */
export function repeatsGroup(e: Expr & { kind: "repeat" }): boolean {
  return e.body.kind === "seq" || e.body.kind === "alt" || e.body.kind === "repeat";
}

/** The alternatives of the group llama.cpp makes for a repeated group `( ... ){m,n}`. */
export function groupAlternatives(body: Expr): Expr[] {
  return body.kind === "repeat" ? [body] : alternatives(body);
}

export interface Size {
  rules: number;
  /** Grammar elements: characters, references, ALT/END markers. */
  elements: number;
}

function symbolSize(e: Expr, out: Size): number {
  switch (e.kind) {
    case "lit":
      return [...e.value].length;
    case "class":
      return Math.max(1, 2 * e.ranges.length);
    case "any":
    case "token":
    case "ref":
      return 1;
    case "seq":
    case "alt":
      return groupSize(alternatives(e), out);
    case "repeat": {
      if (e.max === 0) return 0;
      const one = repeatsGroup(e) ? groupSize(groupAlternatives(e.body), out) : symbolSize(e.body, out);
      const chain = e.max === null ? 1 : e.max - e.min;
      out.rules += chain;
      out.elements += chain * (one + 3);
      return e.min * one + (chain > 0 ? 1 : 0);
    }
  }
}

/** A synthesized rule: one reference where it stands. */
function groupSize(alts: Expr[], out: Size): number {
  out.rules++;
  out.elements += bodySize(alts, out);
  return 1;
}

function bodySize(alts: Expr[], out: Size): number {
  let n = 0;
  for (const a of alts) {
    n++; // the ALT / END marker
    for (const s of symbols(a)) n += symbolSize(s, out);
  }
  return n;
}

/** Rules and elements llama.cpp will hold for this grammar. */
export function grammarSize(defs: Map<string, Expr>): Size {
  const out: Size = { rules: defs.size, elements: 0 };
  for (const body of defs.values()) out.elements += bodySize(alternatives(body), out);
  return out;
}
