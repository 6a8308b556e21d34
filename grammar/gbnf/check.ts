// Static checks on a GBNF grammar: the mistakes llama.cpp either rejects at
// load time (undefined rules, missing root, left recursion, oversized
// repetitions), accepts but cannot do anything useful with (rules that match
// nothing, unreachable rules), or would spend unbounded work on (./cost.ts).
// Grammars come from clients, so every check is linear in the grammar's size.

import type { Expr, Grammar, Rule } from "./ast.ts";
import { RULE_NAME, sourceLocation } from "./ast.ts";
import { costProblems, sizeProblem } from "./cost.ts";
import { rulesWhere, sccs } from "./graph.ts";
import { countRuleHeads, parseGbnf } from "./parse.ts";
import { printGbnf } from "./print.ts";
import { type GrammarLimits, limitsWith, overLimit } from "../limits.ts";

export type GbnfProblemCode =
  | "undefined-rule"
  | "duplicate-rule"
  | "invalid-rule-name"
  | "missing-root"
  | "unused-rule"
  | "empty-language"
  | "left-recursion"
  | "repetition-limit"
  | "token-reference"
  | "grammar-size"
  | "parse-stacks"
  | "rule-depth";

export interface GbnfProblem {
  severity: "error" | "warning";
  code: GbnfProblemCode;
  message: string;
  /** The rule the problem is about (or found in). */
  rule?: string;
  /** For the size and cost checks: the GrammarLimits entry exceeded. */
  limit?: keyof GrammarLimits;
  line?: number;
  column?: number;
}

export interface CheckOptions {
  /** Start symbol; llama.cpp uses "root". */
  root?: string;
  /** Overrides of DEFAULT_LIMITS (../limits.ts) for the size and cost checks. */
  limits?: Partial<GrammarLimits>;
}

// llama.cpp refuses a repetition whose expansion would create this many rules.
const REPETITION_BUDGET = 2000;

function walk(e: Expr, f: (e: Expr) => void): void {
  f(e);
  switch (e.kind) {
    case "seq":
      e.items.forEach((x) => walk(x, f));
      break;
    case "alt":
      e.alts.forEach((x) => walk(x, f));
      break;
    case "repeat":
      walk(e.body, f);
      break;
  }
}

/** Can `e` derive the empty string, given the set of nullable rules? */
export function exprNullable(e: Expr, nullable: (name: string) => boolean): boolean {
  switch (e.kind) {
    case "lit":
      return e.value === "";
    case "class":
    case "any":
    case "token":
      return false;
    case "ref":
      return nullable(e.name);
    case "seq":
      return e.items.every((x) => exprNullable(x, nullable));
    case "alt":
      return e.alts.some((x) => exprNullable(x, nullable));
    case "repeat":
      return e.min === 0 || exprNullable(e.body, nullable);
  }
}

// Leaves of the nullable / productive fixpoints (see rulesWhere).
function derivesEmpty(e: Expr): boolean | undefined {
  if (e.kind === "lit") return e.value === "";
  if (e.kind === "class" || e.kind === "any" || e.kind === "token") return false;
  return e.kind === "repeat" && e.min === 0 ? true : undefined;
}

function derivesString(e: Expr): boolean | undefined {
  if (e.kind === "lit" || e.kind === "any" || e.kind === "token") return true;
  if (e.kind === "class") return e.negated || e.ranges.length > 0;
  return e.kind === "repeat" && e.min === 0 ? true : undefined;
}

/** Rules that can appear at the left edge of `e` (before any character is consumed). */
function leftRefs(e: Expr, nullable: (n: string) => boolean, out: Set<string>): void {
  switch (e.kind) {
    case "ref":
      out.add(e.name);
      break;
    case "seq":
      for (const x of e.items) {
        leftRefs(x, nullable, out);
        if (!exprNullable(x, nullable)) break;
      }
      break;
    case "alt":
      e.alts.forEach((x) => leftRefs(x, nullable, out));
      break;
    case "repeat":
      if (e.max !== 0) leftRefs(e.body, nullable, out);
      break;
  }
}

// Mirrors how llama.cpp counts rules synthesised while parsing a group, which
// it multiplies by the repetition count to decide whether to refuse.
function synthesized(e: Expr): number {
  switch (e.kind) {
    case "seq":
      return e.items.reduce((n, x) => n + synthesizedItem(x), 0);
    case "alt":
      return e.alts.reduce((n, x) => n + (x.kind === "seq" ? synthesized(x) : synthesizedItem(x)), 0);
    default:
      return synthesizedItem(e);
  }
}

