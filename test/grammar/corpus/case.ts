import type { CompileOptions } from "../../../grammar/index.ts";

/** A schema the compiler must accept, with examples on both sides. */
export interface Case {
  name: string;
  schema: unknown;
  /** Valid per ajv; the grammar must accept them (compact and pretty-printed). */
  valid: unknown[];
  /** Invalid per ajv; the grammar must reject them. */
  invalid: unknown[];
  /** Raw texts the grammar must reject (not necessarily JSON). */
  invalidText?: string[];
  /**
   * Valid per ajv but deliberately not generated (documented policy: e.g.
   * undeclared keys, exponents under bounds). The grammar must reject them.
   */
  stricter?: unknown[];
  /** Validate with draft-07 ajv instead of 2020-12. */
  draft?: "07";
  options?: CompileOptions;
  /** Expected `ignored` pointers (strict: false cases). */
  ignored?: string[];
}

/** A schema the compiler must refuse. */
export interface Refused {
  name: string;
  schema: unknown;
  keyword: string;
  path: string;
  kind?: "unsupported" | "unsatisfiable" | "invalid" | "limit";
  options?: CompileOptions;
}
