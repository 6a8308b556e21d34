// The compute devices ggml registered once its backends are loaded: the CPU
// and, with a GPU build (the Vulkan or CUDA libraries), each GPU it found.
// `superfluid check --devices` lists them; the worker places layers on them
// (src/engine/offload.ts) and names them in its startup facts.
import type { Pointer } from "bun:ffi";
import type { Llama } from "./llama.ts";

// enum ggml_backend_dev_type (ggml-backend.h).
const DEVICE_TYPES = ["cpu", "gpu", "igpu", "accel"] as const;
export type DeviceType = (typeof DEVICE_TYPES)[number];

export interface DeviceFacts {
  /** ggml's device name, what --device takes (Vulkan0, CUDA0, CPU, ...). */
  name: string;
  /** The hardware, as the backend describes it (the GPU's product name). */
  description: string;
  type: DeviceType;
  freeBytes: number;
  totalBytes: number;
}

export interface Device extends DeviceFacts {
  /** ggml_backend_dev_t, for llama_model_params.devices. */
  handle: Pointer;
}

/** Every device registered, in ggml's order (llama.cpp numbers GPUs in it). Loads the backends first. */
export function listDevices(llama: Llama): Device[] {
  const g = llama.ggml;
  const devices: Device[] = [];
  const count = Number(g.ggml_backend_dev_count());
  for (let i = 0; i < count; i++) {
    const handle = g.ggml_backend_dev_get(BigInt(i));
    if (!handle || typeof handle === "bigint") continue;
    const free = new BigUint64Array(1);
    const total = new BigUint64Array(1);
    g.ggml_backend_dev_memory(handle, free, total);
    devices.push({
      handle,
      name: String(g.ggml_backend_dev_name(handle)),
      description: String(g.ggml_backend_dev_description(handle)),
      type: DEVICE_TYPES[g.ggml_backend_dev_type(handle)] ?? "accel",
      freeBytes: Number(free[0]),
      totalBytes: Number(total[0]),
    });
  }
  return devices;
}

/**
 * The GPUs that take layers when none is named: every dedicated GPU, else the first integrated one
 * (llama.cpp's own default). The first of them is the one whose free memory sizes a load.
 */
export function defaultGpus<T extends DeviceFacts>(devices: readonly T[]): T[] {
  const gpus = devices.filter((d) => d.type === "gpu");
  return gpus.length > 0 ? gpus : devices.filter((d) => d.type === "igpu").slice(0, 1);
}

/** The facts without the handle (what crosses IPC and goes into JSON). */
export function deviceFacts(d: DeviceFacts): DeviceFacts {
  return { name: d.name, description: d.description, type: d.type, freeBytes: d.freeBytes, totalBytes: d.totalBytes };
}
