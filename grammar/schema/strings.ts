// String grammars: length limits, patterns, formats and "any key but these".
//
// Characters are counted as the validator counts them (code points): each
// grammar "character" is one raw code point or one escape, and the escapes
// we allow each decode to exactly one code point.

import * as cs from "../charset.ts";
import type { Expr } from "../gbnf/ast.ts";
import { EMPTY, alt, lit, ref, seq, star } from "../gbnf/ast.ts";
import { minimize, productDfa } from "../regex/automaton.ts";
import type { RNode } from "../regex/parse.ts";
import { lengthRange } from "../regex/parse.ts";
import { boundedRepeat, regexNodeToExpr } from "../regex/translate.ts";
import type { RuleBuilder } from "./builder.ts";
import { anyString, encodeJsonSet, stringChar } from "./json.ts";

export interface StringSpec {
  minLength: number;
  maxLength: number | null;
  /** Full-match regex trees that must all accept the decoded string. */
  regexes: RNode[];
}

const QUOTE = lit('"');

/**
 * GBNF for a JSON string (with quotes) meeting the spec; null if no string
 * can. Throws RegexError when the constraints need too large an automaton.
 */
export function stringExpr(spec: StringSpec, b: RuleBuilder, hint: string): Expr | null {
  const { minLength: min, maxLength: max, regexes } = spec;
  if (max !== null && min > max) return null;
  if (regexes.length === 0) {
    if (min === 0 && max === null) return anyString(b);
    return seq(QUOTE, boundedRepeat(stringChar(b), min, max), QUOTE);
  }
  const encode = (set: cs.CharSet) => {
    const e = encodeJsonSet(set);
    if (e === null || e.kind !== "alt") return e;
    return b.rule(cs.equal(cs.intersect(set, cs.ANY_CHAR), cs.ANY_CHAR) ? "char-any" : `${hint}-char`, e);
  };
  if (regexes.length === 1) {
    // One regex whose own lengths already respect the limits: translate the
    // tree directly (compact and readable).
    const [lo, hi] = lengthRange(regexes[0]!);
    if (lo >= min && (max === null || (hi !== null && hi <= max))) {
      const body = regexNodeToExpr(regexes[0]!, { encodeSet: encode, factor: (e) => b.rule(`${hint}-part`, e) });
      return body === null ? null : seq(QUOTE, body, QUOTE);
    }
  }
  // Otherwise intersect everything in one automaton; its states become rules.
  const dfa = productDfa(regexes, { minLength: min, maxLength: max });
  if (dfa === null) return null;
  const m = minimize(dfa);
  const names = m.states.map((st, i) => (i > 0 && st.edges.length === 0 ? "" : b.reserve(`${hint}-s${i}`)));
  // A state that can only stop is written inline as "nothing follows".
  const next = (to: number): Expr => (m.states[to]!.edges.length === 0 ? EMPTY : ref(names[to]!));
  m.states.forEach((s, i) => {
    if (i > 0 && s.edges.length === 0) return;
    const alts: Expr[] = [];
    for (const e of s.edges) {
      const enc = encode(e.set);
      if (enc) alts.push(seq(enc, next(e.to)));
    }
    if (s.accept) alts.push(EMPTY);
    b.define(names[i]!, alt(...alts));
  });
  return seq(QUOTE, ref(names[0]!), QUOTE);
}

interface Trie {
  end: boolean;
  next: Map<number, Trie>;
}

/**
 * A JSON string whose decoded value is none of `keys`. Characters are
 * written canonically (one spelling each), otherwise "\u0061" would be a
 * second way to spell a declared key "a".
 */
export function stringExcluding(keys: string[], b: RuleBuilder): Expr {
  if (keys.length === 0) return anyString(b);
  const root: Trie = { end: false, next: new Map() };
  for (const k of keys) {
    let t = root;
    for (const ch of k) {
      const cp = ch.codePointAt(0)!;
      let n = t.next.get(cp);
      if (!n) {
        n = { end: false, next: new Map() };
        t.next.set(cp, n);
      }
      t = n;
    }
    t.end = true;
  }
  const anyChar = b.fixed("key-char", () => encodeJsonSet(cs.ANY_CHAR, true)!);
  const build = (t: Trie): Expr => {
    const alts: Expr[] = [];
    if (!t.end) alts.push(EMPTY);
    for (const [cp, child] of t.next) alts.push(seq(encodeJsonSet(cs.single(cp), true)!, build(child)));
    const others = encodeJsonSet(
      cs.subtract(cs.ANY_CHAR, cs.normalize([...t.next.keys()].map((c) => [c, c] as [number, number]))),
      true,
    );
    if (others) alts.push(seq(others, star(anyChar)));
    return alt(...alts);
  };
  return b.rule("other-key", seq(QUOTE, build(root), QUOTE));
}
