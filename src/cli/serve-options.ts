// `superfluid serve [MODEL] [flags]` (docs/cli.md#serve): the options read from the flags declared
// in serve-flags.ts, the checks that span several flags, and the --help and --help-all text.
import type { KvTypes } from "../gguf/kv-type.ts";
import type { ClassLanes } from "../engine/scheduler.ts";
import type { OperatorSampling } from "../daemon/sampling-resolve.ts";
import { SPECULATION_DEFAULTS } from "../engine/speculation.ts";
import type { SpeculationSettings } from "../engine/speculation-directive.ts";
import { letsInAnySite } from "../http/allowed-origins.ts";
import { KeyPolicyError, readKeyPolicy, type PolicyKey } from "../http/auth/key-policy.ts";
import { parseClassLanes } from "../http/qos.ts";
import { asUsage, checkRefusals, flagSpecs, readFlags, renderHelp } from "./flag-decl.ts";
import type { DirectKey, Env, FlagValues } from "./flag-decl.ts";
import { nonEmpty, UsageError } from "./flag-values.ts";
import { parseFlags } from "./flags.ts";
import { HELP_FLAGS, SERVE_FLAGS, SERVE_SECTIONS } from "./serve-flags.ts";

export { UsageError } from "./flag-values.ts";
export { superfluidHome } from "./serve-flags.ts";

type Declared = FlagValues<typeof SERVE_FLAGS>;

/** The options no single flag gives as it is: read from several, or from the terminal. */
interface Derived {
  /** MODEL tokens (paths or references), the bare one first; the first is the default; none = the built-in model. */
  models: string[];
  /** --key-policy FILE, read and validated at startup (docs/api/key-policy.md). */
  policyKeys: PolicyKey[];
  /** --class-lanes: lane caps per class (undefined = uncapped). */
  classLanes?: ClassLanes;
  /** false under --no-http-qos-header: x-superfluid-qos is ignored. */
  qosHeader: boolean;
  /** The live monitor (docs/cli.md#tui): on when stdin and stdout are a terminal, unless --no-tui. */
  tui: boolean;
  sampling: OperatorSampling;
  /** --speculate auto|prompt-lookup and the --spec-* tuning (docs/cli.md#speculative-decoding); absent = off. */
  speculation?: SpeculationSettings;
  /** The KV's element types: --kv-bits, each part overridden by --cache-type-k/-v. */
  kvTypes: KvTypes;
}

/** The keys of Derived, for the test that every other option comes from a declared flag. */
export const DERIVED_KEYS = [
  "models",
  "policyKeys",
  "classLanes",
  "qosHeader",
  "tui",
  "sampling",
  "speculation",
  "kvTypes",
] as const satisfies readonly (keyof Derived)[];

/**
 * Each declared flag's value under its key (serve-flags.ts says what each means), and the derived ones.
 * host and port come from --http when it is given.
 */
export type ServeOptions = Pick<Declared, DirectKey<typeof SERVE_FLAGS>> & Derived;

const SPECS = flagSpecs(SERVE_FLAGS, HELP_FLAGS);

const HEAD = `usage: superfluid serve [MODEL] [--model MODEL ...] [flags]

MODEL is a GGUF path or a reference org/repo-GGUF[:QUANT] (looked up in
--model-dir folders and the Hugging Face cache, else pulled from the Hugging
Face Hub unless --offline). With no MODEL the built-in tiny model is served.
Each model named is loaded at startup in its own worker; the first is the
default for requests that name none.`;

/** The help text; `all` adds the expert tuning and the flags this runtime refuses. */
export function serveUsage(all = false): string {
  const foot = all
    ? "Flags are described in docs/cli.md#serve."
    : "--help-all also lists the expert tuning (--spec-* beyond --speculate and --spec-draft-tokens)\n" +
      "and the flags this runtime refuses. Flags are described in docs/cli.md#serve.";
  return renderHelp(SERVE_FLAGS, SERVE_SECTIONS, { head: HEAD, foot, all });
}

