// JSON Schema → GBNF.
//
// compileParts() turns "these schemas must all hold" into a GBNF expression:
//   - a lone $ref becomes a named rule (this is what makes recursion work),
//   - otherwise the parts are normalized (allOf / $ref inlined, scalar
//     keywords intersected), anyOf/oneOf are distributed over the rest,
//   - and what remains is emitted per type (emit.ts).
// Every keyword is either enforced exactly, annotation-only, or refused.

import type { Expr } from "../gbnf/ast.ts";
import { alt, ref } from "../gbnf/ast.ts";
import { gbnfErrors } from "../gbnf/check.ts";
import type { Grammar } from "../gbnf/ast.ts";
import { printGbnf } from "../gbnf/print.ts";
import { RuleBuilder, sanitizeName } from "./builder.ts";
import type { CompileOptions, Part } from "./context.ts";
import { Ctx, isObject } from "./context.ts";
import { disjoint } from "./disjoint.ts";
import { emitNorm } from "./emit.ts";
import { SchemaError, pointer } from "./errors.ts";
import { anyObject, anyValue } from "./json.ts";
import { type Norm, isPureRef, isTrivial, normalize } from "./normalize.ts";

export type { CompileOptions } from "./context.ts";

export interface CompileResult {
  /** GBNF text with a `root` rule, ready for llama.cpp. */
  gbnf: string;
  /** The same grammar as an AST. */
  grammar: Grammar;
  /**
   * JSON pointers of keywords that were ignored because strict: false was
   * given (empty in strict mode, where they are refused instead).
   */
  ignored: string[];
}

const MAX_DEPTH = 200;

/** GBNF for values satisfying every schema in `parts`. */
export function compileParts(parts: Part[], hint: string, ctx: Ctx): Expr {
  if (++ctx.depth > MAX_DEPTH) {
    throw new SchemaError(
      "$ref",
      parts[0]?.path ?? "",
      "schema nesting is too deep (or recursion never reaches a value)",
    );
  }
  const outer = ctx.budget.at;
  ctx.budget.at = parts[parts.length - 1]?.path ?? outer;
  ctx.budget.step();
  try {
    const live = parts.filter((p) => !isTrivial(p.schema));
    if (live.length === 0) return anyValue(ctx.b);
    if (live.length === 1 && isPureRef(live[0]!.schema)) return refRule(live[0]!, ctx);
    const norm = normalize(live, ctx);
    if (norm.groups.length) return compileGroup(norm, hint, ctx);
    return emitNorm(norm, hint, ctx, compileParts);
  } finally {
    ctx.depth--;
    ctx.budget.at = outer;
  }
}

function hintFromPointer(path: string): string {
  const last = path.split("/").pop() ?? "";
  return sanitizeName(last === "" ? "root-schema" : last.replace(/~1/g, "-").replace(/~0/g, "-"));
}

/** A named rule for a $ref target, created once per target. */
function refRule(part: Part, ctx: Ctx): Expr {
  let refAt = pointer(part.path, "$ref");
  let target = ctx.resolve((part.schema as { $ref: unknown }).$ref, refAt);
  const chain = new Set([target.path]);
  while (isPureRef(target.schema)) {
    refAt = pointer(target.path, "$ref");
    target = ctx.resolve(target.schema.$ref, refAt);
    if (chain.has(target.path)) throw new SchemaError("$ref", refAt, "circular $ref chain", "invalid");
    chain.add(target.path);
  }
  const known = ctx.refRules.get(target.path);
  if (known) return ref(known);
  const name = ctx.b.reserve(hintFromPointer(target.path));
  ctx.refRules.set(target.path, name);
  ctx.b.define(name, compileParts([target], name, ctx));
  return ref(name);
}

