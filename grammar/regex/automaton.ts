// Finite automata for combining string constraints that a single regex tree
// cannot express: several patterns at once (pattern + format, allOf), or a
// pattern under minLength/maxLength. We build one NFA per regex, run a subset
// construction over all of them in lockstep together with a saturating
// length counter, and get a DFA whose states become GBNF rules. DFA output
// is deterministic, which also keeps llama.cpp's matcher to a single stack.

import type { CharSet } from "../charset.ts";
import * as cs from "../charset.ts";
import type { RNode } from "./parse.ts";
import { RegexError } from "./parse.ts";

interface Nfa {
  /** Per state: labelled edges. */
  edges: { set: CharSet; to: number }[][];
  /** Per state: epsilon edges. */
  eps: number[][];
  start: number;
  accept: number;
}

export interface DfaState {
  accept: boolean;
  edges: { set: CharSet; to: number }[];
}

export interface Dfa {
  /** State 0 is the start state. */
  states: DfaState[];
}

const MAX_NFA_STATES = 20000;

export function buildNfa(root: RNode): Nfa {
  const edges: { set: CharSet; to: number }[][] = [];
  const eps: number[][] = [];
  const add = (): number => {
    if (edges.length >= MAX_NFA_STATES)
      throw new RegexError("pattern is too complex to combine with other string constraints", true);
    edges.push([]);
    eps.push([]);
    return edges.length - 1;
  };
  // Builds a fragment from `from`, returns its exit state.
  const build = (n: RNode, from: number): number => {
    switch (n.t) {
      case "set": {
        const to = add();
        const set = cs.intersect(n.set, cs.ANY_CHAR);
        if (set.length) edges[from]!.push({ set, to });
        return to;
      }
      case "seq": {
        let cur = from;
        for (const x of n.items) cur = build(x, cur);
        return cur;
      }
      case "alt": {
        const out = add();
        for (const x of n.alts) {
          const s = add();
          eps[from]!.push(s);
          eps[build(x, s)]!.push(out);
        }
        return out;
      }
      case "rep": {
        let cur = from;
        for (let i = 0; i < n.min; i++) cur = build(n.body, cur);
        if (n.max === null) {
          const loop = add();
          eps[cur]!.push(loop);
          const end = build(n.body, loop);
          eps[end]!.push(loop);
          return loop;
        }
        const out = add();
        for (let i = n.min; i < n.max; i++) {
          eps[cur]!.push(out);
          cur = build(n.body, cur);
        }
        eps[cur]!.push(out);
        return out;
      }
    }
  };
  const start = add();
  const accept = build(root, start);
  return { edges, eps, start, accept };
}

function closure(nfa: Nfa, states: Iterable<number>): number[] {
  const seen = new Set<number>();
  const todo = [...states];
  while (todo.length) {
    const s = todo.pop()!;
    if (seen.has(s)) continue;
    seen.add(s);
    for (const t of nfa.eps[s]!) if (!seen.has(t)) todo.push(t);
  }
  return [...seen].sort((a, b) => a - b);
}

export interface ProductOptions {
  minLength: number;
  maxLength: number | null;
  /** Refuse (RegexError) beyond this many DFA states. */
  maxStates?: number;
}

/**
 * DFA for the strings accepted by every regex in `nodes` whose length (code
 * points) lies in [minLength, maxLength]. Returns null if no string qualifies.
 * Dead states are removed, so every remaining state can still reach an
 * accepting one.
 */
