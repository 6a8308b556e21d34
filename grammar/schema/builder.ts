// Collects named GBNF rules while a schema is compiled. Rules with identical
// bodies are shared, names are made unique and legal for llama.cpp, and the
// final grammar contains only what the root can reach.

import type { Expr, Grammar, Rule } from "../gbnf/ast.ts";
import { ref } from "../gbnf/ast.ts";
import { printExpr } from "../gbnf/print.ts";

export function sanitizeName(hint: string): string {
  const s = hint
    .replace(/[^a-zA-Z0-9-]+/g, "-")
    .replace(/-+/g, "-")
    .replace(/^-|-$/g, "");
  return s === "" ? "r" : s.length > 40 ? s.slice(0, 40).replace(/-$/, "") : s;
}

/**
 * How JSON text may be laid out between its tokens. "pretty": a newline and
 * indentation in any gap (bounded, see ./json.ts). "compact": one optional
 * space after `:` and `,`, nothing elsewhere: the layout chat templates give
 * tool-call arguments, leaving a small model no room to wander in whitespace.
 */
export type JsonLayout = "pretty" | "compact";

export class RuleBuilder {
  /**
   * `grow` is told the GBNF size of each rule as it is made, so that a
   * compilation can be stopped once its grammar outgrows the budget.
   */
  constructor(
    readonly layout: JsonLayout = "pretty",
    private readonly grow: (bytes: number) => void = () => {},
  ) {}

  private readonly bodies = new Map<string, Expr | null>();
  private readonly byBody = new Map<string, string>();
  private readonly fixedNames = new Map<string, string>();
  /** Next numeric suffix to try per base name (keeps naming linear). */
  private readonly suffixes = new Map<string, number>();

  /** A fresh legal rule name based on `hint`. */
  private freshName(hint: string): string {
    const base = sanitizeName(hint);
    if (base !== "root" && !this.bodies.has(base)) return base;
    for (let i = this.suffixes.get(base) ?? 2; ; i++) {
      const n = `${base}-${i}`;
      if (!this.bodies.has(n)) {
        this.suffixes.set(base, i + 1);
        return n;
      }
    }
  }

  /** Reserve a name whose body is supplied later (for recursive rules). */
  reserve(hint: string): string {
    const name = this.freshName(hint);
    this.bodies.set(name, null);
    return name;
  }

  define(name: string, body: Expr): void {
    if (this.bodies.get(name) !== null) throw new Error(`rule ${name} is not reserved`);
    this.grow(name.length + printExpr(body).length + 6);
    this.bodies.set(name, body);
  }

  /** A reference to a rule with this body, shared with identical rules. */
  rule(hint: string, body: Expr): Expr {
    if (body.kind === "ref") return body;
    const key = printExpr(body);
    const existing = this.byBody.get(key);
    if (existing) return ref(existing);
    const name = this.freshName(hint);
    this.grow(name.length + key.length + 6);
    this.bodies.set(name, body);
    this.byBody.set(key, name);
    return ref(name);
  }

  /** A named helper rule built once (e.g. "ws", "string"). */
  fixed(name: string, make: () => Expr): Expr {
    const known = this.fixedNames.get(name);
    if (known) return ref(known);
    const n = this.reserve(name);
    this.fixedNames.set(name, n);
    this.define(n, make());
    return ref(n);
  }

  /** The grammar with `root` as start rule and every rule it can reach. */
  toGrammar(root: Expr): Grammar {
    const rules: Rule[] = [{ name: "root", body: root }];
    const seen = new Set<string>();
    const visit = (e: Expr) => {
      switch (e.kind) {
        case "ref": {
          if (seen.has(e.name)) return;
          seen.add(e.name);
          const body = this.bodies.get(e.name);
          if (body === undefined || body === null) throw new Error(`rule ${e.name} has no body`);
          rules.push({ name: e.name, body });
          visit(body);
          return;
        }
        case "seq":
          e.items.forEach(visit);
          return;
        case "alt":
          e.alts.forEach(visit);
          return;
        case "repeat":
          visit(e.body);
          return;
      }
    };
    visit(root);
    return { rules };
  }
}
