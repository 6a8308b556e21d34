// GBNF building blocks for JSON text: whitespace, strings, numbers and the
// generic "any JSON value".

import type { CharSet } from "../charset.ts";
import * as cs from "../charset.ts";
import type { Expr } from "../gbnf/ast.ts";
import { EMPTY, alt, chars, cls, lit, opt, repeat, seq, star } from "../gbnf/ast.ts";
import type { RuleBuilder } from "./builder.ts";

/**
 * Whitespace between JSON tokens: at most one newline followed by at most
 * this many spaces/tabs. Enough for pretty-printed output ten levels deep,
 * and a model cannot loop on whitespace forever.
 */
export const MAX_INDENT = 20;

/** Whitespace in a gap where compact JSON has none (after `{`, `[`, a key, a value). */
export function ws(b: RuleBuilder): Expr {
  return b.layout === "compact" ? EMPTY : prettyWs(b);
}

/** Whitespace after `:` and `,`: one optional space in compact JSON. */
export function sepWs(b: RuleBuilder): Expr {
  return b.layout === "compact" ? b.fixed("sp", () => opt(lit(" "))) : prettyWs(b);
}

function prettyWs(b: RuleBuilder): Expr {
  return b.fixed("ws", () => seq(opt(lit("\n")), repeat(chars(" ", "\t"), 0, MAX_INDENT)));
}

const HEX = chars(["0", "9"], ["a", "f"], ["A", "F"]);
const RAW_STRING_CHAR = cls(
  [
    [0x22, 0x22],
    [0x5c, 0x5c],
    [0x00, 0x1f],
  ],
  true,
);

/**
 * One character inside a JSON string, in any of JSON's spellings. \u escapes
 * of UTF-16 surrogates are left out: a pair of them would be one character
 * to a validator but two to the grammar, which breaks exact length limits.
 */
export function stringChar(b: RuleBuilder): Expr {
  return b.fixed("char", () => {
    const hex = b.fixed("hex", () => HEX);
    const nonSurrogate = alt(
      seq(chars(["0", "9"], ["a", "c"], ["A", "C"], ["e", "f"], ["E", "F"]), repeat(hex, 3, 3)),
      seq(chars("d", "D"), chars(["0", "7"]), repeat(hex, 2, 2)),
    );
    return alt(
      RAW_STRING_CHAR,
      seq(lit("\\"), alt(chars('"', "\\", "/", "b", "f", "n", "r", "t"), seq(lit("u"), nonSurrogate))),
    );
  });
}

export function anyString(b: RuleBuilder): Expr {
  return b.fixed("string", () => seq(lit('"'), star(stringChar(b)), lit('"')));
}

const DIGIT = chars(["0", "9"]);
const NONZERO = chars(["1", "9"]);

// Digit bounds on numbers no schema bound limits (grammar/README.md): a JSON
// number of more than 16 significant digits cannot round-trip through a
// double, and without a bound a sampler that never picks a non-digit (a
// random or weak model) writes digits until the reply's cap. llama.cpp's own
// schema converter bounds integer and fraction parts the same way.
/** Most integer digits and most fraction digits of a number no bound limits. */
export const MAX_NUMBER_DIGITS = 16;
/** Most exponent digits (a double's exponent needs three). */
export const MAX_EXPONENT_DIGITS = 3;

/** "0" or a digit string without leading zeros, at most MAX_NUMBER_DIGITS long. */
function integralPart(): Expr {
  return alt(lit("0"), seq(NONZERO, repeat(DIGIT, 0, MAX_NUMBER_DIGITS - 1)));
}

export function anyInteger(b: RuleBuilder): Expr {
  // "-0" is left out: it is a legal spelling of 0 but never a useful one.
  return b.fixed("integer", () => alt(lit("0"), seq(opt(lit("-")), NONZERO, repeat(DIGIT, 0, MAX_NUMBER_DIGITS - 1))));
}

export function anyNumber(b: RuleBuilder): Expr {
  return b.fixed("number", () =>
    seq(
      opt(lit("-")),
      integralPart(),
      opt(seq(lit("."), repeat(DIGIT, 1, MAX_NUMBER_DIGITS))),
      opt(seq(chars("e", "E"), opt(chars("-", "+")), repeat(DIGIT, 1, MAX_EXPONENT_DIGITS))),
    ),
  );
}

export function booleanExpr(b: RuleBuilder): Expr {
  return b.fixed("boolean", () => alt(lit("true"), lit("false")));
}

export function nullExpr(): Expr {
  return lit("null");
}

/** Any JSON value. */
export function anyValue(b: RuleBuilder): Expr {
  return b.fixed("value", () => alt(anyObject(b), anyArray(b), anyString(b), anyNumber(b), booleanExpr(b), nullExpr()));
}

/** Any JSON object (what response_format json_object asks for). */
export function anyObject(b: RuleBuilder): Expr {
  return b.fixed("object", () => {
    const member = b.fixed("member", () => seq(anyString(b), ws(b), lit(":"), sepWs(b), anyValue(b), ws(b)));
    return seq(lit("{"), ws(b), opt(seq(member, star(seq(lit(","), sepWs(b), member)))), lit("}"));
  });
}

export function anyArray(b: RuleBuilder): Expr {
  return b.fixed("array", () => {
    const item = b.fixed("item", () => seq(anyValue(b), ws(b)));
    return seq(lit("["), ws(b), opt(seq(item, star(seq(lit(","), sepWs(b), item)))), lit("]"));
  });
}

