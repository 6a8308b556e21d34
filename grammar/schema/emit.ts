// Emission of a normalized schema (no anyOf/oneOf left) as GBNF, per type.
// Property and item values are whole schemas again: they go back through the
// compiler, which the caller passes in (SubCompile) so that this module does
// not import ./compile.ts, which imports it.

import type { Expr } from "../gbnf/ast.ts";
import { EMPTY, alt, lit, opt, seq, star } from "../gbnf/ast.ts";
import type { RNode } from "../regex/parse.ts";
import { RegexError, parseRegex } from "../regex/parse.ts";
import { boundedRepeat } from "../regex/translate.ts";
import type { Ctx, Part } from "./context.ts";
import { SchemaError } from "./errors.ts";
import { NUMBER_FORMATS, STRING_FORMATS } from "./formats.ts";
import {
  anyArray,
  anyInteger,
  anyNumber,
  anyObject,
  anyValue,
  booleanExpr,
  jsonStringLiteral,
  jsonValueLiteral,
  literalTrie,
  MAX_NUMBER_DIGITS,
  nullExpr,
  sepWs,
  ws,
} from "./json.ts";
import type { NumBound, Norm } from "./normalize.ts";
import { type Caps, type Dec, decimalRange, integerRange, toDec } from "./numbers.ts";
import { objectShape, propertyParts } from "./shape.ts";
import { stringExcluding, stringExpr } from "./strings.ts";
import { valueMatches } from "./validate.ts";

function unsat(keyword: string, at: string, detail: string): SchemaError {
  return new SchemaError(keyword, at, detail, "unsatisfiable");
}

/** Run `f`; an unsatisfiable result becomes null. */
function orNull<T>(f: () => T): T | null {
  try {
    return f();
  } catch (e) {
    if (e instanceof SchemaError && e.kind === "unsatisfiable") return null;
    throw e;
  }
}

const schemaPathOf = (at: string) => at.slice(0, at.lastIndexOf("/"));

/** Compiles the schemas that must all hold for a property or item value (compile.ts's compileParts). */
export type SubCompile = (parts: Part[], hint: string, ctx: Ctx) => Expr;

export function emitNorm(n: Norm, hint: string, ctx: Ctx, compileParts: SubCompile): Expr {
  const b = ctx.b;
  if (n.enumValues !== null) {
    // Only values that also satisfy every sibling keyword are offered.
    const values = n.enumValues.filter((v) => n.flat.every((p) => valueMatches(v, p.schema, p.path, ctx)));
    ctx.budget.step(values.length);
    if (values.length === 0)
      throw unsat(
        n.enumAt.endsWith("/const") ? "const" : "enum",
        n.enumAt,
        "no enum/const value satisfies the other constraints",
      );
    const strings = values.filter((v): v is string => typeof v === "string");
    const others = values.filter((v) => typeof v !== "string");
    return alt(
      ...(strings.length ? [literalTrie(strings.map((v) => JSON.stringify(v)))] : []),
      ...others.map((v) => jsonValueLiteral(v, b)),
    );
  }
  // Without `type`, generate the types whose keywords appear (a schema with
  // `properties` is meant to describe objects); with none, any value.
  const types = n.types ? new Set<string>(n.types) : n.families.size ? new Set<string>(n.families) : null;
  if (types === null && n.stringFormats.length === 0 && n.numberFormats.length === 0) return anyValue(b);
  const want = types ?? new Set(["object", "array", "string", "number", "boolean", "null"]);
  if (want.size === 0) throw unsat("type", n.typesAt, "the type constraints have no type in common");
  const emitters: [string, () => Expr][] = [
    ["object", () => emitObject(n, hint, ctx, compileParts)],
    ["array", () => emitArray(n, hint, ctx, compileParts)],
    ["string", () => emitString(n, hint, ctx)],
    ["number", () => emitNumber(n, hint, ctx, !want.has("number"))],
    ["boolean", () => booleanExpr(b)],
    ["null", () => nullExpr()],
  ];
  const alts: Expr[] = [];
  let firstError: unknown;
  for (const [t, emit] of emitters) {
    if (!(want.has(t) || (t === "number" && want.has("integer")))) continue;
    try {
      alts.push(emit());
    } catch (e) {
      if (!(e instanceof SchemaError && e.kind === "unsatisfiable")) throw e;
      firstError ??= e;
    }
  }
  if (alts.length === 0) throw firstError;
  return alt(...alts);
}

// --- numbers -----------------------------------------------------------------

const TWO53 = 2 ** 53;

function signed(d: Dec): bigint {
  return d.neg ? -d.int : d.int;
}

function ceilDec(d: Dec): bigint {
  return d.frac === "" ? signed(d) : d.neg ? -d.int : d.int + 1n;
}

function floorDec(d: Dec): bigint {
  return d.frac === "" ? signed(d) : d.neg ? -(d.int + 1n) : d.int;
}

