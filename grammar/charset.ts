// Sets of Unicode code points as sorted, disjoint, non-adjacent inclusive
// ranges. Used by the regex translator and the JSON string encoders.

import type { CodeRange } from "./gbnf/ast.ts";

export const MAX_CP = 0x10ffff;

export type CharSet = readonly CodeRange[];

export function normalize(ranges: readonly CodeRange[]): CodeRange[] {
  const sorted = ranges
    .filter(([a, b]) => a <= b)
    .map(([a, b]) => [a, b] as CodeRange)
    .sort((x, y) => x[0] - y[0]);
  const out: CodeRange[] = [];
  for (const r of sorted) {
    const last = out[out.length - 1];
    if (last && r[0] <= last[1] + 1) last[1] = Math.max(last[1], r[1]);
    else out.push(r);
  }
  return out;
}

export function single(cp: number): CharSet {
  return [[cp, cp]];
}

export function range(lo: number, hi: number): CharSet {
  return [[lo, hi]];
}

export function union(...sets: CharSet[]): CharSet {
  return normalize(sets.flat());
}

export function complement(s: CharSet): CharSet {
  const out: CodeRange[] = [];
  let next = 0;
  for (const [a, b] of s) {
    if (a > next) out.push([next, a - 1]);
    next = b + 1;
  }
  if (next <= MAX_CP) out.push([next, MAX_CP]);
  return out;
}

export function intersect(a: CharSet, b: CharSet): CharSet {
  const out: CodeRange[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    const lo = Math.max(a[i]![0], b[j]![0]);
    const hi = Math.min(a[i]![1], b[j]![1]);
    if (lo <= hi) out.push([lo, hi]);
    if (a[i]![1] < b[j]![1]) i++;
    else j++;
  }
  return out;
}

export function subtract(a: CharSet, b: CharSet): CharSet {
  return intersect(a, complement(b));
}

export function isEmptySet(s: CharSet): boolean {
  return s.length === 0;
}

export function has(s: CharSet, cp: number): boolean {
  for (const [a, b] of s) {
    if (cp < a) return false;
    if (cp <= b) return true;
  }
  return false;
}

export function size(s: CharSet): number {
  return s.reduce((n, [a, b]) => n + b - a + 1, 0);
}

export function equal(a: CharSet, b: CharSet): boolean {
  return a.length === b.length && a.every((r, i) => r[0] === b[i]![0] && r[1] === b[i]![1]);
}

export function key(s: CharSet): string {
  return s.map(([a, b]) => (a === b ? `${a}` : `${a}-${b}`)).join(",");
}

/** UTF-16 surrogates never appear as characters in UTF-8 text. */
export const SURROGATES: CharSet = [[0xd800, 0xdfff]];

/** Every character a model can emit. */
export const ANY_CHAR: CharSet = complement(SURROGATES);

export const DIGIT: CharSet = [[0x30, 0x39]];
export const WORD: CharSet = normalize([
  [0x30, 0x39],
  [0x41, 0x5a],
  [0x5f, 0x5f],
  [0x61, 0x7a],
]);
/** ECMAScript \s: WhiteSpace and LineTerminator. */
export const SPACE: CharSet = normalize([
  [0x09, 0x0d],
  [0x20, 0x20],
  [0xa0, 0xa0],
  [0x1680, 0x1680],
  [0x2000, 0x200a],
  [0x2028, 0x2029],
  [0x202f, 0x202f],
  [0x205f, 0x205f],
  [0x3000, 0x3000],
  [0xfeff, 0xfeff],
]);
/** What ECMAScript `.` matches (without the s flag). */
export const DOT: CharSet = subtract(ANY_CHAR, [
  [0x0a, 0x0a],
  [0x0d, 0x0d],
  [0x2028, 0x2029],
]);

/**
 * Split several sets into disjoint atoms such that each input set is a union
 * of atoms. Used to build deterministic automata over character classes.
 */
export function partition(sets: CharSet[]): CharSet[] {
  const points = new Set<number>();
  for (const s of sets)
    for (const [a, b] of s) {
      points.add(a);
      points.add(b + 1);
    }
  const bounds = [...points].sort((x, y) => x - y);
  const atoms = new Map<string, CodeRange[]>();
  for (let i = 0; i + 1 < bounds.length; i++) {
    const lo = bounds[i]!;
    const hi = bounds[i + 1]! - 1;
    // Signature: which input sets contain this elementary interval.
    let sig = "";
    let any = false;
    for (const s of sets) {
      const inside = has(s, lo);
      sig += inside ? "1" : "0";
      any ||= inside;
    }
    if (!any) continue;
    const list = atoms.get(sig) ?? [];
    list.push([lo, hi]);
    atoms.set(sig, list);
  }
  return [...atoms.values()].map(normalize);
}