/** Distribute the first anyOf/oneOf over the remaining constraints. */
function compileGroup(norm: Norm, hint: string, ctx: Ctx): Expr {
  const g = norm.groups[0]!;
  const base: Part[] = norm.flat.map((p, i) => {
    if (i !== g.owner) return p;
    const { [g.kind]: _, ...rest } = p.schema as Record<string, unknown>;
    return { schema: rest, path: p.path };
  });
  const alts: Expr[] = [];
  const norms: Norm[] = [];
  for (const [i, branch] of g.branches.entries()) {
    ctx.budget.branch(g.kind, g.at);
    const parts = [...base, branch];
    try {
      const e = compileParts(parts, `${hint}-${i + 1}`, ctx);
      alts.push(e);
      if (g.kind === "oneOf")
        norms.push(
          normalize(
            parts.filter((p) => !isTrivial(p.schema)),
            ctx,
          ),
        );
    } catch (err) {
      // A branch that contradicts its siblings just drops out.
      if (err instanceof SchemaError && err.kind === "unsatisfiable") continue;
      throw err;
    }
  }
  if (alts.length === 0) {
    throw new SchemaError(
      g.kind,
      g.at,
      `no ${g.kind} branch can be satisfied together with its sibling keywords`,
      "unsatisfiable",
    );
  }
  if (g.kind === "oneOf") {
    for (let i = 0; i < norms.length; i++) {
      for (let j = i + 1; j < norms.length; j++) {
        ctx.budget.step();
        if (!disjoint(norms[i]!, norms[j]!, ctx)) {
          ctx.unsupported(
            "oneOf",
            g.at.slice(0, g.at.lastIndexOf("/")),
            `cannot prove that oneOf branches ${i} and ${j} exclude each other (a value matching both would be invalid); use anyOf, or make them differ by type, const/enum or a required property`,
          );
          i = norms.length;
          break;
        }
      }
    }
  }
  return alt(...alts);
}

function finish(ctx: Ctx, root: Expr): CompileResult {
  const grammar = ctx.b.toGrammar(root);
  // Recursion through $ref can produce rules llama.cpp cannot run: a rule
  // that starts with itself (e.g. anyOf: [{$ref: self}, ...]) or one that
  // can never finish (a required property that recurses forever). And a
  // grammar within the compile budget can still be one llama.cpp's engine
  // would spend too long on (../gbnf/cost.ts).
  const errors = gbnfErrors(grammar, { limits: ctx.budget.limits });
  if (errors.length) {
    const e = errors[0]!;
    if (e.limit)
      throw ctx.budget.error(e.limit, "", "", `the compiled grammar is too costly for llama.cpp: ${e.message}`);
    if (e.code === "empty-language") {
      throw new SchemaError(
        "$ref",
        "",
        `only infinitely deep values satisfy this recursive schema (${e.message})`,
        "unsatisfiable",
      );
    }
    if (e.code === "left-recursion") {
      throw new SchemaError(
        "$ref",
        "",
        `recursive $ref that can recur before any character is produced cannot be compiled (${e.message})`,
      );
    }
    throw new SchemaError("$ref", "", `the schema compiles to a grammar llama.cpp cannot use: ${e.message}`, "invalid");
  }
  const gbnf = printGbnf(grammar);
  const maxBytes = ctx.budget.limits.maxGbnfBytes;
  if (gbnf.length > maxBytes)
    throw ctx.budget.error(
      "maxGbnfBytes",
      "",
      "",
      `the compiled grammar is ${gbnf.length} bytes, above the limit of ${maxBytes} (maxGbnfBytes)`,
    );
  return { gbnf, grammar, ignored: [...ctx.ignored] };
}

/**
 * Compile a JSON Schema to GBNF. Throws SchemaError (keyword, path, message)
 * for anything that cannot be enforced exactly, unless strict: false, in
 * which case such keywords are ignored and listed in `ignored`.
 */
export function compileJsonSchema(schema: unknown, opts: CompileOptions = {}): CompileResult {
  if (schema !== true && schema !== false && !isObject(schema)) {
    throw new SchemaError("type", "", "a schema must be an object or a boolean", "invalid");
  }
  const ctx = new Ctx(schema, opts);
  return finish(ctx, compileParts([{ schema, path: "" }], "value", ctx));
}

/** GBNF for any JSON object: response_format {"type": "json_object"}. */
export function jsonObjectGrammar(): string {
  const b = new RuleBuilder();
  return printGbnf(b.toGrammar(anyObject(b)));
}
