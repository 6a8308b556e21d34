// Exact numeric range grammars.
//
// Integers: digit-by-digit range grammars over decimal strings without
// leading zeros (BigInt, so any size is exact); "-0" is never produced.
//
// Numbers with bounds are written without an exponent, which makes the value
// of the text a plain decimal that can be compared digit by digit with the
// bound (also written as an exact decimal). Inclusive bounds are then exact
// for the validator too, because rounding decimal text to a double is
// monotonic and the bound is itself the double it denotes. Exclusive bounds
// need more: a decimal just below the bound may round *onto* it. When an
// exclusive bound is present we therefore cap the number at 15 significant
// digits (integer digits + fraction digits ≤ 15), so distinct values stay
// distinct doubles and "below the bound" survives rounding.

import type { Expr } from "../gbnf/ast.ts";
import { EMPTY, alt, chars, cls, lit, opt, repeat, seq } from "../gbnf/ast.ts";

/** An exact decimal: sign, integer part, fraction digits (no trailing zeros). */
export interface Dec {
  neg: boolean;
  int: bigint;
  frac: string;
}

/** The exact decimal value of a finite double, as its shortest round-trip text denotes. */
export function toDec(x: number): Dec {
  if (!Number.isFinite(x)) throw new Error(`not a finite number: ${x}`);
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(String(x));
  if (!m) throw new Error(`cannot parse number ${x}`);
  const digits = m[2]! + (m[3] ?? "");
  const exp = Number(m[4] ?? "0") - (m[3] ?? "").length;
  let int: string;
  let frac: string;
  if (exp >= 0) {
    int = digits + "0".repeat(exp);
    frac = "";
  } else {
    const point = digits.length + exp;
    if (point <= 0) {
      int = "0";
      frac = "0".repeat(-point) + digits;
    } else {
      int = digits.slice(0, point);
      frac = digits.slice(point);
    }
  }
  frac = frac.replace(/0+$/, "");
  const i = BigInt(int);
  return { neg: m[1] === "-" && (i !== 0n || frac !== ""), int: i, frac };
}

export function cmpDec(a: Dec, b: Dec): number {
  if (a.neg !== b.neg) return a.neg ? -1 : 1;
  const sign = a.neg ? -1 : 1;
  if (a.int !== b.int) return (a.int < b.int ? -1 : 1) * sign;
  const n = Math.max(a.frac.length, b.frac.length);
  const fa = a.frac.padEnd(n, "0");
  const fb = b.frac.padEnd(n, "0");
  return (fa < fb ? -1 : fa > fb ? 1 : 0) * sign;
}

const DIGIT = chars(["0", "9"]);
const NONZERO = chars(["1", "9"]);

function digitClass(from: number, to: number): Expr {
  return from === to ? lit(String(from)) : cls([[48 + from, 48 + to]]);
}

// Digit strings of the same length as lo/hi, between them (inclusive).
// tl/th: still equal to lo's/hi's prefix so far.
function between(lo: string, hi: string, i: number, tl: boolean, th: boolean): Expr {
  const rem = lo.length - i;
  if (rem === 0) return EMPTY;
  if (!tl && !th) return repeat(DIGIT, rem, rem);
  const dl = tl ? Number(lo[i]) : 0;
  const dh = th ? Number(hi[i]) : 9;
  if (tl && th && dl === dh) return seq(lit(String(dl)), between(lo, hi, i + 1, true, true));
  // A bound whose remaining digits are all 0 (low) or all 9 (high) does not
  // constrain the rest, so its digit can join the free middle range.
  const loFree = !tl || /^0*$/.test(lo.slice(i + 1));
  const hiFree = !th || /^9*$/.test(hi.slice(i + 1));
  const alts: Expr[] = [];
  let from = dl;
  let to = dh;
  if (!loFree) {
    alts.push(seq(lit(String(dl)), between(lo, hi, i + 1, true, false)));
    from = dl + 1;
  }
  let hiAlt: Expr | undefined;
  if (!hiFree) {
    hiAlt = seq(lit(String(dh)), between(lo, hi, i + 1, false, true));
    to = dh - 1;
  }
  if (from <= to) alts.push(seq(digitClass(from, to), repeat(DIGIT, rem - 1, rem - 1)));
  if (hiAlt) alts.push(hiAlt);
  return alt(...alts);
}

const pow10 = (n: number): bigint => 10n ** BigInt(n);

