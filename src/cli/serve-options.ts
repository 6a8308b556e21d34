// `superfluid serve [MODEL] [flags]`: the flags that exist so far (docs/cli.md#serve),
// their defaults, and the startup refusals for flags llama.cpp cannot honour.
import { existsSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import type { ModelAlias } from "../daemon/registry.ts";
import type { OperatorSampling } from "../daemon/sampling-resolve.ts";
import { DEFAULT_QOS, QOS_NAMES, type ClassLanes, type QosClass } from "../engine/scheduler.ts";
import { MAX_DRAFT_TOKENS, SPECULATION_DEFAULTS } from "../engine/speculation.ts";
import type { SpeculationSettings } from "../engine/speculation-directive.ts";
import { isHeaderSafeSecret, KeyPolicyError, readKeyPolicy, SECRET_CHARACTERS, type PolicyKey } from "../http/auth/key-policy.ts";
import { isLoopbackName } from "../http/origin-guard.ts";
import { parseClassLanes, parseQos } from "../http/qos.ts";
import { physicalCores } from "../engine/threads.ts";
import { FlagError, parseFlags, type FlagSpec } from "./flags.ts";

export interface ServeOptions {
  /** MODEL tokens (paths or references), the bare argument first; the first is the default; empty = the built-in model. */
  models: string[];
  /** --idle-timeout: seconds a model other than the default may go unused before it is unloaded (0 = never). */
  idleTimeoutSec: number;
  host: string;
  port: number;
  /** --api-key (repeatable): keys with every right, named `api-key` in logs (docs/api/security.md#keys). */
  apiKeys: string[];
  /** --key-policy FILE, read and validated at startup (docs/api/key-policy.md). */
  policyKeys: PolicyKey[];
  /** --rate-limit: requests a minute per client IP (0 = off). */
  rateLimitRpm: number;
  /** --web-origin (repeatable): page origins, besides this machine's, whose requests are let in. */
  webOrigins: string[];
  /** --web HOST:PORT: the session API's own listener for browser front-ends (docs/api/sessions.md); loopback only. */
  web?: { host: string; port: number };
  maxBatch: number;
  /**
   * --max-context N: tokens per conversation, each sequence its own KV buffer.
   * Undefined (omitted or `auto`): sized from free memory by the worker
   * (src/engine/kv-sizing.ts), a conversation up to the model's trained window.
   */
  maxContext?: number;
  /** --kv-pool N: one shared KV pool of N cells (a conversation up to --max-context, else the trained window). */
  kvPool?: number;
  maxTokens?: number;
  threads: number;
  /** --prefill-budget: prompt tokens per tick (64-4096), or 0 for the adaptive controller. */
  prefillBudget: number;
  /** --starvation-ticks: queue-aging period and starvation bound, in ticks. */
  starvationTicks: number;
  /** --class-lanes: lane caps per class (undefined = uncapped). */
  classLanes?: ClassLanes;
  /** --http-default-qos: the class of an HTTP request that names none. */
  defaultQos: QosClass;
  /** false under --no-http-qos-header: x-superfluid-qos is ignored. */
  qosHeader: boolean;
  /** --http-allow-batch-invariant. */
  allowBatchInvariant: boolean;
  /** --nonstream-keepalive: seconds between padding spaces of a non-streamed reply (0 = off). */
  nonstreamKeepalive: number;
  /** --fim-model: a dedicated fill-in-the-middle model (path or reference) in its own worker. */
  fimModel?: string;
  /** --fim-max-context (undefined = min(the main window, 8192)) and --fim-max-batch. */
  fimMaxContext?: number;
  fimMaxBatch: number;
  /** --completion-deadline-ms (alias --request-timeout): a FIM completion not started by then expires; 0 = none. */
  completionDeadlineMs: number;
  /** --completion-rate: FIM requests per second per client (0 = unmetered); --completion-burst: the bucket's size. */
  completionRate: number;
  completionBurst: number;
  sessions: string;
  /** --sessions-cache: start a fresh log on each start, keeping the previous as wal.log.prev. */
  sessionsCache: boolean;
  /** --park: seal a finishing session generation's KV under <sessions>/park for its next generation (docs/cli.md#parking). */
  park: boolean;
  /** --park-budget-gb: bound of each park directory, oldest artifacts evicted first (0 = unbounded). */
  parkBudgetGb: number;
  /** --files-max-bytes: all /v1/files uploads together (undefined = unbounded). */
  filesMaxBytes?: number;
  /** --files-expiry: seconds an uploaded file lives (undefined = forever). */
  filesExpirySec?: number;
  /** --files-sweep: seconds between expiry sweeps of the file store. */
  filesSweepSec: number;
  /** --host-cache-mb: host memory for prefixes that leave the KV pool (undefined = the engine's default). */
  hostCacheMb?: number;
  /** --pressure-high / --pressure-low, percent of the KV pool's cells. */
  pressureHigh: number;
  pressureLow: number;
  modelDirs: string[];
  /** --alias NAME=ID, in the order given. */
  aliases: ModelAlias[];
  /** --pin-budget-pct: the share of the KV pool cache_control pins may hold; 0 = counted, not enforced. */
  pinBudgetPct: number;
  /** The live monitor (docs/cli.md#tui): on when stdin and stdout are a terminal, unless --no-tui. */
  tui: boolean;
  sampling: OperatorSampling;
  /** --log-dir: JSON lines in rotating files (docs/cli.md#logging). */
  logDir?: string;
  /** --log-file: plain lines appended here instead of stderr. */
  logFile?: string;
  /** -v / --verbose: access lines also carry the reply id and the admission wait. */
  verbose: boolean;
  /** --quiet (or SUPERFLUID_QUIET=1): no access lines on stderr. */
  quiet: boolean;
  /** --ready-file PATH: written (atomically, the URL) once the default model serves; removed on stop. */
  readyFile?: string;
  /** --speculate auto|prompt-lookup and the --spec-* tuning (docs/cli.md#speculative-decoding); absent = off. */
  speculation?: SpeculationSettings;
  /** --spec-max-temperature: the cap on a temperature from a speculating model's own defaults. */
  specMaxTemperature?: number;
}

const FLAGS: Record<string, FlagSpec> = {
  model: { value: true, repeatable: true },
  http: { value: true },
  host: { value: true },
  port: { value: true },
  "api-key": { value: true, repeatable: true },
  "key-policy": { value: true },
  "rate-limit": { value: true },
  "web-origin": { value: true, repeatable: true },
  web: { value: true },
  "max-batch": { value: true, aliases: ["max-batch-size"] },
  "max-context": { value: true },
  "kv-pool": { value: true },
  "max-tokens": { value: true },
  threads: { value: true },
  "prefill-budget": { value: true },
  "starvation-ticks": { value: true },
  "class-lanes": { value: true },
  "http-default-qos": { value: true },
  "no-http-qos-header": {},
  "http-allow-batch-invariant": {},
  "nonstream-keepalive": { value: true },
  "fim-model": { value: true },
  "fim-max-context": { value: true },
  "fim-max-batch": { value: true },
  "completion-deadline-ms": { value: true, aliases: ["request-timeout"] },
  "completion-rate": { value: true },
  "completion-burst": { value: true },
  sessions: { value: true },
  "sessions-cache": {},
  "files-max-bytes": { value: true },
  "files-expiry": { value: true },
  "files-sweep": { value: true },
  "host-cache-mb": { value: true },
  "prefix-blob-budget-mb": { value: true },
  "pressure-high": { value: true },
  "pressure-low": { value: true },
  "model-dir": { value: true, repeatable: true },
  "idle-timeout": { value: true },
  alias: { value: true, repeatable: true },
  "pin-budget-pct": { value: true },
  tui: {},
  "no-tui": {},
  "ready-file": { value: true },
  "log-dir": { value: true },
  "log-file": { value: true },
  verbose: {},
  quiet: {},
  speculate: { value: true },
  "spec-draft-tokens": { value: true },
  "spec-min-yield": { value: true },
  "spec-yield-rounds": { value: true },
  "spec-throughput-gate": {},
  "no-spec-throughput-gate": {},
  "spec-adaptive": {},
  "no-spec-adaptive": {},
  "spec-bitexact": {},
  "spec-max-temperature": { value: true },
  "no-spec-bitexact": {},
  "spec-min-speedup": { value: true },
  "spec-gate-probe-tokens": { value: true },
  "spec-gate-reprobe": { value: true },
  "spec-gate-reprobe-max": { value: true },
  "kv-bits": { value: true },
  "park-lossy": {},
  park: {},
  "no-park": {},
  "park-budget-gb": { value: true },
  temperature: { value: true },
  "top-p": { value: true },
  "top-k": { value: true },
  "min-p": { value: true },
  "repeat-penalty": { value: true },
  help: {},
};

export const SERVE_USAGE = `usage: superfluid serve [MODEL] [--model MODEL ...] [flags]

MODEL is a GGUF path or a local reference org/repo-GGUF[:QUANT] (looked up in
--model-dir folders and the Hugging Face cache; nothing is downloaded). With no
MODEL the built-in tiny model is served. Each model named is loaded at startup
in its own worker; the first is the default for requests that name none.

  --model MODEL           another model to load (repeatable; the bare MODEL counts first)
  --model-dir DIR         every GGUF under DIR is known and loads on the first request
                          naming it (repeatable); references are looked up here too
  --idle-timeout SEC      unload a model other than the default after SEC seconds with
                          no request (checked every SEC/4; default 0 = never)

  --http ADDR:PORT        listener (default 127.0.0.1:8453); or --host / --port
  --api-key KEY           requests need this key (Authorization: Bearer or X-Api-Key);
                          repeatable; a global key may use the admin routes
  --key-policy FILE       keys with names, classes, limits and scopes (JSON; see
                          docs/api/key-policy.md); checked at startup
  --rate-limit RPM        requests a minute per client IP (default 0 = off)
  --web HOST:PORT         serve the session API and the chat page on this loopback address (docs/api/sessions.md)
  --web-origin URL        also let in requests from this page origin (repeatable)
  --max-batch N           concurrent lanes (default 8)
  --max-context N|auto    tokens per conversation (prompt and reply), floor 512. N: each
                          sequence gets its own KV buffer of N cells. With several models
                          (or --model-dir) the default is 8192. auto (default otherwise):
                          up to the model's trained window, the KV taking 60% of the
                          memory the weights and a 1 GiB reserve leave: a buffer of
                          the trained window per sequence where they fit, else one
                          shared pool of that size (a conversation may grow into what
                          the others leave). The startup log says what and why
  --kv-pool N             one shared KV pool of N cells instead (floor 512)
  --max-tokens N          default reply cap (default: fill the context)
  --threads N             compute threads (default: physical cores)
  --prefill-budget N      prompt tokens per tick, 64-4096, or 0 = adaptive (default 4096;
                          each tick is still cut to one micro-batch)
  --starvation-ticks N    queue-aging period: a waiting request moves up one class
                          per N ticks (default 8; 0 = no aging)
  --class-lanes CLASS=N[,...]  lane caps per class, each 1..--max-batch (default uncapped)
  --http-default-qos CLASS  class of requests that name none (default agent); classes:
                          interactive (0), completion (1), agent (2), background (3)
  --no-http-qos-header    ignore the x-superfluid-qos request header
  --http-allow-batch-invariant  accept x-superfluid-batch-invariant (refused with 403 otherwise)
  --nonstream-keepalive SEC  non-streamed replies commit 200 at admission and send a
                          space every SEC seconds until the JSON (default 0 = off)
  --fim-model MODEL       a dedicated fill-in-the-middle model in its own worker
  --fim-max-context N     its tokens per lane (default min(the main window, 8192))
  --fim-max-batch N       its lanes (default 2)
  --completion-deadline-ms N  a FIM completion that has not started after N ms expires
                          (alias --request-timeout; default 0 = none)
  --completion-rate F     FIM requests per second per client (default 10; 0 = unmetered)
  --completion-burst N    FIM bucket size per client (default 20)
  --sessions DIR          session store (default ~/.superfluid/sessions); one server per directory
  --sessions-cache        start a fresh session log on each start (the previous is kept as wal.log.prev)
  --park / --no-park      seal a session's KV to <sessions>/park when its generation ends, so
                          the next one on it restores instead of prefilling (default off)
  --park-budget-gb N      size bound of each park directory, oldest first out (default 20; 0 = none)
  --files-max-bytes N     bytes all /v1/files uploads may take together (default unbounded;
                          one upload is at most 512 MiB either way)
  --files-expiry SEC      delete an uploaded file SEC seconds after its upload (default never)
  --files-sweep SEC       how often expired files are deleted from disk (default 300)
  --host-cache-mb N       host memory for prefixes that leave the KV pool
                          (default: 60% of free memory, at most 8 GiB; 0 = none)
  --pressure-high PCT     KV occupancy that moves cached prefixes out of the pool (default 85)
  --pressure-low PCT      the occupancy that eviction brings it down to (default 70)
  --alias NAME=ID         requests naming NAME get the served model ID; NAME may hold *
                          wildcards (claude-*=tiny-chat); repeatable, exact names first
  --pin-budget-pct PCT    share of the KV pool cache_control pins may hold (default 50;
                          0 = pins are counted but protect nothing)
  --temperature F --top-p F --top-k N --min-p F --repeat-penalty F
                          operator sampling defaults
  --log-dir DIR           logs as JSON lines in DIR/superfluid.<n>.jsonl (64 MiB files,
                          8 kept, 0600); access lines go there instead of stderr
  --log-file PATH         plain log lines appended to PATH (0600) instead of stderr
  -v, --verbose           access lines add the reply id and the wait for a lane
  --quiet                 no access lines on stderr (also SUPERFLUID_QUIET=1)
  --tui / --no-tui        live monitor above the log (on when stdin and stdout are a
                          terminal); logs then also go to <sessions>/logs; q quits
  --ready-file PATH       once the default model serves, write its URL to PATH (atomically;
                          removed on stop), for scripts that wait for the server
  --speculate off|auto|prompt-lookup|draft-model:PATH  speculative decoding (default off):
                          prompt-lookup drafts the tokens that followed the lane's last 3
                          (else 2) tokens earlier in its context and verifies them in one
                          decode; draft-model:PATH drafts greedily with a small GGUF of the
                          same vocabulary, run in the same worker; auto = prompt-lookup
                          where the model can drop a rejected draft (not recurrent, hybrid
                          or sliding-window), else plain
  --spec-draft-tokens N   draft depth, 1-${MAX_DRAFT_TOKENS} (default ${SPECULATION_DEFAULTS.draftTokens})
  --spec-min-yield X      a request whose drafts keep fewer tokens a round stops drafting,
                          judged after --spec-yield-rounds N rounds (default ${SPECULATION_DEFAULTS.minYield}, ${SPECULATION_DEFAULTS.yieldRounds}; 0 = no floor)
  --spec-throughput-gate / --no-spec-throughput-gate  per lane count, draft only where it is
                          --spec-min-speedup X times faster than plain decode (default on, ${SPECULATION_DEFAULTS.minSpeedup}),
                          measured over --spec-gate-probe-tokens N steps a side (default ${SPECULATION_DEFAULTS.probeTokens})
  --spec-adaptive / --no-spec-adaptive  the gate also tries the draft depth halved down to 1
                          and keeps the fastest per lane count (default on)
  --spec-bitexact         refused: llama.cpp cannot make a speculative decode bit-exact
  --spec-max-temperature F  cap a temperature that came from the model's own defaults (never a
                          request's or --temperature's), on a model that speculates
  --spec-gate-reprobe N   measure again N requests after turning it off, doubling up to
                          --spec-gate-reprobe-max N (default ${SPECULATION_DEFAULTS.reprobe}, ${SPECULATION_DEFAULTS.reprobeMax}; 0 = off for good)`;

export class UsageError extends Error {}

function number(flag: string, raw: string, opts: { int?: boolean; min?: number; max?: number } = {}): number {
  const n = Number(raw);
  const bad =
    raw.trim() === "" || !Number.isFinite(n) || (opts.int && !Number.isInteger(n)) || (opts.min !== undefined && n < opts.min) || (opts.max !== undefined && n > opts.max);
  if (bad) {
    const range = opts.min !== undefined && opts.max !== undefined ? ` between ${opts.min} and ${opts.max}` : opts.min !== undefined ? ` of at least ${opts.min}` : "";
    throw new UsageError(`--${flag} expects ${opts.int ? "a whole number" : "a number"}${range}, got '${raw}'`);
  }
  return n;
}

function nonEmpty(flag: string, raw: string): string {
  if (raw.trim() === "") throw new UsageError(`--${flag} expects a path, got ''`);
  return raw;
}

/** --web: a loopback HOST:PORT (port 0: any free port); another host is refused at start. */
function webAddress(raw: string): { host: string; port: number } {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]+):(\d{1,5})$/.exec(raw.trim());
  if (!m) throw new UsageError(`--web expects HOST:PORT (e.g. 127.0.0.1:8081), got '${raw}'`);
  const host = m[1]!.replace(/^\[(.*)\]$/, "$1");
  const port = Number(m[2]);
  if (port > 65535) throw new UsageError(`--web: port ${port} is out of range`);
  if (!isLoopbackName(host)) throw new UsageError(`--web ${raw}: the session API listener is loopback only (127.0.0.1, ::1 or localhost); put a reverse proxy in front to reach it from elsewhere`);
  return { host, port };
}

