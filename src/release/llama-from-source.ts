// Builds libllama and its ggml CPU backends from the llama.cpp source that
// node-llama-cpp publishes on the npm registry: its package carries
// `llama/gitRelease.bundle`, a git bundle of the llama.cpp commit its prebuilt
// @node-llama-cpp/<platform> packages were built from, and `llama/patches/`,
// the patches it applies on top before building. Release tooling only
// (build.ts); the shipped binary never compiles anything.
//
// Why: the linux-x64 prebuilt is compiled by GCC 11.4, which keeps the twelve
// accumulators of tinyBLAS's F16 4x3 micro-kernel on the stack inside its
// inner loop (twelve stores per step) in every AVX2 variant (haswell,
// alderlake, piledriver): 8-lane decode of an F16-headed model runs ~1.3x
// slower over HTTP than the same source built by GCC 12
// (docs/design.md#libllama-from-source). The build here is the same commit and
// patches in node-llama-cpp's shape (shared libraries, backends loaded at run
// time, every CPU variant, no OpenMP), and it is refused if any library needs
// a newer glibc or libstdc++ symbol version than the prebuilt does.
import { createHash } from "node:crypto";
import {
  closeSync,
  copyFileSync,
  existsSync,
  linkSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { basename, join } from "node:path";
import { processAlive } from "../runtime/process-alive.ts";
import { BUILD_METADATA_FILE } from "../version.ts";
import { ceilingsAbove, versionCeilings } from "./elf-versions.ts";
import { fetchPackage } from "./fetch-package.ts";
import { RPC_PROTOCOL } from "../rpc/probe.ts";

/** CMake options of the build: node-llama-cpp's shape, plus $ORIGIN lookups. */
export const SOURCE_BUILD_OPTIONS: readonly string[] = [
  "-DCMAKE_BUILD_TYPE=Release",
  "-DBUILD_SHARED_LIBS=ON",
  "-DGGML_BACKEND_DL=ON",
  "-DGGML_CPU_ALL_VARIANTS=ON",
  "-DGGML_NATIVE=OFF",
  // OpenMP would add a libgomp.so.1 the user's machine may lack; superfluid attaches its own ggml threadpool.
  "-DGGML_OPENMP=OFF",
  "-DLLAMA_BUILD_COMMON=OFF",
  "-DLLAMA_BUILD_TESTS=OFF",
  "-DLLAMA_BUILD_EXAMPLES=OFF",
  "-DLLAMA_BUILD_TOOLS=OFF",
  "-DLLAMA_BUILD_SERVER=OFF",
  "-DLLAMA_CURL=OFF",
  "-DLLAMA_OPENSSL=OFF",
  // The libraries find each other beside themselves, wherever the binary extracts them.
  // (libstdc++ stays shared, as in the prebuilt: linking it in would pull the build
  // machine's glibc symbol versions, e.g. arc4random@GLIBC_2.36, into every library.)
  "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON",
  "-DCMAKE_INSTALL_RPATH=$ORIGIN",
  // ggml's RPC backend (libggml-rpc.so, loaded like any backend): `superfluid rpc-worker` and `serve --rpc`
  // (docs/guides/multi-machine.md). Its RDMA transport turns itself on where libibverbs is found: off, so the
  // library needs nothing the user's machine may lack.
  "-DGGML_RPC=ON",
  "-DGGML_RPC_RDMA=OFF",
];

/**
 * The CMake targets: libllama and libggml (which depends on every CPU variant it loads at run time), and the RPC
 * backend.
 */
export const SOURCE_BUILD_TARGETS: readonly string[] = ["llama", "ggml", "ggml-rpc"];

/** The RPC backend alone (`bun build.ts --rpc-backend`): what running from source needs beside the prebuilt. */
export const RPC_BACKEND_TARGETS: readonly string[] = ["ggml-rpc"];

export interface Compiler {
  kind: "gcc" | "clang";
  major: number;
  /** `12.2.0` */
  version: string;
  /** The first line of `--version`. */
  line: string;
}

/** The compiler a `c++ --version` text names, or undefined when it is neither GCC nor Clang. */
export function parseCompilerVersion(text: string): Compiler | undefined {
  const line = text.split("\n")[0]?.trim() ?? "";
  const clang = /clang version ((\d+)\.[\d.]*\d)/.exec(text);
  if (clang) return { kind: "clang", major: Number(clang[2]), version: clang[1]!, line };
  // `g++ (Debian 12.2.0-14+deb12u1) 12.2.0`, `c++ (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0`, `g++ (GCC) 13.2.1 20230801`
  const gcc = /^\S*(?:g\+\+|c\+\+|gcc|cc)\S* \(.*\) ((\d+)\.\d+(?:\.\d+)?)/.exec(line);
  if (gcc) return { kind: "gcc", major: Number(gcc[2]), version: gcc[1]!, line };
  return undefined;
}

/** `GCC 12.2.0`, `Clang 18.1.3`: how `--version` names the compiler of a source build. */
export function compilerName(c: Compiler): string {
  return `${c.kind === "gcc" ? "GCC" : "Clang"} ${c.version}`;
}

/** Why this compiler must not build the release libraries, or undefined when it may. */
export function compilerRefusal(c: Compiler | undefined): string | undefined {
  if (!c) return "the C++ compiler is neither GCC nor Clang";
  if (c.kind === "gcc" && c.major < 12) {
    return `${c.line}: GCC ${c.major} spills tinyBLAS's F16 accumulators to the stack (what makes the prebuilt slow); use GCC 12 or later, or Clang 15 or later`;
  }
  if (c.kind === "clang" && c.major < 15) return `${c.line}: use Clang 15 or later`;
  return undefined;
}

/** The C and C++ compilers CMake will use (CC, CXX; cc and c++ by default). */
export interface Compilers {
  c: Compiler;
  cxx: Compiler;
}

function output(cmd: string[]): string | undefined {
  try {
    const r = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe" });
    return r.exitCode === 0 ? r.stdout.toString() : undefined;
  } catch {
    return undefined;
  }
}

const TOOLCHAIN_HINT =
  "install cmake, ninja-build, git and GCC 12 or later (Debian 12: apt-get install cmake ninja-build g++ git; " +
  "Ubuntu 22.04: also g++-12, then CC=gcc-12 CXX=g++-12), or build with --prebuilt-llama to embed the prebuilt";

/**
 * The compilers CC and CXX name (a command with arguments, like `ccache g++`, is run as written); throws when one is
 * missing or too old.
 */
export function findCompilers(env = process.env): Compilers {
  const problems: string[] = [];
  const probe = (variable: "CC" | "CXX", fallback: string): Compiler | undefined => {
    const cmd = (env[variable] || fallback).trim().split(/\s+/);
    const text = output([...cmd, "--version"]);
    if (text === undefined) {
      problems.push(`no ${variable === "CC" ? "C" : "C++"} compiler (${cmd.join(" ")})`);
      return undefined;
    }
    const compiler = parseCompilerVersion(text);
    const refusal = compilerRefusal(compiler);
    if (refusal) problems.push(`${variable}: ${refusal}`);
    return compiler;
  };
  const c = probe("CC", "cc");
  const cxx = probe("CXX", "c++");
  if (problems.length > 0 || !c || !cxx)
    throw new Error(`cannot build libllama from source: ${problems.join("; ")}; ${TOOLCHAIN_HINT}`);
  return { c, cxx };
}

type Generator = "Ninja" | "Unix Makefiles";

/** CMake's generator here: Ninja when installed, else Unix Makefiles. */
function generatorHere(): Generator {
  return output(["ninja", "--version"]) ? "Ninja" : "Unix Makefiles";
}

/** Throws naming every tool besides the compilers (findCompilers) that the build needs and this machine lacks. */
function checkBuildTools(generator: Generator): void {
  const problems: string[] = [];
  if (!output(["cmake", "--version"])) problems.push("cmake is not installed");
  if (generator !== "Ninja" && !output(["make", "--version"])) problems.push("neither ninja nor make is installed");
  if (!output(["git", "--version"])) problems.push("git is not installed (the source is a git bundle)");
  if (problems.length > 0)
    throw new Error(`cannot build libllama from source: ${problems.join("; ")}; ${TOOLCHAIN_HINT}`);
}

/**
 * Copies the built libraries from CMake's output folder into `out`, one file
 * per library under the name other libraries load it by: a versioned
 * library's soname link (`libllama.so.0`, the name in its dependents'
 * DT_NEEDED), a plain module (`libggml-cpu-haswell.so`) under its own name.
 * Returns the names copied.
 */
export function collectLibraries(binDir: string, out: string): string[] {
  const byTarget = new Map<string, string[]>();
  for (const name of readdirSync(binDir)) {
    if (!/\.so(\.\d+)*$/.test(name)) continue;
    const real = realpathSync(join(binDir, name));
    if (!statSync(real).isFile()) continue;
    byTarget.set(real, [...(byTarget.get(real) ?? []), name]);
  }
  mkdirSync(out, { recursive: true });
  const copied: string[] = [];
  for (const [real, names] of byTarget) {
    const soname = names.find((n) => /\.so\.\d+$/.test(n)) ?? basename(real);
    copyFileSync(real, join(out, soname));
    copied.push(soname);
  }
  return copied.sort();
}

/**
 * The libraries superfluid loads at every start in a folder: libllama, libggml, libggml-base and the CPU backends
 * (not node-llama-cpp's libllama-common, nor the RPC backend, loaded only for --rpc and rpc-worker).
 */
export function loadedLibraries(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => /^lib(llama|ggml|ggml-base|ggml-cpu-[a-z0-9._]+?)(\.v[\d.]+)?\.so(\.\d+)*$/.test(f))
    .sort()
    .map((f) => join(dir, f));
}

