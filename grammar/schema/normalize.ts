// Folding a list of schemas that must all hold (a schema, its allOf members,
// inlined $ref targets) into one normalized description. Scalar keywords are
// intersected on the spot (tightest bound wins, types intersect, enums
// intersect); object and array keywords are kept per part because their
// exact meaning depends on which part declared what (additionalProperties
// only knows its own part's properties).

import type { Part } from "./context.ts";
import { type Ctx, canonical, isObject } from "./context.ts";
import { SchemaError, pointer } from "./errors.ts";
import { NUMBER_FORMATS, STRING_FORMATS } from "./formats.ts";
import { ANNOTATIONS, ENFORCED, FAMILY_OF, JSON_TYPES, type JsonType } from "./keywords.ts";
import { type Dec, cmpDec, toDec } from "./numbers.ts";

export interface NumBound {
  value: Dec;
  exclusive: boolean;
  raw: number;
  keyword: string;
  /** Pointer to the keyword. */
  at: string;
}

export interface ArrayPart {
  path: string;
  prefix: Part[];
  /** Schema for items after the prefix; undefined = anything, false = none. */
  items: Part | false | undefined;
}

export interface ObjectPart {
  path: string;
  properties: Map<string, Part>;
  required: string[];
  /** undefined = keyword absent, true/false/schema as given. */
  additional: Part | boolean | undefined;
}

export interface Group {
  kind: "anyOf" | "oneOf";
  branches: Part[];
  /** Pointer to the keyword. */
  at: string;
  /** Index into `flat` of the part that owns the group. */
  owner: number;
}

export interface Norm {
  /** The parts merged here, with allOf and $ref already expanded away. */
  flat: Part[];
  /** Explicit type constraint (intersection), null if none. */
  types: Set<JsonType> | null;
  typesAt: string;
  /** Type families that have keywords (for inferring a missing `type`). */
  families: Set<string>;
  enumValues: unknown[] | null;
  enumAt: string;
  lo: NumBound | null;
  hi: NumBound | null;
  minLength: number;
  maxLength: number | null;
  minLengthAt: string;
  patterns: { source: string; at: string }[];
  stringFormats: { name: string; at: string }[];
  numberFormats: { name: string; at: string }[];
  minItems: number;
  maxItems: number | null;
  minItemsAt: string;
  arrays: ArrayPart[];
  objects: ObjectPart[];
  groups: Group[];
}

function intersectTypes(a: Set<JsonType>, b: Set<JsonType>): Set<JsonType> {
  const out = new Set<JsonType>();
  for (const t of a) {
    if (b.has(t)) out.add(t);
    else if (t === "integer" && b.has("number")) out.add("integer");
    else if (t === "number" && b.has("integer")) out.add("integer");
  }
  return out;
}

/** A length or item count: expanded into the grammar, so bounded by maxCount. */
function count(v: unknown, keyword: string, at: string, ctx: Ctx): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0) {
    throw new SchemaError(keyword, at, `${keyword} must be a non-negative integer`, "invalid");
  }
  ctx.budget.cap("maxCount", v, keyword, at, `${keyword} is ${v}`);
  return v;
}

/** A list keyword's entries, at most maxEntries of them. */
function entries<T>(list: T[], keyword: string, at: string, ctx: Ctx): T[] {
  ctx.budget.cap("maxEntries", list.length, keyword, at, `${keyword} has ${list.length} entries`);
  ctx.budget.step(list.length);
  return list;
}

