// The libraries a compiled binary carries. build.ts writes ffi/embedded-files.ts
// listing them (as Bun `file` imports) before `bun build --compile`; from source
// that list is empty and this module finds nothing.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, renameSync, symlinkSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { embeddedFiles } from "./embedded-files.ts";
import { cacheDir } from "./paths.ts";

/** Copies the embedded library set into one cache folder; returns it, or undefined when none is embedded. */
export function extractEmbeddedLibraries(): string | undefined {
  if (embeddedFiles.length === 0) return undefined;
  // Names, sizes and contents (hashed at build time, not re-read here): another build of the libraries gets another
  // folder.
  const id = createHash("sha256")
    .update(embeddedFiles.map((f) => `${basename(f.name)}:${f.size}:${f.sha256 ?? ""}`).join("\n"))
    .digest("hex");
  const dir = join(cacheDir(), "lib", id.slice(0, 16));
  const done = join(dir, ".complete");
  if (existsSync(done)) return dir;
  mkdirSync(dir, { recursive: true });
  for (const file of embeddedFiles) {
    const target = join(dir, basename(file.name));
    const tmp = `${target}.${process.pid}.tmp`;
    writeFileSync(tmp, new Uint8Array(file.read()), { mode: 0o755 });
    renameSync(tmp, target); // atomic, so a concurrent extractor never sees half a library
  }
  linkUnversionedNames(
    dir,
    embeddedFiles.map((f) => basename(f.name)),
  );
  writeFileSync(done, "");
  return dir;
}

/**
 * A versioned library (libggml-base.so.0) is also reachable as libggml-base.so: a backend built apart from
 * the others (the release's Vulkan prebuilt beside a libllama built from source, docs/install.md#gpus) asks
 * for the unversioned name, and the dynamic loader must find the same file, not load a second copy.
 */
export function linkUnversionedNames(dir: string, names: string[]): void {
  if (process.platform === "win32") return;
  for (const name of names) {
    const m = /^(lib.+\.so)\.\d+(\.\d+)*$/.exec(name);
    if (!m || names.includes(m[1]!)) continue;
    try {
      symlinkSync(name, join(dir, m[1]!));
    } catch (err) {
      // Another process extracting the same set made it first.
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
  }
}