export interface SourceBuildOptions {
  /** The node-llama-cpp version whose source to build: the one the platform package is pinned at. */
  nodeLlamaCppVersion: string;
  /** The prebuilt folder of that version (its build metadata is carried over). */
  prebuiltDir: string;
  /** Where the package, the source, the build tree and the result are kept between runs. */
  cacheRoot: string;
  /** Parallel compile jobs (default: this machine's CPUs). */
  jobs?: number;
  log?: (line: string) => void;
  /** The CMake targets (default SOURCE_BUILD_TARGETS); RPC_BACKEND_TARGETS builds the RPC backend alone. */
  targets?: readonly string[];
}

export interface SourceBuild {
  /** The folder holding the libraries (and the build metadata). */
  dir: string;
  /** The llama.cpp commit built. */
  commit: string;
  /** The C++ compiler that built it. */
  compiler: Compiler;
}

/**
 * Runs one build step with its output appended to logFile as it comes (a compile takes minutes: `tail -f` shows where
 * it is).
 */
function run(cmd: string[], what: string, logFile: string, cwd?: string): void {
  writeFileSync(logFile, `$ ${cmd.join(" ")}\n`, { flag: "a" });
  const fd = openSync(logFile, "a");
  try {
    const r = Bun.spawnSync(cmd, { cwd, env: buildEnv(), stdio: ["ignore", fd, fd] });
    if (r.exitCode !== 0) throw new Error(`${what} failed (exit ${r.exitCode}); see ${logFile}`);
  } finally {
    closeSync(fd);
  }
}

