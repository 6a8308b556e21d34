// The libllama binding: where the library comes from and the C API check.
import { describe, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ABI_PROBE_SLOTS, abiMismatches } from "../ffi/abi.ts";
import { loadLlama } from "../ffi/llama.ts";
import { locateLibrary, platformPackage } from "../ffi/locate.ts";

describe("libllama binding", () => {
  test("opens the platform package's library and its layouts match", () => {
    const llama = loadLlama();
    expect(llama.location.source).toBe("package");
    const probe = new Float64Array(ABI_PROBE_SLOTS);
    llama.shim.sf_abi_probe(probe);
    expect(abiMismatches(probe)).toEqual([]);
  });

  test("a layout that moved is named in the refusal", () => {
    const llama = loadLlama();
    const probe = new Float64Array(ABI_PROBE_SLOTS);
    llama.shim.sf_abi_probe(probe);
    probe[9] = 512; // as if n_batch read n_ubatch's slot
    expect(abiMismatches(probe)).toEqual(["llama_context_params.n_batch (expected 2048, read 512)"]);
  });

  test("SUPERFLUID_LLAMA_LIB names the library or its folder", () => {
    const pkg = loadLlama().location;
    expect(locateLibrary({ SUPERFLUID_LLAMA_LIB: pkg.dir })).toMatchObject({ llama: pkg.llama, source: "env" });
    expect(locateLibrary({ SUPERFLUID_LLAMA_LIB: pkg.llama })).toMatchObject({ dir: pkg.dir, source: "env" });
    expect(() => locateLibrary({ SUPERFLUID_LLAMA_LIB: "/no/such/lib.so" })).toThrow("SUPERFLUID_LLAMA_LIB=/no/such/lib.so: no such file");
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
