// How much memory is free for the KV pool: on a machine where llama.cpp puts
// the model on a GPU, that device's free memory (the weights are already in
// it); otherwise the host's available memory (MemAvailable, within the
// cgroup's limit when there is one), from which the weights still have to
// come off, since an mmapped model's pages count as reclaimable cache.
import { readFileSync } from "node:fs";
import { freemem } from "node:os";
import type { Llama } from "../../ffi/llama.ts";

export interface FreeMemory {
  bytes: number;
  /** "host" or "device" (a GPU llama.cpp offloads to). */
  where: "host" | "device";
}

// enum ggml_backend_dev_type (ggml-backend.h).
const DEV_GPU = 1;
const DEV_IGPU = 2;

/** Free memory of the first GPU llama.cpp registered (dedicated before integrated); undefined on a CPU-only build. */
export function deviceFreeBytes(llama: Llama): number | undefined {
  const g = llama.ggml;
  const found: Record<number, number> = {};
  const count = Number(g.ggml_backend_dev_count());
  for (let i = 0; i < count; i++) {
    const dev = g.ggml_backend_dev_get(BigInt(i));
    if (!dev) continue;
    const type = g.ggml_backend_dev_type(dev);
    if ((type !== DEV_GPU && type !== DEV_IGPU) || found[type] !== undefined) continue;
    const free = new BigUint64Array(1);
    const total = new BigUint64Array(1);
    g.ggml_backend_dev_memory(dev, free, total);
    found[type] = Number(free[0]);
  }
  return found[DEV_GPU] ?? found[DEV_IGPU];
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
