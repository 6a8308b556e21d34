// Test-side random sampler: walks a GBNF grammar choosing alternatives,
// repetition counts and characters with a seeded PRNG, producing strings in
// the grammar's language. Beyond a depth bound it takes the alternative with
// the shallowest derivation, so recursive grammars always terminate. It
// stands in for constrained generation by a model.

import type { Expr, Grammar } from "../../grammar/gbnf/ast.ts";

/** mulberry32 floats in [0, 1): small, seedable, good enough for tests (the fixtures' generator). */
export { uniform as rng } from "../../src/fixtures/prng.ts";
import { uniform as rng } from "../../src/fixtures/prng.ts";

// Characters tried for negated classes and `.`: plenty of JSON-relevant ones.
const POOL = [..." aZz09_-.:/\\\"'{}[],@#%+~\t\n\r\u0001\u001f\u007féß中😀\u2028"].map((c) => c.codePointAt(0)!);

export interface SampleOptions {
  /** Rule depth beyond which the shallowest alternative is taken. */
  maxDepth?: number;
  /** Extra copies beyond the minimum for unbounded repetitions. */
  maxExtra?: number;
}

export class Sampler {
  private readonly rules = new Map<string, Expr>();
  private readonly height = new Map<string, number>();

  constructor(
    g: Grammar,
    private readonly opts: SampleOptions = {},
  ) {
    for (const r of g.rules) this.rules.set(r.name, r.body);
    // height(rule) = fewest nested rule expansions needed to finish it.
    for (const n of this.rules.keys()) this.height.set(n, Infinity);
    let changed = true;
    while (changed) {
      changed = false;
      for (const [n, body] of this.rules) {
        const h = 1 + this.exprHeight(body);
        if (h < this.height.get(n)!) {
          this.height.set(n, h);
          changed = true;
        }
      }
    }
  }

  private exprHeight(e: Expr): number {
    switch (e.kind) {
      case "ref":
        return this.height.get(e.name) ?? Infinity;
      case "seq":
        return Math.max(0, ...e.items.map((x) => this.exprHeight(x)));
      case "alt":
        return Math.min(...e.alts.map((x) => this.exprHeight(x)));
      case "repeat":
        return e.min === 0 ? 0 : this.exprHeight(e.body);
      default:
        return 0;
    }
  }

  sample(seed: number, root = "root"): string {
    const rand = rng(seed);
    const maxDepth = this.opts.maxDepth ?? 12;
    const maxExtra = this.opts.maxExtra ?? 4;
    const out: string[] = [];
    const pickChar = (test: (cp: number) => boolean, ranges?: [number, number][]): number => {
      if (ranges?.length && rand() < 0.7) {
        const [a, b] = ranges[Math.floor(rand() * ranges.length)]!;
        // Stay away from surrogates if a range spans them.
        for (let i = 0; i < 20; i++) {
          const c = a + Math.floor(rand() * (Math.min(b, a + 200) - a + 1));
          if (test(c) && (c < 0xd800 || c > 0xdfff)) return c;
        }
      }
      const options = POOL.filter(test);
      if (options.length) return options[Math.floor(rand() * options.length)]!;
      for (let c = 0x20; c < 0x3000; c++) if (test(c)) return c;
      throw new Error("no character fits the class");
    };
    const walk = (e: Expr, depth: number): void => {
      switch (e.kind) {
        case "lit":
          out.push(e.value);
          return;
        case "any":
          out.push(String.fromCodePoint(pickChar(() => true)));
          return;
        case "class": {
          const inside = (cp: number) => e.ranges.some(([a, b]) => cp >= a && cp <= b);
          const test = (cp: number) => inside(cp) !== e.negated;
          out.push(String.fromCodePoint(pickChar(test, e.negated ? undefined : e.ranges)));
          return;
        }
        case "token":
          throw new Error("cannot sample token references");
        case "ref": {
          const body = this.rules.get(e.name);
          if (!body) throw new Error(`undefined rule ${e.name}`);
          walk(body, depth + 1);
          return;
        }
        case "seq":
          for (const x of e.items) walk(x, depth);
          return;
        case "alt": {
          let choices = e.alts;
          if (depth >= maxDepth) {
            const hs = choices.map((x) => this.exprHeight(x));
            const best = Math.min(...hs);
            choices = choices.filter((_, i) => hs[i] === best);
          }
          walk(choices[Math.floor(rand() * choices.length)]!, depth);
          return;
        }
        case "repeat": {
          const cap = e.max ?? e.min + maxExtra;
          let count =
            depth >= maxDepth ? e.min : e.min + Math.floor(rand() * (Math.min(cap, e.min + maxExtra) - e.min + 1));
          if (this.exprHeight(e.body) === Infinity) count = 0;
          for (let i = 0; i < count; i++) walk(e.body, depth);
          return;
        }
      }
    };
    walk({ kind: "ref", name: root }, 0);
    return out.join("");
  }
}
