// The value checks of `superfluid serve`'s flags (docs/cli.md#serve): each takes the raw
// value and the flag's name, and throws UsageError (exit 2) naming the flag and what it expected;
// a check borrowed from another module throws its own error, which readFlags (flag-decl.ts) names the flag in.
import { isKvType, KV_BITS, KV_TYPES, type KvTypeName, type KvTypes } from "../gguf/kv-type.ts";
import { existsSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { isReference } from "../daemon/model-ref.ts";
import type { ModelAlias } from "../daemon/registry.ts";
import { QOS_NAMES, type QosClass } from "../engine/scheduler.ts";
import type { SpeculationSettings } from "../engine/speculation-directive.ts";
import { originPattern } from "../http/allowed-origins.ts";
import { isHeaderSafeSecret, SECRET_CHARACTERS } from "../http/auth/key-policy.ts";
import { isLoopbackName } from "../runtime/loopback.ts";
import { parseQos } from "../http/qos.ts";
import { isReplicaId } from "../http/replica.ts";
import { parseEndpointList } from "../rpc/endpoint.ts";

import { UsageError } from "./flags.ts";

export { UsageError } from "./flags.ts";

export interface NumberRange {
  int?: boolean;
  min?: number;
  max?: number;
}

export function number(flag: string, raw: string, opts: NumberRange = {}): number {
  const n = Number(raw);
  const bad =
    raw.trim() === "" ||
    !Number.isFinite(n) ||
    (opts.int && !Number.isInteger(n)) ||
    (opts.min !== undefined && n < opts.min) ||
    (opts.max !== undefined && n > opts.max);
  if (bad) {
    const range =
      opts.min !== undefined && opts.max !== undefined
        ? ` between ${opts.min} and ${opts.max}`
        : opts.min !== undefined
          ? ` of at least ${opts.min}`
          : "";
    throw new UsageError(`--${flag} expects ${opts.int ? "a whole number" : "a number"}${range}, got '${raw}'`);
  }
  return n;
}

/** A number in a range. */
export const num =
  (opts: NumberRange) =>
  (raw: string, flag: string): number =>
    number(flag, raw, opts);

/** A whole number in a range. */
export const whole = (min: number, max?: number) =>
  num(max === undefined ? { int: true, min } : { int: true, min, max });

/** Any text, as given. */
export const text = (raw: string): string => raw;

/** A path: any text but the empty one. */
export function nonEmpty(raw: string, flag: string): string {
  if (raw.trim() === "") throw new UsageError(`--${flag} expects a path, got ''`);
  return raw;
}

/** --kv-bits: 0, 16, 8, 4 or 84 (src/runtime/kv-type.ts). */
export function kvBits(raw: string, flag: string): KvTypes {
  const types = KV_BITS[raw.trim()];
  if (!types) throw new UsageError(`--${flag} takes 0 (auto), 16, 8, 4 or 84, got '${raw}'`);
  return types;
}

/** --cache-type-k/-v: a KV element type llama.cpp takes. */
export function kvType(raw: string, flag: string): KvTypeName {
  const name = raw.trim().toLowerCase();
  if (!isKvType(name)) throw new UsageError(`--${flag} takes one of ${Object.keys(KV_TYPES).join(", ")}, got '${raw}'`);
  return name;
}

/** A KV size in cells: a whole number, values below 512 raised to 512. */
export const cells = (raw: string, flag: string): number => Math.max(512, number(flag, raw, { int: true, min: 1 }));

/** --max-context: a whole number (floor 512), or `auto` (undefined: sized from free memory by the worker). */
export function maxContext(raw: string): number | undefined {
  if (raw.trim().toLowerCase() === "auto") return undefined;
  const n = Number(raw);
  if (raw.trim() === "" || !Number.isInteger(n) || n < 1) {
    throw new UsageError(`--max-context expects a whole number or auto, got '${raw}'`);
  }
  return Math.max(512, n);
}

/** --prefill-budget: 0 (adaptive) or 64-4096 (docs/cli.md#scheduling-flags). */
export function prefillBudget(raw: string): number {
  const n = Number(raw);
  if (raw.trim() === "" || !Number.isInteger(n) || (n !== 0 && (n < 64 || n > 4096))) {
    throw new UsageError(`--prefill-budget expects 0 (adaptive) or a whole number between 64 and 4096, got '${raw}'`);
  }
  return n;
}

/** --http ADDR:PORT; an empty value is ignored, an empty address is 127.0.0.1. */
export function httpAddress(raw: string): { host: string; port: number } | undefined {
  if (raw === "") return undefined;
  const m = /^(.*):(\d+)$/.exec(raw);
  if (!m) throw new UsageError(`--http expects ADDR:PORT, got '${raw}'`);
  const port = number("http", m[2]!, { int: true, min: 0, max: 65535 });
  return { host: m[1]!.replace(/^\[(.*)\]$/, "$1") || "127.0.0.1", port };
}

export const DEFAULT_PORT = 8453;

/** --port: 0-65535; an empty value keeps the default. */
export const port = (raw: string, flag: string): number =>
  raw === "" ? DEFAULT_PORT : number(flag, raw, { int: true, min: 0, max: 65535 });

/** --web: a loopback HOST:PORT (port 0: any free port); another host is refused at start. */
export function webAddress(raw: string): { host: string; port: number } {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]+):(\d{1,5})$/.exec(raw.trim());
  if (!m) throw new UsageError(`--web expects HOST:PORT (e.g. 127.0.0.1:8081), got '${raw}'`);
  const host = m[1]!.replace(/^\[(.*)\]$/, "$1");
  const port = Number(m[2]);
  if (port > 65535) throw new UsageError(`--web: port ${port} is out of range`);
  if (!isLoopbackName(host)) {
    throw new UsageError(
      `--web ${raw}: the session API listener is loopback only (127.0.0.1, ::1 or localhost); ` +
        "put a reverse proxy in front to reach it from elsewhere",
    );
  }
  return { host, port };
}

