// AST for llama.cpp's GBNF grammar format.
//
// The parser keeps the source structure (nested groups stay nested, literals
// stay separate) so that print → parse reproduces the same tree. The smart
// constructors below (`seq`, `alt`, `lit`, ...) are for code that *builds*
// grammars: they flatten and merge, which the parser deliberately does not.

/** An inclusive code point range. */
export type CodeRange = [number, number];

export type Expr =
  /** A literal string ("abc"); "" is the empty literal. */
  | { kind: "lit"; value: string }
  /** A character class [a-z] or negated [^...]; ranges as written. */
  | { kind: "class"; negated: boolean; ranges: CodeRange[] }
  /** `.` — any single character. */
  | { kind: "any" }
  /** A reference to a rule by name. */
  | { kind: "ref"; name: string }
  /** A token reference `<[id]>`, `<text>`, optionally negated with `!`. */
  | { kind: "token"; negated: boolean; id?: number; text?: string }
  /** A sequence; the empty sequence matches the empty string. */
  | { kind: "seq"; items: Expr[] }
  /** Alternatives. */
  | { kind: "alt"; alts: Expr[] }
  /** Repetition {min,max}; max null means unbounded. * + ? are sugar. */
  | { kind: "repeat"; body: Expr; min: number; max: number | null };

export interface Rule {
  name: string;
  body: Expr;
}

export interface Grammar {
  rules: Rule[];
}

/** Source position (1-based line and column) of a parsed node. */
export interface SourceLoc {
  line: number;
  column: number;
}

// Positions live outside the tree so that deep equality of two parses of
// differently formatted sources holds (round trip).
const locations = new WeakMap<object, SourceLoc>();

export function setLocation(node: object, loc: SourceLoc): void {
  locations.set(node, loc);
}

/** Where a rule or expression came from, if it was produced by parseGbnf. */
export function sourceLocation(node: object): SourceLoc | undefined {
  return locations.get(node);
}

/** Rule names llama.cpp accepts: letters, digits and '-'. */
export const RULE_NAME = /^[a-zA-Z0-9-]+$/;

// ---------------------------------------------------------------------------
// Smart constructors for grammar builders.

export const EMPTY: Expr = { kind: "seq", items: [] };

export function lit(value: string): Expr {
  return { kind: "lit", value };
}

export function ref(name: string): Expr {
  return { kind: "ref", name };
}

export function cls(ranges: CodeRange[], negated = false): Expr {
  return { kind: "class", negated, ranges };
}

/** Class from a string of single characters and "a-z" style ranges given as pairs. */
export function chars(...items: (string | [string, string])[]): Expr {
  const ranges: CodeRange[] = items.map((it) =>
    typeof it === "string" ? [it.codePointAt(0)!, it.codePointAt(0)!] : [it[0].codePointAt(0)!, it[1].codePointAt(0)!],
  );
  return cls(ranges);
}

export function isEmpty(e: Expr): boolean {
  return (e.kind === "seq" && e.items.length === 0) || (e.kind === "lit" && e.value === "");
}

/** Sequence: flattens nested sequences, drops empties, merges adjacent literals. */
export function seq(...items: Expr[]): Expr {
  const out: Expr[] = [];
  for (const it of items) {
    const parts = it.kind === "seq" ? it.items : [it];
    for (const p of parts) {
      if (isEmpty(p)) continue;
      const last = out[out.length - 1];
      if (p.kind === "lit" && last && last.kind === "lit") {
        out[out.length - 1] = lit(last.value + p.value);
      } else {
        out.push(p);
      }
    }
  }
  if (out.length === 1) return out[0]!;
  return { kind: "seq", items: out };
}

/** Alternation: flattens nested alternations and drops exact duplicates. */
export function alt(...alts: Expr[]): Expr {
  const out: Expr[] = [];
  const seen = new Set<string>();
  for (const a of alts) {
    for (const p of a.kind === "alt" ? a.alts : [a]) {
      const key = JSON.stringify(p);
      if (seen.has(key)) continue;
      seen.add(key);
      out.push(p);
    }
  }
  if (out.length === 1) return out[0]!;
  return { kind: "alt", alts: out };
}

export function repeat(body: Expr, min: number, max: number | null): Expr {
  if (max === 0) return EMPTY;
  if (min === 1 && max === 1) return body;
  return { kind: "repeat", body, min, max };
}

export function opt(body: Expr): Expr {
  return repeat(body, 0, 1);
}

export function star(body: Expr): Expr {
  return repeat(body, 0, null);
}

export function plus(body: Expr): Expr {
  return repeat(body, 1, null);
}
