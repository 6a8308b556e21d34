// The one error type the schema compiler throws. Its message is what the API
// returns with the 400: "constraint unsatisfiable: <detail>".

import type { GrammarLimits } from "../limits.ts";

export type SchemaErrorKind =
  /** A keyword (or keyword use) the compiler cannot enforce. */
  | "unsupported"
  /** No JSON value satisfies the schema (or this part of it). */
  | "unsatisfiable"
  /** The schema itself is malformed. */
  | "invalid"
  /** Compiling it would exceed the budget (../limits.ts); `limit` names which part. */
  | "limit";

export class SchemaError extends Error {
  /** The keyword that cannot be honoured (e.g. "pattern", "multipleOf"). */
  readonly keyword: string;
  /** JSON pointer to the schema object holding the keyword ("" = root). */
  readonly path: string;
  /** The detail, without the "constraint unsatisfiable" prefix. */
  readonly detail: string;
  readonly kind: SchemaErrorKind;
  /** For kind "limit": the GrammarLimits entry that was exceeded. */
  readonly limit?: keyof GrammarLimits;
  constructor(
    keyword: string,
    path: string,
    detail: string,
    kind: SchemaErrorKind = "unsupported",
    limit?: keyof GrammarLimits,
  ) {
    const where = path === "" ? "/" : path;
    super(`constraint unsatisfiable: ${detail} (${keyword === "" ? "" : `keyword '${keyword}' `}at ${where})`);
    this.name = "SchemaError";
    this.keyword = keyword;
    this.path = path;
    this.detail = detail;
    this.kind = kind;
    this.limit = limit;
  }
}

/** Append segments to a JSON pointer (RFC 6901 escaping). */
export function pointer(path: string, ...segments: (string | number)[]): string {
  return path + segments.map((s) => `/${String(s).replace(/~/g, "~0").replace(/\//g, "~1")}`).join("");
}