/** --web-origin: an http(s) origin, kept as `scheme://host[:port]`. */
export function webOrigin(raw: string): string {
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) {
    throw new UsageError(`--web-origin expects an http:// or https:// origin, got '${raw}'`);
  }
  return url.origin;
}

/** --allow-origin: a page origin pattern (docs/api/security.md#cors), kept lowercase; readFlags names the flag. */
export const allowedOrigin = originPattern;

/** --api-key: a non-empty secret a header can carry (docs/api/security.md#keys). */
export function apiKey(raw: string): string {
  if (raw.trim() === "") throw new UsageError("--api-key expects a key, got ''");
  if (!isHeaderSafeSecret(raw)) throw new UsageError(`--api-key: ${SECRET_CHARACTERS}`);
  return raw;
}

/** --allow-host: a host name (no port), an IP literal, or `*`; kept lowercase. */
export function allowedHost(raw: string): string {
  const name = raw.trim().toLowerCase();
  if (name === "*" || /^(\[[0-9a-f:.]+\]|[a-z0-9]([a-z0-9_.-]*[a-z0-9])?)$/.test(name)) return name;
  throw new UsageError(`--allow-host expects a host name without a port, or *, got '${raw}'`);
}

/** --rpc: HOST:PORT[,HOST:PORT...], each once; readFlags names the flag. */
export const rpcEndpoints = parseEndpointList;

/** --replica-id: a token a reply header can carry. */
export function replicaId(raw: string): string {
  if (!isReplicaId(raw))
    throw new UsageError(
      `--replica-id expects letters, digits, '.', '_', ':' or '-' (up to 128, starting with a letter or digit), got '${raw}'`,
    );
  return raw;
}

/** --alias NAME=ID: both sides non-empty (whether ID is served is checked once the model is loaded). */
export function aliasOf(raw: string): ModelAlias {
  const at = raw.indexOf("=");
  const [name, target] = at < 0 ? ["", ""] : [raw.slice(0, at).trim(), raw.slice(at + 1).trim()];
  if (name === "" || target === "") {
    throw new UsageError(`--alias expects NAME=ID (e.g. claude-*=tiny-chat), got '${raw}'`);
  }
  return { name, target };
}

/** A QoS class flag: a name, alias or number (docs/api/openai.md#qos-classes). */
export function qosClass(raw: string, flag: string): QosClass {
  const qos = parseQos(raw);
  if (qos === undefined) {
    throw new UsageError(`--${flag} expects one of ${QOS_NAMES.join(", ")} (or an alias or 0-3), got '${raw}'`);
  }
  return qos;
}

/** --spec-min-speedup: a number above 0. */
export function speedup(raw: string, flag: string): number {
  const n = number(flag, raw, { min: 0 });
  if (n <= 0) throw new UsageError(`--${flag} expects a number above 0, got '${raw}'`);
  return n;
}

/** What --speculate may name on llama.cpp. */
const SPECULATE_AVAILABLE = "available: off, auto, prompt-lookup, draft-model:<path or org/repo[:tag]>";
/** Drafters the spec names that only other runtimes run (docs/cli.md#speculative-decoding). */
const OTHER_RUNTIME_DRAFTERS = /^(mtp-head$|dflash:|dspark:|eagle3:)/;

/**
 * --speculate: the directive, undefined for off; the --spec-* tuning is added after parsing. A draft model named
 * by a reference (`draft-model:org/repo[:TAG]`) is kept as one: serve finds it locally or pulls it before the
 * worker starts (docs/cli.md#pulling-models); a path must name a file now, kept as an absolute path.
 */
export function speculate(raw: string): Pick<SpeculationSettings, "directive" | "draftModel"> | undefined {
  const directive = raw.trim();
  if (directive === "off") return undefined;
  if (directive === "auto" || directive === "prompt-lookup") return { directive };
  if (directive.startsWith("draft-model:")) {
    const path = directive.slice("draft-model:".length);
    if (path === "") throw new UsageError(`--speculate draft-model: needs the draft model's file after the colon`);
    if (isReference(path)) return { directive: "draft-model", draftModel: path };
    if (!existsSync(path) || !statSync(path).isFile()) throw new UsageError(`--speculate ${raw}: no such file`);
    return { directive: "draft-model", draftModel: resolve(path) };
  }
  if (OTHER_RUNTIME_DRAFTERS.test(directive)) {
    throw new UsageError(`--speculate ${raw}: the llamacpp runtime cannot run this drafter; ${SPECULATE_AVAILABLE}`);
  }
  if (/[\\/]|\.gguf$/i.test(directive)) {
    const why = "the llamacpp runtime cannot run a drafter named by its path";
    throw new UsageError(`--speculate ${raw}: ${why}; ${SPECULATE_AVAILABLE}`);
  }
  throw new UsageError(`--speculate expects a strategy, got '${raw}'; ${SPECULATE_AVAILABLE}`);
}
