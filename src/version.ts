// What `superfluid --version` prints: `superfluid <version> (llama.cpp <build>, <platform>)`.
// build.ts stamps the three facts into a compiled binary as constants (Bun.build
// `define`); run from source they come from package.json and the installed
// @node-llama-cpp package, read only when asked.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { platformPackage } from "../ffi/locate.ts";

// Replaced by build.ts's `define`; undeclared (typeof "undefined") from source.
declare const SUPERFLUID_VERSION: string;
declare const SUPERFLUID_LLAMA_CPP: string;
declare const SUPERFLUID_PLATFORM: string;

/** node-llama-cpp records the llama.cpp release it built in each binary folder. */
export const BUILD_METADATA_FILE = "_nlcBuildMetadata.json";

/** The llama.cpp release a prebuilt folder records, or undefined when it records none. */
export function llamaCppRelease(binsDir: string): string | undefined {
  const file = join(binsDir, BUILD_METADATA_FILE);
  if (!existsSync(file)) return undefined;
  try {
    const meta = JSON.parse(readFileSync(file, "utf8")) as { buildOptions?: { llamaCpp?: { release?: unknown } } };
    const release = meta.buildOptions?.llamaCpp?.release;
    return typeof release === "string" && release !== "" ? release : undefined;
  } catch {
    return undefined;
  }
}

/** Our platform name for a Node platform/arch pair (linux-x64, darwin-arm64, windows-x64, ...). */
export function platformName(platform = process.platform, arch = process.arch): string {
  return `${platform === "win32" ? "windows" : platform}-${arch}`;
}

async function fromSource(): Promise<{ version: string; llamaCpp: string; platform: string }> {
  const pkg = (await import("../package.json")).default as {
    version: string;
    optionalDependencies?: Record<string, string>;
  };
  let llamaCpp = "unknown";
  try {
    const name = platformPackage();
    const pkgJson = createRequire(import.meta.url).resolve(`${name}/package.json`);
    const bins = join(dirname(pkgJson), "bins");
    const release = readdirSync(bins)
      .map((sub) => llamaCppRelease(join(bins, sub)))
      .find((r) => r !== undefined);
    // No recorded release: the package version is the next best name for the build.
    llamaCpp = release ?? `${name}@${(JSON.parse(readFileSync(pkgJson, "utf8")) as { version: string }).version}`;
  } catch {
    // No package for this machine (SUPERFLUID_LLAMA_LIB users): say what package.json pins.
    const pinned = Object.entries(pkg.optionalDependencies ?? {}).find(([n]) => n.startsWith("@node-llama-cpp/"));
    if (pinned) llamaCpp = `node-llama-cpp ${pinned[1]}`;
  }
  return { version: pkg.version, llamaCpp, platform: platformName() };
}

export async function versionLine(): Promise<string> {
  const info =
    typeof SUPERFLUID_VERSION === "string"
      ? { version: SUPERFLUID_VERSION, llamaCpp: SUPERFLUID_LLAMA_CPP, platform: SUPERFLUID_PLATFORM }
      : await fromSource();
  return `superfluid ${info.version} (llama.cpp ${info.llamaCpp}, ${info.platform})`;
}
