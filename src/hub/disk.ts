// Free disk before the first byte of a pull: what the files still need
// against what the cache's file system has free, refused with both numbers.
import { mkdirSync, statfsSync, statSync } from "node:fs";
import { HubError } from "./errors.ts";
import { formatBytes } from "../runtime/byte-size.ts";

/** Bytes an unprivileged process may still write on the file system holding `dir`. */
export function freeBytes(dir: string): number {
  const fs = statfsSync(dir, { bigint: true });
  return Number(fs.bavail * fs.bsize);
}

/** Bytes a partial file already holds on disk (its allocated blocks: a part-wise download leaves holes). */
export function bytesOnDisk(path: string): number {
  try {
    const st = statSync(path);
    return Math.min(st.size, st.blocks * 512);
  } catch {
    return 0;
  }
}

/** Refuses a pull that needs more than the disk has free, naming both numbers and the way out. */
export function checkDiskSpace(
  dir: string,
  needed: number,
  what: string,
  free: (dir: string) => number = freeBytes,
): void {
  if (needed <= 0) return;
  mkdirSync(dir, { recursive: true });
  const available = free(dir);
  if (needed > available) {
    throw new HubError(
      "disk_space",
      `not enough disk space to pull ${what}: it needs ${formatBytes(needed)} more and ${formatBytes(available)} ` +
        `are free in ${dir}; free some space, or set HF_HUB_CACHE to a folder on a larger disk`,
    );
  }
}