/** --web-origin: an http(s) origin, kept as `scheme://host[:port]`. */
function webOrigin(raw: string): string {
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) throw new UsageError(`--web-origin expects an http:// or https:// origin, got '${raw}'`);
  return url.origin;
}

/** --api-key values (none empty) and the --key-policy file, validated together: a policy secret may not repeat a global key. */
function keys(apiKeys: string[], policyPath: string | undefined, env: Record<string, string | undefined>): { apiKeys: string[]; policyKeys: PolicyKey[] } {
  if (apiKeys.some((k) => k.trim() === "")) throw new UsageError("--api-key expects a key, got ''");
  if (!apiKeys.every(isHeaderSafeSecret)) throw new UsageError(`--api-key: ${SECRET_CHARACTERS}`);
  if (policyPath === undefined) return { apiKeys, policyKeys: [] };
  try {
    return { apiKeys, policyKeys: readKeyPolicy(nonEmpty("key-policy", policyPath), { env, apiKeys }) };
  } catch (err) {
    if (err instanceof KeyPolicyError) throw new UsageError(`--key-policy: ${err.message}`);
    throw err;
  }
}

function parseHttp(raw: string): { host: string; port: number } {
  const m = /^(.*):(\d+)$/.exec(raw);
  if (!m) throw new UsageError(`--http expects ADDR:PORT, got '${raw}'`);
  return { host: m[1]!.replace(/^\[(.*)\]$/, "$1") || "127.0.0.1", port: number("http", m[2]!, { int: true, min: 0, max: 65535 }) };
}

