// Which properties an object schema lets a value carry. Read by object
// emission (./emit.ts) and by the oneOf exclusion proof (./disjoint.ts); a
// module of its own so the proof needs nothing from emission.

import type { Ctx, Part } from "./context.ts";
import type { Norm } from "./normalize.ts";

/** The parts constraining property `key`, or null if the schema forbids it. */
export function propertyParts(n: Norm, key: string): Part[] | null {
  const out: Part[] = [];
  for (const o of n.objects) {
    const p = o.properties.get(key);
    if (p) {
      if (p.schema === false) return null;
      out.push(p);
    } else if (o.additional === false) return null;
    else if (o.additional !== undefined && o.additional !== true) out.push(o.additional);
  }
  return out;
}

export interface ObjectShape {
  /** Properties the grammar may emit, in declaration order. */
  declared: string[];
  /** Every property name any part mentions (excluded from extra keys). */
  mentioned: string[];
  required: Set<string>;
  /** Whether keys beyond `declared` may be emitted. */
  extras: boolean;
  /** Schemas extra values must satisfy. */
  extraParts: Part[];
}

export function objectShape(n: Norm, ctx: Ctx): ObjectShape {
  const names = new Set<string>();
  for (const o of n.objects) for (const k of o.properties.keys()) names.add(k);
  const required = new Set(n.objects.flatMap((o) => o.required));
  for (const k of required) names.add(k);
  const mentioned = [...names];
  ctx.budget.step(mentioned.length * n.objects.length);
  const declared = mentioned.filter((k) => propertyParts(n, k) !== null);
  // A part keeps extra keys out if additionalProperties is false, or — by
  // this compiler's policy — absent while the part lists properties.
  const extras = n.objects.every(
    (o) =>
      o.additional === true ||
      typeof o.additional === "object" ||
      (o.additional === undefined && (o.properties.size === 0 || ctx.openObjects)),
  );
  const extraParts = n.objects.flatMap((o) => (typeof o.additional === "object" ? [o.additional] : []));
  return { declared, mentioned, required, extras, extraParts };
}
