// Puts a grammar's rules under a prefix (rule "x" becomes "p-x", references
// follow), so several compiled grammars can live in one without clashing.
import type { Expr, Grammar, Rule } from "./ast.ts";

function renameRefs(e: Expr, rename: (name: string) => string): Expr {
  switch (e.kind) {
    case "ref":
      return { kind: "ref", name: rename(e.name) };
    case "seq":
      return { kind: "seq", items: e.items.map((x) => renameRefs(x, rename)) };
    case "alt":
      return { kind: "alt", alts: e.alts.map((x) => renameRefs(x, rename)) };
    case "repeat":
      return { ...e, body: renameRefs(e.body, rename) };
    default:
      return e;
  }
}

/** The grammar's rules renamed under `prefix`; its root becomes `${prefix}-root`. */
export function namespaceGrammar(g: Grammar, prefix: string): Rule[] {
  const rename = (name: string) => `${prefix}-${name}`;
  return g.rules.map((r) => ({ name: rename(r.name), body: renameRefs(r.body, rename) }));
}