/** The values once each (in first-seen order). */
function distinct(values: unknown[]): unknown[] {
  const seen = new Set<string>();
  return values.filter((x) => {
    const key = canonical(x);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** Schemas that constrain nothing (true, {}, only annotations / definitions). */
export function isTrivial(schema: unknown): boolean {
  if (schema === true) return true;
  if (!isObject(schema)) return false;
  return Object.keys(schema).every((k) => ANNOTATIONS.has(k) || k === "$defs" || k === "definitions");
}

/** A schema that is just a $ref (plus annotations / definitions). */
export function isPureRef(schema: unknown): schema is { $ref: unknown } {
  if (!isObject(schema) || !("$ref" in schema)) return false;
  return Object.keys(schema).every((k) => k === "$ref" || ANNOTATIONS.has(k) || k === "$defs" || k === "definitions");
}

export function normalize(parts: Part[], ctx: Ctx): Norm {
  const n: Norm = {
    flat: [],
    types: null,
    typesAt: "",
    families: new Set(),
    enumValues: null,
    enumAt: "",
    lo: null,
    hi: null,
    minLength: 0,
    maxLength: null,
    minLengthAt: "",
    patterns: [],
    stringFormats: [],
    numberFormats: [],
    minItems: 0,
    maxItems: null,
    minItemsAt: "",
    arrays: [],
    objects: [],
    groups: [],
  };
  const inlining: string[] = [];
  let merged = 0;
  // Each schema folded in (through $ref or allOf) counts against maxMerged.
  const include = (part: Part, keyword: string, at: string) => {
    ctx.budget.cap("maxMerged", ++merged, keyword, at, `expanding allOf and $ref merges ${merged} schemas into one`);
    add(part);
  };

  const add = (part: Part) => {
    ctx.budget.step();
    const s = part.schema;
    if (s === true) return;
    if (s === false)
      throw new SchemaError("false", part.path, "the schema is `false`, which no value satisfies", "unsatisfiable");
    if (!isObject(s)) throw new SchemaError("type", part.path, "a schema must be an object or a boolean", "invalid");
    const stripped: Record<string, unknown> = { ...s };
    if ("$ref" in s) {
      const target = ctx.resolve(s.$ref, pointer(part.path, "$ref"));
      if (inlining.includes(target.path)) {
        throw new SchemaError(
          "$ref",
          pointer(part.path, "$ref"),
          "circular $ref that never reaches a property or item",
          "invalid",
        );
      }
      inlining.push(target.path);
      include(target, "$ref", pointer(part.path, "$ref"));
      inlining.pop();
      delete stripped.$ref;
    }
    if ("allOf" in s) {
      const list = s.allOf;
      if (!Array.isArray(list) || list.length === 0)
        throw new SchemaError("allOf", pointer(part.path, "allOf"), "allOf must be a non-empty array", "invalid");
      entries(list, "allOf", pointer(part.path, "allOf"), ctx);
      list.forEach((sub, i) =>
        include({ schema: sub, path: pointer(part.path, "allOf", i) }, "allOf", pointer(part.path, "allOf")),
      );
      delete stripped.allOf;
    }
    const owner = n.flat.length;
    n.flat.push({ schema: stripped, path: part.path });
    addKeywords(n, s, part.path, owner, ctx);
  };
  for (const p of parts) add(p);
  return n;
}

function addKeywords(n: Norm, s: Record<string, unknown>, path: string, owner: number, ctx: Ctx): void {
  const at = (k: string) => pointer(path, k);
  let arrayPart: ArrayPart | undefined;
  let objectPart: ObjectPart | undefined;
  const arr = () => (arrayPart ??= { path, prefix: [], items: undefined });
  const obj = () => (objectPart ??= { path, properties: new Map(), required: [], additional: undefined });

  for (const [k, v] of Object.entries(s)) {
    if (ANNOTATIONS.has(k)) continue;
    if (!ENFORCED.has(k)) {
      ctx.unsupported(k, path);
      continue;
    }
    const family = FAMILY_OF.get(k);
    if (family) n.families.add(family);
    switch (k) {
      case "type": {
        const list = Array.isArray(v) ? v : [v];
        if (list.length === 0 || !list.every((t) => (JSON_TYPES as readonly unknown[]).includes(t))) {
          throw new SchemaError("type", at(k), `unknown type ${JSON.stringify(v)}`, "invalid");
        }
        const set = new Set(list as JsonType[]);
        if (s.nullable === true) set.add("null");
        n.types = n.types === null ? set : intersectTypes(n.types, set);
        n.typesAt = at(k);
        break;
      }
      case "nullable":
        // Only meaningful next to `type` (handled there), as in OpenAPI/ajv.
        if (typeof v !== "boolean") throw new SchemaError(k, at(k), "nullable must be a boolean", "invalid");
        break;
      case "enum":
      case "const": {
        let values: unknown[];
        if (k === "enum") {
          if (!Array.isArray(v)) throw new SchemaError(k, at(k), "enum must be an array", "invalid");
          values = distinct(entries(v, k, at(k), ctx));
        } else {
          values = [v];
        }
        if (n.enumValues === null) n.enumValues = values;
        else {
          const keys = new Set(values.map(canonical));
          n.enumValues = n.enumValues.filter((x) => keys.has(canonical(x)));
        }
        n.enumAt = at(k);
        break;
      }
      case "minimum":
      case "maximum":
      case "exclusiveMinimum":
      case "exclusiveMaximum": {
        if (typeof v === "boolean") {
          throw new SchemaError(k, at(k), `boolean ${k} (draft-04 style) is not supported; give the bound as a number`);
        }
        if (typeof v !== "number" || !Number.isFinite(v))
          throw new SchemaError(k, at(k), `${k} must be a number`, "invalid");
        const b: NumBound = { value: toDec(v), exclusive: k.startsWith("exclusive"), raw: v, keyword: k, at: at(k) };
        if (k === "minimum" || k === "exclusiveMinimum") {
          const c = n.lo === null ? 1 : cmpDec(b.value, n.lo.value);
          if (c > 0 || (c === 0 && b.exclusive)) n.lo = b;
        } else {
          const c = n.hi === null ? -1 : cmpDec(b.value, n.hi.value);
          if (c < 0 || (c === 0 && b.exclusive)) n.hi = b;
        }
        break;
      }
      case "minLength":
        if (count(v, k, at(k), ctx) >= n.minLength) {
          n.minLength = v as number;
          n.minLengthAt = at(k);
        }
        break;
      case "maxLength": {
        const m = count(v, k, at(k), ctx);
        n.maxLength = n.maxLength === null ? m : Math.min(n.maxLength, m);
        break;
      }
      case "pattern":
        if (typeof v !== "string") throw new SchemaError(k, at(k), "pattern must be a string", "invalid");
        n.patterns.push({ source: v, at: at(k) });
        break;
      case "format":
        if (typeof v !== "string") throw new SchemaError(k, at(k), "format must be a string", "invalid");
        if (v in STRING_FORMATS) n.stringFormats.push({ name: v, at: at(k) });
        else if (v in NUMBER_FORMATS) n.numberFormats.push({ name: v, at: at(k) });
        else ctx.unsupported(k, path, `format '${v}' is not supported`);
        break;
      case "minItems":
        if (count(v, k, at(k), ctx) >= n.minItems) {
          n.minItems = v as number;
          n.minItemsAt = at(k);
        }
        break;
      case "maxItems": {
        const m = count(v, k, at(k), ctx);
        n.maxItems = n.maxItems === null ? m : Math.min(n.maxItems, m);
        break;
      }
      case "prefixItems":
        if (!Array.isArray(v)) throw new SchemaError(k, at(k), "prefixItems must be an array", "invalid");
        arr().prefix = entries(v, k, at(k), ctx).map((x, i) => ({ schema: x, path: pointer(path, k, i) }));
        break;
      case "items":
        if (Array.isArray(v)) {
          // Draft-07 tuple form: items is the prefix, additionalItems the rest.
          arr().prefix = entries(v, k, at(k), ctx).map((x, i) => ({ schema: x, path: pointer(path, k, i) }));
        } else {
          arr().items = v === true ? undefined : v === false ? false : { schema: v, path: at(k) };
        }
        break;
      case "additionalItems":
        if (Array.isArray(s.items))
          arr().items = v === true ? undefined : v === false ? false : { schema: v, path: at(k) };
        break;
      case "properties":
        if (!isObject(v)) throw new SchemaError(k, at(k), "properties must be an object", "invalid");
        for (const [name, ps] of entries(Object.entries(v), k, at(k), ctx))
          obj().properties.set(name, { schema: ps, path: pointer(path, k, name) });
        break;
      case "required":
        if (!Array.isArray(v) || !v.every((x) => typeof x === "string"))
          throw new SchemaError(k, at(k), "required must be an array of strings", "invalid");
        obj().required = [...new Set(entries(v as string[], k, at(k), ctx))];
        break;
      case "additionalProperties":
        obj().additional = typeof v === "boolean" ? v : { schema: v, path: at(k) };
        break;
      case "anyOf":
      case "oneOf":
        if (!Array.isArray(v) || v.length === 0)
          throw new SchemaError(k, at(k), `${k} must be a non-empty array`, "invalid");
        n.groups.push({
          kind: k,
          branches: entries(v, k, at(k), ctx).map((x, i) => ({ schema: x, path: pointer(path, k, i) })),
          at: at(k),
          owner,
        });
        break;
      case "$ref":
      case "allOf":
      case "$defs":
      case "definitions":
        break; // expanded by normalize / used by $ref resolution
    }
  }
  if (arrayPart) n.arrays.push(arrayPart);
  if (objectPart) n.objects.push(objectPart);
}
