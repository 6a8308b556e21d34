// Whether a GPU backend is worth loading at all. Loading ggml's Vulkan backend
// opens a Vulkan instance, and the Vulkan loader then opens every installed
// driver (Mesa's lavapipe pulls in LLVM): 40-150 ms of a start, paid even on a
// machine where no GPU exists. ggml skips CPU-type Vulkan devices (lavapipe)
// unless GGML_VK_VISIBLE_DEVICES names them, so where the kernel exposes no GPU
// device node the backend could register nothing, and it is not loaded.
import { readdirSync } from "node:fs";

/** The GPU backends (by ggml's name) that --no-gpu leaves unloaded: every loadable one but BLAS and RPC. */
export function isGpuBackend(name: string): boolean {
  return name !== "blas" && name !== "rpc";
}

/**
 * The device nodes through which a Linux GPU driver is reached: DRM render and
 * card nodes (Mesa's and AMD's drivers, Intel's, NVIDIA's open kernel module),
 * NVIDIA's own nodes, WSL2's /dev/dxg (Mesa's Dozen), and the Mali and Adreno
 * nodes of ARM boards' vendor drivers.
 */
export function linuxGpuNodes(list: (dir: string) => string[] = safeList): string[] {
  const dev = list("/dev").filter((f) => /^(nvidia|dxg$|mali|kgsl)/.test(f));
  const dri = list("/dev/dri").filter((f) => /^(renderD|card)\d+$/.test(f));
  return [...dev.map((f) => `/dev/${f}`), ...dri.map((f) => `/dev/dri/${f}`)];
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

export interface GpuBackendQuery {
  /** ggml's backend name: vulkan, cuda, ... */
  name: string;
  env: NodeJS.ProcessEnv;
  /** false: --no-gpu (no device but the CPU is wanted). */
  gpu: boolean;
  platform?: NodeJS.Platform;
  nodes?: () => string[];
}

/**
 * Why a backend beside libllama is left unloaded, or undefined to load it: every GPU backend under --no-gpu;
 * Vulkan on Linux where no GPU device node exists and GGML_VK_VISIBLE_DEVICES does not ask for a CPU-type device.
 */
export function gpuBackendSkip(q: GpuBackendQuery): string | undefined {
  if (!isGpuBackend(q.name)) return undefined;
  if (!q.gpu) return "not loaded: --no-gpu";
  if (q.name !== "vulkan" || (q.platform ?? process.platform) !== "linux") return undefined;
  if (q.env.GGML_VK_VISIBLE_DEVICES !== undefined && q.env.GGML_VK_VISIBLE_DEVICES !== "") return undefined;
  if ((q.nodes ?? linuxGpuNodes)().length > 0) return undefined;
  return (
    "not loaded: no GPU device node here (/dev/dri/renderD*, /dev/nvidia*, /dev/dxg), so Vulkan could list " +
    "only CPU-type devices, which ggml skips; GGML_VK_VISIBLE_DEVICES loads it (lavapipe: GGML_VK_VISIBLE_DEVICES=0)"
  );
}
