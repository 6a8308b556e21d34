// Free disk before the first byte of a pull: what the files still need
// against what the cache's file system has free, refused with both numbers.
import { mkdirSync, statfsSync, statSync } from "node:fs";
import { HubError } from "./errors.ts";

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

/** 1536 -> "1.5 KiB", as the rest of the server writes sizes. */
export function formatSize(n: number): string {
  const units = ["bytes", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  if (i === 0) return `${n} bytes`;
  return `${n.toFixed(n >= 100 ? 0 : n >= 10 ? 1 : 2)} ${units[i]}`;
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
      `not enough disk space to pull ${what}: it needs ${formatSize(needed)} more and ${formatSize(available)} ` +
        `are free in ${dir}; free some space, or set HF_HUB_CACHE to a folder on a larger disk`,
    );
  }
}