/**
 * The environment of the build's commands, without the compiler flags CMake
 * would read from it on its first configure: a builder's CXXFLAGS=-march=native
 * would make every CPU variant need the build machine's instruction set.
 */
function buildEnv(): Record<string, string | undefined> {
  const { CFLAGS: _c, CXXFLAGS: _cxx, CPPFLAGS: _cpp, LDFLAGS: _ld, ...env } = process.env;
  return env;
}

function succeeds(cmd: string[], cwd: string): boolean {
  return Bun.spawnSync(cmd, { cwd, env: buildEnv(), stdout: "ignore", stderr: "ignore" }).exitCode === 0;
}

/** The RPC protocol version a llama.cpp checkout's ggml-rpc.h declares (`7.0.0`), or undefined without one. */
export function rpcProtocolOf(src: string): string | undefined {
  const header = join(src, "ggml", "include", "ggml-rpc.h");
  if (!existsSync(header)) return undefined;
  const text = readFileSync(header, "utf8");
  const part = (name: string) => new RegExp(`#define\\s+RPC_PROTO_${name}_VERSION\\s+(\\d+)`).exec(text)?.[1];
  const [major, minor, patch] = [part("MAJOR"), part("MINOR"), part("PATCH")];
  return major && minor && patch ? `${major}.${minor}.${patch}` : undefined;
}

