// A release archive from a staged folder, and the SHA256SUMS file listing them.
// Release tooling only; the shipped binary never imports it.
import { createHash } from "node:crypto";
import { createReadStream, rmSync } from "node:fs";
import type { Platform } from "./platforms.ts";

/**
 * Packs `files` (names inside `stageDir`) at the archive's root. The system
 * tools do it: `tar` for .tar.gz (every Unix build host has it, and it keeps
 * the executable bit the formula and install script rely on) and Info-ZIP's
 * `zip` for Windows' .zip (present on Debian/Ubuntu/macOS runners; a build
 * host without it is told to install it rather than carry a zip library
 * for one file).
 */
export function writeArchive(platform: Platform, stageDir: string, files: string[], outFile: string): void {
  rmSync(outFile, { force: true }); // zip would add to an old archive
  const cmd =
    platform.archiveExt === "tar.gz"
      ? ["tar", "-czf", outFile, "-C", stageDir, ...files]
      : ["zip", "-q", "-X", "-9", outFile, ...files]; // -X: no Unix uid/gid extra fields
  let run: ReturnType<typeof Bun.spawnSync>;
  try {
    run = Bun.spawnSync(cmd, { cwd: stageDir, stdout: "pipe", stderr: "pipe" });
  } catch (err) {
    throw new Error(`${cmd[0]} is needed to write ${outFile} (${(err as Error).message}); install it and rerun`);
  }
  if (run.exitCode !== 0) throw new Error(`${cmd.join(" ")}: exit ${run.exitCode}: ${run.stderr?.toString().trim()}`);
}

/** Lowercase hex sha256 of a file, read as a stream (archives are ~50 MB). */
export async function sha256File(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/** `sha256sum` format: `<64 hex>  <file name>` a line (two spaces: text mode), sorted by name. */
export function sha256SumsText(checksums: Map<string, string>): string {
  return [...checksums]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, sum]) => {
      if (!/^[0-9a-f]{64}$/.test(sum)) throw new Error(`checksum of ${name} is not 64 lowercase hex digits`);
      if (/[\n\\/]/.test(name)) throw new Error(`archive name ${JSON.stringify(name)} cannot go in SHA256SUMS`);
      return `${sum}  ${name}\n`;
    })
    .join("");
}

/** Reads a SHA256SUMS file back (`sha256sum -c` format; `*name` binary-mode lines too). */
export function parseSha256Sums(text: string): Map<string, string> {
  const sums = new Map<string, string>();
  for (const line of text.split("\n")) {
    if (line === "") continue;
    const m = /^([0-9a-f]{64}) [ *](.+)$/.exec(line);
    if (!m) throw new Error(`not a sha256sum line: ${JSON.stringify(line)}`);
    sums.set(m[2]!, m[1]!);
  }
  return sums;
}
