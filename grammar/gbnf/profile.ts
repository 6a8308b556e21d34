// Step profiles for ./cost.ts: how many paths llama.cpp's
// llama_grammar_advance_stack explores from a place in the grammar, over one
// character and over the next, computed bottom-up with memoisation.
//
// A profile of a region (a symbol, a sequence suffix, a rule) counts paths
// as llama.cpp walks them, one per combination of alternatives:
//   f  paths from the region's start to a character inside it,
//   e  paths through it that read nothing (they go on after it),
//   g  for each path to a character inside it: the paths from just after
//      that character to the next one inside it (two-character paths),
//   k  for each path to a character inside it: the paths from just after
//      that character through its end,
//   r  rule references expanded on the way (llama.cpp recurses once each),
//   h  continuations pushed on the way (each path copies the stack).
// `then` composes a region with what follows it. g matters because every
// stack alive after a character is advanced again: `("x" | "x" | ...)*` with
// n alternatives has n paths per step, but n x (n + 1) per two.
//
// Rules are profiled in two passes, callees first along left edges: f, e,
// r and h need only the symbols a rule can start with, g and k also the
// f and e of what follows them, known once the first pass is done.

import type { Expr } from "./ast.ts";
import { alternatives, groupAlternatives, isRule, repeatsGroup, symbols } from "./llama-shape.ts";
import type { GrammarLimits } from "../limits.ts";

export interface Prof {
  f: number;
  e: number;
  g: number;
  k: number;
  r: number;
  h: number;
}

export const EMPTY_PROF: Readonly<Prof> = { f: 0, e: 1, g: 0, k: 0, r: 0, h: 0 };
const CHAR_PROF: Readonly<Prof> = { f: 1, e: 0, g: 0, k: 1, r: 0, h: 1 };

const same = (a: Prof, b: Prof) =>
  a.f === b.f && a.e === b.e && a.g === b.g && a.k === b.k && a.r === b.r && a.h === b.h;

export class Profiler {
  /**
   * Values are clamped just above their limits: the arithmetic is monotone, so over/under stays right and nothing
   * overflows.
   */
  readonly cap: Readonly<Prof>;
  private readonly first = new Map<string, Prof>();
  private readonly full = new Map<string, Prof>();
  private readonly firstMemo = new Map<Expr, Prof>();
  private readonly fullMemo = new Map<Expr, Prof>();

  constructor(limits: GrammarLimits) {
    const paths = limits.maxStacks + 1;
    const pairs = limits.maxStackPairs + 1;
    this.cap = { f: paths, e: paths, g: pairs, k: pairs, r: limits.maxChain + 1, h: limits.maxGrowth + 1 };
  }

  /**
   * Whether a value reached its clamp: every path to this place is then over
   * a limit, so the loops below need not go on (they end within a few dozen
   * rounds either way: settled, or doubling into the clamp).
   */
  private saturated(p: Prof): boolean {
    const c = this.cap;
    return p.f >= c.f || p.e >= c.e || p.g >= c.g || p.k >= c.k || p.r >= c.r || p.h >= c.h;
  }

  private clamp(p: Prof): Prof {
    const c = this.cap;
    return {
      f: Math.min(p.f, c.f),
      e: Math.min(p.e, c.e),
      g: Math.min(p.g, c.g),
      k: Math.min(p.k, c.k),
      r: Math.min(p.r, c.r),
      h: Math.min(p.h, c.h),
    };
  }

  /** `a` (pushing a continuation for what follows when `push`), then `b`. */
  then(a: Prof, b: Prof, push: boolean): Prof {
    const through = a.e > 0;
    return this.clamp({
      f: a.f + a.e * b.f,
      e: a.e * b.e,
      g: a.g + a.k * b.f + a.e * b.g,
      k: a.k * b.e + a.e * b.k,
      r: Math.max(a.r, through ? a.r + b.r : 0),
      h: Math.max(a.h + (push ? 1 : 0), through ? b.h : 0),
    });
  }

  /** A rule with these alternatives, entered through one reference. */
  private ruleOf(alts: Prof[]): Prof {
    const p = { f: 0, e: 0, g: 0, k: 0, r: 0, h: 0 };
    for (const a of alts) {
      p.f += a.f;
      p.e += a.e;
      p.g += a.g;
      p.k += a.k;
      p.r = Math.max(p.r, a.r);
      p.h = Math.max(p.h, a.h);
    }
    p.r += 1;
    return this.clamp(p);
  }

  /** First pass for one rule: every rule it starts with has had its first pass. */
  defineFirst(name: string, body: Expr): void {
    this.first.set(name, this.ruleOf(alternatives(body).map((a) => this.sequence(symbols(a), false))));
  }

  /** Second pass for one rule: every rule has had its first pass, those it starts with their second. */
  defineFull(name: string, body: Expr): void {
    this.full.set(name, this.ruleOf(alternatives(body).map((a) => this.sequence(symbols(a), true))));
  }

