// The release build's pure parts: the platform table, archive names, the
// SHA256SUMS format and the Mach-O signature check. Nothing is downloaded or
// compiled here (the build itself is run by `npm run release`).
import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseSha256Sums, sha256File, sha256SumsText } from "../../src/release/archive.ts";
import { integrityOf, sha512Of } from "../../src/release/fetch-package.ts";
import { adhocSign, machoSignatureHolds } from "../../src/release/macho-sign.ts";
import {
  archiveName,
  CUDA_VARIANTS,
  hostPlatform,
  PLATFORMS,
  platformByName,
  variantArchiveName,
} from "../../src/release/platforms.ts";
import pkg from "../../package.json";
import lock from "../../package-lock.json";
import { KNOWN_LLAMA_RELEASES } from "../../ffi/abi.ts";

describe("platform table", () => {
  test("the five platforms, each with its Bun target and pinned libllama package", () => {
    expect(PLATFORMS.map((p) => p.name)).toEqual([
      "linux-x64",
      "linux-arm64",
      "darwin-arm64",
      "darwin-x64",
      "windows-x64",
    ]);
    for (const p of PLATFORMS) {
      expect(p.name as string).toBe(`${p.os}-${p.arch}`);
      expect(p.bunTarget).toMatch(new RegExp(`^bun-${p.os}-${p.arch}(-baseline)?$`));
      expect(p.exe).toBe(p.os === "windows" ? "superfluid.exe" : "superfluid");
      expect(p.archiveExt).toBe(p.os === "windows" ? "zip" : "tar.gz");
      // build.ts fetches exactly the version package.json pins.
      expect((pkg.optionalDependencies as Record<string, string>)[p.llamaPackage]).toMatch(/^\d+\.\d+\.\d+$/);
    }
    expect(platformByName("darwin-arm64").llamaPackage).toBe("@node-llama-cpp/mac-arm64-metal");
    expect(() => platformByName("linux-riscv64")).toThrow(/unknown platform/);
    expect(hostPlatform("win32", "x64")?.name).toBe("windows-x64");
    expect(hostPlatform("freebsd", "x64")).toBeUndefined();
  });

  test("each platform pins its own newest served libllama: a release the binding knows, recorded in the lockfile", () => {
    const pins = pkg.optionalDependencies as Record<string, string>;
    const known = KNOWN_LLAMA_RELEASES.map((r) => r.nodeLlamaCpp);
    for (const p of PLATFORMS) {
      // build.ts embeds exactly this version for the platform; ffi/abi.ts must know its layouts.
      expect(known).toContain(pins[p.llamaPackage]!);
      const entry = (lock.packages as Record<string, { version?: string; integrity?: string }>)[
        `node_modules/${p.llamaPackage}`
      ];
      expect(entry?.version).toBe(pins[p.llamaPackage]!);
      expect(entry?.integrity).toMatch(/^sha512-/);
    }
    // The Vulkan build an x64 archive carries is the same release as its CPU build, recorded in the lockfile.
    const vulkan = PLATFORMS.filter((p) => p.vulkanPackage !== undefined);
    expect(vulkan.map((p) => p.name)).toEqual(["linux-x64", "windows-x64"]);
    for (const p of vulkan) {
      expect(pins[p.vulkanPackage!]).toBe(pins[p.llamaPackage]!);
      const entry = (lock.packages as Record<string, { version?: string; integrity?: string }>)[
        `node_modules/${p.vulkanPackage}`
      ];
      expect(entry?.version).toBe(pins[p.llamaPackage]!);
      expect(entry?.integrity).toMatch(/^sha512-/);
    }
    // The CUDA builds are separate archives of the same release as their platform's CPU build, pinned with integrity.
    for (const v of CUDA_VARIANTS) {
      expect(v.name).toBe(`${v.base}-cuda`);
      expect(v.version).toBe(pins[platformByName(v.base).llamaPackage]!);
      expect(v.integrity).toMatch(/^sha512-[A-Za-z0-9+/]{86}==$/);
      expect(variantArchiveName("0.1.0", v)).toBe(
        `superfluid-0.1.0-${v.name}.${v.base.startsWith("windows") ? "zip" : "tar.gz"}`,
      );
    }
    // llama.cpp v0.5.0 (3.22.1) is served for Linux only; macOS and Windows stay on v0.4.0 (3.21.1).
    expect(PLATFORMS.map((p) => `${p.name} ${pins[p.llamaPackage]}`)).toEqual([
      "linux-x64 3.22.1",
      "linux-arm64 3.22.1",
      "darwin-arm64 3.21.1",
      "darwin-x64 3.21.1",
      "windows-x64 3.21.1",
    ]);
  });

  test("archive names", () => {
    expect(archiveName("0.1.0", "linux-x64")).toBe("superfluid-0.1.0-linux-x64.tar.gz");
    expect(archiveName("0.1.0", platformByName("windows-x64"))).toBe("superfluid-0.1.0-windows-x64.zip");
    expect(new Set(PLATFORMS.map((p) => archiveName(pkg.version, p))).size).toBe(5);
  });
});

