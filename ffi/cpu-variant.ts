// Which build of ggml's CPU backend runs the model. The x86-64 libraries ship
// one file per instruction-set level (libggml-cpu-haswell.so, -zen4, -x64,
// ...); each exports ggml_backend_score(), 0 where this CPU lacks what it was
// compiled for and otherwise higher the more it uses. ggml's own loader
// (ggml_backend_load_all_from_path) keeps the highest; superfluid makes the
// same choice itself so that it can name it (every speed figure names its
// kernels: their rounding differs, and so do batched tokens) and so that
// SUPERFLUID_CPU_VARIANT can pin one, e.g. `haswell` to run the AVX2 kernels
// on an AVX-512 machine.
import { dlopen } from "bun:ffi";
import { cpus } from "node:os";
import { readdirSync } from "node:fs";
import { join } from "node:path";

/** libggml-cpu-haswell.so, ggml-cpu-zen4.dll, libggml-cpu-armv8.2_1.so, ... */
const VARIANT_FILE = /^(?:lib)?ggml-cpu-([a-z0-9_.]+)\.(?:so|dylib|dll)$/;
/** The other loadable backends (libggml-vulkan.so, ggml-cuda.dll, ...): not the base, not the CPU. */
const BACKEND_FILE = /^(?:lib)?ggml-([a-z0-9_]+)\.(?:so|dylib|dll)$/;

export interface CpuVariantFile {
  name: string;
  path: string;
}

export interface CpuVariantChoice {
  /** The variant's name (haswell, zen4, x64, ...). */
  name: string;
  path: string;
  /** Whether SUPERFLUID_CPU_VARIANT named it (else it is the best this CPU runs). */
  pinned: boolean;
  /** The variant's library, held open: ggml's own dlopen of it then finds it loaded. */
  close(): void;
}

/** The CPU backend variants in a library folder, by name; none for a build with one CPU backend. */
export function cpuVariantFiles(dir: string): CpuVariantFile[] {
  const files: CpuVariantFile[] = [];
  for (const file of readdirSync(dir).sort()) {
    const m = VARIANT_FILE.exec(file);
    if (m) files.push({ name: m[1]!, path: join(dir, file) });
  }
  return files;
}

/**
 * The order ggml_backend_load_all_from_path registers backends in (the CPU
 * last): llama.cpp numbers devices in it, and the first GPU takes the layers.
 */
const GGML_BACKEND_ORDER = [
  "blas",
  "zdnn",
  "cann",
  "cuda",
  "hip",
  "metal",
  "rpc",
  "sycl",
  "vulkan",
  "opencl",
  "hexagon",
  "musa",
];

/**
 * The loadable backends beside the CPU's (a GPU build's), to load when the
 * CPU variant is chosen here: in ggml's own order, names it does not know
 * after those, by name.
 */
export function otherBackendFiles(dir: string): string[] {
  const rank = (name: string) => {
    const i = GGML_BACKEND_ORDER.indexOf(name);
    return i < 0 ? GGML_BACKEND_ORDER.length : i;
  };
  return readdirSync(dir)
    .sort()
    .flatMap((file) => {
      const m = BACKEND_FILE.exec(file);
      // The RPC backend is loaded only where RPC is asked for (ffi/rpc.ts).
      return m !== null && m[1] !== "base" && m[1] !== "cpu" && m[1] !== "rpc" ? [{ file, name: m[1]! }] : [];
    })
    .sort((a, b) => rank(a.name) - rank(b.name))
    .map(({ file }) => join(dir, file));
}

function openScored(path: string): { score: number; close(): void } {
  const lib = dlopen(path, { ggml_backend_score: { args: [], returns: "i32" } });
  return { score: lib.symbols.ggml_backend_score(), close: () => lib.close() };
}

/**
 * The CPU variant to load: the pinned one (refused by name where the folder
 * lacks it or this CPU cannot run it), else the highest score, the first by
 * name on a tie. Undefined when the folder has no variants.
 */
export function chooseCpuVariant(dir: string, pin: string | undefined): CpuVariantChoice | undefined {
  const files = cpuVariantFiles(dir);
  if (pin !== undefined && pin !== "") {
    const file = files.find((f) => f.name === pin);
    if (!file) {
      const names = files.map((f) => f.name).join(", ");
      throw new Error(
        `SUPERFLUID_CPU_VARIANT=${pin}: no such CPU variant in ${dir} (${names || "this build has one CPU backend"})`,
      );
    }
    const lib = openScored(file.path);
    if (lib.score <= 0) {
      lib.close();
      throw new Error(
        `SUPERFLUID_CPU_VARIANT=${pin}: this CPU (${cpuModel()}) lacks the instructions the ${pin} variant needs`,
      );
    }
    return { name: file.name, path: file.path, pinned: true, close: lib.close };
  }
  let best: (CpuVariantFile & { score: number; close(): void }) | undefined;
  for (const file of files) {
    let scored: { score: number; close(): void };
    try {
      scored = openScored(file.path);
    } catch {
      continue; // A file that does not open is skipped, as ggml's loader skips it.
    }
    if (best === undefined || scored.score > best.score) {
      best?.close();
      best = { ...file, ...scored };
    } else {
      scored.close();
    }
  }
  if (!best || best.score <= 0) {
    best?.close();
    return undefined;
  }
  return { name: best.name, path: best.path, pinned: false, close: best.close };
}

export interface CpuInfo {
  model: string;
  variant: string | null;
  /** The variant's library file (null: ggml's loader chose the CPU backend). */
  library: string | null;
  /** SUPERFLUID_CPU_VARIANT chose the variant, not the CPU's score. */
  pinned: boolean;
}

/** How messages name the machine's kernels: "AMD EPYC 9B14, ggml CPU variant zen4". */
export function describeCpu(cpu: CpuInfo): string {
  const variant =
    cpu.variant === null ? "one CPU backend" : `ggml CPU variant ${cpu.variant}${cpu.pinned ? " (pinned)" : ""}`;
  return `${cpu.model}, ${variant}`;
}

/** The processor's model name, as the OS reports it ("AMD EPYC 9B14", "Intel(R) Xeon(R) ..."). */
export function cpuModel(): string {
  const model = cpus()[0]?.model?.trim();
  return model ? model.replace(/\s+/g, " ") : "unknown CPU";
}
