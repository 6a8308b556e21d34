// One blob from the Hub into the cache: fetched in parallel ranged parts into
// blobs/{blob}.incomplete, resumed from what an earlier attempt or process
// left, retried with backoff when a connection is cut or stalls, its hash
// checked, and only then renamed to blobs/{blob}.
//
// Which byte ranges are on disk is kept beside the partial file
// (`.incomplete.parts`, JSON, replaced through a rename); a partial file with
// no such record (left by huggingface_hub or an older single-connection pull)
// is taken as a contiguous prefix, which is how huggingface_hub writes it.
// The record is saved at most every SAVE_MS, so a process killed mid-way
// loses under a second of progress, never bytes it claims to have.
import { createHash } from "node:crypto";
import {
  closeSync,
  existsSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { open as openFile } from "node:fs/promises";
import type { RepoCache } from "./cache.ts";
import { HubError } from "./errors.ts";

export interface BlobTarget {
  /** The file's path in the repo (for messages). */
  path: string;
  /** Its name under blobs/: the sha256 of an LFS file, else the git oid. */
  blob: string;
  size: number;
  /** How the bytes are checked: sha256 of the content (LFS), or git's sha1 of `blob {size}\0` + content. */
  check: "sha256" | "git-sha1";
}

/**
 * How bytes reach the partial file: at `position`, answering how many were written (a disk that fills writes what it
 * can, then throws ENOSPC). A seam for tests, which fill the disk on demand.
 */
export interface FileOps {
  write(fd: number, data: Uint8Array, position: number): number;
}

export interface DownloadTuning {
  /** Connections for one file (its ranged parts); 1 downloads in one stream. */
  connections: number;
  /** A part is never smaller than this, so a small file stays one request. */
  minPartBytes: number;
  /** Attempts a part gets without progress before the pull fails (progress resets the count). */
  attempts: number;
  /** First retry delay; doubled each attempt up to MAX_BACKOFF_MS. */
  retryBaseMs: number;
  /** A connection that sends nothing for this long is cut and retried. */
  idleTimeoutMs: number;
}

export const DEFAULT_TUNING: DownloadTuning = {
  connections: 8,
  minPartBytes: 32 * 1024 * 1024,
  attempts: 6,
  retryBaseMs: 1000,
  idleTimeoutMs: 60_000,
};

const MAX_BACKOFF_MS = 30_000;
const SAVE_MS = 500;
const HASH_CHUNK = 8 * 1024 * 1024;

/** Opens the file from `start` to `end` (exclusive; absent: to the end of the file). */
export type OpenRange = (range: { start: number; end?: number }, signal: AbortSignal) => Promise<Response>;

export interface DownloadEvents {
  /** Bytes of this file on disk so far (resumed ones included). */
  bytes?(done: number): void;
  /** The download is whole and its hash is being checked. */
  verifying?(): void;
}

/** A range still to fetch: [pos, end). */
interface Part {
  start: number;
  end: number;
  pos: number;
}

function sidecarPath(incomplete: string): string {
  return `${incomplete}.parts`;
}

/** What an earlier attempt left: its parts, or a contiguous prefix, or nothing. */
function resumeState(incomplete: string, size: number): Part[] {
  const sidecar = sidecarPath(incomplete);
  if (existsSync(sidecar)) {
    try {
      const saved = JSON.parse(readFileSync(sidecar, "utf8")) as { size: number; parts: [number, number, number][] };
      if (saved.size === size && Array.isArray(saved.parts) && existsSync(incomplete)) {
        const parts = saved.parts.map(([start, end, pos]) => ({ start, end, pos }));
        if (parts.every((p) => p.start <= p.pos && p.pos <= p.end && p.end <= size)) return parts;
      }
    } catch {
      // Unreadable: start over below.
    }
    rmSync(incomplete, { force: true });
    rmSync(sidecar, { force: true });
    return [{ start: 0, end: size, pos: 0 }];
  }
  let prefix = 0;
  try {
    prefix = Math.min(statSync(incomplete).size, size);
  } catch {
    // No partial file.
  }
  return [{ start: 0, end: size, pos: prefix }];
}

/** The ranges left, split until there are `connections` of them or none is worth splitting. */
export function planParts(parts: Part[], tuning: DownloadTuning): Part[] {
  const open = parts.filter((p) => p.pos < p.end).map((p) => ({ start: p.pos, end: p.end, pos: p.pos }));
  for (;;) {
    if (open.length >= tuning.connections) break;
    open.sort((a, b) => b.end - b.pos - (a.end - a.pos));
    const big = open[0];
    if (!big || big.end - big.pos < 2 * tuning.minPartBytes) break;
    const mid = big.pos + Math.floor((big.end - big.pos) / 2);
    open.splice(0, 1, { start: big.pos, end: mid, pos: big.pos }, { start: mid, end: big.end, pos: mid });
  }
  return open.sort((a, b) => a.start - b.start);
}

const defaultOps: FileOps = { write: (fd, data, position) => writeSync(fd, data, 0, data.length, position) };

/** The file's digest as the Hub publishes it. */
async function digestOf(path: string, size: number, check: BlobTarget["check"]): Promise<string> {
  const hash = createHash(check === "sha256" ? "sha256" : "sha1");
  if (check === "git-sha1") hash.update(`blob ${size}\0`);
  const fh = await openFile(path, "r");
  try {
    const buf = Buffer.allocUnsafe(HASH_CHUNK);
    for (;;) {
      const { bytesRead } = await fh.read(buf, 0, HASH_CHUNK, null);
      if (bytesRead === 0) break;
      hash.update(buf.subarray(0, bytesRead));
    }
  } finally {
    await fh.close();
  }
  return hash.digest("hex");
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}

class DiskWriteError extends Error {
  constructor(readonly cause: NodeJS.ErrnoException) {
    super(cause.message);
  }
}

/**
 * Downloads `target` into the cache's blobs/ (a no-op when the blob is there). Answers the bytes fetched over the
 * network (a resume fetches fewer than the size).
 */
export async function downloadBlob(
  cache: RepoCache,
  target: BlobTarget,
  openRange: OpenRange,
  tuning: DownloadTuning,
  events: DownloadEvents = {},
  fileOps: FileOps = defaultOps,
  signal?: AbortSignal,
): Promise<{ fetched: number }> {
  if (cache.hasBlob(target.blob)) return { fetched: 0 };
  const incomplete = cache.incompletePath(target.blob);
  const sidecar = sidecarPath(incomplete);
  const parts = planParts(resumeState(incomplete, target.size), tuning);
  // Bytes already on disk: everything outside the ranges left.
  const left = () => parts.reduce((n, p) => n + (p.end - p.pos), 0);
  const fd = openSync(incomplete, existsSync(incomplete) ? "r+" : "w+");
  let fetched = 0;
  let dirty = true;
  const save = () => {
    if (!dirty) return;
    dirty = false;
    // Only the ranges still open are listed: every byte outside them is on disk.
    const tmp = `${sidecar}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify({ size: target.size, parts: parts.map((p) => [p.start, p.end, p.pos]) }));
    renameSync(tmp, sidecar);
  };
  save();
  const saver = setInterval(save, SAVE_MS);
  const stop = new AbortController();
  const onOuterAbort = () => stop.abort(signal?.reason);
  signal?.addEventListener("abort", onOuterAbort, { once: true });
  events.bytes?.(target.size - left());

  const runPart = async (part: Part) => {
    let attempt = 0;
    while (part.pos < part.end) {
      stop.signal.throwIfAborted();
      const before = part.pos;
      const attemptAbort = new AbortController();
      const cancel = () => attemptAbort.abort(stop.signal.reason);
      stop.signal.addEventListener("abort", cancel, { once: true });
      let idle: ReturnType<typeof setTimeout> | undefined;
      const arm = () => {
        clearTimeout(idle);
        idle = setTimeout(
          () => attemptAbort.abort(new Error(`no data for ${tuning.idleTimeoutMs} ms`)),
          tuning.idleTimeoutMs,
        );
      };
      let failure: unknown;
      try {
        arm();
        // The last part asks for the rest of the file (`bytes=N-`, or no Range at all from 0), as one stream does.
        const res = await openRange(
          part.end === target.size ? { start: part.pos } : { start: part.pos, end: part.end },
          attemptAbort.signal,
        );
        if (res.status === 200 && part.pos !== 0) {
          await res.body?.cancel();
          throw new HubError("hub", `the server of ${target.path} ignored a Range request; it cannot be resumed`);
        }
        const from = /^bytes (\d+)-/.exec(res.headers.get("content-range") ?? "");
        if (res.status === 206 && (!from || Number(from[1]) !== part.pos)) {
          await res.body?.cancel();
          throw new HubError("hub", `the server of ${target.path} answered another range than asked`);
        }
        const reader = res.body!.getReader();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          arm();
          const take = Math.min(value.length, part.end - part.pos);
          // Every byte written counts at once, so a write that fails half-way keeps the half it wrote.
          for (let off = 0; off < take; ) {
            let n: number;
            try {
              n = fileOps.write(fd, value.subarray(off, take), part.pos);
            } catch (err) {
              throw new DiskWriteError(err as NodeJS.ErrnoException);
            }
            off += n;
            part.pos += n;
            fetched += n;
            dirty = true;
          }
          if (take > 0) events.bytes?.(target.size - left());
          if (part.pos >= part.end) {
            await reader.cancel().catch(() => undefined);
            break;
          }
        }
      } catch (err) {
        failure = err;
      } finally {
        clearTimeout(idle);
        stop.signal.removeEventListener("abort", cancel);
      }
      if (part.pos >= part.end) return;
      if (stop.signal.aborted) throw stop.signal.reason;
      if (failure instanceof DiskWriteError) throw failure;
      if (failure instanceof HubError && failure.kind !== "network") throw failure;
      // A cut connection, a stall, an answer that ended early: try again from where the bytes stop.
      attempt = part.pos > before ? 1 : attempt + 1;
      if (attempt >= tuning.attempts) {
        const why = failure ? ((failure as Error).message ?? String(failure)) : "the connection closed early";
        throw new HubError(
          "network",
          `the download of ${target.path} stopped at ${target.size - left()} of ${target.size} bytes after ` +
            `${attempt} attempts (${why}); ` +
            (left() < target.size ? "run the pull again to resume (the partial file is kept)" : "run the pull again"),
        );
      }
      await sleep(Math.min(tuning.retryBaseMs * 2 ** (attempt - 1), MAX_BACKOFF_MS), stop.signal);
    }
  };

  try {
    const runs = parts.map((p) =>
      runPart(p).catch((err) => {
        stop.abort(err);
        throw err;
      }),
    );
    const results = await Promise.allSettled(runs);
    const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed) throw failed.reason;
  } catch (err) {
    clearInterval(saver);
    closeSync(fd);
    signal?.removeEventListener("abort", onOuterAbort);
    if (target.size > 0 && left() === target.size) {
      // Not one byte came (a gated repo, a refused request): no partial to keep.
      rmSync(incomplete, { force: true });
      rmSync(sidecar, { force: true });
    } else {
      dirty = true;
      save();
    }
    if (err instanceof DiskWriteError) {
      const e = err.cause;
      throw new HubError(
        "disk_full",
        `cannot write ${target.path} into ${cache.dir} (${e.code ?? e.message}): ${target.size - left()} of ` +
          `${target.size} bytes are kept in ${incomplete}; free space and pull again to resume`,
      );
    }
    throw err;
  }
  clearInterval(saver);
  closeSync(fd);
  signal?.removeEventListener("abort", onOuterAbort);
  events.verifying?.();
  const got = await digestOf(incomplete, target.size, target.check);
  if (got !== target.blob) {
    // The bytes on disk are wrong somewhere: a resume would keep the fault, so they go.
    rmSync(incomplete, { force: true });
    rmSync(sidecar, { force: true });
    throw new HubError(
      "integrity",
      `${target.path} failed its ${target.check === "sha256" ? "sha256" : "git hash"} check: the Hub published ` +
        `${target.blob}, the download hashes to ${got}; it was deleted and nothing was added to the cache (pull again)`,
    );
  }
  renameSync(incomplete, cache.blobPath(target.blob));
  rmSync(sidecar, { force: true });
  return { fetched };
}
