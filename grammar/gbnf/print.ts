// GBNF printer. Output is ASCII-only (non-ASCII as \u / \U escapes) and uses
// only escapes that every llama.cpp version understands, so the text survives
// any transport and any parser revision. Parentheses are added exactly where
// the tree needs them, which makes parse(print(t)) deep-equal t for trees that
// came from the parser.

import type { CodeRange, Expr, Grammar } from "./ast.ts";

function hex(n: number, width: number): string {
  return n.toString(16).toUpperCase().padStart(width, "0");
}

function escapeCommon(cp: number): string | undefined {
  if (cp === 0x5c) return "\\\\";
  if (cp === 0x0a) return "\\n";
  if (cp === 0x0d) return "\\r";
  if (cp === 0x09) return "\\t";
  if (cp < 0x20 || cp === 0x7f) return `\\x${hex(cp, 2)}`;
  if (cp > 0x7f) return cp > 0xffff ? `\\U${hex(cp, 8)}` : `\\u${hex(cp, 4)}`;
  return undefined;
}

function literalChar(cp: number): string {
  if (cp === 0x22) return '\\"';
  return escapeCommon(cp) ?? String.fromCodePoint(cp);
}

function classChar(cp: number): string {
  // ']' and '\' are structural; '-' and '^' are written as hex so no parser
  // revision can read them as a range or a negation.
  if (cp === 0x5d) return "\\]";
  if (cp === 0x5b) return "\\[";
  if (cp === 0x22) return '\\"';
  if (cp === 0x2d) return "\\x2D";
  if (cp === 0x5e) return "\\x5E";
  return escapeCommon(cp) ?? String.fromCodePoint(cp);
}

export function printLiteral(value: string): string {
  let out = '"';
  for (const ch of value) out += literalChar(ch.codePointAt(0)!);
  return `${out}"`;
}

export function printClass(ranges: CodeRange[], negated: boolean): string {
  let out = negated ? "[^" : "[";
  for (const [lo, hi] of ranges) {
    out += classChar(lo);
    if (hi !== lo) out += `-${classChar(hi)}`;
  }
  return `${out}]`;
}

function printRepeatSuffix(min: number, max: number | null): string {
  if (min === 0 && max === null) return "*";
  if (min === 1 && max === null) return "+";
  if (min === 0 && max === 1) return "?";
  if (max === null) return `{${min},}`;
  if (max === min) return `{${min}}`;
  return `{${min},${max}}`;
}

/** An element that can carry a postfix operator or stand in a sequence. */
function printAtom(e: Expr): string {
  switch (e.kind) {
    case "lit":
      return printLiteral(e.value);
    case "class":
      return printClass(e.ranges, e.negated);
    case "any":
      return ".";
    case "ref":
      return e.name;
    case "token": {
      const inner = e.id !== undefined ? `<[${e.id}]>` : `<${e.text}>`;
      return (e.negated ? "!" : "") + inner;
    }
    case "repeat": {
      const body = e.body.kind === "repeat" ? `(${printAlt(e.body)})` : printAtom(e.body);
      return body + printRepeatSuffix(e.min, e.max);
    }
    case "seq":
      if (e.items.length === 0) return "()";
      return `(${printAlt(e)})`;
    case "alt":
      return `(${printAlt(e)})`;
  }
}

function printSeq(e: Expr): string {
  // The empty sequence is written "()": a bare empty alternative at the end of
  // a rule would let the parser run on into the next line.
  if (e.kind === "seq") return e.items.length === 0 ? "()" : e.items.map(printAtom).join(" ");
  if (e.kind === "alt") return `(${printAlt(e)})`;
  return printAtom(e);
}

/** Print an expression as a rule body. */
export function printAlt(e: Expr): string {
  if (e.kind === "alt") return e.alts.map(printSeq).join(" | ");
  return printSeq(e);
}

/** Print a grammar, one rule per line. */
export function printGbnf(g: Grammar): string {
  return `${g.rules.map((r) => `${r.name} ::= ${printAlt(r.body)}`).join("\n")}\n`;
}

/** Print a single expression as a GBNF rule body. */
export function printExpr(e: Expr): string {
  return printAlt(e);
}
