// What a grammar will cost llama.cpp's grammar engine (src/llama-grammar.cpp),
// found statically so that a grammar that would stall the worker is refused
// before it gets there.
//
// A parse stack is a list of grammar positions, the top one a character.
// After each character, llama_grammar_advance_stack replaces every live
// stack by all the stacks it can become before the next character: it
// expands the rule reference on top depth-first, once per alternative, pops
// through alternatives that can be empty into the continuation below, and
// appends each path's result to the new list after a linear search for
// duplicates. A step therefore costs about paths x (distinct stacks +
// stack height) and recurses once per expanded reference. Paths multiply:
// `r0 ::= r1 | r1`, `r1 ::= r2 | r2`, ... thirty deep is 2^30 paths.
//
// Each place a stack can stand (every position in every rule and group) is
// profiled (./profile.ts): paths to the next character and to the one after
// (every stack left alive is advanced again), rule references expanded, and
// continuations pushed. What a rule leads to once it finishes depends on
// where it was called from: the worst such continuation, Cont, is
// propagated from the root (whose continuation is the empty stack) through
// the call sites. A cycle of call sites that pops through a continuation
// still adding paths or depth makes the cost grow with the nesting of the
// input (`list ::= "x" ("," list)*`), and is refused outright.
// Everything is linear in the grammar's size, whatever the counts in it.

import type { Expr } from "./ast.ts";
import { sccs } from "./graph.ts";
import { alternatives, grammarSize, groupAlternatives, isRule, repeatsGroup, symbols } from "./llama-shape.ts";
import { EMPTY_PROF, type Prof, Profiler } from "./profile.ts";
import { type GrammarLimits, overLimit } from "../limits.ts";

export interface CostProblem {
  code: "grammar-size" | "parse-stacks" | "rule-depth";
  rule: string;
  limit: keyof GrammarLimits;
  message: string;
}

/** Whether llama.cpp would hold more rules or elements than the limits allow (cheap: checked first). */
export function sizeProblem(defs: Map<string, Expr>, root: string, limits: GrammarLimits): CostProblem | undefined {
  const size = grammarSize(defs);
  if (size.rules > limits.maxRules) {
    return {
      code: "grammar-size",
      rule: root,
      limit: "maxRules",
      message: overLimit(`the grammar expands to ${size.rules} rules in llama.cpp`, "maxRules", limits),
    };
  }
  if (size.elements > limits.maxElements) {
    return {
      code: "grammar-size",
      rule: root,
      limit: "maxElements",
      message: overLimit(`the grammar expands to ${size.elements} elements in llama.cpp`, "maxElements", limits),
    };
  }
  return undefined;
}

/** A place llama.cpp can call into: a named rule or a group it synthesizes. */
interface Owner {
  /** The named rule it is part of (for messages). */
  rule: string;
  /** Profiles from each position in it, to be combined with its Cont. */
  positions: Prof[];
}

interface CallSite {
  from: number;
  to: number;
  /** What follows the call inside `from`, before `from` itself finishes. */
  after: Prof;
}

/** The worst continuation of an owner: paths to the next character, to the one after, references expanded. */
interface Cont {
  f: number;
  g: number;
  r: number;
}

/** A tail call: nothing follows it, so it passes its caller's continuation on unchanged. */
const isTailCall = (p: Prof) => p.f === 0 && p.e === 1 && p.g === 0 && p.k === 0 && p.r === 0;

/**
 * What one step of llama.cpp's engine can cost at each place in the grammar,
 * against the limits. `order` lists the rules callees-first along left edges
 * (so the grammar must have no left recursion and no undefined rules).
 */
export function costProblems(
  defs: Map<string, Expr>,
  root: string,
  order: string[],
  limits: GrammarLimits,
): CostProblem[] {
  const prof = new Profiler(limits);
  for (const name of order) prof.defineFirst(name, defs.get(name)!);
  for (const name of order) prof.defineFull(name, defs.get(name)!);
  const { owners, calls } = callGraph(defs, root, prof);
  const cont = continuations(owners, calls, prof);
  if (!Array.isArray(cont)) return [cont];
  return positionProblems(owners, cont, prof, limits);
}

/** The owners reachable from the root, the profile of each of their positions, and the calls between them. */
function callGraph(defs: Map<string, Expr>, root: string, prof: Profiler): { owners: Owner[]; calls: CallSite[] } {
  const owners: Owner[] = [];
  const calls: CallSite[] = [];
  const ruleOwners = new Map<string, number>();
  const groupOwners = new Map<Expr, number>();
  const todo: [number, Expr[]][] = [];
  const ownerOf = (key: string | Expr, rule: string, alts: Expr[]) => {
    let id = typeof key === "string" ? ruleOwners.get(key) : groupOwners.get(key);
    if (id === undefined) {
      id = owners.length;
      owners.push({ rule, positions: [] });
      if (typeof key === "string") ruleOwners.set(key, id);
      else groupOwners.set(key, id);
      todo.push([id, alts]);
    }
    return id;
  };
  const callee = (e: Expr, rule: string): number | null => {
    if (e.kind === "ref") return ownerOf(e.name, e.name, alternatives(defs.get(e.name)!));
    if (e.kind === "seq" || e.kind === "alt") return ownerOf(e, rule, alternatives(e));
    return null;
  };
  ownerOf(root, root, alternatives(defs.get(root)!));
  // The first step expands every alternative of the root at once.
  owners[0]!.positions.push(prof.symbol({ kind: "ref", name: root }));
  while (todo.length) {
    const [id, alts] = todo.pop()!;
    const o = owners[id]!;
    for (const a of alts) {
      const items = symbols(a);
      // Right to left: `suffix` is what a stack standing before items[i] can reach.
      let suffix: Prof = EMPTY_PROF;
      o.positions.push(suffix);
      for (let i = items.length - 1; i >= 0; i--) {
        const x = items[i]!;
        const after = suffix;
        if (x.kind === "repeat") {
          const to = repeatsGroup(x) ? ownerOf(x.body, o.rule, groupAlternatives(x.body)) : callee(x.body, o.rule);
          for (const inside of prof.repeat(x).afterCopy) {
            const rest = prof.then(inside, after, false);
            o.positions.push(rest);
            if (to !== null) calls.push({ from: id, to, after: rest });
          }
        } else {
          const to = callee(x, o.rule);
          if (to !== null) calls.push({ from: id, to, after });
        }
        suffix = prof.then(prof.symbol(x), after, isRule(x) && i < items.length - 1);
        o.positions.push(suffix);
      }
    }
  }
  return { owners, calls };
}

