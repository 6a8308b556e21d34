// valibot schemas to typed requests, with OpenAI-style 400s that name the
// offending field (`param`, e.g. "messages[1].content").
import * as v from "valibot";
import { invalidRequest } from "../daemon/request-error.ts";

function paramOf(issue: v.BaseIssue<unknown>): string | null {
  const path = issue.path ?? [];
  let out = "";
  for (const item of path) {
    const key = (item as { key: unknown }).key;
    out += typeof key === "number" ? `[${key}]` : out === "" ? String(key) : `.${String(key)}`;
  }
  return out || null;
}

export function parseWith<S extends v.GenericSchema>(schema: S, input: unknown): v.InferOutput<S> {
  const result = v.safeParse(schema, input);
  if (result.success) return result.output;
  const issue = result.issues[0];
  const param = paramOf(issue);
  throw invalidRequest(param ? `${param}: ${issue.message}` : issue.message, param);
}

/** An optional field that may also be sent as null. */
export const opt = <S extends v.GenericSchema>(schema: S) => v.nullish(schema);

export const int = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  v.pipe(
    v.number(),
    v.integer("must be a whole number"),
    v.minValue(min, `must be at least ${min}`),
    v.maxValue(max, `must be at most ${max}`),
  );

export const num = (min: number, max: number) =>
  v.pipe(v.number(), v.finite(), v.minValue(min, `must be at least ${min}`), v.maxValue(max, `must be at most ${max}`));

const isJsonObject = (value: unknown) => typeof value === "object" && value !== null && !Array.isArray(value);

/** A JSON object (an array is not one) with these fields; fields not named pass through. */
export const object = <E extends v.ObjectEntries>(entries: E, message = "must be an object") =>
  v.pipe(v.custom<unknown>(isJsonObject, message), v.looseObject(entries, message));

/** A JSON object (an array is not one) whose values all match `value`. */
export const record = <S extends v.GenericSchema>(value: S, message = "must be an object") =>
  v.pipe(v.custom<unknown>(isJsonObject, message), v.record(v.string(), value, message));