/** Decimal strings (no leading zeros) of the integers in [a, b]; b null = unbounded. a ≥ 0. */
export function uintRange(a: bigint, b: bigint | null): Expr | null {
  if (b !== null && a > b) return null;
  const la = a.toString().length;
  const topOfLa = (pow10(la) - 1n).toString();
  if (b === null) {
    return alt(between(a.toString(), topOfLa, 0, true, true), seq(NONZERO, repeat(DIGIT, la, null)));
  }
  const lb = b.toString().length;
  if (la === lb) return between(a.toString(), b.toString(), 0, true, true);
  const alts: Expr[] = [between(a.toString(), topOfLa, 0, true, true)];
  if (lb - la >= 2) alts.push(seq(NONZERO, repeat(DIGIT, la, lb - 2)));
  alts.push(between(pow10(lb - 1).toString(), b.toString(), 0, true, true));
  return alt(...alts);
}

/** Integers in [lo, hi] (null = unbounded side); null if the range is empty. */
export function integerRange(lo: bigint | null, hi: bigint | null): Expr | null {
  if (lo !== null && hi !== null && lo > hi) return null;
  const alts: Expr[] = [];
  if (hi === null || hi >= 0n) {
    const a = lo === null || lo < 0n ? 0n : lo;
    const e = uintRange(a, hi);
    if (e) alts.push(e);
  }
  if (lo === null || lo < 0n) {
    const h = hi === null || hi > -1n ? -1n : hi;
    const e = uintRange(-h, lo === null ? null : -lo);
    if (e) alts.push(seq(lit("-"), e));
  }
  return alts.length ? alt(...alts) : null;
}

// --- Fractions ---------------------------------------------------------------
// A fraction is a digit string s standing for 0.s. Bounds on it are digit
// strings too (f for the low side, g for the high side; "" stands for 0).

interface Low {
  f: string;
  strict: boolean;
}
interface High {
  g: string;
  strict: boolean;
}

/** "0"* [1-9] [0-9]* with at most `cap` digits in all. */
function nonZeroDigits(cap: number | null): Expr | null {
  if (cap === null) return seq(repeat(lit("0"), 0, null), NONZERO, repeat(DIGIT, 0, null));
  if (cap <= 0) return null;
  const alts: Expr[] = [];
  for (let k = 0; k < cap; k++) alts.push(seq(repeat(lit("0"), k, k), NONZERO, repeat(DIGIT, 0, cap - 1 - k)));
  return alt(...alts);
}

/**
 * Digit strings s (length ≤ cap) with lo ≤/< 0.s ≤/< hi. With allowEmpty
 * false the empty string is excluded. Null when no string qualifies.
 */
function fraction(lo: Low | null, hi: High | null, cap: number | null, allowEmpty: boolean): Expr | null {
  const emptyOk =
    allowEmpty && (lo === null || (lo.f === "" && !lo.strict)) && (hi === null || hi.g !== "" || !hi.strict);
  if (cap === 0) return emptyOk ? EMPTY : null;
  // Every e passed here is non-empty, so "e?" adds exactly the empty string.
  const withEmpty = (e: Expr | null): Expr | null => (e === null ? (emptyOk ? EMPTY : null) : emptyOk ? opt(e) : e);
  const dig = (min: number) => repeat(DIGIT, min, cap);
  // Closed forms once neither bound has digits left: the rest is just
  // "anything", "not all zeros" or "all zeros".
  if ((lo === null || lo.f === "") && (hi === null || hi.g === "")) {
    const positive = lo?.strict;
    if (hi !== null) {
      if (hi.strict || positive) return emptyOk ? EMPTY : null; // s < 0 or 0 < s ≤ 0
      return withEmpty(repeat(lit("0"), 1, cap));
    }
    return withEmpty(positive ? nonZeroDigits(cap) : dig(1));
  }
  const groups = new Map<string, { digits: number[]; lo: Low | null; hi: High | null }>();
  for (let d = 0; d <= 9; d++) {
    let nlo: Low | null = null;
    if (lo !== null) {
      const f1 = lo.f === "" ? 0 : Number(lo.f[0]);
      if (d < f1) continue;
      if (d === f1) nlo = { f: lo.f.slice(1), strict: lo.strict };
    }
    let nhi: High | null = null;
    if (hi !== null) {
      const g1 = hi.g === "" ? 0 : Number(hi.g[0]);
      if (d > g1) continue;
      if (d === g1) nhi = { g: hi.g.slice(1), strict: hi.strict };
    }
    const k = JSON.stringify([nlo, nhi]);
    const grp = groups.get(k) ?? { digits: [], lo: nlo, hi: nhi };
    grp.digits.push(d);
    groups.set(k, grp);
  }
  const alts: Expr[] = [];
  for (const g of groups.values()) {
    const rest = fraction(g.lo, g.hi, cap === null ? null : cap - 1, true);
    if (rest === null) continue;
    const first =
      g.digits.length === 1 ? lit(String(g.digits[0])) : digitClass(g.digits[0]!, g.digits[g.digits.length - 1]!);
    alts.push(seq(first, rest));
  }
  return withEmpty(alts.length ? alt(...alts) : null);
}