function synthesizedItem(e: Expr): number {
  switch (e.kind) {
    case "seq":
    case "alt":
      return 1 + synthesized(e);
    case "repeat": {
      const body =
        e.body.kind === "seq" || e.body.kind === "alt" || e.body.kind === "repeat" ? 1 + synthesized(e.body) : 0;
      return body + (e.max === null ? 1 : e.max - e.min);
    }
    default:
      return 0;
  }
}

function repetitionCost(e: Expr & { kind: "repeat" }): number {
  const atomic = !(e.body.kind === "seq" || e.body.kind === "alt" || e.body.kind === "repeat");
  const prev = atomic ? 1 : Math.max(1, 1 + synthesized(e.body));
  const total = e.max !== null && e.max > 0 ? e.max : e.min > 0 ? e.min : 1;
  return prev * total;
}

function locOf(node: object): { line?: number; column?: number } {
  const loc = sourceLocation(node);
  return loc ? { line: loc.line, column: loc.column } : {};
}

/** Check a grammar; returns problems (errors and warnings), empty if clean. */
export function checkGbnf(g: Grammar, opts: CheckOptions = {}): GbnfProblem[] {
  const root = opts.root ?? "root";
  const problems: GbnfProblem[] = [];
  const defs = new Map<string, Expr>();
  const firstRule = new Map<string, Rule>();

  for (const r of g.rules) {
    if (!RULE_NAME.test(r.name)) {
      problems.push({
        severity: "error",
        code: "invalid-rule-name",
        rule: r.name,
        message: `rule name '${r.name}' may only contain letters, digits and '-'`,
        ...locOf(r),
      });
    }
    if (firstRule.has(r.name)) {
      problems.push({
        severity: "error",
        code: "duplicate-rule",
        rule: r.name,
        message: `rule '${r.name}' is defined more than once (llama.cpp keeps only the last definition)`,
        ...locOf(r),
      });
    } else {
      firstRule.set(r.name, r);
    }
    defs.set(r.name, r.body);
  }

  // Undefined references, token references and repetition budget.
  for (const r of g.rules) {
    walk(r.body, (e) => {
      if (e.kind === "ref" && !defs.has(e.name)) {
        problems.push({
          severity: "error",
          code: "undefined-rule",
          rule: r.name,
          message: `rule '${r.name}' references undefined rule '${e.name}'`,
          ...locOf(e),
        });
      } else if (e.kind === "token") {
        problems.push({
          severity: "warning",
          code: "token-reference",
          rule: r.name,
          message: `rule '${r.name}' uses a token reference, which depends on the model's vocabulary`,
          ...locOf(e),
        });
      } else if (e.kind === "repeat") {
        const cost = repetitionCost(e);
        if (cost >= REPETITION_BUDGET) {
          problems.push({
            severity: "error",
            code: "repetition-limit",
            rule: r.name,
            message: `repetition in rule '${r.name}' expands to ${cost} rules; llama.cpp refuses ${REPETITION_BUDGET} or more`,
            ...locOf(e),
          });
        }
      }
    });
  }

  if (!defs.has(root)) {
    problems.push({ severity: "error", code: "missing-root", message: `grammar has no '${root}' rule` });
  }

  // Too big for llama.cpp to load cheaply: refused before the analyses below.
  const limits = limitsWith(opts.limits);
  const tooBig = sizeProblem(defs, root, limits);
  if (tooBig) {
    problems.push({
      severity: "error",
      code: tooBig.code,
      rule: tooBig.rule,
      limit: tooBig.limit,
      message: tooBig.message,
    });
    return problems;
  }

  // Nullable and productive rules (undefined rules are neither).
  const nullable = rulesWhere(defs, derivesEmpty);
  const productive = rulesWhere(defs, derivesString);
  const isNullable = (n: string) => nullable.has(n);

  for (const r of g.rules) {
    if (firstRule.get(r.name) !== r) continue;
    if (!productive.has(r.name)) {
      const what = r.name === root ? "the grammar matches nothing" : "no finite string matches it";
      problems.push({
        severity: "error",
        code: "empty-language",
        rule: r.name,
        message: `rule '${r.name}' can never complete (${what}); every alternative needs itself or an impossible element`,
        ...locOf(r),
      });
    }
  }

  // Left recursion: a cycle in the "can start with" graph. A starred group
  // that can match empty is expanded by llama.cpp into a rule that starts with
  // itself, so it counts too.
  const names = [...defs.keys()];
  const index = new Map(names.map((n, i) => [n, i]));
  const edges = names.map((name) => {
    const out = new Set<string>();
    leftRefs(defs.get(name)!, isNullable, out);
    return [...out].filter((n) => defs.has(n)).map((n) => index.get(n)!);
  });
  const components = sccs(names.length, edges);
  for (const ids of components) {
    const comp = ids.map((i) => names[i]!);
    const self = comp.length === 1 && edges[ids[0]!]!.includes(ids[0]!);
    if (comp.length > 1 || self) {
      const cycle = [...comp, comp[0]].join(" -> ");
      const kind = comp.length > 1 ? "indirect" : "direct";
      problems.push({
        severity: "error",
        code: "left-recursion",
        rule: comp[0],
        message: `${kind} left recursion: ${cycle} (llama.cpp cannot match left-recursive rules)`,
        ...locOf(firstRule.get(comp[0]!)!),
      });
    }
  }
  for (const r of g.rules) {
    walk(r.body, (e) => {
      if (e.kind === "repeat" && e.max === null && exprNullable(e.body, isNullable)) {
        problems.push({
          severity: "error",
          code: "left-recursion",
          rule: r.name,
          message: `unbounded repetition of an expression that can match empty in rule '${r.name}' becomes left recursion in llama.cpp`,
          ...locOf(e),
        });
      }
    });
  }

  // Unreachable rules.
  if (defs.has(root)) {
    const seen = new Set<string>([root]);
    const todo = [root];
    while (todo.length) {
      const n = todo.pop()!;
      walk(defs.get(n)!, (e) => {
        if (e.kind === "ref" && defs.has(e.name) && !seen.has(e.name)) {
          seen.add(e.name);
          todo.push(e.name);
        }
      });
    }
    for (const r of g.rules) {
      if (firstRule.get(r.name) === r && !seen.has(r.name)) {
        problems.push({
          severity: "warning",
          code: "unused-rule",
          rule: r.name,
          message: `rule '${r.name}' is not reachable from '${root}'`,
          ...locOf(r),
        });
      }
    }
  }
  // What the grammar would cost llama.cpp, once it is one llama.cpp can load.
  if (!problems.some((p) => p.severity === "error")) {
    const order = components.map((c) => names[c[0]!]!);
    for (const p of costProblems(defs, root, order, limits)) {
      problems.push({
        severity: "error",
        code: p.code,
        rule: p.rule,
        limit: p.limit,
        message: p.message,
        ...locOf(firstRule.get(p.rule) ?? {}),
      });
    }
  }
  return problems;
}

