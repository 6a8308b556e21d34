// The worker's command line: `superfluid worker --model PATH [--max-batch N]
// [--max-context N|auto] [--kv-pool N] [--threads N] [--prefill-budget N] [--host-cache-mb N]
// [--pressure-high PCT] [--pressure-low PCT] [--pin-budget-pct PCT]
// [--class-lanes class=N,...] [--starvation-ticks N] [--speculate auto|prompt-lookup|draft-model:PATH
// --spec-draft-tokens N --spec-min-yield X --spec-yield-rounds N --spec-throughput-gate on|off --spec-adaptive on|off
// --spec-min-speedup X --spec-gate-probe-tokens N --spec-gate-reprobe N --spec-gate-reprobe-max N]`.
// The daemon checked every value the user gave (src/cli/serve-options.ts); these checks guard the IPC boundary.
import { parseLaneCaps, type ClassLanes } from "../engine/scheduler.ts";
import { MAX_DRAFT_TOKENS } from "../engine/speculation.ts";
import { speculationSettings, type SpeculationSettings } from "../engine/speculation-directive.ts";
import { physicalCores } from "../engine/threads.ts";
import {
  DEFAULT_OFFLOAD,
  parseDeviceList,
  parseGpuLayers,
  parseSplitMode,
  parseTensorSplit,
  type OffloadRequest,
} from "../engine/offload.ts";
import { parseEndpointList } from "../rpc/endpoint.ts";
import { F16_KV, isKvType, KV_TYPES, type KvTypes } from "../gguf/kv-type.ts";

export interface WorkerArgs {
  model: string;
  maxBatch: number;
  /**
   * Per-lane window (per-lane buffers unless kvPool is set); undefined = auto, sized from free memory (kv-sizing.ts).
   */
  maxContext?: number;
  /** Cells of a shared pool (--kv-pool). */
  kvPool?: number;
  /** The KV cache's element types (--cache-type-k, --cache-type-v). */
  kvTypes: KvTypes;
  threads: number;
  prefillBudget: number;
  /** Host-tier bytes for prefixes that leave the pool; undefined = the engine's default, 0 = none. */
  hostCacheBytes?: number;
  /** Pressure watermarks in percent of the pool's cells. */
  pressureHigh: number;
  pressureLow: number;
  /**
   * Percent of the pool's cells pinned prefixes may hold (docs/design.md#pinned-prefixes); 0 = they protect nothing.
   */
  pinBudgetPct: number;
  classLanes?: ClassLanes;
  starvationTicks?: number;
  /** --speculate and its tuning; absent = plain decoding. */
  speculation?: SpeculationSettings;
  /** --gpu-layers, --device, --split-mode, --tensor-split, --kv-offload (src/engine/offload.ts). */
  offload: OffloadRequest;
}

export const WORKER_DEFAULTS = { maxBatch: 8, prefillBudget: 512, pressureHigh: 85, pressureLow: 70, pinBudgetPct: 50 };

/** The smallest window (docs/design.md#kv-layout: floor 512). */
export const MIN_CONTEXT = 512;

export class UsageError extends Error {}

function positiveInt(flag: string, value: string | undefined): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0)
    throw new UsageError(`${flag} needs a positive whole number, got ${value ?? "nothing"}`);
  return n;
}

function wholeNumber(flag: string, value: string | undefined, max: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > max)
    throw new UsageError(`${flag} needs a whole number from 0 to ${max}, got ${value ?? "nothing"}`);
  return n;
}

function positiveNumber(flag: string, value: string | undefined, orZero = false): number {
  const n = Number(value);
  if (value === undefined || value.trim() === "" || !Number.isFinite(n) || n < 0 || (n === 0 && !orZero)) {
    throw new UsageError(`${flag} needs a number ${orZero ? "of at least 0" : "above 0"}, got ${value ?? "nothing"}`);
  }
  return n;
}

