// A small validator for the keywords the compiler supports. It is used to
// decide which `enum`/`const` values also satisfy their sibling constraints
// (only those are emitted) and to prove oneOf branches disjoint. Where it
// meets a keyword it cannot evaluate it defers to Ctx.unsupported, exactly
// like the compiler.

import type { Ctx } from "./context.ts";
import { canonical, deepEqual, isObject } from "./context.ts";
import { SchemaError, pointer } from "./errors.ts";
import { NUMBER_FORMATS, STRING_FORMATS } from "./formats.ts";
import { ANNOTATIONS } from "./keywords.ts";

const formatRegexCache = new Map<string, RegExp>();

function formatRegex(src: string): RegExp {
  let re = formatRegexCache.get(src);
  if (!re) {
    re = new RegExp(`^(?:${src})$`, "u");
    formatRegexCache.set(src, re);
  }
  return re;
}

// Each enum's values as canonical texts, built once per enum array: checking
// every value of one enum against another would otherwise be quadratic.
const enumKeyCache = new WeakMap<unknown[], Set<string>>();

function enumKeys(values: unknown[], ctx: Ctx): Set<string> {
  let keys = enumKeyCache.get(values);
  if (!keys) {
    ctx.budget.step(values.length);
    keys = new Set(values.map(canonical));
    enumKeyCache.set(values, keys);
  }
  return keys;
}

export function jsonTypeOf(v: unknown): "null" | "boolean" | "number" | "string" | "array" | "object" {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  return typeof v as "boolean" | "number" | "string" | "object";
}

function hasType(v: unknown, t: string): boolean {
  if (t === "integer") return typeof v === "number" && Number.isInteger(v);
  return jsonTypeOf(v) === t;
}

/** Does `v` satisfy `schema` (located at `path`)? */
export function valueMatches(v: unknown, schema: unknown, path: string, ctx: Ctx, depth = 0): boolean {
  if (schema === true) return true;
  if (schema === false) return false;
  if (!isObject(schema)) throw new SchemaError("type", path, "a schema must be an object or a boolean", "invalid");
  if (depth > 64) throw new SchemaError("$ref", path, "schema nesting too deep to check enum values");
  ctx.budget.step();
  const s = schema;
  const sub = (x: unknown, sch: unknown, p: string) => valueMatches(x, sch, p, ctx, depth + 1);
  for (const [k, kv] of Object.entries(s)) {
    if (ANNOTATIONS.has(k) || k === "$defs" || k === "definitions" || k === "nullable") continue;
    switch (k) {
      case "type": {
        const types = Array.isArray(kv) ? kv : [kv];
        if (!(types.some((t) => hasType(v, t as string)) || (v === null && s.nullable === true))) return false;
        break;
      }
      case "enum":
        if (!Array.isArray(kv) || !enumKeys(kv, ctx).has(canonical(v))) return false;
        break;
      case "const":
        if (!deepEqual(kv, v)) return false;
        break;
      case "minimum":
        if (typeof v === "number" && !(v >= (kv as number))) return false;
        break;
      case "maximum":
        if (typeof v === "number" && !(v <= (kv as number))) return false;
        break;
      case "exclusiveMinimum":
        if (typeof v === "number" && typeof kv === "number" && !(v > kv)) return false;
        break;
      case "exclusiveMaximum":
        if (typeof v === "number" && typeof kv === "number" && !(v < kv)) return false;
        break;
      case "minLength":
        if (typeof v === "string" && [...v].length < (kv as number)) return false;
        break;
      case "maxLength":
        if (typeof v === "string" && [...v].length > (kv as number)) return false;
        break;
      case "pattern": {
        if (typeof v !== "string") break;
        let re: RegExp;
        try {
          re = new RegExp(kv as string, "u");
        } catch (e) {
          throw new SchemaError(
            "pattern",
            pointer(path, k),
            `invalid regular expression: ${(e as Error).message}`,
            "invalid",
          );
        }
        if (!re.test(v)) return false;
        break;
      }
      case "format": {
        const f = kv as string;
        if (f in STRING_FORMATS) {
          const src = STRING_FORMATS[f] ?? null;
          if (typeof v === "string" && src !== null && !formatRegex(src).test(v)) return false;
        } else if (f in NUMBER_FORMATS) {
          const nf = NUMBER_FORMATS[f]!;
          if (typeof v === "number") {
            if (nf.integer && !Number.isInteger(v)) return false;
            if (nf.min !== undefined && v < nf.min) return false;
            if (nf.max !== undefined && v > nf.max) return false;
          }
        } else {
          ctx.unsupported("format", path, `format '${f}' is not supported`);
        }
        break;
      }
      case "minItems":
        if (Array.isArray(v) && v.length < (kv as number)) return false;
        break;
      case "maxItems":
        if (Array.isArray(v) && v.length > (kv as number)) return false;
        break;
      case "prefixItems":
        if (Array.isArray(v) && Array.isArray(kv)) {
          for (let i = 0; i < Math.min(v.length, kv.length); i++)
            if (!sub(v[i], kv[i], pointer(path, k, i))) return false;
        }
        break;
      case "items":
        if (Array.isArray(v)) {
          if (Array.isArray(kv)) {
            for (let i = 0; i < Math.min(v.length, kv.length); i++)
              if (!sub(v[i], kv[i], pointer(path, k, i))) return false;
          } else {
            const start = Array.isArray(s.prefixItems) ? s.prefixItems.length : 0;
            for (let i = start; i < v.length; i++) if (!sub(v[i], kv, pointer(path, k))) return false;
          }
        }
        break;
      case "additionalItems":
        if (Array.isArray(v) && Array.isArray(s.items)) {
          for (let i = s.items.length; i < v.length; i++) if (!sub(v[i], kv, pointer(path, k))) return false;
        }
        break;
      case "properties":
        if (isObject(v) && isObject(kv)) {
          for (const [pk, ps] of Object.entries(kv)) if (pk in v && !sub(v[pk], ps, pointer(path, k, pk))) return false;
        }
        break;
      case "required":
        if (isObject(v) && Array.isArray(kv) && !kv.every((r) => (r as string) in v)) return false;
        break;
      case "additionalProperties":
        if (isObject(v)) {
          const declared = isObject(s.properties) ? s.properties : {};
          for (const key of Object.keys(v)) if (!(key in declared) && !sub(v[key], kv, pointer(path, k))) return false;
        }
        break;
      case "$ref": {
        const target = ctx.resolve(kv, pointer(path, k));
        if (!sub(v, target.schema, target.path)) return false;
        break;
      }
      case "allOf":
        if (!(kv as unknown[]).every((x, i) => sub(v, x, pointer(path, k, i)))) return false;
        break;
      case "anyOf":
        if (!(kv as unknown[]).some((x, i) => sub(v, x, pointer(path, k, i)))) return false;
        break;
      case "oneOf":
        if ((kv as unknown[]).filter((x, i) => sub(v, x, pointer(path, k, i))).length !== 1) return false;
        break;
      default:
        ctx.unsupported(k, path);
    }
  }
  return true;
}
