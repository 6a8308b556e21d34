// The libllama binding: where the library comes from and the C API check.
import { describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ABI_PROBE_SLOTS, abiMismatches, identifyRelease, KNOWN_LLAMA_RELEASES } from "../../ffi/abi.ts";
import { loadLlama } from "../../ffi/llama.ts";
import { locateLibrary, platformPackage } from "../../ffi/locate.ts";
import { cacheDir } from "../../ffi/paths.ts";
import { llamaCppRelease } from "../../src/version.ts";

/** A probe as a library of `release` writes it. */
function probeOf(tag: string): Float64Array {
  const probe = new Float64Array(ABI_PROBE_SLOTS);
  for (const d of KNOWN_LLAMA_RELEASES.find((r) => r.tag === tag)!.defaults) probe[d.slot] = d.value;
  return probe;
}
const V050_ONLY = "llama_adapter_lora_init_from_file_ptr";

describe("libllama binding", () => {
  test("opens the platform package's library and its layouts match", () => {
    const llama = loadLlama();
    expect(llama.location.source).toBe("package");
    const probe = new Float64Array(ABI_PROBE_SLOTS);
    llama.shim.sf_abi_probe(probe);
    expect(abiMismatches(probe, llama.release)).toEqual([]);
    // The release it was identified as is the one the package's build metadata records.
    expect(llama.release.tag).toBe(llamaCppRelease(llama.location.dir)!);
  });

  test("both shipped releases are known, each told apart by its functions", () => {
    expect(KNOWN_LLAMA_RELEASES.map((r) => `${r.tag}/${r.nodeLlamaCpp}`)).toEqual(["v0.4.0/3.21.1", "v0.5.0/3.22.1"]);
    const v040 = identifyRelease(probeOf("v0.4.0"), () => false);
    expect(v040.release?.tag).toBe("v0.4.0");
    const v050 = identifyRelease(probeOf("v0.5.0"), (name) => name === V050_ONLY);
    expect(v050.release?.tag).toBe("v0.5.0");
  });

  test("a layout no known release has is refused by name, whichever release its functions say", () => {
    for (const [tag, exports] of [
      ["v0.4.0", () => false],
      ["v0.5.0", (n: string) => n === V050_ONLY],
    ] as const) {
      const probe = probeOf(tag);
      probe[9] = 512; // as if n_batch read n_ubatch's slot
      const match = identifyRelease(probe, exports);
      expect(match.release).toBeNull();
      expect(match.release === null && match.detail).toBe(
        `closest known release ${tag} (node-llama-cpp ${tag === "v0.4.0" ? "3.21.1" : "3.22.1"}): struct layout differs at llama_context_params.n_batch (expected 2048, read 512)`,
      );
    }
  });

  test("loading refuses a library that matches no known release, naming them", () => {
    // In a child process: loadLlama opens one library per process.
    const lib = loadLlama().location.dir;
    const child = Bun.spawnSync(
      [
        process.execPath,
        "-e",
        `
        const abi = await import(${JSON.stringify(join(import.meta.dir, "../..", "ffi", "abi.ts"))});
        for (const r of abi.KNOWN_LLAMA_RELEASES) r.defaults[9].value = 4096;
        try { (await import(${JSON.stringify(join(import.meta.dir, "../..", "ffi", "llama.ts"))})).loadLlama(); console.log("opened"); }
        catch (e) { console.log(e.name + ": " + e.message); }`,
      ],
      { env: { ...process.env, SUPERFLUID_LLAMA_LIB: lib }, stdout: "pipe", stderr: "pipe" },
    );
    const out = child.stdout.toString();
    expect(out).toContain("LlamaAbiError: libllama at");
    expect(out).toContain("v0.4.0 (node-llama-cpp 3.21.1) or v0.5.0 (node-llama-cpp 3.22.1)");
    expect(out).toContain("struct layout differs at llama_context_params.n_batch (expected 4096, read 2048)");
  });

  // The other shipped release, where a release build fetched it (bun build.ts --all): it opens,
  // identified as its own release. Skipped on machines without that cache.
  const host = `${process.platform === "darwin" ? "mac" : process.platform === "win32" ? "win" : process.platform}-${process.arch}`;
  const others = KNOWN_LLAMA_RELEASES.map((r) => ({
    release: r,
    dir: join(cacheDir(), "release", "packages", `node-llama-cpp+${host}@${r.nodeLlamaCpp}`, "bins", host),
  })).filter((o) => existsSync(o.dir));
  test.skipIf(others.length === 0)("each fetched release package opens and is identified as its release", () => {
    for (const { release, dir } of others) {
      const child = Bun.spawnSync([process.execPath, join(import.meta.dir, "../..", "src", "main.ts"), "check"], {
        env: { ...process.env, SUPERFLUID_LLAMA_LIB: dir },
        stdout: "pipe",
        stderr: "pipe",
      });
      expect(child.stderr.toString()).toBe("");
      expect(child.stdout.toString()).toContain(`(env, llama.cpp ${release.tag})`);
    }
  });

  test("a layout that moved is named in the refusal", () => {
    const llama = loadLlama();
    const probe = new Float64Array(ABI_PROBE_SLOTS);
    llama.shim.sf_abi_probe(probe);
    probe[9] = 512; // as if n_batch read n_ubatch's slot
    expect(abiMismatches(probe, llama.release)).toEqual(["llama_context_params.n_batch (expected 2048, read 512)"]);
  });

  test("SUPERFLUID_LLAMA_LIB names the library or its folder", () => {
    const pkg = loadLlama().location;
    expect(locateLibrary({ SUPERFLUID_LLAMA_LIB: pkg.dir })).toMatchObject({ llama: pkg.llama, source: "env" });
    expect(locateLibrary({ SUPERFLUID_LLAMA_LIB: pkg.llama })).toMatchObject({ dir: pkg.dir, source: "env" });
    expect(() => locateLibrary({ SUPERFLUID_LLAMA_LIB: "/no/such/lib.so" })).toThrow(
      "SUPERFLUID_LLAMA_LIB=/no/such/lib.so: no such file",
    );
    const empty = mkdtempSync(join(tmpdir(), "sf-nolib-"));
    expect(() => locateLibrary({ SUPERFLUID_LLAMA_LIB: empty })).toThrow("no libllama in");
  });

  test("platform packages are named per platform", () => {
    expect(platformPackage("linux", "x64")).toBe("@node-llama-cpp/linux-x64");
    expect(platformPackage("darwin", "arm64")).toBe("@node-llama-cpp/mac-arm64-metal");
    expect(platformPackage("win32", "x64")).toBe("@node-llama-cpp/win-x64");
    expect(() => platformPackage("aix", "ppc64")).toThrow("SUPERFLUID_LLAMA_LIB");
  });
});