/** Only the errors from checkGbnf. */
export function gbnfErrors(g: Grammar, opts?: CheckOptions): GbnfProblem[] {
  return checkGbnf(g, opts).filter((p) => p.severity === "error");
}

/**
 * Check GBNF text as a client sent it: its size (bytes, then rules counted
 * without parsing) before anything else, then gbnfErrors. Returns the
 * grammar printed canonically, which is exactly what the checks measured,
 * so that is what should go to llama.cpp. Throws GbnfSyntaxError for text
 * that does not parse.
 */
export function checkGbnfText(source: string, opts: CheckOptions = {}): { gbnf: string; errors: GbnfProblem[] } {
  const limits = limitsWith(opts.limits);
  const tooBig = (limit: "maxGbnfBytes" | "maxRules", what: string) => ({
    gbnf: source,
    errors: [
      { severity: "error" as const, code: "grammar-size" as const, limit, message: overLimit(what, limit, limits) },
    ],
  });
  if (source.length > limits.maxGbnfBytes) return tooBig("maxGbnfBytes", `the grammar is ${source.length} bytes`);
  const heads = countRuleHeads(source);
  if (heads > limits.maxRules) return tooBig("maxRules", `the grammar defines ${heads} rules`);
  const grammar = parseGbnf(source);
  return { gbnf: printGbnf(grammar), errors: gbnfErrors(grammar, opts) };
}