/** The package's patches (llama/patches/*.diff), in the order they are applied. */
function patchesOf(pkgDir: string): { name: string; path: string; sha256: string }[] {
  const dir = join(pkgDir, "llama", "patches");
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith(".diff"))
    .sort()
    .map((name) => {
      const path = join(dir, name);
      return { name, path, sha256: createHash("sha256").update(readFileSync(path)).digest("hex") };
    });
}

/**
 * Holds the lock file `lock` while fn runs, so two builds never share a source
 * or build tree. The lock appears whole or not at all: our pid is written to a
 * file of our own, then hard-linked to `lock` (which fails if it exists). A
 * lock naming a process that is gone (or this very pid, left by a killed run
 * whose pid came round again) is moved aside and taken; a live one refuses.
 */
export async function withLock<T>(lock: string, fn: () => Promise<T>): Promise<T> {
  const mine = `${lock}.${process.pid}`;
  writeFileSync(mine, String(process.pid));
  try {
    const take = (): boolean => {
      try {
        linkSync(mine, lock);
        return true;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
        return false;
      }
    };
    if (!take()) {
      let holder = Number.NaN;
      try {
        holder = Number(readFileSync(lock, "utf8"));
      } catch {}
      if (!Number.isSafeInteger(holder) || holder <= 0 || (holder !== process.pid && processAlive(holder))) {
        const who = Number.isSafeInteger(holder) && holder > 0 ? holder : "unknown";
        throw new Error(
          `another build (pid ${who}) is building libllama in this cache; wait for it, or remove ${lock} if none is`,
        );
      }
      // Stale: moved aside under a name of our own (a rename either happens once or not at all), then taken like a
      // fresh one.
      const aside = `${lock}.stale.${process.pid}`;
      try {
        renameSync(lock, aside);
        rmSync(aside, { force: true });
      } catch {}
      if (!take()) throw new Error(`another build took ${lock} at the same moment; wait for it`);
    }
  } finally {
    rmSync(mine, { force: true });
  }
  try {
    return await fn();
  } finally {
    rmSync(lock, { force: true });
  }
}

/**
 * Applies node-llama-cpp's patches to a checkout in `dir`, in name order, as
 * node-llama-cpp does (`git apply --ignore-whitespace`); a patch the source
 * already holds is skipped. Throws for a patch that applies neither way.
 * Returns what it did with each, for the log.
 */
export function applyPatches(
  dir: string,
  patches: readonly { name: string; path: string }[],
  logFile: string,
): string[] {
  return patches.map((patch) => {
    const git = (...args: string[]) => ["git", "apply", "--ignore-whitespace", ...args, patch.path];
    if (succeeds(git("--check"), dir)) {
      run(git(), `git apply ${patch.name}`, logFile, dir);
      return `${patch.name}: applied`;
    }
    if (succeeds(git("--reverse", "--check"), dir)) return `${patch.name}: already in the source`;
    throw new Error(`node-llama-cpp's ${patch.name} applies neither forwards nor backwards to its own source`);
  });
}

