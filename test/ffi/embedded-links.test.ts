// A compiled binary's extracted libraries: a versioned name (libggml-base.so.0,
// what a source-built set carries) is also reachable unversioned, since the
// Vulkan backend the release adds beside it asks for libggml-base.so, and the
// loader must find that same file rather than a second copy.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, readlinkSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { linkUnversionedNames } from "../../ffi/embedded.ts";

const dir = mkdtempSync(join(tmpdir(), "sf-links-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test.skipIf(process.platform === "win32")(
  "versioned libraries get their unversioned name; others are left alone",
  () => {
    const names = ["libggml-base.so.0", "libllama.so.0.5.1", "libggml-vulkan.so", "libggml.so", "libggml.so.0"];
    for (const n of names) writeFileSync(join(dir, n), "");
    linkUnversionedNames(dir, names);
    // A second extractor of the same set finds the links made.
    linkUnversionedNames(dir, names);
    expect(readlinkSync(join(dir, "libggml-base.so"))).toBe("libggml-base.so.0");
    expect(readlinkSync(join(dir, "libllama.so"))).toBe("libllama.so.0.5.1");
    expect(readdirSync(dir).sort()).toEqual([...names, "libggml-base.so", "libllama.so"].sort());
  },
);
