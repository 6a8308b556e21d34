// Keyword classification. Anything not listed as enforced or annotation is
// refused (or, with strict: false, ignored and reported) — never silently
// dropped.

/** Keywords the compiler enforces exactly. */
export const ENFORCED = new Set([
  "type",
  "enum",
  "const",
  "nullable",
  "properties",
  "required",
  "additionalProperties",
  "items",
  "prefixItems",
  "additionalItems",
  "minItems",
  "maxItems",
  "minLength",
  "maxLength",
  "pattern",
  "format",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "$ref",
  "anyOf",
  "oneOf",
  "allOf",
  // Containers for $ref targets; their contents are checked when referenced.
  "$defs",
  "definitions",
]);

/** Keywords with no effect on validation. */
export const ANNOTATIONS = new Set([
  "title",
  "description",
  "examples",
  "default",
  "$schema",
  "$id",
  "$comment",
  "deprecated",
  "readOnly",
  "writeOnly",
]);

/** Type-specific keywords, used to infer the type when `type` is absent. */
export const TYPE_KEYWORDS: Record<string, string[]> = {
  object: ["properties", "required", "additionalProperties"],
  array: ["items", "prefixItems", "additionalItems", "minItems", "maxItems"],
  string: ["minLength", "maxLength", "pattern"],
  number: ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"],
};

/** The type family of each type-specific keyword. */
export const FAMILY_OF: ReadonlyMap<string, string> = new Map(
  Object.entries(TYPE_KEYWORDS).flatMap(([fam, kws]) => kws.map((k) => [k, fam] as const)),
);

export const JSON_TYPES = ["object", "array", "string", "number", "integer", "boolean", "null"] as const;
export type JsonType = (typeof JSON_TYPES)[number];
