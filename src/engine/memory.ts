// How much memory is free for the KV pool: on a machine where llama.cpp puts
// the model on a GPU, that device's free memory (the weights are already in
// it); otherwise the host's available memory (MemAvailable, within the
// cgroup's limit when there is one), from which the weights still have to
// come off, since an mmapped model's pages count as reclaimable cache.
import { readFileSync } from "node:fs";
import { freemem } from "node:os";
import { defaultGpus, listDevices } from "../../ffi/devices.ts";
import type { Llama } from "../../ffi/llama.ts";

export interface FreeMemory {
  bytes: number;
  /** "host" or "device" (a GPU llama.cpp offloads to), with RPC workers' devices counted in (--rpc). */
  where: "host" | "device" | "host and RPC workers" | "device and RPC workers";
}

/** Free memory of the GPU a load is sized by (ffi/devices.ts defaultGpus); undefined on a CPU-only build. */
export function deviceFreeBytes(llama: Llama): number | undefined {
  return defaultGpus(listDevices(llama))[0]?.freeBytes;
}

function readNumber(path: string): number | undefined {
  try {
    const text = readFileSync(path, "utf8").trim();
    const n = Number(text);
    return text !== "" && Number.isFinite(n) ? n : undefined; // "max" = no limit
  } catch {
    return undefined;
  }
}

/** Host memory a new allocation can get without swapping: MemAvailable, capped by the cgroup (v2) limit. */
export function hostAvailableBytes(): number {
  let available = freemem();
  if (process.platform === "linux") {
    try {
      const m = /^MemAvailable:\s+(\d+) kB/m.exec(readFileSync("/proc/meminfo", "utf8"));
      if (m) available = Number(m[1]) * 1024;
    } catch {
      // keep freemem()
    }
    const limit = readNumber("/sys/fs/cgroup/memory.max");
    const current = readNumber("/sys/fs/cgroup/memory.current");
    if (limit !== undefined && current !== undefined) available = Math.min(available, Math.max(0, limit - current));
  }
  return available;
}

/**
 * Free memory for the KV pool, with the model's weights (`weightBytes`) already taken off the host figure.
 * `offloaded`: layers went to a GPU (src/engine/offload.ts), whose free memory is then the budget.
 */
export function freeForKv(llama: Llama, weightBytes: number, offloaded = true): FreeMemory {
  const device = offloaded ? deviceFreeBytes(llama) : undefined;
  if (device !== undefined) return { bytes: device, where: "device" };
  return { bytes: Math.max(0, hostAvailableBytes() - weightBytes), where: "host" };
}
