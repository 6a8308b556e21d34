// The worker's command line: `superfluid worker --model PATH [--max-batch N]
// [--max-context N|auto] [--kv-pool N] [--threads N] [--prefill-budget N] [--host-cache-mb N]
// [--pressure-high PCT] [--pressure-low PCT] [--pin-budget-pct PCT]
// [--class-lanes class=N,...] [--starvation-ticks N]`.
import { parseLaneCaps, type ClassLanes } from "../engine/scheduler.ts";
import { physicalCores } from "../engine/threads.ts";

export interface WorkerArgs {
  model: string;
  maxBatch: number;
  /** Per-lane window (per-lane buffers unless kvPool is set); undefined = auto, sized from free memory (kv-sizing.ts). */
  maxContext?: number;
  /** Cells of a shared pool (--kv-pool). */
  kvPool?: number;
  threads: number;
  prefillBudget: number;
  /** Host-tier bytes for prefixes that leave the pool; undefined = the engine's default, 0 = none. */
  hostCacheBytes?: number;
  /** Pressure watermarks in percent of the pool's cells. */
  pressureHigh: number;
  pressureLow: number;
  /** Percent of the pool's cells pinned prefixes may hold (docs/design.md#pinned-prefixes); 0 = they protect nothing. */
  pinBudgetPct: number;
  classLanes?: ClassLanes;
  starvationTicks?: number;
}

export const WORKER_DEFAULTS = { maxBatch: 8, prefillBudget: 512, pressureHigh: 85, pressureLow: 70, pinBudgetPct: 50 };

/** The smallest window (docs/design.md#kv-layout: floor 512). */
export const MIN_CONTEXT = 512;

export class UsageError extends Error {}

function positiveInt(flag: string, value: string | undefined): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new UsageError(`${flag} needs a positive whole number, got ${value ?? "nothing"}`);
  return n;
}

function wholeNumber(flag: string, value: string | undefined, max: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > max) throw new UsageError(`${flag} needs a whole number from 0 to ${max}, got ${value ?? "nothing"}`);
  return n;
}

export function parseWorkerArgs(argv: string[]): WorkerArgs {
  const args: Partial<WorkerArgs> = {};
  let classLanes: string | undefined;
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
    threads: args.threads ?? physicalCores(),
    prefillBudget: args.prefillBudget ?? WORKER_DEFAULTS.prefillBudget,
    ...(args.hostCacheBytes === undefined ? {} : { hostCacheBytes: args.hostCacheBytes }),
    pressureHigh: args.pressureHigh ?? WORKER_DEFAULTS.pressureHigh,
    pressureLow: Math.min(args.pressureLow ?? WORKER_DEFAULTS.pressureLow, args.pressureHigh ?? WORKER_DEFAULTS.pressureHigh),
    pinBudgetPct: args.pinBudgetPct ?? WORKER_DEFAULTS.pinBudgetPct,
    ...(args.classLanes ? { classLanes: args.classLanes } : {}),
    ...(args.starvationTicks === undefined ? {} : { starvationTicks: args.starvationTicks }),
  };
}