const SHORT_ESCAPES = new Map<number, string>([
  [0x08, "\\b"],
  [0x09, "\\t"],
  [0x0a, "\\n"],
  [0x0c, "\\f"],
  [0x0d, "\\r"],
]);
const RAW_OK: CharSet = cs.subtract(cs.ANY_CHAR, [
  [0x00, 0x1f],
  [0x22, 0x22],
  [0x5c, 0x5c],
]);

function hexDigitSet(nibbles: number[], canonical: boolean): Expr {
  const ranges: [number, number][] = [];
  for (const n of nibbles) {
    const h = n.toString(16);
    ranges.push([h.charCodeAt(0), h.charCodeAt(0)]);
    if (!canonical && n >= 10) ranges.push([h.toUpperCase().charCodeAt(0), h.toUpperCase().charCodeAt(0)]);
  }
  return ranges.length === 1 ? lit(String.fromCharCode(ranges[0]![0])) : cls(cs.normalize(ranges));
}

/**
 * GBNF for one character from `set`, written as it appears inside a JSON
 * string: raw where JSON allows it, otherwise escaped. With `canonical` each
 * character has exactly one spelling (what JSON.stringify writes), which is
 * needed where distinct spellings of one key must not slip through.
 * Returns null when the set has no character a model can emit.
 */
export function encodeJsonSet(set: CharSet, canonical = false): Expr | null {
  const s = cs.intersect(set, cs.ANY_CHAR);
  if (s.length === 0) return null;
  const alts: Expr[] = [];
  const raw = cs.intersect(s, RAW_OK);
  if (raw.length) {
    if (cs.equal(raw, RAW_OK)) alts.push(RAW_STRING_CHAR);
    else if (raw.length === 1 && raw[0]![0] === raw[0]![1]) alts.push(lit(String.fromCodePoint(raw[0]![0])));
    else {
      // Prefer the shorter of [..] and [^..] spellings.
      const comp = cs.subtract(cs.complement(raw), cs.SURROGATES);
      alts.push(
        comp.length < raw.length
          ? cls(
              comp.map(([a, b]) => [a, b]),
              true,
            )
          : cls(raw.map(([a, b]) => [a, b])),
      );
    }
  }
  if (cs.has(s, 0x22)) alts.push(lit('\\"'));
  if (cs.has(s, 0x5c)) alts.push(lit("\\\\"));
  if (!canonical && cs.has(s, 0x2f)) alts.push(lit("\\/"));
  const low: number[] = [];
  const high: number[] = [];
  for (let c = 0; c < 0x20; c++) {
    if (!cs.has(s, c)) continue;
    const short = SHORT_ESCAPES.get(c);
    if (short) alts.push(lit(short));
    else (c < 0x10 ? low : high).push(c & 0xf);
  }
  if (low.length) alts.push(seq(lit("\\u000"), hexDigitSet(low, canonical)));
  if (high.length) alts.push(seq(lit("\\u001"), hexDigitSet(high, canonical)));
  return alt(...alts);
}

/** A JSON string literal for exactly this value (JSON.stringify's spelling). */
export function jsonStringLiteral(s: string): Expr {
  return lit(JSON.stringify(s));
}

interface TrieNode {
  next: Map<string, TrieNode>;
  end: boolean;
}

/**
 * Exactly these literal texts, as a trie: shared prefixes written once and
 * alternatives only where the texts part. To llama.cpp's grammar engine an
 * enum of n strings is then a handful of parse stacks per character instead
 * of n (all n alternatives start with the same quote).
 */
export function literalTrie(texts: string[]): Expr {
  const root: TrieNode = { next: new Map(), end: false };
  for (const t of texts) {
    let node = root;
    for (const ch of t) {
      let child = node.next.get(ch);
      if (!child) node.next.set(ch, (child = { next: new Map(), end: false }));
      node = child;
    }
    node.end = true;
  }
  const emit = (node: TrieNode): Expr => {
    const alts: Expr[] = node.end ? [EMPTY] : [];
    for (const [ch, child] of node.next) {
      // Runs without a branch become one literal.
      let text = ch;
      let n = child;
      while (!n.end && n.next.size === 1) {
        const [c, only] = n.next.entries().next().value!;
        text += c;
        n = only;
      }
      alts.push(seq(lit(text), emit(n)));
    }
    return alt(...alts);
  };
  return emit(root);
}

/** Grammar for exactly this JSON value, allowing whitespace between tokens. */
export function jsonValueLiteral(v: unknown, b: RuleBuilder): Expr {
  if (v === null) return lit("null");
  if (typeof v === "boolean") return lit(String(v));
  if (typeof v === "number") return lit(Object.is(v, -0) ? "0" : JSON.stringify(v));
  if (typeof v === "string") return jsonStringLiteral(v);
  if (Array.isArray(v)) {
    if (v.length === 0) return seq(lit("["), ws(b), lit("]"));
    const items = v.map((x, i) => seq(i === 0 ? EMPTY : seq(lit(","), sepWs(b)), jsonValueLiteral(x, b), ws(b)));
    return seq(lit("["), ws(b), ...items, lit("]"));
  }
  if (typeof v === "object") {
    const entries = Object.entries(v as Record<string, unknown>);
    if (entries.length === 0) return seq(lit("{"), ws(b), lit("}"));
    const members = entries.map(([k, x], i) =>
      seq(
        i === 0 ? EMPTY : seq(lit(","), sepWs(b)),
        jsonStringLiteral(k),
        ws(b),
        lit(":"),
        sepWs(b),
        jsonValueLiteral(x, b),
        ws(b),
      ),
    );
    return seq(lit("{"), ws(b), ...members, lit("}"));
  }
  throw new Error(`not a JSON value: ${String(v)}`);
}