/** The optional ".digits" part under the given bounds; null if impossible. */
function fractionPart(lo: Low | null, hi: High | null, cap: number | null): Expr | null {
  const emptyOk = fraction(lo, hi, 0, true) !== null;
  const digits = cap === 0 ? null : fraction(lo, hi, cap, false);
  if (digits === null) return emptyOk ? EMPTY : null;
  const part = seq(lit("."), digits);
  return emptyOk ? opt(part) : part;
}

export interface Bound {
  value: Dec;
  exclusive: boolean;
}

export interface Caps {
  /** Most integer digits. */
  intDigits: number;
  /** Most fraction digits. */
  fracDigits: number;
}

interface MagLow {
  int: bigint;
  tail: Low;
}
interface MagHigh {
  int: bigint;
  tail: High | null;
}

// Non-negative magnitudes m (written without sign) with lo ≤ m ≤ hi.
function magnitude(lo: MagLow, hi: MagHigh | null, caps: Caps | null): Expr | null {
  const fracCap = caps ? caps.fracDigits : null;
  if (caps) {
    const capInt = pow10(caps.intDigits) - 1n;
    if (lo.int > capInt) return null;
    if (hi === null || hi.int > capInt) hi = { int: capInt, tail: null };
  }
  const anyFrac = fractionPart(null, null, fracCap)!;
  if (hi === null) {
    const alts: Expr[] = [];
    const fl = fractionPart(lo.tail, null, fracCap);
    if (fl) alts.push(seq(lit(lo.int.toString()), fl));
    alts.push(seq(uintRange(lo.int + 1n, null)!, anyFrac));
    return alt(...alts);
  }
  if (lo.int > hi.int) return null;
  if (lo.int === hi.int) {
    const f = fractionPart(lo.tail, hi.tail, fracCap);
    return f === null ? null : seq(lit(lo.int.toString()), f);
  }
  const alts: Expr[] = [];
  const fl = fractionPart(lo.tail, null, fracCap);
  if (fl) alts.push(seq(lit(lo.int.toString()), fl));
  const mid = uintRange(lo.int + 1n, hi.int - 1n);
  if (mid) alts.push(seq(mid, anyFrac));
  const fh = fractionPart(null, hi.tail, fracCap);
  if (fh) alts.push(seq(lit(hi.int.toString()), fh));
  return alts.length ? alt(...alts) : null;
}

/**
 * Decimal numbers (no exponent) x with lo ≤/< x ≤/< hi; null if none.
 * With caps the integer and fraction digit counts are limited.
 */
export function decimalRange(lo: Bound | null, hi: Bound | null, caps: Caps | null): Expr | null {
  if (lo && hi) {
    const c = cmpDec(lo.value, hi.value);
    if (c > 0 || (c === 0 && (lo.exclusive || hi.exclusive))) return null;
  }
  const alts: Expr[] = [];
  // x ≥ 0, written without a sign.
  const zero: Dec = { neg: false, int: 0n, frac: "" };
  if (hi === null || cmpDec(hi.value, zero) >= 0) {
    const mlo: MagLow =
      lo === null || lo.value.neg
        ? { int: 0n, tail: { f: "", strict: false } }
        : { int: lo.value.int, tail: { f: lo.value.frac, strict: lo.exclusive } };
    const mhi: MagHigh | null =
      hi === null ? null : { int: hi.value.int, tail: { g: hi.value.frac, strict: hi.exclusive } };
    const e = magnitude(mlo, mhi, caps);
    if (e) alts.push(e);
  }
  // x < 0, written "-" m with m = -x > 0 (so "-0" never appears).
  if (lo === null || lo.value.neg) {
    const mlo: MagLow = hi?.value.neg
      ? { int: hi.value.int, tail: { f: hi.value.frac, strict: hi.exclusive } }
      : { int: 0n, tail: { f: "", strict: true } };
    const mhi: MagHigh | null =
      lo === null ? null : { int: lo.value.int, tail: { g: lo.value.frac, strict: lo.exclusive } };
    const e = magnitude(mlo, mhi, caps);
    if (e) alts.push(seq(lit("-"), e));
  }
  return alts.length ? alt(...alts) : null;
}
