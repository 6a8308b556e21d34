// Which of a model's layers go to a GPU, decided before the load
// (docs/design.md#gpu-offload). llama.cpp counts the output layer as one
// more layer after the repeating ones and offloads the last n_gpu_layers of
// that sequence (so 1 is the output layer alone; the token embeddings always
// stay on the host), and
// splits the offloaded ones between devices in proportion to the tensor split
// (free memory by default). The plan applies the same rules to the GGUF's
// tensor sizes, so it can say, before any byte is loaded, what goes where,
// refuse `--gpu-layers all` when it cannot fit, and pick `auto`'s count.
import { defaultGpus, type DeviceFacts } from "../../ffi/devices.ts";
import type { GgufFile } from "../gguf/index.ts";

export type GpuLayers = number | "auto" | "all";
export type SplitMode = "none" | "layer" | "row";

/** What the user asked for (serve flags; docs/cli.md#gpu-offload). */
export interface OffloadRequest {
  gpuLayers: GpuLayers;
  /** --device: the devices to use, by ggml name; undefined = every GPU (dedicated before integrated). */
  devices?: string[];
  splitMode: SplitMode;
  /** --tensor-split: one share per device used; undefined = in proportion to free memory. */
  tensorSplit?: number[];
  /** KV of offloaded layers on their device (default true). */
  kvOffload: boolean;
  /**
   * --rpc: RPC workers (HOST:PORT) whose devices join the local ones before placement (src/rpc/connect.ts,
   * docs/guides/multi-machine.md).
   */
  rpc?: string[];
}

export const DEFAULT_OFFLOAD: OffloadRequest = { gpuLayers: "auto", splitMode: "layer", kvOffload: true };

/** A model's weight bytes by where llama.cpp may put them. */
export interface LayerBytes {
  /** Bytes of each repeating layer (blk.N.*), by N. */
  layers: number[];
  /** The output layer's (output.weight, output_norm.*): the first offloaded (n_gpu_layers >= 1). */
  output: number;
  /** Everything else (token embeddings): always on the host. */
  host: number;
}

/** The GGUF's tensors grouped as llama.cpp places them. */
export function layerBytesOf(file: GgufFile): LayerBytes {
  const arch = file.metadata["general.architecture"];
  const declared = Number(file.metadata[`${typeof arch === "string" ? arch : ""}.block_count`] ?? 0);
  const layers = new Array<number>(Number.isFinite(declared) ? declared : 0).fill(0);
  let output = 0;
  let host = 0;
  for (const t of file.tensors) {
    const bytes = t.nbytes ?? 0;
    const block = /^blk\.(\d+)\./.exec(t.name);
    if (block) {
      const i = Number(block[1]);
      while (layers.length <= i) layers.push(0);
      layers[i]! += bytes;
    } else if (t.name.startsWith("output")) output += bytes;
    else host += bytes;
  }
  return { layers, output, host };
}

/** One device's share of a plan. */
export interface DevicePlacement {
  name: string;
  description: string;
  /** Repeating layers on it (the output layer is not counted here). */
  layers: number;
  weightBytes: number;
  /** KV of its layers for `kvCells` cells (0 with --no-kv-offload). */
  kvBytes: number;
}

export interface OffloadPlan {
  /** n_gpu_layers for llama.cpp: 0 = all on the host, 1 = the output layer, layerCount + 1 = all. */
  gpuLayers: number;
  /** Repeating layers in the model. */
  layerCount: number;
  devices: DevicePlacement[];
  /** Weight bytes left on the host. */
  hostWeightBytes: number;
  splitMode: SplitMode;
  tensorSplit?: number[];
  kvOffload: boolean;
  /** One line: what went where and why (the startup log). */
  summary: string;
}

/** Memory a device keeps free of weights and KV for llama.cpp's compute buffers and the driver. */
export function deviceReserveBytes(d: DeviceFacts): number {
  return Math.max(256 * 2 ** 20, 0.05 * d.totalBytes);
}

export class OffloadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "OffloadError";
  }
}

const MiB = 2 ** 20;
const mib = (n: number) => `${(n / MiB).toFixed(n < 10 * MiB ? 1 : 0)} MiB`;

/**
 * The devices a request uses, from those registered: --device names them
 * (refused by name when unknown, with what there is), else every GPU.
 */
