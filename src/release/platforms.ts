// The platforms a release is built for, and what names each one's files carry.
// Release tooling only (build.ts and the package-manager generators import it);
// the shipped binary never does.

export type PlatformName = "linux-x64" | "linux-arm64" | "darwin-arm64" | "darwin-x64" | "windows-x64";

export interface Platform {
  /** Our name for it, in archive names and `--version`. */
  name: PlatformName;
  /** Bun's `--compile --target` for it (Bun fetches that runtime from the npm registry as `@oven/bun-…`). */
  bunTarget: string;
  /** The npm package carrying its prebuilt libllama and ggml backends. */
  llamaPackage: string;
  /**
   * The same release built with ggml's Vulkan backend (docs/install.md#gpus): the archive carries its libraries
   * instead, so one download uses any Vulkan GPU and runs on the CPU variants where there is none. Where libllama
   * is built from source, only its libggml-vulkan joins the source-built set (the same llama.cpp commit).
   */
  vulkanPackage?: string;
  os: "linux" | "darwin" | "windows";
  arch: "x64" | "arm64";
  /** The executable's file name inside the archive. */
  exe: string;
  archiveExt: "tar.gz" | "zip";
}

// x64 targets use Bun's `baseline` runtime (SSE4.2, Nehalem and later) rather
// than the default one, which needs AVX2 and dies with SIGILL on older CPUs.
// The ggml backends already cover those CPUs (libggml-cpu-sse42/-x64 are in the
// packages, picked at run time), and the JavaScript side is not where the time
// goes, so one x64 binary that starts everywhere beats a faster-by-little one
// that does not.
export const PLATFORMS: readonly Platform[] = [
  {
    name: "linux-x64",
    bunTarget: "bun-linux-x64-baseline",
    llamaPackage: "@node-llama-cpp/linux-x64",
    vulkanPackage: "@node-llama-cpp/linux-x64-vulkan",
    os: "linux",
    arch: "x64",
    exe: "superfluid",
    archiveExt: "tar.gz",
  },
  {
    name: "linux-arm64",
    bunTarget: "bun-linux-arm64",
    llamaPackage: "@node-llama-cpp/linux-arm64",
    os: "linux",
    arch: "arm64",
    exe: "superfluid",
    archiveExt: "tar.gz",
  },
  {
    name: "darwin-arm64",
    bunTarget: "bun-darwin-arm64",
    llamaPackage: "@node-llama-cpp/mac-arm64-metal",
    os: "darwin",
    arch: "arm64",
    exe: "superfluid",
    archiveExt: "tar.gz",
  },
  {
    name: "darwin-x64",
    bunTarget: "bun-darwin-x64-baseline",
    llamaPackage: "@node-llama-cpp/mac-x64",
    os: "darwin",
    arch: "x64",
    exe: "superfluid",
    archiveExt: "tar.gz",
  },
  {
    name: "windows-x64",
    bunTarget: "bun-windows-x64-baseline",
    llamaPackage: "@node-llama-cpp/win-x64",
    vulkanPackage: "@node-llama-cpp/win-x64-vulkan",
    os: "windows",
    arch: "x64",
    exe: "superfluid.exe",
    archiveExt: "zip",
  },
];

export function platformByName(name: string): Platform {
  const found = PLATFORMS.find((p) => p.name === name);
  if (!found) throw new Error(`unknown platform ${name}; one of ${PLATFORMS.map((p) => p.name).join(", ")}`);
  return found;
}

/** The platform this process runs on, or undefined where no release is built. */
export function hostPlatform(platform = process.platform, arch = process.arch): Platform | undefined {
  const os = platform === "win32" ? "windows" : platform;
  return PLATFORMS.find((p) => p.os === os && p.arch === arch);
}

/** `superfluid-<version>-<platform>.<tar.gz|zip>` */
export function archiveName(version: string, platform: Platform | PlatformName): string {
  const p = typeof platform === "string" ? platformByName(platform) : platform;
  return `superfluid-${version}-${p.name}.${p.archiveExt}`;
}

/**
 * A GPU build released as its own archive beside a platform's: the CUDA builds, too big (and too bound to the
 * host's CUDA toolkit) to ride in every download as Vulkan does (docs/install.md#gpus). Not npm dependencies
 * (`npm ci` would fetch hundreds of MB): pinned here with their integrity.
 */
export interface GpuVariant {
  /** `linux-x64-cuda`: the archive's platform part. */
  name: string;
  base: PlatformName;
  llamaPackage: string;
  version: string;
  /** The registry's dist.integrity of that version. */
  integrity: string;
  /** What the host must have, for the docs and the failure message. */
  needs: string;
}

export const CUDA_VARIANTS: readonly GpuVariant[] = [
  {
    name: "linux-x64-cuda",
    base: "linux-x64",
    llamaPackage: "@node-llama-cpp/linux-x64-cuda",
    version: "3.22.1",
    integrity: "sha512-8rQCjyNNLZJUFit+YpjwlC4hwkKgOMIkB2wuycKBf8NU2O3ySKbiWZQ8aw9ku2nUTXjSnUIrE6KB88itduTBuA==",
    needs: "the NVIDIA driver and a CUDA 13 toolkit's libcudart, libcublas and libcublasLt",
  },
  {
    name: "windows-x64-cuda",
    base: "windows-x64",
    llamaPackage: "@node-llama-cpp/win-x64-cuda",
    version: "3.21.1",
    integrity: "sha512-PLz70neFEMkQTlmJqG1ujUtCSgHasLPMxQ9rLkqQVmZYAXqkRj+45TIHCjdn3XqUeaoun0vrO9rRaxZ8NVq9jg==",
    needs: "the NVIDIA driver and the CUDA toolkit's cudart and cuBLAS DLLs",
  },
];

/** `superfluid-<version>-<variant>.<ext>`, with its base platform's archive kind. */
export function variantArchiveName(version: string, v: GpuVariant): string {
  return `superfluid-${version}-${v.name}.${platformByName(v.base).archiveExt}`;
}