  /**
   * A sequence, left to right, as far as paths reach without a character.
   * In the second pass, g and k also need f and e of what follows each
   * symbol: first-pass suffix values, right to left.
   */
  private sequence(items: Expr[], full: boolean): Prof {
    const c = this.cap;
    let suffixF: number[] = [];
    let suffixE: number[] = [];
    if (full) {
      suffixF = new Array<number>(items.length + 1);
      suffixE = new Array<number>(items.length + 1);
      suffixF[items.length] = 0;
      suffixE[items.length] = 1;
      for (let i = items.length - 1; i >= 0; i--) {
        const s = this.symbol(items[i]!, false);
        suffixF[i] = Math.min(s.f + s.e * suffixF[i + 1]!, c.f);
        suffixE[i] = Math.min(s.e * suffixE[i + 1]!, c.e);
      }
    }
    const p = { f: 0, e: 1, g: 0, k: 0, r: 0, h: 0 };
    let depth = 0; // references expanded by the symbols passed over empty
    for (let i = 0; i < items.length && p.e > 0; i++) {
      const s = this.symbol(items[i]!, full);
      p.f = Math.min(p.f + p.e * s.f, c.f);
      if (full) {
        p.g = Math.min(p.g + p.e * (s.g + s.k * suffixF[i + 1]!), c.g);
        p.k = Math.min(p.k + p.e * s.k * suffixE[i + 1]!, c.k);
      }
      p.r = Math.max(p.r, Math.min(depth + s.r, c.r));
      p.h = Math.max(p.h, s.h + (isRule(items[i]!) && i < items.length - 1 ? 1 : 0));
      depth = Math.min(depth + s.r, c.r);
      p.e = Math.min(p.e * s.e, c.e);
    }
    return p;
  }

  /** A symbol's profile, from the given pass. */
  symbol(e: Expr, full = true): Prof {
    switch (e.kind) {
      case "lit":
        return e.value === "" ? EMPTY_PROF : CHAR_PROF;
      case "class":
      case "any":
      case "token":
        return CHAR_PROF;
      case "ref": {
        const p = (full ? this.full : this.first).get(e.name);
        if (!p) throw new Error(`rule ${e.name} profiled out of order`);
        return p;
      }
      default: {
        const memo = full ? this.fullMemo : this.firstMemo;
        const known = memo.get(e);
        if (known) return known;
        const p = e.kind === "repeat" ? this.repeat(e, full).whole : this.group(alternatives(e), full);
        memo.set(e, p);
        return p;
      }
    }
  }

  private group(alts: Expr[], full: boolean): Prof {
    return this.ruleOf(alts.map((a) => this.sequence(symbols(a), full)));
  }

  /**
   * x{m,n} as llama.cpp expands it: the whole, and what can follow one copy
   * of x inside it (after the first inline copy; after x in S'(n - m)).
   */
  repeat(e: Expr & { kind: "repeat" }, full = true): { whole: Prof; afterCopy: Prof[] } {
    if (e.max === 0) return { whole: EMPTY_PROF, afterCopy: [] };
    const s = repeatsGroup(e) ? this.group(groupAlternatives(e.body), full) : this.symbol(e.body, full);
    const push = isRule(e.body) || repeatsGroup(e);
    const optional = e.max === null ? null : e.max - e.min;
    const chain = this.chain(s, optional, push);
    const afterCopy: Prof[] = [];
    if (e.min > 0) afterCopy.push(this.copies(s, e.min - 1, chain, push));
    if (optional === null) afterCopy.push(chain);
    else if (optional > 0) afterCopy.push(this.chain(s, optional - 1, push));
    return { whole: this.copies(s, e.min, chain, push), afterCopy };
  }

  /** `n` copies of `s` in front of `tail`. */
  private copies(s: Prof, n: number, tail: Prof, push: boolean): Prof {
    if (n === 0) return tail;
    if (s.e === 1) {
      // Closed form of the loop below (each copy can be skipped one way).
      return this.clamp({
        f: n * s.f + tail.f,
        e: tail.e,
        g: n * s.g + s.k * (s.f * ((n * (n - 1)) / 2) + n * tail.f) + tail.g,
        k: n * s.k * tail.e + tail.k,
        r: n * s.r + tail.r,
        h: Math.max(s.h + (push ? 1 : 0), tail.h),
      });
    }
    // e = 0 settles after two copies; e >= 2 doubles into the clamp.
    let p = tail;
    for (let i = 0; i < n; i++) {
      const q = this.then(s, p, push);
      if (same(p, q)) break;
      p = q;
      if (this.saturated(p)) break;
    }
    return p;
  }

  /** The rule S'(n) ::= x S'(n-1) | for the optional copies (n null: S' ::= x S' | ). */
  private chain(s: Prof, n: number | null, push: boolean): Prof {
    if (n === 0) return EMPTY_PROF;
    if (n !== null && s.e === 1) {
      // Closed form of the loop below.
      return this.clamp({
        f: n * s.f,
        e: n + 1,
        g: n * s.g + s.k * s.f * ((n * (n - 1)) / 2),
        k: (s.k * n * (n + 1)) / 2,
        r: n * (1 + s.r),
        h: s.h + (push ? 1 : 0),
      });
    }
    // Unbounded, x cannot be empty (that is left recursion, refused before
    // this runs): S' settles in three rounds, like a bounded chain with e = 0.
    let p: Prof = EMPTY_PROF;
    for (let i = 1; n === null || i <= n; i++) {
      const q = this.ruleOf([this.then(s, p, push), EMPTY_PROF]);
      if (same(p, q)) break;
      p = q;
      if (this.saturated(p)) break;
    }
    return p;
  }
}
