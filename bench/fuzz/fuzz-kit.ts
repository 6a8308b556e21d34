// What the fuzz run's request generators share (bench/fuzz/fuzz.ts): the request
// spec, the seeded helpers, the served model ids and the tables of wrong
// values. Generators live in fuzz.ts (chat and completions) and the
// fuzz-*.ts modules (the other routes and families); none imports another.
import { COMMON_WORDS } from "../../src/fixtures/words.ts";

/** The models the fuzz server serves (fuzz.ts starts it with files named so): fixed, so `--show` needs no server. */
export const SERVED = { chat: "tiny-chat", embed: "tiny-embed", rerank: "tiny-rerank" } as const;
export const MODEL = SERVED.chat;
export const CHAT = "/v1/chat/completions";
export const COMPLETIONS = "/v1/completions";

/**
 * Objects the run makes and later names: files, batches and stored responses.
 * A spec names one as `@@kind@@` (one made at setup, never deleted) or
 * `@@kind~@@` (one made during the run, which a later request may delete) in
 * its path or body; the sender fills in a real id (fuzz-pool.ts).
 */
export type PoolKind = "file" | "batchfile" | "batch" | "response";

/** The key a request carries under --auth (fuzz-auth.ts); absent without it. */
export type KeyChoice = "none" | "wrong" | "user" | "admin" | "global";

/** One request: sent with fetch, or as raw bytes on a socket (what fetch cannot send). */
export interface Spec {
  category: string;
  /** What this request tries, for grouping findings (e.g. "chat.n=\"2\""). */
  variant: string;
  /** Acceptable statuses. */
  expect: number[];
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  /**
   * A streamed reply expected: read by its content type (SSE or NDJSON) and checked to end as its family ends a stream.
   */
  stream?: boolean;
  /** The client aborts after this many stream events, or this many ms. */
  abortAfter?: { events?: number; ms?: number };
  raw?: Uint8Array;
  /**
   * An error reply with an empty body is acceptable: Bun's own HTTP parser
   * answers it before any hook of ours runs (an HTTP/1.1 request without Host,
   * a 400 RFC 9112 §3.2 requires).
   */
  bareErrorOk?: boolean;
  /** Raw: half-close after writing (the request is incomplete; a close without an answer is fine). */
  halfClose?: boolean;
  /** Statuses when an object it names is not visible to its key (another key made it): default [404]. */
  expectHidden?: number[];
  /** A 200 reply's `id` joins the run's objects of this kind (deletable). */
  capture?: PoolKind;
  /** An admin route: a non-admin key gets 403 under --auth. */
  admin?: boolean;
  /** Open without a key under --auth (GET /health). */
  open?: boolean;
  /** Under --auth: the key sent, and how (set by fuzz-auth.ts). */
  key?: KeyChoice;
}

export type Rng = () => number;
export const pick = <T>(r: Rng, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
export const between = (r: Rng, lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));
export const chance = (r: Rng, p: number) => r() < p;
export const words = (r: Rng, n: number) => Array.from({ length: n }, () => pick(r, COMMON_WORDS)).join(" ");
/** UTF-8 text and raw bytes, joined. */
export const bytes = (...parts: (string | number[])[]) =>
  Buffer.concat(parts.map((p) => (typeof p === "string" ? Buffer.from(p, "utf8") : Buffer.from(p))));

export const short = (v: unknown) => {
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 40 ? `${s.slice(0, 37)}...` : s;
};

export const json = (
  path: string,
  body: unknown,
  extra: Partial<Spec> & Pick<Spec, "category" | "variant" | "expect">,
): Spec => ({
  method: "POST",
  path,
  headers: { "content-type": "application/json" },
  body: JSON.stringify(body),
  ...extra,
});

export const get = (path: string, extra: Partial<Spec> & Pick<Spec, "category" | "variant" | "expect">): Spec => ({
  method: "GET",
  path,
  ...extra,
});

/** Values of every JSON type; each field gets those not of its own type. */
export const ANY = {
  str: "x",
  int: 5,
  frac: 1.5,
  bool: true,
  arr: [1],
  obj: { a: 1 },
  emptyArr: [],
  emptyObj: {},
} as const;
export const wrong = (...keep: (keyof typeof ANY)[]) =>
  Object.entries(ANY)
    .filter(([k]) => !keep.includes(k as keyof typeof ANY))
    .map(([, v]) => v);
export const STR = wrong("str");
export const BOOL = [...wrong("bool"), "true", 0, 1];
export const OBJ = [...wrong("obj", "emptyObj"), [{ a: 1 }]];
export const ARR = [...wrong("arr", "emptyArr"), { 0: "a" }];
export const intRange = (lo: number, hi?: number) => [
  ...wrong("int"),
  lo - 1,
  "5",
  ...(hi === undefined ? [] : [hi + 1]),
];
export const numRange = (lo: number, hi: number) => [...wrong("int", "frac"), lo - 0.5, hi + 0.5, "0.5"];

/** A body with one field set to a value from its table of wrong values: the variant names both. */
export function wrongField(
  r: Rng,
  table: Record<string, unknown[]>,
  base: Record<string, unknown>,
): { body: Record<string, unknown>; field: string; value: unknown } {
  const field = pick(r, Object.keys(table));
  const value = pick(r, table[field]!);
  return { body: { ...base, [field]: value }, field, value };
}

/** JSON text cut at a random point, an empty body, or a non-object. */
export function brokenJson(r: Rng, valid: string): { variant: string; body: string } {
  const cases: [string, string][] = [
    ["truncated", valid.slice(0, between(r, 1, Math.max(1, valid.length - 1)))],
    ["empty", ""],
    ["garbage", pick(r, ["{model:", "undefined", "NaN", "{'a':1}", '{"a":1,}', "{}}", "\u0000"])],
    ["not-an-object", pick(r, ["[]", "5", '"str"', "null", "true", "[{}]"])],
  ];
  const [variant, body] = pick(r, cases);
  return { variant, body };
}

export const nest = (depth: number, open: string, inner: string, close: string) =>
  open.repeat(depth) + inner + close.repeat(depth);

/**
 * A model an admin request may have unloaded: the next request naming it loads it again, answered 503 model_loading
 * meanwhile.
 */
export const RELOADING = [503];

export interface Part {
  name: string;
  filename?: string;
  type?: string;
  data: string | Uint8Array;
}

/** A multipart/form-data body; `cut` ends it without the closing boundary. */
export function multipart(boundary: string, parts: Part[], cut = false): Uint8Array {
  const chunks: (string | Uint8Array)[] = [];
  for (const p of parts) {
    chunks.push(
      `--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"${p.filename === undefined ? "" : `; filename="${p.filename}"`}\r\n`,
    );
    if (p.type) chunks.push(`Content-Type: ${p.type}\r\n`);
    chunks.push("\r\n", p.data, "\r\n");
  }
  if (!cut) chunks.push(`--${boundary}--\r\n`);
  return Buffer.concat(chunks.map((c) => (typeof c === "string" ? Buffer.from(c, "utf8") : Buffer.from(c))));
}
