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
import { createHash } from "node:crypto";
import { cpus } from "node:os";
import { mkdirSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
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

/** ggml's name of a backend file (vulkan for libggml-vulkan.so, cuda for ggml-cuda.dll). */
export function backendName(path: string): string {
  const file = path.split(/[\\/]/).pop() ?? path;
  return BACKEND_FILE.exec(file)?.[1] ?? file;
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
export function chooseCpuVariant(
  dir: string,
  pin: string | undefined,
  cacheDir?: string,
): CpuVariantChoice | undefined {
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
  const cache = cacheDir === undefined || files.length === 0 ? undefined : choiceCache(cacheDir, dir, files);
  const remembered = cache?.read();
  if (remembered) return remembered;
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
  cache?.write(best.name);
  return { name: best.name, path: best.path, pinned: false, close: best.close };
}

/**
 * The unpinned choice, remembered in the cache folder: scoring every variant opens each library (~10-35 ms of
 * every worker's start). One file per library folder, keyed by the processor (its model name and instruction-set
 * flags) and every variant file's size and modification time; a key that differs, a file that does not read, or
 * a remembered variant that no longer opens or scores 0 here, and every variant is scored again.
 */
function choiceCache(cacheDir: string, dir: string, files: CpuVariantFile[]) {
  let key: string;
  try {
    const stamps = files.map((f) => {
      const st = statSync(f.path);
      return [f.name, st.size, st.mtimeMs];
    });
    key = createHash("sha256")
      .update(JSON.stringify({ dir, cpu: cpuSignature(), stamps }))
      .digest("hex");
  } catch {
    return undefined;
  }
  const file = join(cacheDir, `${createHash("sha256").update(dir).digest("hex").slice(0, 16)}.json`);
  return {
    read(): CpuVariantChoice | undefined {
      let name: unknown;
      try {
        const saved = JSON.parse(readFileSync(file, "utf8")) as { key?: unknown; name?: unknown };
        if (saved.key !== key) return undefined;
        name = saved.name;
      } catch {
        return undefined;
      }
      const found = files.find((f) => f.name === name);
      if (!found) return undefined;
      let lib: { score: number; close(): void };
      try {
        lib = openScored(found.path);
      } catch {
        return undefined;
      }
      if (lib.score <= 0) {
        lib.close();
        return undefined;
      }
      return { name: found.name, path: found.path, pinned: false, close: lib.close };
    },
    write(name: string): void {
      try {
        mkdirSync(cacheDir, { recursive: true });
        // Written aside and renamed into place: another worker may read it the moment it exists.
        const partial = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
        writeFileSync(partial, JSON.stringify({ key, name }));
        renameSync(partial, file);
      } catch {
        // A cache that cannot be written costs the next start the scoring, nothing more.
      }
    },
  };
}

/** What ggml's scores depend on: the processor's model and, on Linux, the instruction-set flags the kernel reports. */
export function cpuSignature(): string {
  if (process.platform === "linux") {
    try {
      const info = readFileSync("/proc/cpuinfo", "utf8");
      const end = info.indexOf("\n\n");
      const first = end < 0 ? info : info.slice(0, end);
      const lines = first
        .split("\n")
        .filter((l) => /^(model name|flags|Features|CPU implementer|CPU part)\s*:/.test(l));
      if (lines.length > 0) return `${process.arch}\n${lines.join("\n")}`;
    } catch {
      // Fall through to the model name.
    }
  }
  return `${process.arch} ${cpuModel()}`;
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