export function parseWorkerArgs(argv: string[]): WorkerArgs {
  const args: Partial<WorkerArgs> = {};
  const kvTypes: KvTypes = { ...F16_KV };
  let classLanes: string | undefined;
  // The --spec-* values, applied once the directive is known (any order).
  const tuning: Partial<Omit<SpeculationSettings, "directive">> = {};
  let directive: SpeculationSettings["directive"] | undefined;
  const offload: OffloadRequest = { ...DEFAULT_OFFLOAD };
  // The offload parsers throw OffloadError; at this boundary it is a usage error.
  const offloadValue = <T>(parse: () => T): T => {
    try {
      return parse();
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    const value = argv[i + 1];
    switch (flag) {
      case "--model":
        if (!value) throw new UsageError("--model needs a path");
        args.model = value;
        break;
      case "--max-batch":
        args.maxBatch = positiveInt(flag, value);
        break;
      case "--max-context":
        if (value !== "auto") args.maxContext = positiveInt(flag, value);
        break;
      case "--kv-pool":
        args.kvPool = positiveInt(flag, value);
        break;
      case "--threads":
        args.threads = positiveInt(flag, value);
        break;
      case "--prefill-budget":
        // 0 = the adaptive controller.
        args.prefillBudget = wholeNumber(flag, value, 4096);
        break;
      case "--class-lanes":
        classLanes = value ?? "";
        break;
      case "--starvation-ticks":
        args.starvationTicks = wholeNumber(flag, value, 2 ** 31 - 1);
        break;
      case "--cache-type-k":
      case "--cache-type-v":
        if (!value || !isKvType(value))
          throw new UsageError(`${flag} takes one of ${Object.keys(KV_TYPES).join(", ")}, got ${value ?? "nothing"}`);
        kvTypes[flag === "--cache-type-k" ? "k" : "v"] = value;
        break;
      case "--host-cache-mb":
        args.hostCacheBytes = wholeNumber(flag, value, 2 ** 40) * 2 ** 20;
        break;
      case "--pressure-high":
        args.pressureHigh = wholeNumber(flag, value, 100);
        break;
      case "--pressure-low":
        args.pressureLow = wholeNumber(flag, value, 100);
        break;
      case "--pin-budget-pct":
        args.pinBudgetPct = wholeNumber(flag, value, 100);
        break;
      case "--speculate":
        if (value?.startsWith("draft-model:") && value.length > "draft-model:".length) {
          directive = "draft-model";
          tuning.draftModel = value.slice("draft-model:".length);
          break;
        }
        if (value !== "auto" && value !== "prompt-lookup")
          throw new UsageError(`--speculate needs auto, prompt-lookup or draft-model:PATH, got ${value ?? "nothing"}`);
        directive = value;
        break;
      case "--spec-draft-tokens":
        tuning.draftTokens = positiveInt(flag, value);
        if (tuning.draftTokens > MAX_DRAFT_TOKENS)
          throw new UsageError(`${flag} needs 1 to ${MAX_DRAFT_TOKENS}, got ${value}`);
        break;
      case "--spec-min-yield":
        tuning.minYield = positiveNumber(flag, value, true);
        break;
      case "--spec-yield-rounds":
        tuning.yieldRounds = positiveInt(flag, value);
        break;
      case "--spec-throughput-gate":
        if (value !== "on" && value !== "off")
          throw new UsageError(`${flag} needs on or off, got ${value ?? "nothing"}`);
        tuning.throughputGate = value === "on";
        break;
      case "--spec-adaptive":
        if (value !== "on" && value !== "off")
          throw new UsageError(`${flag} needs on or off, got ${value ?? "nothing"}`);
        tuning.adaptive = value === "on";
        break;
      case "--spec-min-speedup":
        tuning.minSpeedup = positiveNumber(flag, value);
        break;
      case "--spec-gate-probe-tokens":
        tuning.probeTokens = positiveInt(flag, value);
        break;
      case "--spec-gate-reprobe":
        tuning.reprobe = wholeNumber(flag, value, 2 ** 31 - 1);
        break;
      case "--spec-gate-reprobe-max":
        tuning.reprobeMax = positiveInt(flag, value);
        break;
      case "--gpu-layers":
        offload.gpuLayers = offloadValue(() => parseGpuLayers(value));
        break;
      case "--device":
        offload.devices = offloadValue(() => parseDeviceList(value));
        break;
      case "--split-mode":
        offload.splitMode = offloadValue(() => parseSplitMode(value));
        break;
      case "--tensor-split":
        offload.tensorSplit = offloadValue(() => parseTensorSplit(value));
        break;
      case "--kv-offload":
        if (value !== "on" && value !== "off")
          throw new UsageError(`${flag} needs on or off, got ${value ?? "nothing"}`);
        offload.kvOffload = value === "on";
        break;
      case "--rpc":
        try {
          offload.rpc = parseEndpointList(value ?? "");
        } catch (err) {
          throw new UsageError(`${flag}: ${(err as Error).message}`);
        }
        break;
      default:
        throw new UsageError(`unknown worker flag ${flag}`);
    }
    i++;
  }
  if (!args.model) throw new UsageError("the worker needs --model");
  if (classLanes !== undefined) {
    try {
      args.classLanes = parseLaneCaps(classLanes, args.maxBatch ?? WORKER_DEFAULTS.maxBatch);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  }
  return {
    model: args.model,
    maxBatch: args.maxBatch ?? WORKER_DEFAULTS.maxBatch,
    ...(args.maxContext === undefined ? {} : { maxContext: Math.max(MIN_CONTEXT, args.maxContext) }),
    ...(args.kvPool === undefined ? {} : { kvPool: Math.max(MIN_CONTEXT, args.kvPool) }),
    kvTypes,
    threads: args.threads ?? physicalCores(),
    prefillBudget: args.prefillBudget ?? WORKER_DEFAULTS.prefillBudget,
    ...(args.hostCacheBytes === undefined ? {} : { hostCacheBytes: args.hostCacheBytes }),
    pressureHigh: args.pressureHigh ?? WORKER_DEFAULTS.pressureHigh,
    pressureLow: Math.min(
      args.pressureLow ?? WORKER_DEFAULTS.pressureLow,
      args.pressureHigh ?? WORKER_DEFAULTS.pressureHigh,
    ),
    pinBudgetPct: args.pinBudgetPct ?? WORKER_DEFAULTS.pinBudgetPct,
    ...(args.classLanes ? { classLanes: args.classLanes } : {}),
    ...(args.starvationTicks === undefined ? {} : { starvationTicks: args.starvationTicks }),
    ...(directive === undefined ? {} : { speculation: speculationSettings(directive, tuning) }),
    offload,
  };
}
