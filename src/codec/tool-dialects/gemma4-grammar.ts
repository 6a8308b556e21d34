// Gemma 4's argument syntax, and the grammar of a forced call in it.
//
// Gemma 4's template writes a call's arguments with its own value syntax
// (format_argument with escape_keys=False): strings between `<|"|>` tokens,
// raw (no escaping at all), keys bare, keys of every object in dictsort order
// (case-insensitive), `true`/`false`, numbers as Python prints them, None for
// null, and no whitespace anywhere:
//   {city:<|"|>Paris<|"|>,days:3,tags:[<|"|>a<|"|>,<|"|>b<|"|>],opts:{deep:true}}
// JSON-schema grammars cannot be reused for it (their strings are JSON's), so
// this compiles the schema features it can honour into that syntax and
// refuses the rest with the schema compiler's SchemaError. Numbers and
// integers are the same text in both syntaxes: their subschemas go to the
// JSON-schema compiler, bounds and all.
import { ANNOTATIONS as SCHEMA_ANNOTATIONS } from "../../../grammar/schema/keywords.ts";
import { type CompileBudget, compileJsonSchema, namespaceGrammar, SchemaError } from "../../../grammar/index.ts";
import { alt, cls, EMPTY, lit, opt, ref, repeat, seq, star, type Expr, type Rule } from "../../../grammar/gbnf/ast.ts";
import { callsGrammar, type ToolSpec } from "../tool-grammar.ts";

/** The token around every string value. */
export const GEMMA_QUOTE = '<|"|>';

/** Object keys in the order the template's dictsort puts them (case-insensitive, stable). */
export function dictsortKeys(keys: string[]): string[] {
  return [...keys].sort((a, b) => {
    const la = a.toLowerCase();
    const lb = b.toLowerCase();
    return la < lb ? -1 : la > lb ? 1 : 0;
  });
}

/** A JSON value in Gemma's argument syntax, as the template renders it. */
export function formatGemmaValue(value: unknown): string {
  if (typeof value === "string") return GEMMA_QUOTE + value + GEMMA_QUOTE;
  if (value === null || value === undefined) return "None";
  if (Array.isArray(value)) return `[${value.map(formatGemmaValue).join(",")}]`;
  if (typeof value === "object") {
    const o = value as Record<string, unknown>;
    return `{${dictsortKeys(Object.keys(o))
      .map((k) => `${k}:${formatGemmaValue(o[k])}`)
      .join(",")}}`;
  }
  return String(value);
}

// ---------------------------------------------------------------------------
// Schema → grammar.

/** Keywords with no effect on the values: the JSON-schema compiler's, and the definitions a `$ref` reads. */
const ANNOTATIONS = new Set([...SCHEMA_ANNOTATIONS, "$defs", "definitions"]);
/** Keywords enforced here; any other keyword is refused. */
const ENFORCED = new Set([
  "type",
  "enum",
  "const",
  "nullable",
  "anyOf",
  "oneOf",
  "allOf",
  "$ref",
  "properties",
  "required",
  "additionalProperties",
  "items",
  "minItems",
  "maxItems",
  "minLength",
  "maxLength",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
]);
const NUMBER_KEYWORDS = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"];
/** Keywords that imply a type when `type` is absent. */
const TYPE_OF_KEYWORD: Record<string, string> = {
  properties: "object",
  required: "object",
  additionalProperties: "object",
  items: "array",
  minItems: "array",
  maxItems: "array",
  minLength: "string",
  maxLength: "string",
  minimum: "number",
  maximum: "number",
  exclusiveMinimum: "number",
  exclusiveMaximum: "number",
};
const ALL_TYPES = ["object", "array", "string", "number", "integer", "boolean", "null"];