export function chooseDevices<T extends DeviceFacts>(all: readonly T[], req: OffloadRequest): T[] {
  if (req.devices && req.devices.length > 0) {
    return req.devices.map((name) => {
      const found = all.find((d) => d.name.toLowerCase() === name.toLowerCase());
      if (!found) {
        const names = all.map((d) => `${d.name} (${d.type})`).join(", ");
        throw new OffloadError(`--device ${name}: no such device; this machine has ${names || "none"}`);
      }
      if (found.type === "cpu")
        throw new OffloadError(`--device ${name}: the CPU runs what no GPU takes; name GPUs, or use --no-gpu`);
      return found;
    });
  }
  return defaultGpus(all);
}

/**
 * Places layers: `devices` are those chosen (chooseDevices), `kvBytesPerLayer`
 * the KV one layer takes for the cells the worker will allocate. `auto` takes
 * as many layers, from the last, as fit in the devices' free memory less a
 * reserve; a number is taken as given (llama.cpp's own meaning); `all` is
 * refused when it does not fit.
 */
export function planOffload(
  req: OffloadRequest,
  devices: readonly DeviceFacts[],
  model: LayerBytes,
  kvBytesPerLayer: number,
): OffloadPlan {
  const n = model.layers.length;
  const kvPerLayer = req.kvOffload ? kvBytesPerLayer : 0;
  const shares = splitShares(req, devices);
  const place = (gpuLayers: number): DevicePlacement[] => placeLayers(gpuLayers, devices, shares, model, kvPerLayer);
  const fits = (placed: DevicePlacement[]) =>
    placed.every((p, i) => p.weightBytes + p.kvBytes <= devices[i]!.freeBytes - deviceReserveBytes(devices[i]!));
  let gpuLayers: number;
  let why: string;
  if (devices.length === 0 || req.gpuLayers === 0) {
    gpuLayers = 0;
    why = devices.length === 0 ? "no GPU found" : "--gpu-layers 0";
  } else if (req.gpuLayers === "all") {
    gpuLayers = n + 1;
    const placed = place(gpuLayers);
    if (!fits(placed)) {
      const need = placed.map(
        (p, i) => `${p.name}: ${mib(p.weightBytes + p.kvBytes)} of ${mib(devices[i]!.freeBytes)} free`,
      );
      throw new OffloadError(
        `--gpu-layers all: the model does not fit on ${devices.map((d) => d.name).join(", ")} (${need.join("; ")}, ` +
          `${mib(deviceReserveBytes(devices[0]!))} kept for compute); use --gpu-layers auto or a number`,
      );
    }
    why = "--gpu-layers all";
  } else if (req.gpuLayers === "auto") {
    gpuLayers = 0;
    for (let k = n + 1; k > 0; k--) {
      if (fits(place(k))) {
        gpuLayers = k;
        break;
      }
    }
    why =
      gpuLayers === n + 1 ? "auto: all fit" : `auto: ${Math.max(0, gpuLayers - 1)} of ${n} layers fit in free memory`;
  } else {
    gpuLayers = Math.min(req.gpuLayers, n + 1);
    why = `--gpu-layers ${req.gpuLayers}`;
  }
  const placed = gpuLayers > 0 ? place(gpuLayers) : [];
  const onDevices = placed.reduce((s, p) => s + p.weightBytes, 0);
  const total = model.layers.reduce((s, b) => s + b, 0) + model.output + model.host;
  const plan: OffloadPlan = {
    gpuLayers,
    layerCount: n,
    devices: placed.filter((p) => p.weightBytes > 0),
    hostWeightBytes: total - onDevices,
    splitMode: req.splitMode,
    ...(req.tensorSplit ? { tensorSplit: req.tensorSplit } : {}),
    kvOffload: req.kvOffload,
    summary: "",
  };
  plan.summary = summarize(plan, why);
  return plan;
}

/** Cumulative split points in [0, 1], one per device (llama.cpp's rule). */
function splitShares(req: OffloadRequest, devices: readonly DeviceFacts[]): number[] {
  if (devices.length === 0) return [];
  // No split: every offloaded layer on the first device chosen (llama.cpp's main_gpu).
  if (req.splitMode === "none") return devices.map(() => 1);
  const weights = req.tensorSplit ?? devices.map((d) => d.freeBytes);
  if (weights.length !== devices.length)
    throw new OffloadError(
      `--tensor-split has ${weights.length} shares for ${devices.length} devices (${devices.map((d) => d.name).join(", ")})`,
    );
  const sum = weights.reduce((s, w) => s + w, 0);
  if (!(sum > 0)) throw new OffloadError("--tensor-split needs at least one share above 0");
  let acc = 0;
  return weights.map((w) => (acc += w / sum));
}

