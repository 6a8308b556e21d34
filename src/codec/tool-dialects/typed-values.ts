// Argument values written as raw text (the XML-style wires: Qwen3.5's
// `<parameter=days>\n3\n</parameter>`, GLM's `<arg_value>`, MiniMax's
// `<parameter name="…">`) carry no JSON quoting: whether `3` is the number 3
// or the string "3" is the tool's schema's to say. The templates write a
// string as it is and anything else as JSON (`tojson`), so reading it back
// is: a parameter that can only be a string is a string; otherwise the text
// is parsed as JSON (Python's True/False/None accepted), kept as a string
// when it does not parse or gives a type the schema does not allow. The
// forced grammars hold a string parameter's raw text likewise (rawStringGrammar).
import type { Expr, Rule } from "../../../grammar/index.ts";
import { lit, repeat, seq, textWithout, type ToolSpec } from "../tool-grammar.ts";

type JsonType = "string" | "number" | "integer" | "boolean" | "null" | "object" | "array";
const ALL_TYPES: JsonType[] = ["string", "number", "integer", "boolean", "null", "object", "array"];

/** The schema of parameter `param` of tool `tool` (with the root's definitions, for `$ref`), if declared. */
export function parameterSchema(tools: readonly ToolSpec[] | undefined, tool: string, param: string): unknown {
  const root = tools?.find((t) => t.name === tool)?.parameters;
  if (typeof root !== "object" || root === null) return undefined;
  const r = root as Record<string, unknown>;
  const props = r.properties as Record<string, unknown> | undefined;
  const schema = props && Object.hasOwn(props, param) ? props[param] : undefined;
  return withDefinitions(schema, r);
}

/** A tool's parameters schema (its root, for definitions), its declared properties, and the names it requires. */
export function toolParameters(tool: ToolSpec): {
  root: Record<string, unknown>;
  props: Record<string, unknown>;
  required: Set<string>;
} {
  const root = (typeof tool.parameters === "object" && tool.parameters !== null ? tool.parameters : {}) as Record<
    string,
    unknown
  >;
  const props = (root.properties ?? {}) as Record<string, unknown>;
  const required = new Set(Array.isArray(root.required) ? (root.required as string[]) : []);
  return { root, props, required };
}

/** `schema` with the root's `$defs`/`definitions` beside it, so a `#/$defs/…` reference still resolves. */
export function withDefinitions(schema: unknown, root: Record<string, unknown>): unknown {
  if (typeof schema !== "object" || schema === null || !JSON.stringify(schema).includes('"$ref"')) return schema;
  return {
    ...(schema as Record<string, unknown>),
    ...(root.$defs === undefined ? {} : { $defs: root.$defs }),
    ...(root.definitions === undefined ? {} : { definitions: root.definitions }),
  };
}

/** The JSON types a schema admits (every type when it does not say). */
export function schemaTypes(schema: unknown): Set<JsonType> {
  if (typeof schema !== "object" || schema === null) return new Set(ALL_TYPES);
  const s = schema as Record<string, unknown>;
  if (typeof s.type === "string") return new Set([s.type as JsonType]);
  if (Array.isArray(s.type)) return new Set(s.type as JsonType[]);
  const values = Array.isArray(s.enum) ? s.enum : "const" in s ? [s.const] : undefined;
  if (values) return new Set(values.map(jsonType));
  const branches = (s.anyOf ?? s.oneOf) as unknown[] | undefined;
  if (Array.isArray(branches)) {
    const out = new Set<JsonType>();
    for (const b of branches) for (const t of schemaTypes(b)) out.add(t);
    return out;
  }
  return new Set(ALL_TYPES);
}

function jsonType(v: unknown): JsonType {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v as JsonType;
}

/** Whether a parameter's raw text is always a string: a schema that admits strings only. */
export function isStringOnly(schema: unknown): boolean {
  if (schema === undefined) return true; // an undeclared parameter: as the model wrote it
  const types = schemaTypes(schema);
  return types.size === 1 && types.has("string");
}

const PYTHON_LITERALS: Record<string, unknown> = { True: true, False: false, None: null };

/** A raw text value as JSON text, typed by its parameter's schema. */
export function rawValueJson(raw: string, schema: unknown): string {
  if (isStringOnly(schema)) return JSON.stringify(raw);
  const types = schemaTypes(schema);
  const text = raw.trim();
  let parsed: unknown;
  let parses = true;
  try {
    parsed = Object.hasOwn(PYTHON_LITERALS, text) ? PYTHON_LITERALS[text] : JSON.parse(text);
  } catch {
    parses = false;
  }
  if (parses) {
    const t = jsonType(parsed);
    const admitted = types.has(t) || (t === "integer" && types.has("number"));
    if (admitted || !types.has("string")) return JSON.stringify(parsed);
  }
  return JSON.stringify(raw);
}

/**
 * The forced grammar of a string parameter's raw text, which has no quoting
 * (so patterns and formats cannot be held): its enum's values, a run of
 * characters without `<` (so it cannot write its closing tag) as its length
 * bounds allow, or any text without `close`.
 */
export function rawStringGrammar(schema: unknown, close: string, rules: Rule[]): Expr {
  const s = (typeof schema === "object" && schema !== null ? schema : {}) as Record<string, unknown>;
  const values = Array.isArray(s.enum) ? s.enum : "const" in s ? [s.const] : undefined;
  if (values?.every((v) => typeof v === "string" && !v.includes(close)))
    return { kind: "alt", alts: (values as string[]).map((v) => lit(v)) };
  const min = typeof s.minLength === "number" ? s.minLength : 0;
  const max = typeof s.maxLength === "number" ? s.maxLength : null;
  const plain: Expr = { kind: "class", negated: true, ranges: [[0x3c, 0x3c]] }; // not `<`
  if (max !== null) return repeat(plain, min, max);
  const rest = textWithout(close, `raw-${close.replace(/[^a-zA-Z0-9]/g, "") || "v"}`, rules);
  return min > 0 ? seq(repeat(plain, min, min), rest) : rest;
}