/**
 * Cont of every owner, callers first: paths to the next character (f) and
 * the references on the way (r) in one pass, paths to the character after
 * (g) in a second, once every f is known. Or the problem of a call cycle
 * whose continuations pile up.
 */
function continuations(owners: Owner[], calls: CallSite[], prof: Profiler): Cont[] | CostProblem {
  // A call depends on its caller's Cont only when what follows it can be empty.
  const into: number[][] = owners.map(() => []);
  for (const c of calls) if (c.after.e > 0) into[c.from]!.push(c.to);
  const comps = sccs(owners.length, into).reverse(); // callers first
  const compOf = new Int32Array(owners.length);
  comps.forEach((comp, ci) => comp.forEach((v) => (compOf[v] = ci)));
  const incoming: CallSite[][] = comps.map(() => []);
  for (const c of calls) incoming[compOf[c.to]!]!.push(c);
  const cap = prof.cap;
  // The root finishes onto the empty stack: one path, no further character.
  const cont: Cont[] = owners.map((_, i) => ({ f: i === 0 ? 1 : 0, g: 0, r: 0 }));
  for (const pass of ["f", "g"] as const) {
    for (const [ci, comp] of comps.entries()) {
      let f = 0;
      let g = 0;
      let r = 0;
      for (const c of incoming[ci]!) {
        const through = c.after.e > 0;
        if (through && compOf[c.from] === ci) {
          if (isTailCall(c.after)) continue;
          const rule = owners[c.to]!.rule;
          const message = `rule '${rule}' recurses with something that can be empty after the recursive call, so each level of nesting adds parse stacks (llama.cpp's work per character would grow with the input)`;
          return { code: "parse-stacks", rule, limit: "maxStacks", message };
        }
        const from = cont[c.from]!;
        f = Math.max(f, Math.min(c.after.f + c.after.e * from.f, cap.f));
        r = Math.max(r, Math.min(c.after.r + (through ? from.r : 0), cap.r));
        g = Math.max(g, Math.min(c.after.g + c.after.k * from.f + c.after.e * from.g, cap.g));
      }
      for (const id of comp) {
        const c = cont[id]!;
        if (pass === "f") cont[id] = { f: Math.max(f, c.f), g: 0, r: Math.max(r, c.r) };
        else c.g = g;
      }
    }
  }
  return cont;
}

/**
 * Every position against the limits. Of the positions over a limit, the one
 * over by the least is named: that is where the blow-up starts (in
 * r0 ::= r1 | r1, r1 ::= r2 | r2, ..., the rule whose alternatives first
 * pass the limit, not the root above it).
 */
function positionProblems(owners: Owner[], cont: Cont[], prof: Profiler, limits: GrammarLimits): CostProblem[] {
  const cap = prof.cap;
  const checks = [
    {
      code: "parse-stacks",
      limit: "maxStacks",
      cap: cap.f,
      what: (n: string) =>
        `split into ${n} parse stacks at one character (alternatives that can start alike multiply them)`,
    },
    {
      code: "parse-stacks",
      limit: "maxStackPairs",
      cap: cap.g,
      what: (n: string) =>
        `lead to ${n} parse stacks over two characters (alternatives that match the same text multiply them)`,
    },
    {
      code: "rule-depth",
      limit: "maxChain",
      cap: cap.r,
      what: (n: string) => `expand ${n} nested rule references before reaching a character`,
    },
    {
      code: "rule-depth",
      limit: "maxGrowth",
      cap: cap.h,
      what: (n: string) => `push ${n} continuations onto a parse stack before reaching a character`,
    },
  ] as const;
  const worst = checks.map(() => ({ value: Infinity, rule: "" }));
  const over = (k: number, v: number, rule: string) => {
    if (v > limits[checks[k]!.limit] && v <= worst[k]!.value) worst[k] = { value: v, rule };
  };
  for (let id = 0; id < owners.length; id++) {
    const o = owners[id]!;
    const c = cont[id]!;
    for (const p of o.positions) {
      over(0, p.f + p.e * c.f, o.rule);
      over(1, p.g + p.k * c.f + p.e * c.g, o.rule);
      over(2, p.r + (p.e > 0 ? c.r : 0), o.rule);
      over(3, p.h, o.rule);
    }
  }
  for (const [k, w] of worst.entries()) {
    if (w.value === Infinity) continue;
    const { code, limit, what } = checks[k]!;
    const amount = w.value >= checks[k]!.cap ? `more than ${limits[limit]}` : String(w.value);
    return [{ code, rule: w.rule, limit, message: overLimit(`rule '${w.rule}' can ${what(amount)}`, limit, limits) }];
  }
  return [];
}