function placeLayers(
  gpuLayers: number,
  devices: readonly DeviceFacts[],
  shares: number[],
  model: LayerBytes,
  kvPerLayer: number,
): DevicePlacement[] {
  const n = model.layers.length;
  const placed = devices.map((d) => ({
    name: d.name,
    description: d.description,
    layers: 0,
    weightBytes: 0,
    kvBytes: 0,
  }));
  if (devices.length === 0) return placed;
  const start = Math.max(n + 1 - gpuLayers, 0);
  const active = n + 1 - start;
  const deviceOf = (il: number) => {
    const at = (il - start) / active;
    const i = shares.findIndex((s) => at < s);
    return i < 0 ? devices.length - 1 : i;
  };
  for (let il = start; il < n; il++) {
    const p = placed[deviceOf(il)]!;
    p.layers++;
    p.weightBytes += model.layers[il]!;
    p.kvBytes += kvPerLayer;
  }
  if (gpuLayers >= 1) {
    const p = placed[deviceOf(n)]!;
    p.weightBytes += model.output;
  }
  return placed;
}

function summarize(plan: OffloadPlan, why: string): string {
  if (plan.devices.length === 0) return `offload: none, every layer on the CPU (${why})`;
  const parts = plan.devices.map(
    (d) =>
      `${d.name} (${d.description}): ${plan.devices.length > 1 ? `${d.layers} layers, ` : ""}${mib(d.weightBytes)} weights` +
      (d.kvBytes > 0 ? ` + ${mib(d.kvBytes)} KV` : ""),
  );
  const offloaded = plan.devices.reduce((s, d) => s + d.layers, 0);
  return (
    `offload: ${offloaded} of ${plan.layerCount} layers and the output layer ` +
    `on ${parts.join("; ")}; CPU: ${mib(plan.hostWeightBytes)} weights` +
    (plan.kvOffload ? "" : ", all KV (--no-kv-offload)") +
    ` (${why})`
  );
}

/** --gpu-layers: a count, `auto` or `all`. */
export function parseGpuLayers(value: string | undefined): GpuLayers {
  if (value === "auto" || value === "all") return value;
  const n = Number(value);
  if (value === undefined || value.trim() === "" || !Number.isInteger(n) || n < 0)
    throw new OffloadError(`--gpu-layers needs a number of layers, auto or all, got ${value ?? "nothing"}`);
  return n;
}

/** --split-mode: layer, row or none. */
export function parseSplitMode(value: string | undefined): SplitMode {
  if (value === "layer" || value === "row" || value === "none") return value;
  throw new OffloadError(`--split-mode needs layer, row or none, got ${value ?? "nothing"}`);
}

/** --tensor-split: shares separated by commas (3,1), one per device. */
export function parseTensorSplit(value: string | undefined): number[] {
  const shares = (value ?? "").split(",").map((s) => Number(s.trim()));
  if (!value || shares.some((s) => !Number.isFinite(s) || s < 0) || !shares.some((s) => s > 0))
    throw new OffloadError(`--tensor-split needs shares separated by commas (3,1), got ${value ?? "nothing"}`);
  return shares;
}

/** --device: device names separated by commas (Vulkan0,Vulkan1). */
export function parseDeviceList(value: string | undefined): string[] {
  const names = (value ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  if (names.length === 0)
    throw new OffloadError(`--device needs device names (superfluid check --devices), got nothing`);
  return names;
}

/** llama_split_mode. */
export function splitModeCode(mode: SplitMode): number {
  return mode === "none" ? 0 : mode === "layer" ? 1 : 2;
}

/** The worker's command-line flags for a request (src/worker/args.ts reads them back). */
export function offloadFlags(req: OffloadRequest): string[] {
  const flags = ["--gpu-layers", String(req.gpuLayers), "--split-mode", req.splitMode];
  if (req.devices) flags.push("--device", req.devices.join(","));
  if (req.tensorSplit) flags.push("--tensor-split", req.tensorSplit.join(","));
  if (!req.kvOffload) flags.push("--kv-offload", "off");
  if (req.rpc) flags.push("--rpc", req.rpc.join(","));
  return flags;
}
