// Finds the libllama to open, in this order:
//   1. SUPERFLUID_LLAMA_LIB: a user's own build (the library file or its folder),
//      or `vulkan` / `cuda`: the installed @node-llama-cpp/<platform>-<gpu> package;
//   2. the copy embedded in a compiled binary, extracted into one cache folder
//      together with every library it needs (they resolve each other by soname);
//   3. the @node-llama-cpp/<platform> package in node_modules.
import { existsSync, readdirSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { createRequire } from "node:module";
import { extractEmbeddedLibraries } from "./embedded.ts";

export interface LibraryLocation {
  /** Folder holding libllama and its ggml backends. */
  dir: string;
  /** Full path of the libllama file itself. */
  llama: string;
  /** Full path of libggml (it holds the backend loader). */
  ggml: string;
  /** Where it came from, for messages. */
  source: "env" | "embedded" | "package";
}

/** The npm package that carries the prebuilt libraries for this machine. */
export function platformPackage(platform = process.platform, arch = process.arch): string {
  if (platform === "linux") return `@node-llama-cpp/linux-${arch}`;
  if (platform === "darwin") return arch === "arm64" ? "@node-llama-cpp/mac-arm64-metal" : "@node-llama-cpp/mac-x64";
  if (platform === "win32") return `@node-llama-cpp/win-${arch}`;
  throw new Error(
    `superfluid has no prebuilt libllama for ${platform}-${arch}; set SUPERFLUID_LLAMA_LIB to your own build`,
  );
}

// libllama.so, libllama.so.0, libllama.v0.4.0.so, libllama.dylib, llama.dll, ...
// and a GPU build's tagged names (the macOS arm64 package's libllama.metal.v0.4.0.dylib).
const LLAMA_FILE = /^(lib)?llama(\.[a-z]+)?(\.v[\d.]+)?(\.\d+)*\.(so|dylib|dll)(\.\d+)*$/;
const GGML_FILE = /^(lib)?ggml(\.[a-z]+)?(\.v[\d.]+)?(\.\d+)*\.(so|dylib|dll)(\.\d+)*$/;

function findIn(dir: string, pattern: RegExp): string | undefined {
  const name = readdirSync(dir).find((f) => pattern.test(f));
  return name ? join(dir, name) : undefined;
}

function locationIn(dir: string, source: LibraryLocation["source"], llama?: string): LibraryLocation {
  const llamaPath = llama ?? findIn(dir, LLAMA_FILE);
  if (!llamaPath) throw new Error(`no libllama in ${dir} (${source})`);
  const ggml = findIn(dir, GGML_FILE);
  if (!ggml) throw new Error(`no libggml beside ${llamaPath}: libllama's backends cannot be loaded`);
  return { dir, llama: llamaPath, ggml, source };
}

/** The GPU builds SUPERFLUID_LLAMA_LIB may name instead of a path. */
export const GPU_PACKAGE_BUILDS = ["vulkan", "cuda"] as const;

function fromEnv(value: string): LibraryLocation {
  if ((GPU_PACKAGE_BUILDS as readonly string[]).includes(value)) {
    const pkg = `${platformPackage()}-${value}`;
    const found = fromPackage(pkg);
    if (!found) throw new Error(`SUPERFLUID_LLAMA_LIB=${value}: ${pkg} is not installed (npm install ${pkg})`);
    return { ...found, source: "env" };
  }
  const path = resolve(value);
  if (!existsSync(path)) throw new Error(`SUPERFLUID_LLAMA_LIB=${value}: no such file or folder`);
  if (statSync(path).isDirectory()) return locationIn(path, "env");
  return locationIn(dirname(path), "env", path);
}

function fromPackage(pkg = platformPackage()): LibraryLocation | undefined {
  let pkgJson: string;
  try {
    pkgJson = createRequire(import.meta.url).resolve(`${pkg}/package.json`);
  } catch {
    return undefined;
  }
  const bins = join(dirname(pkgJson), "bins");
  for (const sub of existsSync(bins) ? readdirSync(bins) : []) {
    const dir = join(bins, sub);
    if (statSync(dir).isDirectory() && findIn(dir, LLAMA_FILE)) return locationIn(dir, "package");
  }
  return undefined;
}

export function locateLibrary(env = process.env): LibraryLocation {
  if (env.SUPERFLUID_LLAMA_LIB) return fromEnv(env.SUPERFLUID_LLAMA_LIB);
  const embedded = extractEmbeddedLibraries();
  if (embedded) return locationIn(embedded, "embedded");
  const pkg = fromPackage();
  if (pkg) return pkg;
  throw new Error(
    `libllama not found: install ${platformPackage()} (npm ci), use a release binary, or set SUPERFLUID_LLAMA_LIB`,
  );
}
