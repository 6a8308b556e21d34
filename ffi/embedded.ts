// The libraries a compiled binary carries. build.ts writes ffi/embedded-files.ts
// listing them (as Bun `file` imports) before `bun build --compile`; from source
// that list is empty and this module finds nothing.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
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
  writeFileSync(done, "");
  return dir;
}
