// Structural regex → GBNF translation: the regex tree maps one-to-one onto a
// GBNF expression. How a set of characters is written is up to the caller:
// raw characters for regexToGbnf, JSON-escaped characters inside strings for
// the schema compiler.

import type { CharSet } from "../charset.ts";
import * as cs from "../charset.ts";
import type { Expr } from "../gbnf/ast.ts";
import { EMPTY, alt, cls, lit, repeat, seq } from "../gbnf/ast.ts";
import { printExpr } from "../gbnf/print.ts";
import type { RNode } from "./parse.ts";
import { RegexError, parseRegex } from "./parse.ts";

/**
 * llama.cpp expands {m,n} into n rules and refuses 2000 or more; we keep every
 * single count at or below this and split larger ones.
 */
export const REPEAT_LIMIT = 1000;

/**
 * The block size for counts beyond that. llama.cpp makes one rule per
 * optional copy (x{0,n} is n rules, ~4 µs each to load in the worker), and
 * refuses a group repeated so often that (rules made for the group) x
 * (count) reaches 2000. So larger counts are written in nested blocks of
 * BLOCK copies, each level repeated at most BLOCK times: O(BLOCK · log n)
 * rules for n copies, and no count in a nested block above BLOCK. Up to
 * REPEAT_LIMIT a range stays one {m,n}: its chain of rules keeps a single
 * parse stack, where blocks keep about three (block or tail) and would slow
 * every character of a long constrained string.
 */
export const BLOCK = 32;

export interface TranslateOptions {
  /** GBNF for "one character from this set"; null when the set is empty. */
  encodeSet: (set: CharSet) => Expr | null;
  /**
   * Called on repeated sub-expressions that are not single atoms, so the
   * caller can give them a rule name (keeps llama.cpp's repetition
   * expansion cheap). Defaults to inlining.
   */
  factor?: (e: Expr) => Expr;
}

function isAtom(e: Expr): boolean {
  return e.kind === "lit" || e.kind === "class" || e.kind === "any" || e.kind === "ref" || e.kind === "token";
}

/** `min` to `max` (null: unbounded) copies of `body`, unambiguously, with no count above `limit`. */
export function boundedRepeat(body: Expr, min: number, max: number | null, limit = REPEAT_LIMIT): Expr {
  if (max === null)
    return min <= limit ? repeat(body, min, null) : seq(exactly(body, min, limit), repeat(body, 0, null));
  if (max <= limit) return repeat(body, min, max);
  return seq(exactly(body, min, limit), upTo(body, max - min));
}

// Exactly m copies: directly up to `direct`, otherwise whole blocks of BLOCK
// copies (counted the same way, nested) and the rest.
function exactly(body: Expr, m: number, direct: number): Expr {
  if (m <= direct) return repeat(body, m, m);
  const block = repeat(body, BLOCK, BLOCK);
  return seq(exactly(block, Math.floor(m / BLOCK), BLOCK), repeat(body, m % BLOCK, m % BLOCK));
}

// Zero to n copies, unambiguously: with q = n / BLOCK, either fewer than q
// blocks followed by fewer than BLOCK copies, or exactly q blocks followed
// by at most n mod BLOCK copies.
function upTo(body: Expr, n: number): Expr {
  if (n <= BLOCK) return repeat(body, 0, n);
  const q = Math.floor(n / BLOCK);
  const block = repeat(body, BLOCK, BLOCK);
  return alt(
    seq(upTo(block, q - 1), repeat(body, 0, BLOCK - 1)),
    seq(exactly(block, q, BLOCK), repeat(body, 0, n % BLOCK)),
  );
}

export function nullable(n: RNode): boolean {
  switch (n.t) {
    case "set":
      return false;
    case "seq":
      return n.items.every(nullable);
    case "alt":
      return n.alts.some(nullable);
    case "rep":
      return n.min === 0 || nullable(n.body);
  }
}

