// The pure parts of building libllama from node-llama-cpp's source bundle
// (src/release/llama-from-source.ts): which compilers may build it, how the
// built libraries are collected, and that the loader finds such a folder.
// The build itself takes tens of minutes and runs in `npm run release`.
import { describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { locateLibrary } from "../../ffi/locate.ts";
import { ceilingsAbove, neededVersions, versionCeilings } from "../../src/release/elf-versions.ts";
import {
  applyPatches,
  collectLibraries,
  compilerName,
  compilerRefusal,
  loadedLibraries,
  parseCompilerVersion,
  SOURCE_BUILD_OPTIONS,
  withLock,
} from "../../src/release/llama-from-source.ts";

describe("compilers", () => {
  test("GCC and Clang version lines are read", () => {
    expect(parseCompilerVersion("g++ (Debian 12.2.0-14+deb12u1) 12.2.0\nCopyright (C) 2022")).toMatchObject({
      kind: "gcc",
      major: 12,
      version: "12.2.0",
    });
    expect(parseCompilerVersion("cc (Debian 12.2.0-14+deb12u1) 12.2.0\n")).toMatchObject({ kind: "gcc", major: 12 });
    expect(parseCompilerVersion("x86_64-linux-gnu-gcc-12 (Ubuntu 12.3.0-1ubuntu1~22.04) 12.3.0\n")).toMatchObject({
      kind: "gcc",
      major: 12,
      version: "12.3.0",
    });
    expect(parseCompilerVersion("c++ (Ubuntu 11.4.0-1ubuntu1~22.04.3) 11.4.0\n")).toMatchObject({
      kind: "gcc",
      major: 11,
    });
    expect(parseCompilerVersion("g++ (GCC) 13.2.1 20230801\n")).toMatchObject({ kind: "gcc", major: 13 });
    expect(parseCompilerVersion("Debian clang version 14.0.6\nTarget: x86_64-pc-linux-gnu")).toMatchObject({
      kind: "clang",
      major: 14,
    });
    expect(parseCompilerVersion("Ubuntu clang version 18.1.3 (1ubuntu1)\n")).toMatchObject({
      kind: "clang",
      major: 18,
      version: "18.1.3",
    });
    expect(compilerName(parseCompilerVersion("g++ (Debian 12.2.0-14+deb12u1) 12.2.0")!)).toBe("GCC 12.2.0");
    expect(parseCompilerVersion("icpx (Intel) 2024.0\n")).toBeUndefined();
    expect(parseCompilerVersion("")).toBeUndefined();
  });

  test("GCC before 12 is refused for the reason the prebuilt is slow; newer compilers pass", () => {
    const gcc11 = parseCompilerVersion("c++ (Ubuntu 11.4.0-1ubuntu1~22.04.3) 11.4.0");
    expect(compilerRefusal(gcc11)).toMatch(/GCC 11 spills tinyBLAS's F16 accumulators/);
    expect(compilerRefusal(parseCompilerVersion("g++ (Debian 12.2.0-14+deb12u1) 12.2.0"))).toBeUndefined();
    expect(compilerRefusal(parseCompilerVersion("Debian clang version 14.0.6"))).toMatch(/Clang 15 or later/);
    expect(compilerRefusal(parseCompilerVersion("Ubuntu clang version 18.1.3"))).toBeUndefined();
    expect(compilerRefusal(undefined)).toMatch(/neither GCC nor Clang/);
  });

  test("the build has the prebuilt's shape and needs nothing it did not", () => {
    expect(SOURCE_BUILD_OPTIONS).toContain("-DGGML_BACKEND_DL=ON");
    expect(SOURCE_BUILD_OPTIONS).toContain("-DGGML_CPU_ALL_VARIANTS=ON");
    expect(SOURCE_BUILD_OPTIONS).toContain("-DGGML_NATIVE=OFF");
    expect(SOURCE_BUILD_OPTIONS).toContain("-DGGML_OPENMP=OFF");
    expect(SOURCE_BUILD_OPTIONS).toContain("-DCMAKE_INSTALL_RPATH=$ORIGIN");
    // A static C++ runtime would carry the build machine's glibc symbol versions into every library.
    expect(SOURCE_BUILD_OPTIONS.join(" ")).not.toContain("-static-lib");
  });
});

describe("collecting the built libraries", () => {
  function fakeBuild(): string {
    const bin = mkdtempSync(join(tmpdir(), "sf-llama-bin-"));
    // A versioned library: dev link -> soname link -> real file.
    writeFileSync(join(bin, "libllama.so.0.0.9"), "llama bytes");
    symlinkSync("libllama.so.0.0.9", join(bin, "libllama.so.0"));
    symlinkSync("libllama.so.0", join(bin, "libllama.so"));
    writeFileSync(join(bin, "libggml.so.0.9.4"), "ggml bytes");
    symlinkSync("libggml.so.0.9.4", join(bin, "libggml.so.0"));
    symlinkSync("libggml.so.0", join(bin, "libggml.so"));
    writeFileSync(join(bin, "libggml-base.so.0.9.4"), "base bytes");
    symlinkSync("libggml-base.so.0.9.4", join(bin, "libggml-base.so.0"));
    symlinkSync("libggml-base.so.0", join(bin, "libggml-base.so"));
    // A backend module: one plain file.
    writeFileSync(join(bin, "libggml-cpu-haswell.so"), "haswell bytes");
    writeFileSync(join(bin, "llama-config.cmake"), "not a library");
    return bin;
  }

  test("one file per library, under the name its dependents load it by", () => {
    const out = join(mkdtempSync(join(tmpdir(), "sf-llama-out-")), "lib");
    const names = collectLibraries(fakeBuild(), out);
    expect(names).toEqual(["libggml-base.so.0", "libggml-cpu-haswell.so", "libggml.so.0", "libllama.so.0"]);
    expect(readdirSync(out).sort()).toEqual(names);
    expect(readFileSync(join(out, "libllama.so.0"), "utf8")).toBe("llama bytes");
    expect(readFileSync(join(out, "libggml-cpu-haswell.so"), "utf8")).toBe("haswell bytes");
  });

  test("the loader finds libllama and libggml (not libggml-base) in such a folder", () => {
    const out = join(mkdtempSync(join(tmpdir(), "sf-llama-out-")), "lib");
    collectLibraries(fakeBuild(), out);
    const found = locateLibrary({ SUPERFLUID_LLAMA_LIB: out });
    expect(basename(found.llama)).toBe("libllama.so.0");
    expect(basename(found.ggml)).toBe("libggml.so.0");
  });
});

describe("symbol versions a library needs", () => {
  const prebuilt = join(
    import.meta.dir,
    "..",
    "..",
    "node_modules",
    "@node-llama-cpp",
    "linux-x64",
    "bins",
    "linux-x64",
  );
  const onLinuxX64 = process.platform === "linux" && process.arch === "x64";

  test.skipIf(!onLinuxX64)("read from the prebuilt's own ELF files, as objdump -T lists them", () => {
    const libs = readdirSync(prebuilt)
      .filter((f) => /\.so$/.test(f))
      .map((f) => join(prebuilt, f));
    const llama = libs.find((f) => basename(f).startsWith("libllama.v"))!;
    const needs = neededVersions(llama);
    expect(needs).toContain("GLIBC_2.2.5");
    expect(needs.some((v) => v.startsWith("GLIBCXX_3.4."))).toBe(true);
    // The prebuilt (3.22.1) was linked on Ubuntu 22.04. What superfluid loads needs glibc 2.34 and
    // GLIBCXX 3.4.29 at most; node-llama-cpp's own libllama-common (never loaded) needs 3.4.30.
    const loaded = loadedLibraries(prebuilt).map((f) => basename(f));
    expect(loaded).toContain("libggml-base.so");
    expect(loaded).toContain("libggml-cpu-haswell.so");
    expect(loaded).toContain("libllama.v0.5.0.so");
    expect(loaded).toContain("libggml.v0.5.0.so");
    expect(loaded).not.toContain("libllama-common.so");
    const ceilings = versionCeilings(loadedLibraries(prebuilt));
    expect(ceilings.get("GLIBC")).toBe("2.34");
    expect(ceilings.get("GLIBCXX")).toBe("3.4.29");
    expect(versionCeilings(libs).get("GLIBCXX")).toBe("3.4.30");
    // Anything but a whole 64-bit little-endian ELF file is refused by name, never read as "needs nothing".
    expect(() => neededVersions(join(prebuilt, "_nlcBuildMetadata.json"))).toThrow(
      /_nlcBuildMetadata\.json: not an ELF file/,
    );
    const cut = join(mkdtempSync(join(tmpdir(), "sf-elf-")), "libcut.so");
    writeFileSync(cut, readFileSync(llama).subarray(0, 4096));
    expect(() => neededVersions(cut)).toThrow(/libcut\.so: truncated/);
  });

  test("the libraries superfluid loads, on x64 and arm64 names alike", () => {
    const dir = mkdtempSync(join(tmpdir(), "sf-loaded-"));
    for (const f of [
      "libllama.so.0",
      "libllama.v0.5.0.so",
      "libllama-common.so",
      "libggml.so.0",
      "libggml-base.so",
      "libggml-cpu-haswell.so",
      "libggml-cpu-armv8.2_1.so",
      "llama-addon.node",
      "_nlcBuildMetadata.json",
    ]) {
      writeFileSync(join(dir, f), "");
    }
    expect(loadedLibraries(dir).map((f) => basename(f))).toEqual([
      "libggml-base.so",
      "libggml-cpu-armv8.2_1.so",
      "libggml-cpu-haswell.so",
      "libggml.so.0",
      "libllama.so.0",
      "libllama.v0.5.0.so",
    ]);
  });

  test("a version that is not a number (GLIBC_PRIVATE) matches only itself", () => {
    expect(
      ceilingsAbove(
        new Map([
          ["GLIBC_PRIVATE", ""],
          ["GLIBC", "2.17"],
        ]),
        new Map([["GLIBC", "2.34"]]),
      ),
    ).toEqual(["GLIBC_PRIVATE (none in the prebuilt)"]);
    expect(ceilingsAbove(new Map([["GLIBC_PRIVATE", ""]]), new Map([["GLIBC_PRIVATE", ""]]))).toEqual([]);
  });

  test("a build needing a newer glibc or libstdc++ than the prebuilt is named", () => {
    const allowed = new Map([
      ["GLIBC", "2.34"],
      ["GLIBCXX", "3.4.29"],
    ]);
    expect(
      ceilingsAbove(
        new Map([
          ["GLIBC", "2.34"],
          ["GLIBCXX", "3.4.29"],
        ]),
        allowed,
      ),
    ).toEqual([]);
    expect(
      ceilingsAbove(
        new Map([
          ["GLIBC", "2.4"],
          ["GLIBCXX", "3.4.9"],
        ]),
        allowed,
      ),
    ).toEqual([]);
    expect(
      ceilingsAbove(
        new Map([
          ["GLIBC", "2.36"],
          ["GLIBCXX", "3.4.29"],
        ]),
        allowed,
      ),
    ).toEqual(["GLIBC_2.36 (at most GLIBC_2.34)"]);
    expect(
      ceilingsAbove(
        new Map([
          ["GLIBC", "2.34"],
          ["GLIBCXX", "3.4.30"],
          ["CXXABI", "1.3.13"],
        ]),
        allowed,
      ),
    ).toEqual(["CXXABI_1.3.13 (none in the prebuilt)", "GLIBCXX_3.4.30 (at most GLIBCXX_3.4.29)"]);
  });
});

describe("one build per cache folder", () => {
  test("a live holder refuses; a dead one's lock, or one left by this very pid, is taken over; the lock goes when done", async () => {
    const lock = join(mkdtempSync(join(tmpdir(), "sf-lock-")), "build.lock");
    // Held by a live process (the test runner's parent is as good as any).
    writeFileSync(lock, String(process.ppid));
    await expect(withLock(lock, async () => "ran")).rejects.toThrow(
      new RegExp(`another build \\(pid ${process.ppid}\\)`),
    );
    expect(readFileSync(lock, "utf8")).toBe(String(process.ppid));
    // Held by a process that is gone: a pid past the kernel's limit never exists.
    writeFileSync(lock, "4194305");
    let inside = "";
    expect(
      await withLock(lock, async () => {
        inside = readFileSync(lock, "utf8");
        return "ran";
      }),
    ).toBe("ran");
    expect(inside).toBe(String(process.pid));
    expect(existsSync(lock)).toBe(false);
    // Left by an earlier run whose pid is ours now.
    writeFileSync(lock, String(process.pid));
    expect(await withLock(lock, async () => "ran")).toBe("ran");
    // Unreadable content is taken as held: nothing is built over a lock that may be half written.
    writeFileSync(lock, "");
    await expect(withLock(lock, async () => "ran")).rejects.toThrow(/another build \(pid unknown\)/);
    // A failing build still gives the lock back.
    const fresh = join(mkdtempSync(join(tmpdir(), "sf-lock-")), "build.lock");
    await expect(withLock(fresh, async () => Promise.reject(new Error("compile failed")))).rejects.toThrow(
      "compile failed",
    );
    expect(readdirSync(join(fresh, ".."))).toEqual([]);
  });
});

describe("node-llama-cpp's patches", () => {
  const git = (cwd: string, ...args: string[]) => {
    const r = Bun.spawnSync(["git", ...args], { cwd, stdout: "pipe", stderr: "pipe" });
    if (r.exitCode !== 0) throw new Error(`git ${args.join(" ")}: ${r.stderr.toString()}`);
    return r.stdout.toString();
  };
  const hasGit = Bun.spawnSync(["git", "--version"], { stdout: "ignore", stderr: "ignore" }).exitCode === 0;

  test.skipIf(!hasGit)("applied when they apply, skipped when the source has them, refused otherwise", () => {
    const repo = mkdtempSync(join(tmpdir(), "sf-patch-"));
    git(repo, "init", "-q");
    writeFileSync(join(repo, "loader.cpp"), "int n_tensors = 0;\n");
    const dir = mkdtempSync(join(tmpdir(), "sf-patches-"));
    const patch = join(dir, "PR-1.diff");
    writeFileSync(
      patch,
      "--- a/loader.cpp\n+++ b/loader.cpp\n@@ -1 +1 @@\n-int n_tensors = 0;\n+int n_tensors = gguf_get_n_tensors(metadata);\n",
    );
    const log = join(dir, "build.log");
    expect(applyPatches(repo, [{ name: "PR-1.diff", path: patch }], log)).toEqual(["PR-1.diff: applied"]);
    expect(readFileSync(join(repo, "loader.cpp"), "utf8")).toBe("int n_tensors = gguf_get_n_tensors(metadata);\n");
    expect(applyPatches(repo, [{ name: "PR-1.diff", path: patch }], log)).toEqual(["PR-1.diff: already in the source"]);
    writeFileSync(join(repo, "loader.cpp"), "something else entirely\n");
    expect(() => applyPatches(repo, [{ name: "PR-1.diff", path: patch }], log)).toThrow(
      /PR-1\.diff applies neither forwards nor backwards/,
    );
  });
});
