// Test-side GBNF recognizer: an Earley parser over the AST that answers
// "is this whole string in the grammar's language?". Independent of
// llama.cpp's stack matcher on purpose — it is the oracle the compiler's
// output is checked against.
//
// The AST is first lowered to plain BNF (numbered nonterminals whose
// productions are sequences of terminals and nonterminals); repetitions
// become helper nonterminals. Empty productions are handled with the
// Aycock–Horspool nullable trick.

import type { Expr, Grammar } from "../../grammar/gbnf/ast.ts";

type Term = (cp: number) => boolean;
type Sym = { nt: number } | { t: Term };

interface Bnf {
  /** prods[i] = [lhs, symbols]. */
  prods: { lhs: number; rhs: Sym[] }[];
  byLhs: number[][];
  nullable: boolean[];
  start: number;
}

function classTest(e: Expr & { kind: "class" }): Term {
  const ranges = e.ranges;
  const neg = e.negated;
  return (cp) => {
    let hit = false;
    for (const [a, b] of ranges)
      if (cp >= a && cp <= b) {
        hit = true;
        break;
      }
    return hit !== neg;
  };
}

function lower(g: Grammar, root: string): Bnf {
  const ntOf = new Map<string, number>();
  const prods: { lhs: number; rhs: Sym[] }[] = [];
  let count = 0;
  const fresh = () => count++;
  for (const r of g.rules) if (!ntOf.has(r.name)) ntOf.set(r.name, fresh());
  const seqSyms = (e: Expr): Sym[] => {
    if (e.kind === "seq") return e.items.flatMap(seqSyms);
    if (e.kind === "lit")
      return [...e.value].map((ch) => {
        const c = ch.codePointAt(0)!;
        return { t: (x: number) => x === c };
      });
    return [sym(e)];
  };
  const sym = (e: Expr): Sym => {
    switch (e.kind) {
      case "class":
        return { t: classTest(e) };
      case "any":
        return { t: () => true };
      case "ref": {
        const n = ntOf.get(e.name);
        if (n === undefined) throw new Error(`undefined rule ${e.name}`);
        return { nt: n };
      }
      case "token":
        throw new Error("token references cannot be recognized over text");
      case "lit":
      case "seq":
      case "alt": {
        const n = fresh();
        define(n, e);
        return { nt: n };
      }
      case "repeat": {
        const body = sym(e.body);
        const n = fresh();
        const pre: Sym[] = Array(e.min).fill(body);
        if (e.max === null) {
          const star = fresh();
          prods.push({ lhs: star, rhs: [] }, { lhs: star, rhs: [body, { nt: star }] });
          prods.push({ lhs: n, rhs: [...pre, { nt: star }] });
        } else {
          // opt_k: up to k more copies.
          let tail: number | null = null;
          for (let k = 1; k <= e.max - e.min; k++) {
            const o = fresh();
            prods.push({ lhs: o, rhs: [] }, { lhs: o, rhs: tail === null ? [body] : [body, { nt: tail }] });
            tail = o;
          }
          prods.push({ lhs: n, rhs: tail === null ? pre : [...pre, { nt: tail }] });
        }
        return { nt: n };
      }
    }
  };
  const define = (n: number, e: Expr) => {
    if (e.kind === "alt") for (const a of e.alts) prods.push({ lhs: n, rhs: seqSyms(a) });
    else prods.push({ lhs: n, rhs: seqSyms(e) });
  };
  const defined = new Set<string>();
  for (const r of g.rules) {
    if (defined.has(r.name)) continue;
    defined.add(r.name);
    define(ntOf.get(r.name)!, r.body);
  }
  const rootNt = ntOf.get(root);
  if (rootNt === undefined) throw new Error(`no rule ${root}`);
  const start = fresh();
  prods.push({ lhs: start, rhs: [{ nt: rootNt }] });
  const byLhs: number[][] = Array.from({ length: count }, () => []);
  prods.forEach((p, i) => byLhs[p.lhs]!.push(i));
  const nullable = Array(count).fill(false);
  let changed = true;
  while (changed) {
    changed = false;
    for (const p of prods) {
      if (!nullable[p.lhs] && p.rhs.every((s) => "nt" in s && nullable[s.nt])) {
        nullable[p.lhs] = true;
        changed = true;
      }
    }
  }
  return { prods, byLhs, nullable, start };
}

export class Recognizer {
  private readonly bnf: Bnf;
  constructor(grammar: Grammar, root = "root") {
    this.bnf = lower(grammar, root);
  }

  /** Does the grammar derive exactly `text`? */
  accepts(text: string): boolean {
    const input = [...text].map((c) => c.codePointAt(0)!);
    const { prods, byLhs, nullable, start } = this.bnf;
    const n = input.length;
    // Items packed as prod, dot, origin.
    const sets: {
      items: [number, number, number][];
      seen: Set<string>;
      waiting: Map<number, [number, number, number][]>;
    }[] = [];
    for (let i = 0; i <= n; i++) sets.push({ items: [], seen: new Set(), waiting: new Map() });
    const add = (i: number, it: [number, number, number]) => {
      const s = sets[i]!;
      const k = `${it[0]},${it[1]},${it[2]}`;
      if (s.seen.has(k)) return;
      s.seen.add(k);
      s.items.push(it);
      const rhs = prods[it[0]]!.rhs;
      const next = rhs[it[1]];
      if (next && "nt" in next) {
        const w = s.waiting.get(next.nt) ?? [];
        w.push(it);
        s.waiting.set(next.nt, w);
      }
    };
    for (const p of byLhs[start]!) add(0, [p, 0, 0]);
    for (let i = 0; i <= n; i++) {
      const s = sets[i]!;
      for (let j = 0; j < s.items.length; j++) {
        const [p, dot, origin] = s.items[j]!;
        const rhs = prods[p]!.rhs;
        if (dot === rhs.length) {
          const lhs = prods[p]!.lhs;
          for (const w of sets[origin]!.waiting.get(lhs) ?? []) add(i, [w[0], w[1] + 1, w[2]]);
          continue;
        }
        const next = rhs[dot]!;
        if ("nt" in next) {
          for (const q of byLhs[next.nt]!) add(i, [q, 0, i]);
          if (nullable[next.nt]) add(i, [p, dot + 1, origin]);
        } else if (i < n && next.t(input[i]!)) {
          add(i + 1, [p, dot + 1, origin]);
        }
      }
      if (i < n && sets[i + 1]!.items.length === 0) return false;
    }
    return sets[n]!.items.some(
      ([p, dot, origin]) => origin === 0 && prods[p]!.lhs === start && dot === prods[p]!.rhs.length,
    );
  }
}

export function recognizes(grammar: Grammar, text: string): boolean {
  return new Recognizer(grammar).accepts(text);
}