function emitNumber(n: Norm, hint: string, ctx: Ctx, integerOnly: boolean): Expr {
  let integer = integerOnly;
  let lo: NumBound | null = n.lo;
  let hi: NumBound | null = n.hi;
  for (const f of n.numberFormats) {
    const nf = NUMBER_FORMATS[f.name]!;
    if (nf.integer) integer = true;
    if (nf.min !== undefined && (lo === null || nf.min > lo.raw))
      lo = { value: toDec(nf.min), exclusive: false, raw: nf.min, keyword: "format", at: f.at };
    if (nf.max !== undefined && (hi === null || nf.max < hi.raw))
      hi = { value: toDec(nf.max), exclusive: false, raw: nf.max, keyword: "format", at: f.at };
  }
  const empty = () => unsat((lo ?? hi)!.keyword, (lo ?? hi)!.at, "the numeric bounds leave no value");
  if (integer) {
    if (!lo && !hi) return anyInteger(ctx.b);
    for (const bd of [lo, hi]) {
      if (bd?.exclusive && Math.abs(bd.raw) > TWO53) {
        throw new SchemaError(
          bd.keyword,
          bd.at,
          "an exclusive bound beyond 2^53 cannot be enforced exactly (doubles there are not consecutive integers)",
        );
      }
    }
    let l = lo ? (lo.exclusive ? floorDec(lo.value) + 1n : ceilDec(lo.value)) : null;
    let h = hi ? (hi.exclusive ? ceilDec(hi.value) - 1n : floorDec(hi.value)) : null;
    // The open side gets the digit bound of an unbounded integer, or as many
    // digits as the other side's bound has (json.ts, MAX_NUMBER_DIGITS).
    const widest = (x: bigint) => 10n ** BigInt(Math.max(MAX_NUMBER_DIGITS, (x < 0n ? -x : x).toString().length)) - 1n;
    if (h === null) h = widest(l!);
    if (l === null) l = -widest(h);
    const e = integerRange(l, h);
    if (e === null) throw empty();
    return ctx.b.rule(`${hint}-int`, e);
  }
  if (!lo && !hi) return anyNumber(ctx.b);
  // Without an exclusive bound the digits are bounded as an unbounded
  // number's are, or as far as the bounds' own digits need.
  const intDigitsOf = (x: NumBound | null) => (x ? x.value.int.toString().length : 0);
  const fracDigitsOf = (x: NumBound | null) => (x ? x.value.frac.length : 0);
  let caps: Caps = {
    intDigits: Math.max(MAX_NUMBER_DIGITS, intDigitsOf(lo), intDigitsOf(hi)),
    fracDigits: Math.max(MAX_NUMBER_DIGITS, fracDigitsOf(lo), fracDigitsOf(hi)),
  };
  const excl = [lo, hi].find((x) => x?.exclusive);
  if (excl) {
    // See numbers.ts: at most 15 significant digits keeps "strictly below
    // the bound" true after the validator rounds the text to a double.
    const intDigits = Math.max(9, intDigitsOf(lo), intDigitsOf(hi));
    if (intDigits > 15) {
      throw new SchemaError(
        excl.keyword,
        excl.at,
        "exclusive bounds on numbers of magnitude 1e15 or more cannot be enforced exactly",
      );
    }
    caps = { intDigits, fracDigits: 15 - intDigits };
  }
  const e = decimalRange(
    lo && { value: lo.value, exclusive: lo.exclusive },
    hi && { value: hi.value, exclusive: hi.exclusive },
    caps,
  );
  if (e === null) throw empty();
  return ctx.b.rule(`${hint}-num`, e);
}

// --- strings -----------------------------------------------------------------

function emitString(n: Norm, hint: string, ctx: Ctx): Expr {
  const regexes: RNode[] = [];
  for (const p of n.patterns) {
    try {
      regexes.push(parseRegex(p.source));
    } catch (e) {
      if (!(e instanceof RegexError)) throw e;
      if (!e.unsupported) throw new SchemaError("pattern", p.at, e.message, "invalid");
      ctx.unsupported("pattern", schemaPathOf(p.at), e.message);
    }
  }
  for (const f of n.stringFormats) {
    const src = STRING_FORMATS[f.name];
    if (src) regexes.push(parseRegex(`^(?:${src})$`));
  }
  const blame = n.patterns[0]
    ? { keyword: "pattern", at: n.patterns[0].at }
    : n.stringFormats[0]
      ? { keyword: "format", at: n.stringFormats[0].at }
      : { keyword: "minLength", at: n.minLengthAt };
  let e: Expr | null;
  try {
    e = stringExpr({ minLength: n.minLength, maxLength: n.maxLength, regexes }, ctx.b, hint);
  } catch (err) {
    if (err instanceof RegexError) throw new SchemaError(blame.keyword, blame.at, err.message);
    throw err;
  }
  if (e === null) throw unsat(blame.keyword, blame.at, "no string satisfies the string constraints together");
  return e.kind === "ref" ? e : ctx.b.rule(`${hint}-str`, e);
}

// --- objects -----------------------------------------------------------------