/**
 * Builds (or finds already built in the cache) the library set of node-llama-cpp
 * `nodeLlamaCppVersion`'s llama.cpp source for this machine. Takes 8-15
 * minutes on two cores the first time; a finished build is reused.
 */
export async function buildLlamaFromSource(opts: SourceBuildOptions): Promise<SourceBuild> {
  const log = opts.log ?? (() => {});
  const targets = opts.targets ?? SOURCE_BUILD_TARGETS;
  const rpcOnly = targets.join() === RPC_BACKEND_TARGETS.join();
  const compilers = findCompilers();
  const pkg = await fetchPackage("node-llama-cpp", opts.nodeLlamaCppVersion, {
    cacheRoot: join(opts.cacheRoot, "packages"),
    log,
  });
  const bundle = join(pkg.dir, "llama", "gitRelease.bundle");
  if (!existsSync(bundle))
    throw new Error(`node-llama-cpp@${opts.nodeLlamaCppVersion} carries no llama/gitRelease.bundle`);
  const patches = patchesOf(pkg.dir);

  const generator = generatorHere();
  // One build per source, patches, options, compilers and generator: anything else gets another folder.
  const key = createHash("sha256")
    .update(
      [
        opts.nodeLlamaCppVersion,
        process.platform,
        process.arch,
        compilers.c.line,
        compilers.cxx.line,
        generator,
        ...patches.map((p) => p.sha256),
        ...SOURCE_BUILD_OPTIONS,
        ...targets,
      ].join("\n"),
    )
    .digest("hex")
    .slice(0, 16);
  const root = join(
    opts.cacheRoot,
    "llama-source",
    `${opts.nodeLlamaCppVersion}-${process.platform}-${process.arch}-${rpcOnly ? "rpc-" : ""}${key}`,
  );
  const out = join(root, "lib");
  const done = join(root, ".complete");
  /** The commit of a finished build in this folder, if there is one. */
  const finished = (): string | undefined => {
    if (!existsSync(done) || !existsSync(out)) return undefined;
    try {
      const commit = (JSON.parse(readFileSync(done, "utf8")) as { commit?: unknown }).commit;
      return typeof commit === "string" ? commit : undefined;
    } catch {
      return undefined;
    }
  };
  const cached = (commit: string): SourceBuild => {
    log(`libllama from source: cached in ${out} (commit ${commit.slice(0, 7)})`);
    return { dir: out, commit, compiler: compilers.cxx };
  };
  const before = finished();
  if (before) return cached(before);
  mkdirSync(root, { recursive: true });
  return withLock(`${root}.lock`, async () => {
    // Another build may have finished while we waited for the lock.
    const meanwhile = finished();
    if (meanwhile) return cached(meanwhile);
    checkBuildTools(generator);
    rmSync(done, { force: true });
    const logFile = join(root, "build.log");
    writeFileSync(logFile, "");
    // What killed builds left behind (each a ~200 MB checkout, or a half-collected folder).
    for (const f of readdirSync(root))
      if (/^(src\.\d+\.tmp|lib\.tmp)$/.test(f)) rmSync(join(root, f), { recursive: true, force: true });
    const src = join(root, "src");
    if (!existsSync(src)) {
      // Cloned and patched aside, then renamed: a build killed midway never leaves a half tree that looks whole.
      const tmp = `${src}.${process.pid}.tmp`;
      run(["git", "clone", "--quiet", bundle, tmp], "git clone of the source bundle", logFile);
      for (const line of applyPatches(tmp, patches, logFile)) log(`libllama from source: ${line}`);
      renameSync(tmp, src);
    }
    const protocol = rpcProtocolOf(src);
    if (protocol !== RPC_PROTOCOL)
      throw new Error(`ggml-rpc.h of this source speaks RPC protocol ${protocol}, superfluid ${RPC_PROTOCOL}`);
    const rev = Bun.spawnSync(["git", "-C", src, "rev-parse", "HEAD"], { stdout: "pipe", stderr: "pipe" });
    const head = rev.stdout.toString().trim();
    if (rev.exitCode !== 0 || !/^[0-9a-f]{40}$/.test(head))
      throw new Error(`${src} is not a whole git checkout; remove ${root} and build again`);
    const build = join(root, "build");
    const jobs = String(opts.jobs ?? navigator.hardwareConcurrency ?? 2);
    log(
      `libllama from source: llama.cpp ${head.slice(0, 7)} from node-llama-cpp@${opts.nodeLlamaCppVersion} with ${patches.length} patch(es), ` +
        `${compilerName(compilers.cxx)}, ${jobs} jobs (progress: ${logFile})`,
    );
    const t0 = performance.now();
    run(["cmake", "-S", src, "-B", build, "-G", generator, ...SOURCE_BUILD_OPTIONS], "cmake configure", logFile);
    run(["cmake", "--build", build, "--parallel", jobs, "--target", ...targets], "cmake build", logFile);
    // Collected and checked aside; `lib` and then `.complete` appear only for a set that passed.
    const staging = join(root, "lib.tmp");
    const names = collectLibraries(join(build, "bin"), staging);
    const expected = rpcOnly ? ["libggml-rpc"] : ["libllama", "libggml-cpu", "libggml-rpc"];
    const missing = expected.filter((want) => !names.some((n) => n.startsWith(want)));
    if (missing.length > 0)
      throw new Error(`the build produced no ${missing.join(", ")} (${names.join(", ")}); see ${logFile}`);
    // The RPC backend is loaded only by --rpc and rpc-worker, and says so where it cannot load: GCC 12's
    // libstdc++ gives it std::condition_variable::wait@GLIBCXX_3.4.30, newer than the prebuilt's ceiling.
    const rpc = join(staging, "libggml-rpc.so");
    if (existsSync(rpc)) {
      const needs = ceilingsAbove(versionCeilings([rpc]), versionCeilings(loadedLibraries(opts.prebuiltDir)));
      if (needs.length > 0) log(`libllama from source: libggml-rpc.so also needs ${needs.join(", ")} (RPC only)`);
    }
    // Nothing loaded at every start may need a newer glibc or libstdc++ than the prebuilt: the binary must start
    // wherever it did.
    const above = ceilingsAbove(
      versionCeilings(loadedLibraries(staging)),
      versionCeilings(loadedLibraries(opts.prebuiltDir)),
    );
    if (above.length > 0)
      throw new Error(
        `the built libraries need newer symbol versions than the prebuilt: ${above.join(", ")}; build on an older distribution or with --prebuilt-llama`,
      );
    // The llama.cpp release the prebuilt records (what `--version` and the ABI check name), and this build's own facts.
    const metaFile = join(opts.prebuiltDir, BUILD_METADATA_FILE);
    const prebuilt = existsSync(metaFile)
      ? (JSON.parse(readFileSync(metaFile, "utf8")) as { buildOptions?: { llamaCpp?: unknown } })
      : {};
    const meta = {
      buildOptions: { llamaCpp: prebuilt.buildOptions?.llamaCpp },
      superfluidSourceBuild: {
        source: `node-llama-cpp@${opts.nodeLlamaCppVersion} llama/gitRelease.bundle`,
        commit: head,
        patches: patches.map((p) => `${p.name} sha256:${p.sha256}`),
        compilers: { c: compilers.c.line, cxx: compilers.cxx.line },
        options: SOURCE_BUILD_OPTIONS,
        rpcProtocol: protocol,
      },
    };
    writeFileSync(join(staging, BUILD_METADATA_FILE), `${JSON.stringify(meta, null, 2)}\n`);
    rmSync(out, { recursive: true, force: true });
    renameSync(staging, out);
    writeFileSync(done, JSON.stringify({ commit: head }));
    log(`libllama from source: ${names.length} libraries in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    return { dir: out, commit: head, compiler: compilers.cxx };
  });
}
