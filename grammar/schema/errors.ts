// The one error type the schema compiler throws. Its message is what the API
// returns with the 400: "constraint unsatisfiable: <detail>".

export type SchemaErrorKind =
  /** A keyword (or keyword use) the compiler cannot enforce. */
  | "unsupported"
  /** No JSON value satisfies the schema (or this part of it). */
  | "unsatisfiable"
  /** The schema itself is malformed. */
  | "invalid";

export class SchemaError extends Error {
  /** The keyword that cannot be honoured (e.g. "pattern", "multipleOf"). */
  readonly keyword: string;
  /** JSON pointer to the schema object holding the keyword ("" = root). */
  readonly path: string;
  /** The detail, without the "constraint unsatisfiable" prefix. */
  readonly detail: string;
  readonly kind: SchemaErrorKind;
  constructor(keyword: string, path: string, detail: string, kind: SchemaErrorKind = "unsupported") {
    super(`constraint unsatisfiable: ${detail} (keyword '${keyword}' at ${path === "" ? "/" : path})`);
    this.name = "SchemaError";
    this.keyword = keyword;
    this.path = path;
    this.detail = detail;
    this.kind = kind;
  }
}

/** Append segments to a JSON pointer (RFC 6901 escaping). */
export function pointer(path: string, ...segments: (string | number)[]): string {
  return path + segments.map((s) => "/" + String(s).replace(/~/g, "~0").replace(/\//g, "~1")).join("");
}
