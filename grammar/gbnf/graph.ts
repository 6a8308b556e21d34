// Linear-time graph algorithms for grammar checks. They run on grammars a
// client sends, so nothing here may be quadratic in the number of rules or
// recurse once per rule (a chain of 10,000 rules must not cost seconds or
// overflow the stack).

import type { Expr } from "./ast.ts";

/**
 * The rules for which a property holds, as the least fixpoint of
 * `seq` = all items, `alt` = any alternative, `repeat` = its body, a rule
 * reference = that rule. `leaf` decides terminals (and may decide any other
 * node, e.g. `x{0,n}` is nullable whatever x is); returning undefined leaves
 * a structural node to the rules above. Propagation from the nodes that hold
 * outright (Horn satisfiability): each node is visited once, as a tree (a
 * shared subexpression counts once per place, as it does in the printed text).
 */
export function rulesWhere(defs: Map<string, Expr>, leaf: (e: Expr) => boolean | undefined): Set<string> {
  const names = [...defs.keys()];
  const ruleIndex = new Map(names.map((n, i) => [n, i]));
  // Nodes 0..names.length-1 are the rules; the rest are expressions.
  const parent: number[] = names.map(() => -1);
  const need: number[] = names.map(() => 1);
  const refsTo: number[][] = names.map(() => []);
  const ready: number[] = [];
  const todo: Expr[] = [];
  const todoParent: number[] = [];
  names.forEach((n, i) => {
    todo.push(defs.get(n)!);
    todoParent.push(i);
  });
  while (todo.length) {
    const e = todo.pop()!;
    const id = parent.length;
    parent.push(todoParent.pop()!);
    const decided = leaf(e);
    let n: number;
    if (decided !== undefined) n = decided ? 0 : -1;
    else if (e.kind === "seq") n = e.items.length;
    else if (e.kind === "alt" || e.kind === "repeat") n = 1;
    else if (e.kind === "ref") {
      const r = ruleIndex.get(e.name);
      if (r !== undefined) refsTo[r]!.push(id);
      n = r === undefined ? -1 : 1;
    } else n = -1;
    need.push(n);
    if (n === 0) ready.push(id);
    if (decided !== undefined) continue;
    const children = e.kind === "seq" ? e.items : e.kind === "alt" ? e.alts : e.kind === "repeat" ? [e.body] : [];
    for (const c of children) {
      todo.push(c);
      todoParent.push(id);
    }
  }
  // A node holds once `need` of its children hold (all of a seq, one otherwise).
  const hold = (id: number) => {
    if (need[id]! > 0 && --need[id]! === 0) ready.push(id);
  };
  while (ready.length) {
    const id = ready.pop()!;
    if (id < names.length) for (const ref of refsTo[id]!) hold(ref);
    else hold(parent[id]!);
  }
  return new Set(names.filter((_, i) => need[i] === 0));
}

/**
 * Strongly connected components of the graph on nodes 0..n-1 (Tarjan,
 * iterative), in reverse topological order: a component comes after every
 * component it has an edge to.
 */
export function sccs(n: number, edges: readonly (readonly number[])[]): number[][] {
  let index = 0;
  const idx = new Int32Array(n).fill(-1);
  const low = new Int32Array(n);
  const onStack = new Uint8Array(n);
  const stack: number[] = [];
  const out: number[][] = [];
  const frames: number[] = []; // node, next edge to follow: two entries per frame
  for (let root = 0; root < n; root++) {
    if (idx[root] !== -1) continue;
    const open = (v: number) => {
      idx[v] = low[v] = index++;
      stack.push(v);
      onStack[v] = 1;
      frames.push(v, 0);
    };
    open(root);
    while (frames.length) {
      const v = frames[frames.length - 2]!;
      const k = frames[frames.length - 1]!;
      const next = edges[v]!;
      if (k < next.length) {
        frames[frames.length - 1] = k + 1;
        const w = next[k]!;
        if (idx[w] === -1) open(w);
        else if (onStack[w]) low[v] = Math.min(low[v]!, idx[w]!);
        continue;
      }
      frames.length -= 2;
      if (frames.length) {
        const parent = frames[frames.length - 2]!;
        low[parent] = Math.min(low[parent]!, low[v]!);
      }
      if (low[v] === idx[v]) {
        const comp: number[] = [];
        let w: number;
        do {
          w = stack.pop()!;
          onStack[w] = 0;
          comp.push(w);
        } while (w !== v);
        out.push(comp.reverse());
      }
    }
  }
  return out;
}
