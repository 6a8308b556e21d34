// Proving two schemas share no value, so a oneOf can be compiled as a plain
// alternation (a value matching two branches would be invalid under oneOf).
// Conservative: "false" means "could not prove it", never "they overlap".

import type { Ctx, Part } from "./context.ts";
import { SchemaError } from "./errors.ts";
import { type JsonType, JSON_TYPES } from "./keywords.ts";
import { type Norm, isTrivial, normalize } from "./normalize.ts";
import { cmpDec } from "./numbers.ts";
import { objectShape, propertyParts } from "./shape.ts";
import { jsonTypeOf, valueMatches } from "./validate.ts";

/** Types the compiler generates for this schema ("integer" folded into "number"). */
function generatedTypes(n: Norm): Set<string> {
  if (n.enumValues !== null) return new Set(n.enumValues.map(jsonTypeOf));
  const types: Iterable<JsonType> = n.types ?? (n.families.size ? (n.families as Set<JsonType>) : JSON_TYPES);
  const out = new Set<string>();
  for (const t of types) out.add(t === "integer" ? "number" : t);
  return out;
}

/** Types the schema accepts (no inference from keywords: that is generation policy). */
function acceptedTypes(n: Norm): Set<string> {
  const out = new Set<string>();
  for (const t of n.types ?? JSON_TYPES) out.add(t === "integer" ? "number" : t);
  return out;
}

function matchesAll(v: unknown, n: Norm, ctx: Ctx): boolean {
  return n.flat.every((p) => valueMatches(v, p.schema, p.path, ctx));
}

function required(n: Norm): Set<string> {
  return new Set(n.objects.flatMap((o) => o.required));
}

function tryNormalize(parts: Part[], ctx: Ctx): Norm | null {
  try {
    return normalize(
      parts.filter((p) => !isTrivial(p.schema)),
      ctx,
    );
  } catch (e) {
    if (e instanceof SchemaError) return null;
    throw e;
  }
}

/** Can no value generated for `a` satisfy schema `b`? */
function excludes(a: Norm, b: Norm, ctx: Ctx, depth: number): boolean {
  const gen = generatedTypes(a);
  const acc = acceptedTypes(b);
  const shared = [...gen].filter((t) => acc.has(t));
  if (shared.length === 0) return true;
  if (a.enumValues?.every((v) => !matchesAll(v, a, ctx) || !matchesAll(v, b, ctx))) return true;
  if (shared.length === 1 && shared[0] === "number") {
    // Generated numbers lie in a's range; b accepts only its own range.
    const sep = (lo: Norm, hi: Norm) =>
      lo.hi !== null &&
      hi.lo !== null &&
      (cmpDec(lo.hi.value, hi.lo.value) < 0 ||
        (cmpDec(lo.hi.value, hi.lo.value) === 0 && (lo.hi.exclusive || hi.lo.exclusive)));
    if (sep(a, b) || sep(b, a)) return true;
  }
  if (shared.length === 1 && shared[0] === "object") {
    const ra = required(a);
    const rb = required(b);
    const shape = objectShape(a, ctx);
    for (const key of rb) {
      // b needs the key, but a never produces it.
      if (propertyParts(a, key) === null) return true;
      if (!shape.extras && !shape.declared.includes(key)) return true;
      // Both need it, with values that cannot coincide.
      const pa = propertyParts(a, key);
      const pb = propertyParts(b, key);
      if (ra.has(key) && pa && pb && pa.length && pb.length) {
        const na = tryNormalize(pa, ctx);
        const nb = tryNormalize(pb, ctx);
        if (na && nb && na.groups.length === 0 && nb.groups.length === 0 && disjoint(na, nb, ctx, depth + 1))
          return true;
      }
    }
  }
  return false;
}

/**
 * True when no value generated for either schema satisfies the other, so
 * alternation honours oneOf's "exactly one".
 */
export function disjoint(a: Norm, b: Norm, ctx: Ctx, depth = 0): boolean {
  if (depth > 4) return false;
  return excludes(a, b, ctx, depth) && excludes(b, a, ctx, depth);
}