export function superfluidHome(env = process.env): string {
  return env.SUPERFLUID_HOME ?? join(homedir(), ".superfluid");
}

function pressure(high: number, low: number): { pressureHigh: number; pressureLow: number } {
  if (low > high) throw new UsageError(`--pressure-low (${low}) cannot be above --pressure-high (${high})`);
  return { pressureHigh: high, pressureLow: low };
}

/** --prefill-budget: 0 (adaptive) or 64-4096; 4096 by default (docs/cli.md#scheduling-flags). */
function prefillBudget(raw: string | undefined): number {
  if (raw === undefined) return 4096;
  const n = Number(raw);
  if (raw.trim() === "" || !Number.isInteger(n) || (n !== 0 && (n < 64 || n > 4096))) {
    throw new UsageError(`--prefill-budget expects 0 (adaptive) or a whole number between 64 and 4096, got '${raw}'`);
  }
  return n;
}

/** --max-context: a whole number (floor 512), or `auto` (the default: sized from free memory by the worker). */
function maxContext(raw: string | undefined): { maxContext?: number } {
  if (raw === undefined || raw.trim().toLowerCase() === "auto") return {};
  const n = Number(raw);
  if (raw.trim() === "" || !Number.isInteger(n) || n < 1) throw new UsageError(`--max-context expects a whole number or auto, got '${raw}'`);
  return { maxContext: Math.max(512, n) };
}

