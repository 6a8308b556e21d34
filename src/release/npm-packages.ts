// The npm distribution (how esbuild and Biome ship a native binary): a main
// package `superfluid` holding only a Node launcher, with an optional
// dependency on one package per platform, `superfluid-<platform>`, each holding
// that platform's binary and marked with npm's `os`/`cpu` (and `libc`) fields so
// that npm installs the matching one only. `npx superfluid serve` then works in
// any Node project (docs/install.md#npm).
// Release tooling: build.ts calls it; the shipped binary never imports it.
import { chmodSync, copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Platform, type PlatformName, platformByName } from "./platforms.ts";

export interface NpmPackagesInput {
  version: string;
  /** The binary built for each platform to package; the main package depends on these platforms only. */
  binaries: Map<PlatformName | string, string>;
  outDir: string;
}

/** The main package's name; platform packages are `superfluid-<platform>`. */
export const NPM_NAME = "superfluid";

export function platformPackageName(platform: Platform | PlatformName): string {
  return `${NPM_NAME}-${typeof platform === "string" ? platform : platform.name}`;
}

/** npm's `os` value for a platform (Node's `process.platform`). */
function npmOs(p: Platform): string {
  return p.os === "windows" ? "win32" : p.os;
}

export function mainPackageJson(version: string, platforms: readonly Platform[]): Record<string, unknown> {
  return {
    name: NPM_NAME,
    version,
    description:
      "Local LLM inference server (GGUF models through llama.cpp) with OpenAI, Anthropic and Ollama APIs, in one executable",
    keywords: ["llm", "llama.cpp", "gguf", "openai", "inference", "server"],
    type: "module",
    bin: { [NPM_NAME]: "bin/superfluid.js" },
    engines: { node: ">=18" },
    // Pinned to this exact version: the launcher and the binary ship together.
    optionalDependencies: Object.fromEntries(platforms.map((p) => [platformPackageName(p), version])),
  };
}

export function platformPackageJson(version: string, p: Platform): Record<string, unknown> {
  return {
    name: platformPackageName(p),
    version,
    description: `The ${p.name} binary of superfluid (installed by the superfluid package)`,
    os: [npmOs(p)],
    cpu: [p.arch],
    // Bun's Linux runtime and libllama's Linux builds link glibc; on a musl
    // system (Alpine) npm then skips the package and the launcher says why.
    ...(p.os === "linux" ? { libc: ["glibc"] } : {}),
    // Yarn PnP: a binary must sit on disk to be executed.
    preferUnplugged: true,
  };
}

function mainReadme(version: string, platforms: readonly Platform[]): string {
  return `# superfluid

A local LLM inference server in one executable: GGUF models through
llama.cpp, served over OpenAI's chat completions and completions API,
Anthropic's Messages API and Ollama's API on one listener. With no model
named it serves \`tiny-chat\`, a built-in test model whose replies are fixed,
so an app's tests can run against it in CI with nothing to download.

\`\`\`sh
npx superfluid serve --port 8453        # the built-in model
npx superfluid serve path/to/model.gguf
npx superfluid --version
\`\`\`

This package holds a small Node (>= 18) launcher; the binary comes in the
package for your platform (${platforms.map((p) => `\`${platformPackageName(p)}\``).join(", ")}),
which npm installs from this package's optional dependencies. Installing with
optional dependencies left out (\`--omit=optional\`) leaves the launcher
without a binary: it says so and exits 1. \`SUPERFLUID_BINARY=/path/to/superfluid\`
makes it run that binary instead.

The launcher passes the arguments, the standard streams and the exit status
through, and passes SIGTERM, SIGHUP and SIGINT on to the server (SIGINT as
SIGTERM, which stops it the same way), so \`kill\` on the launcher's process
stops the server.

Version ${version}. \`superfluid serve --help\` lists the flags.
`;
}

function platformReadme(version: string, p: Platform): string {
  return `# ${platformPackageName(p)}

The ${p.name} executable of superfluid ${version} (\`bin/${p.exe}\`). Install
the \`superfluid\` package instead: it depends on this one for this platform
and its \`superfluid\` command runs the binary.
`;
}

function writeJson(path: string, value: unknown): void {
  writeFileSync(path, `${JSON.stringify(value, null, 2)}\n`);
}

/**
 * Writes outDir/superfluid/ and outDir/superfluid-<platform>/ for each binary given; returns the folders written, main
 * first.
 */
export function npmPackages({ version, binaries, outDir }: NpmPackagesInput): string[] {
  const platforms = [...binaries.keys()].map((name) => platformByName(name));
  if (platforms.length === 0) throw new Error("npmPackages: no binaries given");
  const written: string[] = [];

  // A folder left from an earlier run would carry files this one did not write.
  const main = join(outDir, NPM_NAME);
  rmSync(main, { recursive: true, force: true });
  mkdirSync(join(main, "bin"), { recursive: true });
  writeJson(join(main, "package.json"), mainPackageJson(version, platforms));
  writeFileSync(join(main, "README.md"), mainReadme(version, platforms));
  writeFileSync(join(main, "bin", "superfluid.js"), readFileSync(new URL("./npm-launcher.js", import.meta.url)));
  chmodSync(join(main, "bin", "superfluid.js"), 0o755);
  written.push(main);

  for (const p of platforms) {
    const dir = join(outDir, platformPackageName(p));
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(join(dir, "bin"), { recursive: true });
    writeJson(join(dir, "package.json"), platformPackageJson(version, p));
    writeFileSync(join(dir, "README.md"), platformReadme(version, p));
    const exe = join(dir, "bin", p.exe);
    copyFileSync(binaries.get(p.name)!, exe);
    chmodSync(exe, 0o755);
    written.push(dir);
  }
  return written;
}