/** A key the parser can read back bare: no delimiter, bracket, quote or space in it. */
const BARE_KEY = /^[^\s:,{}[\]<>"]+$/;

const Q = lit(GEMMA_QUOTE);
const NOT_LT = cls([[0x3c, 0x3c]], true);
/** Characters after `<` that cannot continue it into `<|"|>`. */
const except = (...chars: string[]) =>
  cls(
    chars.map((c) => [c.codePointAt(0)!, c.codePointAt(0)!]),
    true,
  );
/**
 * A string's raw content: any text without `<|"|>` in it. Written as runs of
 * `<` each followed by a character that breaks the delimiter (or by its
 * partial prefix, then the next run or the end), so no text parses two ways.
 */
const STRING_BODY = seq(
  star(NOT_LT),
  star(
    seq(
      repeat(lit("<"), 1, null),
      alt(
        seq(except("<", "|"), star(NOT_LT)),
        seq(
          lit("|"),
          opt(
            alt(
              seq(except("<", '"'), star(NOT_LT)),
              seq(
                lit('"'),
                opt(alt(seq(except("<", "|"), star(NOT_LT)), seq(lit("|"), opt(seq(except("<", ">"), star(NOT_LT)))))),
              ),
            ),
          ),
        ),
      ),
    ),
  ),
  star(lit("<")),
);

type Schema = Record<string, unknown>;

const isSchemaObject = (s: unknown): s is Schema => typeof s === "object" && s !== null && !Array.isArray(s);

function typeOfValue(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

/** Compiles one tool's parameter schema into rules named under `prefix`. */
class GemmaSchemaCompiler {
  readonly rules: Rule[] = [];
  private readonly taken = new Set<string>();
  private readonly refRules = new Map<string, string>();
  private readonly shared = new Map<string, Expr>();

  constructor(
    private readonly root: unknown,
    private readonly prefix: string,
    private readonly budget: CompileBudget,
  ) {}

  /** The call's arguments: always an object. */
  arguments(): Expr {
    return this.value(this.root ?? { type: "object" }, "", true);
  }

  private name(hint: string): string {
    let name = `${this.prefix}-${hint}`;
    for (let i = 2; this.taken.has(name); i++) name = `${this.prefix}-${hint}-${i}`;
    this.taken.add(name);
    return name;
  }

  private define(name: string, body: Expr): Expr {
    this.rules.push({ name, body });
    this.budget.grow(name.length);
    return ref(name);
  }

  private rule(hint: string, body: Expr): Expr {
    return this.define(this.name(hint), body);
  }

  /** A rule made once per tool (strings, any value, ...). */
  private once(hint: string, make: (name: string) => Expr): Expr {
    let known = this.shared.get(hint);
    if (!known) {
      const name = this.name(hint);
      known = ref(name);
      this.shared.set(hint, known);
      this.define(name, make(name));
    }
    return known;
  }

  private value(schema: unknown, path: string, objectOnly = false): Expr {
    this.budget.step();
    this.budget.at = path;
    if (schema === true || (isSchemaObject(schema) && Object.keys(schema).every((k) => ANNOTATIONS.has(k))))
      return objectOnly ? this.anyObject() : this.anyValue();
    if (schema === false) throw new SchemaError("", path, "no value satisfies the schema false", "unsatisfiable");
    if (!isSchemaObject(schema)) throw new SchemaError("", path, "a schema must be an object or a boolean", "invalid");
    for (const k of Object.keys(schema)) {
      if (!ANNOTATIONS.has(k) && !ENFORCED.has(k))
        throw new SchemaError(k, `${path}/${k}`, `keyword '${k}' cannot be enforced in Gemma's call syntax`);
    }
    const constraints = Object.keys(schema).filter((k) => !ANNOTATIONS.has(k));
    const alone = (keyword: string) => {
      if (constraints.length > 1)
        throw new SchemaError(
          keyword,
          `${path}/${keyword}`,
          `'${keyword}' beside other keywords cannot be enforced in Gemma's call syntax`,
        );
    };
    if ("$ref" in schema) {
      alone("$ref");
      return this.refRule(schema.$ref, `${path}/$ref`, objectOnly);
    }
    if ("allOf" in schema) {
      alone("allOf");
      const parts = schema.allOf;
      if (!Array.isArray(parts) || parts.length !== 1)
        throw new SchemaError(
          "allOf",
          `${path}/allOf`,
          "only a single-schema allOf can be enforced in Gemma's call syntax",
        );
      return this.value(parts[0], `${path}/allOf/0`, objectOnly);
    }
    for (const keyword of ["anyOf", "oneOf"] as const) {
      if (!(keyword in schema)) continue;
      alone(keyword);
      const branches = schema[keyword];
      if (!Array.isArray(branches) || branches.length === 0)
        throw new SchemaError(keyword, `${path}/${keyword}`, `${keyword} must be a non-empty array`, "invalid");
      if (keyword === "oneOf") this.checkDisjoint(branches, `${path}/oneOf`);
      const alts: Expr[] = [];
      for (const [i, branch] of branches.entries()) {
        try {
          alts.push(this.value(branch, `${path}/${keyword}/${i}`, objectOnly));
        } catch (err) {
          // A branch no value can take (or no object, for the arguments) drops out.
          if (!(err instanceof SchemaError && err.kind === "unsatisfiable")) throw err;
        }
      }
      if (alts.length === 0)
        throw new SchemaError(
          keyword,
          `${path}/${keyword}`,
          `no branch of ${keyword} can be satisfied`,
          "unsatisfiable",
        );
      return alt(...alts);
    }
    let types = this.types(schema, path);
    if (objectOnly) types = types.filter((t) => t === "object");
    if ("const" in schema || "enum" in schema) return this.literals(schema, types, path);
    if (types.length === 0)
      throw new SchemaError("type", path, "the call's arguments must be an object", "unsatisfiable");
    // A number schema also admits every integer.
    if (types.includes("number")) types = types.filter((t) => t !== "integer");
    return alt(...types.map((t) => this.typed(schema, t, path)));
  }

  private types(schema: Schema, path: string): string[] {
    const t = schema.type;
    let types: string[];
    if (typeof t === "string") types = [t];
    else if (Array.isArray(t)) types = t.map(String);
    else {
      const implied = new Set(Object.keys(schema).flatMap((k) => (TYPE_OF_KEYWORD[k] ? [TYPE_OF_KEYWORD[k]] : [])));
      types = implied.size === 1 ? [...implied] : ALL_TYPES;
      if (implied.has("number")) types.push("integer");
    }
    for (const type of types)
      if (!ALL_TYPES.includes(type)) throw new SchemaError("type", `${path}/type`, `unknown type '${type}'`, "invalid");
    if (schema.nullable === true && !types.includes("null")) types.push("null");
    return types;
  }

  private typed(schema: Schema, type: string, path: string): Expr {
    switch (type) {
      case "string":
        return this.string(schema, path);
      case "number":
      case "integer":
        return this.number(schema, type);
      case "boolean":
        return alt(lit("true"), lit("false"));
      case "null":
        // The template prints Python's None; llama.cpp's Gemma 4 parser reads null: both are null.
        return alt(lit("None"), lit("null"));
      case "array":
        return this.array(schema, path);
      default:
        return this.object(schema, path);
    }
  }

  private literals(schema: Schema, types: string[], path: string): Expr {
    const values = "const" in schema ? [schema.const] : schema.enum;
    if (!Array.isArray(values)) throw new SchemaError("enum", `${path}/enum`, "enum must be an array", "invalid");
    const fits = values.filter((v) => {
      const t = typeOfValue(v);
      return types.includes(t) || (t === "integer" && types.includes("number"));
    });
    if (fits.length === 0)
      throw new SchemaError("enum", `${path}/enum`, "no listed value has an allowed type", "unsatisfiable");
    for (const v of fits)
      if (JSON.stringify(v).includes(GEMMA_QUOTE) || !this.writableKeys(v))
        throw new SchemaError("enum", `${path}/enum`, "a listed value cannot be written in Gemma's call syntax");
    return alt(...fits.map((v) => (v === null ? alt(lit("None"), lit("null")) : lit(formatGemmaValue(v)))));
  }

  private writableKeys(v: unknown): boolean {
    if (Array.isArray(v)) return v.every((x) => this.writableKeys(x));
    if (isSchemaObject(v)) return Object.entries(v).every(([k, x]) => BARE_KEY.test(k) && this.writableKeys(x));
    return true;
  }

  private string(schema: Schema, path: string): Expr {
    const min = this.count(schema, "minLength", path) ?? 0;
    const max = this.count(schema, "maxLength", path);
    if (max !== undefined && min > max)
      throw new SchemaError("maxLength", `${path}/maxLength`, "maxLength is below minLength", "unsatisfiable");
    if (min === 0 && max === undefined) return this.anyString();
    // Counted characters exclude `<`, so none can start the closing delimiter.
    return seq(Q, repeat(NOT_LT, min, max ?? null), Q);
  }

  private number(schema: Schema, type: string): Expr {
    const sub: Schema = { type };
    for (const k of NUMBER_KEYWORDS) if (k in schema) sub[k] = schema[k];
    return this.jsonCompiled(type, sub);
  }

  /** A scalar subschema compiled by the JSON-schema compiler (same text in both syntaxes). */
  private jsonCompiled(hint: string, schema: Schema): Expr {
    const ns = this.name(hint);
    const compiled = compileJsonSchema(schema, { layout: "compact", budget: this.budget }).grammar;
    this.rules.push(...namespaceGrammar(compiled, ns));
    return ref(`${ns}-root`);
  }

  private array(schema: Schema, path: string): Expr {
    const min = this.count(schema, "minItems", path) ?? 0;
    const max = this.count(schema, "maxItems", path);
    if (max !== undefined && min > max)
      throw new SchemaError("maxItems", `${path}/maxItems`, "maxItems is below minItems", "unsatisfiable");
    if (max === 0) return lit("[]");
    const items = schema.items;
    if (items !== undefined && typeof items !== "boolean" && !isSchemaObject(items))
      throw new SchemaError(
        "items",
        `${path}/items`,
        "only a single items schema can be enforced in Gemma's call syntax",
      );
    if (items === false) {
      if (min > 0)
        throw new SchemaError("items", `${path}/items`, "items is false but minItems is above 0", "unsatisfiable");
      return lit("[]");
    }
    const item = this.rule("item", this.value(items ?? true, `${path}/items`));
    const rest = repeat(seq(lit(","), item), Math.max(min - 1, 0), max === undefined ? null : max - 1);
    const some = seq(item, rest);
    return seq(lit("["), min === 0 ? opt(some) : some, lit("]"));
  }

  private object(schema: Schema, path: string): Expr {
    const properties = schema.properties ?? {};
    if (!isSchemaObject(properties))
      throw new SchemaError("properties", `${path}/properties`, "properties must be an object", "invalid");
    const required = schema.required ?? [];
    if (!Array.isArray(required) || !required.every((k) => typeof k === "string"))
      throw new SchemaError("required", `${path}/required`, "required must be an array of names", "invalid");
    const extra = schema.additionalProperties;
    const keys = dictsortKeys([...new Set([...Object.keys(properties), ...required])]);
    // An object without declared keys is any dict (unless extra keys are
    // refused); with declared keys, only those are written: every object
    // produced is still valid, and inventing undeclared keys is never wanted.
    if (keys.length === 0) return extra === false ? lit("{}") : this.anyObject(extra, `${path}/additionalProperties`);
    const members = keys.map((key) => {
      if (!BARE_KEY.test(key))
        throw new SchemaError(
          "properties",
          `${path}/properties`,
          `property name ${JSON.stringify(key)} cannot be written bare in Gemma's call syntax`,
        );
      const declared = key in properties;
      if (!declared && extra === false)
        throw new SchemaError(
          "required",
          `${path}/required`,
          `required property ${JSON.stringify(key)} is not allowed`,
          "unsatisfiable",
        );
      const at = declared ? `${path}/properties/${key}` : `${path}/additionalProperties`;
      const value = this.value(declared ? properties[key] : (extra ?? true), at);
      // A value written in more than one alternative of the list is a rule, not a copy.
      const shared = value.kind === "ref" || value.kind === "lit" ? value : this.rule("prop", value);
      return { member: seq(lit(`${key}:`), shared), required: required.includes(key) };
    });
    return seq(lit("{"), this.memberList(members), lit("}"));
  }

  /**
   * Members in their fixed order, optional ones left out at will, commas
   * only between those written. after(i): members i.. once one was written
   * (each with its comma); first(i): members i.. with none written yet. Each
   * is a rule made when first used (both refer to after(i + 1)).
   */
  private memberList(members: { member: Expr; required: boolean }[]): Expr {
    if (members.every((m) => m.required))
      return seq(...members.flatMap((m, i) => (i === 0 ? [m.member] : [lit(","), m.member])));
    const n = members.length;
    const afters = new Map<number, Expr>();
    const firsts = new Map<number, Expr>();
    const after = (i: number): Expr => {
      if (i === n) return EMPTY;
      let known = afters.get(i);
      if (!known) {
        const { member, required } = members[i]!;
        const withIt = seq(lit(","), member, after(i + 1));
        known = this.rule("more", required ? withIt : alt(withIt, after(i + 1)));
        afters.set(i, known);
      }
      return known;
    };
    const first = (i: number): Expr => {
      if (i === n) return EMPTY;
      let known = firsts.get(i);
      if (!known) {
        const { member, required } = members[i]!;
        const startHere = seq(member, after(i + 1));
        known = this.rule("members", required ? startHere : alt(startHere, first(i + 1)));
        firsts.set(i, known);
      }
      return known;
    };
    return first(0);
  }

  /** A non-negative integer keyword, capped by the budget. */
  private count(schema: Schema, keyword: string, path: string): number | undefined {
    const v = schema[keyword];
    if (v === undefined) return undefined;
    if (typeof v !== "number" || !Number.isInteger(v) || v < 0)
      throw new SchemaError(keyword, `${path}/${keyword}`, `${keyword} must be a non-negative integer`, "invalid");
    this.budget.cap("maxCount", v, keyword, `${path}/${keyword}`, keyword);
    return v;
  }

  private checkDisjoint(branches: unknown[], path: string): void {
    const seen = new Set<string>();
    for (const b of branches) {
      const t = isSchemaObject(b) ? b.type : undefined;
      const types = typeof t === "string" ? [t] : [];
      const numeric = types.some((x) => x === "number" || x === "integer");
      const claims = numeric ? ["number"] : types;
      if (claims.length === 0 || claims.some((x) => seen.has(x)))
        throw new SchemaError(
          "oneOf",
          path,
          "oneOf is enforced in Gemma's call syntax only when each branch has its own type",
        );
      for (const x of claims) seen.add(x);
    }
  }

  private refRule(target: unknown, path: string, objectOnly: boolean): Expr {
    if (typeof target !== "string" || !target.startsWith("#"))
      throw new SchemaError("$ref", path, "only references within the schema (#/...) are supported", "invalid");
    const key = `${objectOnly ? "o" : "v"}${target}`;
    const known = this.refRules.get(key);
    if (known) return ref(known);
    const name = this.name("ref");
    this.refRules.set(key, name);
    this.define(name, this.value(this.resolve(target, path), target.slice(1), objectOnly));
    return ref(name);
  }

  private resolve(pointer: string, path: string): unknown {
    let at: unknown = this.root;
    for (const raw of pointer.slice(1).split("/").slice(1)) {
      const seg = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~");
      if (!isSchemaObject(at) || !(seg in at))
        throw new SchemaError("$ref", path, `reference ${pointer} does not resolve`, "invalid");
      at = at[seg];
    }
    return at;
  }

  private anyString(): Expr {
    return this.once("string", () => seq(Q, STRING_BODY, Q));
  }

  private anyValue(): Expr {
    return this.once("value", (self) => {
      const value = ref(self);
      return alt(
        this.anyString(),
        this.once("number", () => this.jsonCompiled("json-number", { type: "number" })),
        lit("true"),
        lit("false"),
        lit("None"),
        lit("null"),
        this.anyObject(),
        seq(lit("["), opt(seq(value, star(seq(lit(","), value)))), lit("]")),
      );
    });
  }

  /** A dict of bare keys; its values held to `values` when given. */
  private anyObject(values?: unknown, path = ""): Expr {
    const key = this.once("key", () =>
      seq(
        cls([
          [0x41, 0x5a],
          [0x61, 0x7a],
          [0x5f, 0x5f],
        ]),
        repeat(
          cls([
            [0x30, 0x39],
            [0x41, 0x5a],
            [0x61, 0x7a],
            [0x5f, 0x5f],
          ]),
          0,
          63,
        ),
      ),
    );
    const member = (v: Expr) => seq(key, lit(":"), v);
    const dict = (v: Expr) => seq(lit("{"), opt(seq(member(v), star(seq(lit(","), member(v))))), lit("}"));
    if (values === undefined || values === true) return this.once("dict", () => dict(this.anyValue()));
    return this.rule("dict", dict(this.rule("dict-value", this.value(values, path))));
  }
}

/**
 * GBNF (root rule `root`): `<|tool_call>call:NAME{…}<tool_call|>` to one of
 * `tools`, or several back to back when `parallel` (as the template writes
 * them), arguments in Gemma's syntax and held to each tool's schema.
 */
export function gemmaCallGrammar(tools: ToolSpec[], parallel: boolean): string {
  return callsGrammar(
    tools,
    (tool, i, out) => {
      const compiler = new GemmaSchemaCompiler(tool.parameters, `tc${i}`, out.budget);
      const args = compiler.arguments();
      out.rules.push(...compiler.rules);
      return seq(lit(`call:${tool.name}`), args);
    },
    (call) => {
      const one = seq(lit("<|tool_call>"), call, lit("<tool_call|>"));
      return parallel ? repeat(one, 1, null) : one;
    },
  );
}
