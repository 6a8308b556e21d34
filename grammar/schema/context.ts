// State shared by one compilation: options, the rule builder, $ref
// resolution and the list of keywords ignored under strict: false.

import type { GrammarLimits } from "../limits.ts";
import { CompileBudget } from "./budget.ts";
import { RuleBuilder, type JsonLayout } from "./builder.ts";
import { SchemaError, pointer } from "./errors.ts";

/** A (sub)schema together with the JSON pointer where it sits. */
export interface Part {
  schema: unknown;
  path: string;
}

export interface CompileOptions {
  /**
   * Refuse keywords that cannot be enforced (default true). With false they
   * are ignored and listed in the result's `ignored`.
   */
  strict?: boolean;
  /**
   * Whether objects that declare `properties` but not `additionalProperties`
   * may carry extra keys. JSON Schema says yes; the default here is no: for
   * generation, inventing undeclared keys is never what the caller wants, and
   * every object produced is still valid.
   */
  additionalProperties?: boolean;
  /** Whitespace allowed between JSON tokens (default "pretty"; see JsonLayout). */
  layout?: JsonLayout;
  /** Overrides of the compile budget's DEFAULT_LIMITS (../limits.ts). */
  limits?: Partial<GrammarLimits>;
  /** A budget shared with other compilations (then `limits` is ignored). */
  budget?: CompileBudget;
}

export class Ctx {
  readonly b: RuleBuilder;
  readonly strict: boolean;
  readonly openObjects: boolean;
  readonly ignored = new Set<string>();
  /** $ref target pointer → rule name. */
  readonly refRules = new Map<string, string>();
  depth = 0;
  readonly budget: CompileBudget;

  constructor(
    readonly root: unknown,
    opts: CompileOptions,
  ) {
    this.budget = opts.budget ?? new CompileBudget(opts.limits);
    this.b = new RuleBuilder(opts.layout, (bytes) => this.budget.grow(bytes));
    this.strict = opts.strict ?? true;
    this.openObjects = opts.additionalProperties ?? false;
  }

  /** A keyword that cannot be enforced: throw, or note it when not strict. */
  unsupported(keyword: string, schemaPath: string, detail?: string): void {
    const at = pointer(schemaPath, keyword);
    if (this.strict)
      throw new SchemaError(keyword, at, detail ?? `keyword '${keyword}' cannot be enforced by the grammar`);
    this.ignored.add(at);
  }

  /** Resolve a local $ref ("#", "#/$defs/x", "#/definitions/x", any local JSON pointer). */
  resolve(ref: unknown, refPath: string): Part {
    if (typeof ref !== "string") throw new SchemaError("$ref", refPath, "$ref must be a string", "invalid");
    if (!ref.startsWith("#"))
      throw new SchemaError(
        "$ref",
        refPath,
        `remote $ref '${ref}' is not supported (only references into this schema)`,
      );
    const frag = ref.slice(1);
    if (frag !== "" && !frag.startsWith("/"))
      throw new SchemaError(
        "$ref",
        refPath,
        `anchor $ref '${ref}' is not supported (use a JSON pointer such as #/$defs/name)`,
      );
    let cur: unknown = this.root;
    let path = "";
    for (const raw of frag === "" ? [] : frag.slice(1).split("/")) {
      let seg: string;
      try {
        seg = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~");
      } catch {
        throw new SchemaError("$ref", refPath, `malformed $ref '${ref}'`, "invalid");
      }
      if (cur === null || typeof cur !== "object" || !(seg in (cur as object))) {
        throw new SchemaError("$ref", refPath, `$ref '${ref}' does not resolve inside the schema`, "invalid");
      }
      cur = (cur as Record<string, unknown>)[seg];
      path = pointer(path, seg);
    }
    return { schema: cur, path };
  }
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== "object") return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((x, i) => deepEqual(x, bb[i]));
  }
  const ka = Object.keys(a as object);
  const kb = Object.keys(b as object);
  return (
    ka.length === kb.length &&
    ka.every(
      (k) => k in (b as object) && deepEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]),
    )
  );
}

/** A canonical text per JSON value: equal texts exactly for deepEqual values (hashable, unlike deepEqual). */
export function canonical(v: unknown): string {
  if (v === null || typeof v !== "object") return JSON.stringify(v) ?? "undefined";
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  const keys = Object.keys(v).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`).join(",")}}`;
}