/** --api-key values and the --key-policy file, validated together: a policy secret may not repeat a global key. */
function policyKeys(apiKeys: string[], path: string | undefined, env: Env): PolicyKey[] {
  if (path === undefined) return [];
  return asUsage("key-policy", () => readKeyPolicy(nonEmpty(path, "key-policy"), { env, apiKeys }), KeyPolicyError);
}

/**
 * --allow-origin patterns that let in pages from any web site: only on a server with keys. Without one,
 * any page a person visits could drive the server through their browser (docs/api/security.md#cors).
 */
function checkOpenOrigins(patterns: readonly string[], keyed: boolean): void {
  const open = patterns.find(letsInAnySite);
  if (open !== undefined && !keyed) {
    throw new UsageError(
      `--allow-origin '${open}' lets any web site's pages call this server: it needs a key (--api-key or --key-policy)`,
    );
  }
}

/** --speculate and its --spec-* tuning: undefined when off. The tuning is checked whatever the directive. */
function speculation(v: Declared): SpeculationSettings | undefined {
  // A re-probe period above the default ceiling raises the ceiling with it.
  const reprobeMax = v.reprobeMax ?? Math.max(SPECULATION_DEFAULTS.reprobeMax, v.reprobe);
  if (v.reprobe > reprobeMax) {
    throw new UsageError(`--spec-gate-reprobe (${v.reprobe}) cannot be above --spec-gate-reprobe-max (${reprobeMax})`);
  }
  if (v.speculate === undefined) return undefined;
  const { draftTokens, minYield, yieldRounds, throughputGate, adaptive, minSpeedup, probeTokens, reprobe } = v;
  const tuning = { draftTokens, minYield, yieldRounds, throughputGate, adaptive, minSpeedup, probeTokens, reprobe };
  return { ...v.speculate, ...tuning, reprobeMax };
}

export function parseServeOptions(argv: string[], env: Env = process.env): ServeOptions | "help" | "help-all" {
  const flags = parseFlags(argv, SPECS);
  if (flags.switches.has("help")) return "help";
  if (flags.switches.has("help-all")) return "help-all";
  checkRefusals(SERVE_FLAGS, flags);
  const v = readFlags(SERVE_FLAGS, flags, env);
  // A log treated as a cache forgets the sessions whose KV the artifacts would restore.
  if (v.park && v.sessionsCache) throw new UsageError("--park cannot be combined with --sessions-cache");
  const spec = speculation(v);
  checkOpenOrigins(v.allowOrigins, v.apiKeys.length > 0 || v.keyPolicy !== undefined);
  if (v.pressureLow > v.pressureHigh) {
    throw new UsageError(`--pressure-low (${v.pressureLow}) cannot be above --pressure-high (${v.pressureHigh})`);
  }
  const lanes = v.classLanes;
  const direct: Record<string, unknown> = {};
  for (const d of SERVE_FLAGS) {
    const value = (v as Record<string, unknown>)[d.key];
    if (!("internal" in d) && value !== undefined) direct[d.key] = value;
  }
  const options = direct as Pick<Declared, DirectKey<typeof SERVE_FLAGS>>;
  return {
    ...options,
    ...v.http,
    models: [...flags.positional, ...v.model],
    policyKeys: policyKeys(v.apiKeys, v.keyPolicy, env),
    ...(lanes === undefined ? {} : { classLanes: asUsage("class-lanes", () => parseClassLanes(lanes, v.maxBatch)) }),
    qosHeader: !v.noQosHeader,
    // Only when a person is at the terminal (both ends of it), --tui or not: pipes, tests and services see plain lines.
    tui: v.tui !== false && process.stdout.isTTY === true && process.stdin.isTTY === true,
    sampling: { temperature: v.temperature, topP: v.topP, topK: v.topK, minP: v.minP, repeatPenalty: v.repeatPenalty },
    ...(spec ? { speculation: spec } : {}),
    kvTypes: { k: v.cacheTypeK ?? v.kvBits.k, v: v.cacheTypeV ?? v.kvBits.v },
  };
}