/** --alias NAME=ID: both sides non-empty (whether ID is served is checked once the model is loaded). */
function aliasOf(raw: string): ModelAlias {
  const at = raw.indexOf("=");
  const [name, target] = at < 0 ? ["", ""] : [raw.slice(0, at).trim(), raw.slice(at + 1).trim()];
  if (name === "" || target === "") throw new UsageError(`--alias expects NAME=ID (e.g. claude-*=tiny-chat), got '${raw}'`);
  return { name, target };
}

/** A QoS class flag: a name, alias or number (docs/api/openai.md#qos-classes). */
function qosClass(flag: string, raw: string | undefined): QosClass {
  if (raw === undefined) return DEFAULT_QOS;
  const qos = parseQos(raw);
  if (qos === undefined) throw new UsageError(`--${flag} expects one of ${QOS_NAMES.join(", ")} (or an alias or 0-3), got '${raw}'`);
  return qos;
}

function classLanes(raw: string, maxBatch: number): ClassLanes {
  try {
    return parseClassLanes(raw, maxBatch);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/** What --speculate may name on llama.cpp. */
const SPECULATE_AVAILABLE = "available: off, auto, prompt-lookup, draft-model:<path>";
/** Drafters the spec names that only other runtimes run (docs/cli.md#speculative-decoding). */
const OTHER_RUNTIME_DRAFTERS = /^(mtp-head$|dflash:|dspark:|eagle3:)/;

/** The environment variable each --spec-* tuning flag falls back to (flag, then variable, then default). */
const SPEC_ENV: Record<string, string> = {
  "spec-min-yield": "SUPERFLUID_SPEC_MIN_YIELD",
  "spec-yield-rounds": "SUPERFLUID_SPEC_LANE_YIELD_ROUNDS",
  "spec-min-speedup": "SUPERFLUID_SPEC_MIN_SPEEDUP",
  "spec-gate-probe-tokens": "SUPERFLUID_SPEC_GATE_PROBE",
  "spec-gate-reprobe": "SUPERFLUID_SPEC_GATE_REPROBE",
  "spec-gate-reprobe-max": "SUPERFLUID_SPEC_GATE_REPROBE_MAX",
};

/** An on/off switch pair: the flag given, else its variable (1 or 0), else the default. */
function onOff(switches: Set<string>, name: string, env: Record<string, string | undefined>, variable: string, fallback: boolean): boolean {
  const on = switches.has(name);
  const off = switches.has(`no-${name}`);
  if (on && off) throw new UsageError(`--${name} and --no-${name} contradict each other; give one`);
  if (on || off) return on;
  const raw = env[variable];
  if (raw === undefined) return fallback;
  if (raw !== "0" && raw !== "1") throw new UsageError(`${variable} expects 1 or 0, got '${raw}'`);
  return raw === "1";
}

/**
 * --speculate and the --spec-* flags: undefined when off. The tuning flags are
 * checked whatever the directive, so a typo is caught before it matters.
 */
function speculationOf(switches: Set<string>, given: (name: string) => string | undefined, env: Record<string, string | undefined>): SpeculationSettings | undefined {
  const one = (name: string) => given(name) ?? (SPEC_ENV[name] === undefined ? undefined : env[SPEC_ENV[name]!]);
  const opt = (flag: string, o: Parameters<typeof number>[2]) => (one(flag) === undefined ? undefined : number(flag, one(flag)!, o));
  const d = SPECULATION_DEFAULTS;
  const minSpeedup = opt("spec-min-speedup", { min: 0 }) ?? d.minSpeedup;
  if (minSpeedup <= 0) throw new UsageError(`--spec-min-speedup expects a number above 0, got '${one("spec-min-speedup")}'`);
  const throughputGate = onOff(switches, "spec-throughput-gate", env, "SUPERFLUID_SPEC_GATE", d.throughputGate);
  const adaptive = onOff(switches, "spec-adaptive", env, "SUPERFLUID_SPEC_ADAPTIVE", d.adaptive);
  if (switches.has("spec-bitexact")) {
    throw new UsageError("--spec-bitexact: llama.cpp has no batch-invariant kernels, so a speculative decode cannot be made bit-exact with a plain one on this runtime (greedy output is already the same; docs/cli.md#speculative-decoding)");
  }
  const reprobe = opt("spec-gate-reprobe", { int: true, min: 0 }) ?? d.reprobe;
  const reprobeMax = opt("spec-gate-reprobe-max", { int: true, min: 1 }) ?? Math.max(d.reprobeMax, reprobe);
  if (reprobe > reprobeMax) throw new UsageError(`--spec-gate-reprobe (${reprobe}) cannot be above --spec-gate-reprobe-max (${reprobeMax})`);
  const tuning = {
    draftTokens: opt("spec-draft-tokens", { int: true, min: 1, max: MAX_DRAFT_TOKENS }) ?? d.draftTokens,
    minYield: opt("spec-min-yield", { min: 0 }) ?? d.minYield,
    yieldRounds: opt("spec-yield-rounds", { int: true, min: 1 }) ?? d.yieldRounds,
    throughputGate,
    adaptive,
    minSpeedup,
    probeTokens: opt("spec-gate-probe-tokens", { int: true, min: 1 }) ?? d.probeTokens,
    reprobe,
    reprobeMax,
  };
  const raw = one("speculate") ?? "off";
  const directive = raw.trim();
  if (directive === "off") return undefined;
  if (directive === "auto" || directive === "prompt-lookup") return { directive, ...tuning };
  if (directive.startsWith("draft-model:")) {
    const path = directive.slice("draft-model:".length);
    if (path === "") throw new UsageError(`--speculate draft-model: needs the draft model's file after the colon`);
    if (!existsSync(path) || !statSync(path).isFile()) throw new UsageError(`--speculate ${raw}: no such file`);
    return { directive: "draft-model", draftModel: resolve(path), ...tuning };
  }
  if (OTHER_RUNTIME_DRAFTERS.test(directive)) {
    throw new UsageError(`--speculate ${raw}: the llamacpp runtime cannot run this drafter; ${SPECULATE_AVAILABLE}`);
  }
  if (/[\\/]|\.gguf$/i.test(directive)) {
    throw new UsageError(`--speculate ${raw}: the llamacpp runtime cannot run a drafter named by its path; ${SPECULATE_AVAILABLE}`);
  }
  throw new UsageError(`--speculate expects a strategy, got '${raw}'; ${SPECULATE_AVAILABLE}`);
}

export function parseServeOptions(argv: string[], env = process.env): ServeOptions | "help" {
  let flags;
  try {
    flags = parseFlags(argv, FLAGS);
  } catch (err) {
    if (err instanceof FlagError) throw new UsageError(err.message);
    throw err;
  }
  if (flags.switches.has("help")) return "help";
  const one = (name: string) => flags.values.get(name)?.[0];
  const kvBits = one("kv-bits");
  if (kvBits !== undefined && Number(kvBits) !== 0) {
    throw new UsageError("the llamacpp runtime keeps its KV type per context and exposes no such knob");
  }
  if (flags.switches.has("park-lossy")) throw new UsageError("the llamacpp runtime exports no lossy encoding");
  if (flags.switches.has("park") && flags.switches.has("no-park")) throw new UsageError("--park and --no-park contradict each other; give one");
  // A log treated as a cache forgets the sessions whose KV the artifacts would restore.
  if (flags.switches.has("park") && flags.switches.has("sessions-cache")) throw new UsageError("--park cannot be combined with --sessions-cache");
  // A baseRT knob (docs/cli.md#accepted-and-refused-flags): llama.cpp's evicted prefixes are its own state exports, bounded by --host-cache-mb.
  if (one("prefix-blob-budget-mb") !== undefined) {
    throw new UsageError("the llamacpp runtime keeps evicted prefixes as its own state exports and has no prefix blob store; bound them with --host-cache-mb");
  }
  const speculation = speculationOf(flags.switches, one, env);
  // -v is the one short flag: the flag parser reads it as a bare argument, so it is taken out here.
  const verbose = flags.switches.has("verbose") || flags.positional.includes("-v");
  const models = [...flags.positional.filter((a) => a !== "-v"), ...(flags.values.get("model") ?? [])];
  let { host, port } = { host: one("host") ?? "127.0.0.1", port: one("port") ? number("port", one("port")!, { int: true, min: 0, max: 65535 }) : 8453 };
  if (one("http")) ({ host, port } = parseHttp(one("http")!));
  const opt = (flag: string, o: Parameters<typeof number>[2]) => (one(flag) === undefined ? undefined : number(flag, one(flag)!, o));
  const maxBatch = opt("max-batch", { int: true, min: 1, max: 256 }) ?? 8;
  return {
    models,
    // setInterval takes at most 2^31-1 ms (the check runs every sec/4).
    idleTimeoutSec: opt("idle-timeout", { min: 0, max: 2_147_483 }) ?? 0,
    host,
    port,
    ...keys(flags.values.get("api-key") ?? [], one("key-policy"), env),
    rateLimitRpm: opt("rate-limit", { int: true, min: 0, max: 1_000_000 }) ?? 0,
    webOrigins: (flags.values.get("web-origin") ?? []).map(webOrigin),
    ...(one("web") === undefined ? {} : { web: webAddress(one("web")!) }),
    maxBatch,
    ...maxContext(one("max-context")),
    ...(one("kv-pool") === undefined ? {} : { kvPool: Math.max(512, opt("kv-pool", { int: true, min: 1 })!) }),
    maxTokens: opt("max-tokens", { int: true, min: 1 }),
    threads: opt("threads", { int: true, min: 1 }) ?? physicalCores(),
    prefillBudget: prefillBudget(one("prefill-budget")),
    starvationTicks: opt("starvation-ticks", { int: true, min: 0, max: 2 ** 31 - 1 }) ?? 8,
    ...(one("class-lanes") === undefined ? {} : { classLanes: classLanes(one("class-lanes")!, maxBatch) }),
    defaultQos: qosClass("http-default-qos", one("http-default-qos")),
    qosHeader: !flags.switches.has("no-http-qos-header"),
    allowBatchInvariant: flags.switches.has("http-allow-batch-invariant"),
    nonstreamKeepalive: opt("nonstream-keepalive", { min: 0, max: 3600 }) ?? 0,
    ...(one("fim-model") === undefined ? {} : { fimModel: one("fim-model")! }),
    ...(one("fim-max-context") === undefined ? {} : { fimMaxContext: opt("fim-max-context", { int: true, min: 1 }) }),
    fimMaxBatch: opt("fim-max-batch", { int: true, min: 1, max: 256 }) ?? 2,
    completionDeadlineMs: opt("completion-deadline-ms", { int: true, min: 0 }) ?? 0,
    completionRate: opt("completion-rate", { min: 0 }) ?? 10,
    completionBurst: opt("completion-burst", { int: true, min: 1 }) ?? 20,
    sessions: one("sessions") ?? env.SUPERFLUID_SESSIONS ?? join(superfluidHome(env), "sessions"),
    sessionsCache: flags.switches.has("sessions-cache"),
    park: flags.switches.has("park"),
    parkBudgetGb: opt("park-budget-gb", { min: 0 }) ?? 20,
    ...(one("files-max-bytes") === undefined ? {} : { filesMaxBytes: opt("files-max-bytes", { int: true, min: 0 }) }),
    ...(one("files-expiry") === undefined ? {} : { filesExpirySec: opt("files-expiry", { int: true, min: 1, max: 2 ** 31 - 1 }) }),
    // setInterval takes at most 2^31-1 ms.
    filesSweepSec: opt("files-sweep", { int: true, min: 1, max: 2_147_483 }) ?? 300,
    ...(one("host-cache-mb") === undefined ? {} : { hostCacheMb: opt("host-cache-mb", { int: true, min: 0 }) }),
    ...pressure(opt("pressure-high", { int: true, min: 1, max: 100 }) ?? 85, opt("pressure-low", { int: true, min: 0, max: 100 }) ?? 70),
    modelDirs: flags.values.get("model-dir") ?? [],
    aliases: (flags.values.get("alias") ?? []).map(aliasOf),
    pinBudgetPct: opt("pin-budget-pct", { int: true, min: 0, max: 100 }) ?? 50,
    // Only when a person is at the terminal (both ends of it), --tui or not: pipes, tests and services see plain lines.
    tui: !flags.switches.has("no-tui") && process.stdout.isTTY === true && process.stdin.isTTY === true,
    ...(one("log-dir") === undefined ? {} : { logDir: nonEmpty("log-dir", one("log-dir")!) }),
    ...(one("log-file") === undefined ? {} : { logFile: nonEmpty("log-file", one("log-file")!) }),
    verbose,
    quiet: flags.switches.has("quiet") || env.SUPERFLUID_QUIET === "1",
    ...(one("ready-file") === undefined ? {} : { readyFile: nonEmpty("ready-file", one("ready-file")!) }),
    ...(speculation ? { speculation } : {}),
    ...(one("spec-max-temperature") === undefined ? {} : { specMaxTemperature: opt("spec-max-temperature", { min: 0, max: 2 })! }),
    sampling: {
      temperature: opt("temperature", { min: 0, max: 2 }),
      topP: opt("top-p", { min: 0, max: 1 }),
      topK: opt("top-k", { int: true, min: 0, max: 2 ** 31 - 1 }),
      minP: opt("min-p", { min: 0, max: 1 }),
      repeatPenalty: opt("repeat-penalty", { min: 0.01, max: 2 }),
    },
  };
}