function emitObject(n: Norm, hint: string, ctx: Ctx, compileParts: SubCompile): Expr {
  const b = ctx.b;
  const shape = objectShape(n, ctx);
  if (shape.mentioned.length === 0 && shape.extras && shape.extraParts.length === 0) return anyObject(b);
  const declared = new Set(shape.declared);
  for (const k of shape.required) {
    if (!declared.has(k)) {
      const o = n.objects.find((x) => x.required.includes(k))!;
      throw unsat("required", `${o.path}/required`, `required property '${k}' is forbidden by another keyword`);
    }
  }
  const W = ws(b);
  const S = sepWs(b);
  type Member = { required: boolean; kv: Expr };
  const members: Member[] = [];
  for (const k of shape.declared) {
    ctx.budget.step();
    const required = shape.required.has(k);
    const compile = () => compileParts(propertyParts(n, k)!, `${hint}-${k}`, ctx);
    const value = required ? compile() : orNull(compile);
    if (value === null) continue; // an optional property no value fits is simply never emitted
    let kv = seq(jsonStringLiteral(k), W, lit(":"), S, value, W);
    if (!required) kv = b.rule(`${hint}-${k}-kv`, kv);
    members.push({ required, kv });
  }
  let extra: Expr | null = null;
  if (shape.extras) {
    const value = orNull(() => compileParts(shape.extraParts, `${hint}-extra`, ctx));
    if (value !== null)
      extra = b.rule(`${hint}-extra-kv`, seq(stringExcluding(shape.mentioned, b), W, lit(":"), S, value, W));
  }
  const comma = (x: Expr) => seq(lit(","), S, x);
  // T(i): the rest after at least one member was written; F(i): nothing yet.
  const T: Expr[] = [];
  T[members.length] = extra ? star(b.rule(`${hint}-extra-next`, comma(extra))) : EMPTY;
  let hasOptional = extra !== null;
  for (let i = members.length - 1; i >= 0; i--) {
    const m = members[i]!;
    const rest = seq(m.required ? comma(m.kv) : opt(comma(m.kv)), T[i + 1]!);
    hasOptional ||= !m.required;
    T[i] = hasOptional && i > 0 ? b.rule(`${hint}-rest-${i}`, rest) : rest;
  }
  // F: the first member written is one of the optional ones up to and
  // including the first required one (alternatives gathered in one list: a
  // nested alt per member would copy the list each time).
  const starts: Expr[] = [extra ? opt(seq(extra, T[members.length]!)) : EMPTY];
  for (let i = members.length - 1; i >= 0; i--) {
    const m = members[i]!;
    const start = seq(m.kv, T[i + 1]!);
    if (m.required) starts.length = 0;
    starts.push(start);
  }
  return b.rule(hint, seq(lit("{"), W, alt(...starts.reverse()), lit("}")));
}

// --- arrays ------------------------------------------------------------------

function emitArray(n: Norm, hint: string, ctx: Ctx, compileParts: SubCompile): Expr {
  const b = ctx.b;
  const min = n.minItems;
  let max = n.maxItems ?? Infinity;
  const K = Math.max(0, ...n.arrays.map((p) => p.prefix.length));
  for (const p of n.arrays) if (p.items === false) max = Math.min(max, p.prefix.length);
  if (n.arrays.length === 0 && min === 0 && max === Infinity) return anyArray(b);
  const W = ws(b);
  const S = sepWs(b);
  const elements: Expr[] = [];
  for (let i = 0; i < Math.min(K, max); i++) {
    ctx.budget.step();
    const parts = n.arrays.flatMap((p) => (i < p.prefix.length ? [p.prefix[i]!] : p.items ? [p.items] : []));
    const e = orNull(() => compileParts(parts, `${hint}-item-${i}`, ctx));
    if (e === null) {
      max = i; // no value fits position i, so the array ends before it
      break;
    }
    elements.push(seq(e, W));
  }
  let tail: Expr | null = null;
  if (max > K) {
    const parts = n.arrays.flatMap((p) => (p.items ? [p.items] : []));
    const e = orNull(() => compileParts(parts, `${hint}-item`, ctx));
    if (e === null) max = K;
    else tail = seq(e, W);
  }
  if (min > max) throw unsat("minItems", n.minItemsAt, "the array cannot have minItems elements");
  const item = (i: number) => (i < K ? elements[i]! : tail!);
  const rest = (i: number): Expr => {
    if (i >= max) return EMPTY;
    if (i >= K) {
      const next = b.rule(`${hint}-next`, seq(lit(","), S, tail!));
      return boundedRepeat(next, Math.max(0, min - i), max === Infinity ? null : max - i);
    }
    const cont = seq(lit(","), S, item(i), rest(i + 1));
    return i >= min ? opt(cont) : cont;
  };
  const body = max === 0 ? EMPTY : min === 0 ? opt(seq(item(0), rest(1))) : seq(item(0), rest(1));
  return b.rule(hint, seq(lit("["), W, body, lit("]")));
}