describe("SHA256SUMS", () => {
  const a = "a".repeat(64);
  const b = "0123456789abcdef".repeat(4);

  test("sha256sum's format, sorted by name, read back", () => {
    const text = sha256SumsText(
      new Map([
        ["superfluid-0.1.0-windows-x64.zip", b],
        ["superfluid-0.1.0-darwin-x64.tar.gz", a],
      ]),
    );
    expect(text).toBe(`${a}  superfluid-0.1.0-darwin-x64.tar.gz\n${b}  superfluid-0.1.0-windows-x64.zip\n`);
    expect(parseSha256Sums(text)).toEqual(
      new Map([
        ["superfluid-0.1.0-darwin-x64.tar.gz", a],
        ["superfluid-0.1.0-windows-x64.zip", b],
      ]),
    );
    expect(parseSha256Sums(`${a} *x.zip\n`).get("x.zip")).toBe(a);
  });

  test("refuses what sha256sum -c could not read", () => {
    expect(() => sha256SumsText(new Map([["x.zip", "ABC"]]))).toThrow(/64 lowercase hex/);
    expect(() => sha256SumsText(new Map([["a/x.zip", a]]))).toThrow(/cannot go in/);
    expect(() => parseSha256Sums("nonsense\n")).toThrow(/not a sha256sum line/);
  });

  test("a file's digest", async () => {
    const file = join(mkdtempSync(join(tmpdir(), "sf-sums-")), "x");
    writeFileSync(file, "superfluid\n");
    expect(await sha256File(file)).toBe(createHash("sha256").update("superfluid\n").digest("hex"));
  });
});

test("registry integrity strings", () => {
  const bytes = new TextEncoder().encode("tarball");
  const sri = integrityOf(bytes);
  expect(sri).toBe(`sha512-${createHash("sha512").update(bytes).digest("base64")}`);
  expect(sha512Of(`sha1-xyz ${sri}`)).toBe(sri);
  expect(() => sha512Of("sha1-xyz")).toThrow(/no sha512/);
});

describe("Mach-O ad-hoc signature", () => {
  /** A minimal 64-bit Mach-O: __TEXT, __LINKEDIT and a code signature slot at the end, with a stale signature. */
  function fakeMacho(): Buffer {
    const body = 3 * 4096 + 100;
    const sigOff = body;
    const sigSize = 64;
    const bin = Buffer.alloc(sigOff + sigSize);
    bin.writeUInt32LE(0xfeedfacf, 0);
    bin.writeUInt32LE(3, 16); // ncmds
    let off = 32;
    const segment = (name: string, fileoff: number, filesize: number) => {
      bin.writeUInt32LE(0x19, off);
      bin.writeUInt32LE(72, off + 4);
      bin.write(name, off + 8, "latin1");
      bin.writeBigUInt64LE(BigInt(Math.ceil(filesize / 0x4000) * 0x4000), off + 32); // vmsize
      bin.writeBigUInt64LE(BigInt(fileoff), off + 40);
      bin.writeBigUInt64LE(BigInt(filesize), off + 48);
      off += 72;
    };
    segment("__TEXT", 0, 4096);
    segment("__LINKEDIT", 8192, sigOff + sigSize - 8192);
    bin.writeUInt32LE(0x1d, off);
    bin.writeUInt32LE(16, off + 4);
    bin.writeUInt32LE(sigOff, off + 8);
    bin.writeUInt32LE(sigSize, off + 12);
    for (let i = 4096; i < body; i++) bin[i] = i % 251;
    return bin;
  }

  test("a stale signature is refused; the rewritten one verifies and tracks the bytes", () => {
    const stale = fakeMacho();
    expect(machoSignatureHolds(stale)).toBe(false);
    const signed = adhocSign(stale, "superfluid");
    expect(machoSignatureHolds(signed)).toBe(true);
    expect(signed.subarray(4096, 3 * 4096 + 100)).toEqual(stale.subarray(4096, 3 * 4096 + 100));
    const tampered = Buffer.from(signed);
    tampered[5000] = (tampered[5000]! + 1) % 256;
    expect(machoSignatureHolds(tampered)).toBe(false);
  });
});