export function productDfa(nodes: RNode[], o: ProductOptions): Dfa | null {
  const maxStates = o.maxStates ?? 4000;
  const nfas = nodes.map(buildNfa);
  // The counter saturates at minLength when there is no maximum.
  const cap = o.maxLength ?? o.minLength;
  type Tuple = { sets: number[][]; count: number };
  const keyOf = (t: Tuple) => `${t.sets.map((s) => s.join(",")).join("|")}#${t.count}`;
  const index = new Map<string, number>();
  const tuples: Tuple[] = [];
  const raw: { accept: boolean; edges: { set: CharSet; to: number }[] }[] = [];

  const intern = (t: Tuple): number => {
    const k = keyOf(t);
    let id = index.get(k);
    if (id === undefined) {
      if (tuples.length >= maxStates) {
        throw new RegexError(`string constraints need more than ${maxStates} automaton states`, true);
      }
      id = tuples.length;
      index.set(k, id);
      tuples.push(t);
      raw.push({ accept: false, edges: [] });
    }
    return id;
  };

  intern({ sets: nfas.map((n) => closure(n, [n.start])), count: 0 });
  for (let id = 0; id < tuples.length; id++) {
    const t = tuples[id]!;
    raw[id]!.accept = t.count >= o.minLength && t.sets.every((s, i) => s.includes(nfas[i]!.accept));
    if (o.maxLength !== null && t.count >= o.maxLength) continue;
    const out: CharSet[] = [];
    t.sets.forEach((s, i) => s.forEach((st) => nfas[i]!.edges[st]!.forEach((e) => out.push(e.set))));
    const byTarget = new Map<number, CharSet[]>();
    for (const atom of cs.partition(out)) {
      const probe = atom[0]![0];
      const next: number[][] = [];
      let dead = false;
      for (let i = 0; i < nfas.length && !dead; i++) {
        const targets: number[] = [];
        for (const st of t.sets[i]!) for (const e of nfas[i]!.edges[st]!) if (cs.has(e.set, probe)) targets.push(e.to);
        if (targets.length === 0) dead = true;
        else next.push(closure(nfas[i]!, targets));
      }
      if (dead) continue;
      const count = o.maxLength === null ? Math.min(t.count + 1, cap) : t.count + 1;
      const to = intern({ sets: next, count });
      const list = byTarget.get(to) ?? [];
      list.push(atom);
      byTarget.set(to, list);
    }
    raw[id]!.edges = [...byTarget].map(([to, sets]) => ({ to, set: cs.union(...sets) }));
  }

  // Keep only states from which an accepting state is reachable.
  const live = new Set<number>();
  let changed = true;
  raw.forEach((s, i) => s.accept && live.add(i));
  while (changed) {
    changed = false;
    raw.forEach((s, i) => {
      if (!live.has(i) && s.edges.some((e) => live.has(e.to))) {
        live.add(i);
        changed = true;
      }
    });
  }
  if (!live.has(0)) return null;
  // Renumber the live states reachable from the start, start first.
  const order: number[] = [];
  const renum = new Map<number, number>();
  const todo = [0];
  renum.set(0, 0);
  order.push(0);
  while (todo.length) {
    const s = todo.shift()!;
    for (const e of raw[s]!.edges) {
      if (live.has(e.to) && !renum.has(e.to)) {
        renum.set(e.to, order.length);
        order.push(e.to);
        todo.push(e.to);
      }
    }
  }
  return {
    states: order.map((s) => ({
      accept: raw[s]!.accept,
      edges: raw[s]!.edges.filter((e) => live.has(e.to)).map((e) => ({ set: e.set, to: renum.get(e.to)! })),
    })),
  };
}

/** Merge equivalent states (Moore's partition refinement). */
export function minimize(dfa: Dfa): Dfa {
  const n = dfa.states.length;
  let block: number[] = dfa.states.map((s) => (s.accept ? 1 : 0));
  let count = new Set(block).size;
  for (;;) {
    const sigs = new Map<string, number>();
    const next = new Array<number>(n);
    for (let i = 0; i < n; i++) {
      // Signature: own block plus, per target block, the characters leading there.
      const byBlock = new Map<number, CharSet[]>();
      for (const e of dfa.states[i]!.edges) {
        const list = byBlock.get(block[e.to]!) ?? [];
        list.push(e.set);
        byBlock.set(block[e.to]!, list);
      }
      const sig =
        block[i] +
        ":" +
        [...byBlock]
          .map(([bl, sets]) => `${bl}=${cs.key(cs.union(...sets))}`)
          .sort()
          .join(";");
      let id = sigs.get(sig);
      if (id === undefined) {
        id = sigs.size;
        sigs.set(sig, id);
      }
      next[i] = id;
    }
    const nextCount = sigs.size;
    block = next;
    if (nextCount === count) break;
    count = nextCount;
  }
  // Rebuild with the start state's block first.
  const order = new Map<number, number>();
  const rep = new Map<number, number>();
  const visit = [0];
  order.set(block[0]!, 0);
  rep.set(block[0]!, 0);
  while (visit.length) {
    const s = visit.shift()!;
    for (const e of dfa.states[s]!.edges) {
      const bl = block[e.to]!;
      if (!order.has(bl)) {
        order.set(bl, order.size);
        rep.set(bl, e.to);
        visit.push(e.to);
      }
    }
  }
  const states: DfaState[] = [];
  for (const [bl, idx] of order) {
    const s = dfa.states[rep.get(bl)!]!;
    const byTarget = new Map<number, CharSet[]>();
    for (const e of s.edges) {
      const t = order.get(block[e.to]!)!;
      const list = byTarget.get(t) ?? [];
      list.push(e.set);
      byTarget.set(t, list);
    }
    states[idx] = { accept: s.accept, edges: [...byTarget].map(([to, sets]) => ({ to, set: cs.union(...sets) })) };
  }
  return { states };
}