/** The language of `n` without the empty string; null if that is empty. */
export function nonEmpty(n: RNode): RNode | null {
  switch (n.t) {
    case "set":
      return n;
    case "seq": {
      if (n.items.length === 0) return null;
      const [head, ...rest] = n.items;
      const tail: RNode = rest.length === 1 ? rest[0]! : { t: "seq", items: rest };
      if (!nullable(head!)) return n;
      if (rest.length === 0) return nonEmpty(head!);
      // head non-empty then anything, or head empty and the tail non-empty.
      const a = nonEmpty(head!);
      const b = nonEmpty(tail);
      const alts: RNode[] = [];
      if (a) alts.push({ t: "seq", items: [a, tail] });
      if (b) alts.push(b);
      return alts.length === 0 ? null : alts.length === 1 ? alts[0]! : { t: "alt", alts };
    }
    case "alt": {
      const alts = n.alts.map(nonEmpty).filter((x): x is RNode => x !== null);
      return alts.length === 0 ? null : alts.length === 1 ? alts[0]! : { t: "alt", alts };
    }
    case "rep": {
      if (n.max === 0) return null;
      if (!nullable(n.body)) return n.min >= 1 ? n : { t: "rep", body: n.body, min: 1, max: n.max };
      const b = nonEmpty(n.body);
      return b === null ? null : { t: "rep", body: b, min: 1, max: n.max };
    }
  }
}

/** Translate a regex tree; null if it matches nothing. */
export function regexNodeToExpr(n: RNode, o: TranslateOptions): Expr | null {
  switch (n.t) {
    case "set":
      return o.encodeSet(n.set);
    case "seq": {
      const items: Expr[] = [];
      for (const x of n.items) {
        const e = regexNodeToExpr(x, o);
        if (e === null) return null;
        items.push(e);
      }
      return seq(...items);
    }
    case "alt": {
      const alts = n.alts.map((x) => regexNodeToExpr(x, o)).filter((e): e is Expr => e !== null);
      return alts.length === 0 ? null : alt(...alts);
    }
    case "rep": {
      // A starred expression that can match empty would become a
      // left-recursive rule in llama.cpp; repeat its non-empty part instead
      // (same language, since empty copies contribute nothing).
      if (nullable(n.body)) {
        const ne = nonEmpty(n.body);
        if (ne === null) return EMPTY;
        n = { t: "rep", body: ne, min: 0, max: n.max };
      }
      let body = regexNodeToExpr(n.body, o);
      if (body === null) return n.min === 0 ? EMPTY : null;
      if (n.max === 0) return EMPTY;
      if (!isAtom(body) && o.factor) body = o.factor(body);
      return boundedRepeat(body, n.min, n.max);
    }
  }
}

/** One raw character from `set` as a GBNF atom; null if the set is empty. */
export function rawSetExpr(set: CharSet): Expr | null {
  const s = cs.subtract(set, cs.SURROGATES);
  if (s.length === 0) return null;
  if (cs.equal(s, cs.ANY_CHAR)) return { kind: "any" };
  if (s.length === 1 && s[0]![0] === s[0]![1]) return lit(String.fromCodePoint(s[0]![0]));
  const comp = cs.subtract(cs.complement(s), cs.SURROGATES);
  return comp.length < s.length
    ? cls(
        comp.map(([a, b]) => [a, b]),
        true,
      )
    : cls(s.map(([a, b]) => [a, b]));
}

/**
 * Translate an ECMAScript (u-flag) regular expression into a GBNF rule body
 * that matches exactly the strings for which `new RegExp(pattern, "u").test`
 * is true — i.e. search semantics: without ^ / $ the match may be surrounded
 * by anything. Throws RegexError for invalid or unsupported patterns
 * (lookarounds, backreferences, word boundaries, property escapes, anchors
 * in the middle) and for patterns that can match nothing.
 */
export function regexToGbnf(pattern: string): string {
  const e = regexNodeToExpr(parseRegex(pattern), { encodeSet: rawSetExpr });
  if (e === null) throw new RegexError("pattern can never match", false);
  return printExpr(e);
}
