// Before a model is loaded: does it fit in the memory that is free now?
// (docs/cli.md#several-models). Its weights (the GGUF files' size: tensor
// data is nearly all of a file) plus its KV for the window it would get
// (bytes a token from the GGUF metadata, times the cells the worker's own
// sizing would allocate, src/engine/kv-sizing.ts) against the host's
// available memory, or the GPU's free memory where llama.cpp offloads to
// one. A model that does not fit is refused naming both figures, instead of
// a worker that dies half-way through allocating or a machine that swaps.
import type { KvTypes } from "../gguf/kv-type.ts";
import { existsSync, statSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { defaultGpus } from "../../ffi/devices.ts";
import { cpuOnlyLibrary, libraryLocation, loadLlama } from "../../ffi/llama.ts";
import { planKv } from "../engine/kv-sizing.ts";
import { formatBytes } from "../runtime/byte-size.ts";
import { deviceFreeBytes, hostAvailableBytes, type FreeMemory } from "../engine/memory.ts";
import { kvBytesPerToken, type GgufFile } from "../gguf/index.ts";
import { RequestError } from "./request-error.ts";
import { devicesOfStandby } from "./standby-worker.ts";

/** How the worker will size its KV: the serve flags that decide it. */
export interface KvSizing {
  lanes: number;
  /** --max-context N. */
  maxContext?: number;
  /** --kv-pool N. */
  kvPool?: number;
  /** --kv-bits, --cache-type-k/-v: the KV's element types (f16 unless said). */
  kvTypes?: KvTypes;
}

export interface FitFigures {
  weightBytes: number;
  kvBytes: number;
  /** KV cells (tokens) the worker would allocate. */
  kvCells: number;
  bytesPerToken: number;
  free: FreeMemory;
}

/** A model that does not fit: 507 on demand (docs/api/openai.md#loading-and-unloading-models), exit 1 at startup. */
export class ModelTooLargeError extends RequestError {
  /** `pulled`: the reference a pull was about to download, refused before its first byte. */
  constructor(
    readonly id: string,
    readonly figures: FitFigures,
    pulled?: string,
  ) {
    const f = figures;
    super(
      507,
      `model '${id}' does not fit in memory: it needs ${formatBytes(f.weightBytes + f.kvBytes)} ` +
        `(weights ${formatBytes(f.weightBytes)} + KV ${formatBytes(f.kvBytes)} for ${f.kvCells} tokens at ${formatBytes(f.bytesPerToken)} a token) ` +
        `but ${formatBytes(f.free.bytes)} of ${f.free.where} memory is free` +
        (f.kvBytes > 0
          ? "; a smaller --max-context or --max-batch, a quantized KV (--kv-bits 8), or unloading another model, would make room"
          : "") +
        (pulled === undefined
          ? ""
          : `; nothing of ${pulled} was downloaded (a smaller quant of ${id}, a lower :TAG, needs less; ` +
            "`superfluid pull` downloads it without loading)"),
      "insufficient_memory",
      "model",
    );
    this.name = "ModelTooLargeError";
  }
}

export { kvBytesPerToken };

const SPLIT_NAME = /-(\d{5})-of-(\d{5})\.gguf$/i;

/** The bytes of a model's files: every shard of a split model. */
export function weightBytesOf(path: string): number {
  const m = SPLIT_NAME.exec(basename(path));
  if (!m) return statSync(path).size;
  let total = 0;
  const count = Number(m[2]);
  const stem = basename(path).slice(0, m.index);
  for (let i = 1; i <= count; i++) {
    const shard = join(dirname(path), `${stem}-${String(i).padStart(5, "0")}-of-${m[2]}.gguf`);
    if (existsSync(shard)) total += statSync(shard).size;
  }
  return total;
}

/**
 * Memory a model can be loaded into now: a GPU's free memory when llama.cpp
 * offloads to one (weights and KV both go there), else the host's available
 * memory within the cgroup's limit.
 */
export function freeMemory(): FreeMemory {
  let device: number | undefined;
  try {
    // A library of CPU backends only offloads to no device: the host's memory is
    // the budget, and the daemon need not load (and score) every backend to say so.
    const dir = loadLlama(process.env, { backends: false }).location.dir;
    device = cpuOnlyLibrary(dir) ? undefined : deviceFreeBytes(loadLlama());
  } catch {
    device = undefined;
  }
  return device !== undefined ? { bytes: device, where: "device" } : { bytes: hostAvailableBytes(), where: "host" };
}

/**
 * The memory free for a model about to load, without loading ggml's backends on the daemon's main thread
 * where it can be helped: a CPU-only library (or `gpu` false: --no-gpu) is the host's memory; a GPU library's
 * devices come from the standby worker, which loads the backends anyway (src/daemon/standby-worker.ts); only
 * when there is none (a later load) does the daemon load them itself. `devices`: the --device names, first
 * one wins; else the first dedicated GPU, then an integrated one.
 */
export async function freeMemoryBeforeLoad(gpu: boolean, devices?: string[]): Promise<FreeMemory> {
  const host = (): FreeMemory => ({ bytes: hostAvailableBytes(), where: "host" });
  if (!gpu) return host();
  try {
    // Located, not opened: the vocabulary load opens it, after the worker has been started (served-model.ts).
    if (cpuOnlyLibrary(libraryLocation().dir)) return host();
  } catch {
    return host();
  }
  const seen = await devicesOfStandby();
  if (!seen) return freeMemory();
  const named = devices?.map((n) => seen.find((d) => d.name.toLowerCase() === n.toLowerCase())).find(Boolean);
  const device = named ?? defaultGpus(seen)[0];
  return device ? { bytes: device.freeBytes, where: "device" } : host();
}

/**
 * The figures of a load, computed as the worker would size the KV: an
 * explicit --max-context or --kv-pool as given, auto sizing as kv-sizing.ts
 * plans it from the memory left after the weights (its smallest pool is one
 * window of min(trained window, 4096) tokens, which is what may not fit).
 * `weights`: the model's file (every shard of a split model counted), or its
 * bytes where the file is not on disk yet (a pull about to download it).
 */
export function fitFigures(
  weights: string | number,
  file: GgufFile,
  trainedContext: number,
  sizing: KvSizing,
  free: FreeMemory = freeMemory(),
): FitFigures {
  const weightBytes = typeof weights === "number" ? weights : weightBytesOf(weights);
  const bytesPerToken = kvBytesPerToken(file, sizing.kvTypes);
  const left: FreeMemory = { bytes: Math.max(0, free.bytes - weightBytes), where: free.where };
  const plan = planKv(
    {
      ...(sizing.maxContext === undefined ? {} : { maxContext: sizing.maxContext }),
      ...(sizing.kvPool === undefined ? {} : { poolCells: sizing.kvPool }),
    },
    { lanes: sizing.lanes, trainedContext, bytesPerToken, free: () => left },
  );
  return { weightBytes, kvBytes: plan.poolBytes, kvCells: plan.poolCells, bytesPerToken, free };
}

/**
 * Throws ModelTooLargeError when weights plus KV exceed the free memory (`weights` as fitFigures takes it; `pulled`:
 * the reference of a pull this check runs before, named in the refusal).
 */
export function checkFit(
  id: string,
  weights: string | number,
  file: GgufFile,
  trainedContext: number,
  sizing: KvSizing,
  free?: FreeMemory,
  pulled?: string,
): FitFigures {
  const figures = fitFigures(weights, file, trainedContext, sizing, free);
  if (figures.weightBytes + figures.kvBytes > figures.free.bytes) throw new ModelTooLargeError(id, figures, pulled);
  return figures;
}
