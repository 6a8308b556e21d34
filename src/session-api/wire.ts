// The session API's JSON encoding (docs/api/sessions.md#encoding): serde's
// externally tagged form. A request is an object with one key, the variant,
// whose value holds its fields, or a bare string for a variant without
// fields; replies have the same form. Field readers here refuse a malformed
// request with a message that names the variant and the field.
import type { SessionEvent, SessionParams } from "../session-log/events.ts";

export class WireError extends Error {}

/** A parsed request: its variant and its fields (empty for a bare variant). */
export interface WireRequest {
  variant: string;
  fields: Record<string, unknown>;
}

export function parseRequest(value: unknown): WireRequest {
  if (typeof value === "string" && value !== "") return { variant: value, fields: {} };
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new WireError(
      'a request is a JSON object with one key, the request\'s name (e.g. {"Read":{"session":1,"cursor":0}}), or a bare name such as "Tree"',
    );
  }
  const keys = Object.keys(value);
  if (keys.length !== 1)
    throw new WireError(`a request object has exactly one key, the request's name; got ${keys.length} keys`);
  const variant = keys[0]!;
  const fields = (value as Record<string, unknown>)[variant];
  if (fields === null) return { variant, fields: {} };
  if (typeof fields !== "object" || Array.isArray(fields))
    throw new WireError(`${variant}: its fields must be a JSON object`);
  return { variant, fields: fields as Record<string, unknown> };
}

/** Reads the fields of one request, naming the request in every refusal. */
export class Fields {
  constructor(private readonly req: WireRequest) {}

  private fail(name: string, what: string): never {
    throw new WireError(`${this.req.variant}.${name}: ${what}`);
  }

  /** A field as sent (for the caller to check). */
  raw(name: string): unknown {
    return this.req.fields[name];
  }

  has(name: string): boolean {
    const v = this.req.fields[name];
    return v !== undefined && v !== null;
  }

  int(name: string, min = 0, max = Number.MAX_SAFE_INTEGER): number {
    const v = this.req.fields[name];
    if (typeof v !== "number" || !Number.isInteger(v))
      this.fail(name, `expected an integer, got ${JSON.stringify(v) ?? "nothing"}`);
    if (v < min || v > max) this.fail(name, `must be between ${min} and ${max}, got ${v}`);
    return v;
  }

  optionalInt(name: string, min = 0, max = Number.MAX_SAFE_INTEGER): number | undefined {
    return this.has(name) ? this.int(name, min, max) : undefined;
  }

  string(name: string): string {
    const v = this.req.fields[name];
    if (typeof v !== "string") this.fail(name, `expected a string, got ${JSON.stringify(v) ?? "nothing"}`);
    return v;
  }

  optionalString(name: string): string | undefined {
    return this.has(name) ? this.string(name) : undefined;
  }

  bool(name: string, fallback: boolean): boolean {
    const v = this.req.fields[name];
    if (v === undefined || v === null) return fallback;
    if (typeof v !== "boolean") this.fail(name, `expected true or false, got ${JSON.stringify(v)}`);
    return v;
  }

  optionalBool(name: string): boolean | undefined {
    return this.has(name) ? this.bool(name, false) : undefined;
  }

  array(name: string): unknown[] {
    const v = this.req.fields[name];
    if (!Array.isArray(v)) this.fail(name, `expected an array, got ${JSON.stringify(v) ?? "nothing"}`);
    return v;
  }

  tokenIds(name: string, vocabSize: number): number[] {
    return this.array(name).map((t, i) => {
      if (typeof t !== "number" || !Number.isInteger(t) || t < 0 || t >= vocabSize)
        this.fail(`${name}[${i}]`, `not a token id of this model (0-${vocabSize - 1})`);
      return t;
    });
  }

  strings(name: string): string[] {
    return this.array(name).map((t, i) => {
      if (typeof t !== "string") this.fail(`${name}[${i}]`, "expected a string");
      return t;
    });
  }

  /** Session params: all five fields, numbers in their ranges; null or absent when `optional`. */
  params(name: string, optional: boolean): SessionParams | undefined {
    const v = this.req.fields[name];
    if ((v === undefined || v === null) && optional) return undefined;
    if (typeof v !== "object" || v === null || Array.isArray(v))
      this.fail(name, "expected an object with temperature, top_p, min_p, top_k and seed");
    const p = v as Record<string, unknown>;
    const num = (key: string, min: number, max: number, integer = false) => {
      const x = p[key];
      if (typeof x !== "number" || !Number.isFinite(x) || (integer && !Number.isInteger(x)))
        this.fail(
          `${name}.${key}`,
          `expected ${integer ? "an integer" : "a number"} (all five params are required; nothing is filled in from model defaults)`,
        );
      if (x < min || x > max) this.fail(`${name}.${key}`, `must be between ${min} and ${max}, got ${x}`);
      return x;
    };
    return {
      temperature: num("temperature", 0, 100),
      top_p: num("top_p", 0, 1),
      min_p: num("min_p", 0, 1),
      top_k: num("top_k", 0, 1 << 30, true),
      seed: num("seed", 0, 0xffffffff, true),
    };
  }
}

/** An event as the wire shows it: {event_id, epoch, ts_unix_ms, body}. */
export function wireEvent(e: SessionEvent): Record<string, unknown> {
  return { event_id: e.event_id, epoch: e.epoch, ts_unix_ms: e.ts_unix_ms, body: e.body };
}

export type Reply = Record<string, unknown> | string;

export const err = (message: string): Reply => ({ Err: { message } });
