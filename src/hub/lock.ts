// One pull of a blob at a time across processes: a lock file created with
// O_EXCL beside the cache, holding who took it. Bun has no flock(), so a lock
// whose holder died must be recognised: on this host, its process is gone; on
// any host (a cache on a shared disk), it has not been touched for STALE_MS
// (the holder touches it every HEARTBEAT_MS). A waiter polls until the lock
// is gone, then looks again at what the holder left.
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { dirname } from "node:path";

const HEARTBEAT_MS = 5_000;
const STALE_MS = 60_000;

interface Holder {
  pid: number;
  host: string;
  nonce: string;
}

export interface HeldLock {
  release(): void;
}

function readHolder(path: string): Holder | undefined {
  try {
    const holder = JSON.parse(readFileSync(path, "utf8")) as Holder;
    return typeof holder.pid === "number" && typeof holder.nonce === "string" ? holder : undefined;
  } catch {
    return undefined;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process exists under another user.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Whether the lock at `path` belongs to nobody living. An unreadable lock counts as stale only once it is old. */
function isStale(path: string, holder: Holder | undefined, staleMs: number): boolean {
  let age: number;
  try {
    age = Date.now() - statSync(path).mtimeMs;
  } catch {
    return false;
  }
  if (holder && holder.host === hostname() && !alive(holder.pid)) return true;
  return age > staleMs;
}

/**
 * Takes a stale lock away: renamed aside first (only one taker's rename wins), then checked to be the lock judged
 * stale; a lock that turned out to be a new holder's is put back.
 */
function breakStale(path: string, judged: Holder | undefined): void {
  const aside = `${path}.stale-${process.pid}-${randomBytes(4).toString("hex")}`;
  try {
    renameSync(path, aside);
  } catch {
    return;
  }
  const moved = readHolder(aside);
  if (judged && moved && moved.nonce !== judged.nonce) {
    try {
      renameSync(aside, path);
      return;
    } catch {
      // Someone took the lock meanwhile: the moved one is dropped below.
    }
  }
  rmSync(aside, { force: true });
}

/** Takes the lock now, or answers undefined when a living holder has it (a stale one is broken first). */
export function tryLock(path: string, staleMs = STALE_MS): HeldLock | undefined {
  mkdirSync(dirname(path), { recursive: true });
  const me: Holder = { pid: process.pid, host: hostname(), nonce: randomBytes(8).toString("hex") };
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(path, JSON.stringify(me), { flag: "wx" });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const holder = readHolder(path);
      if (!isStale(path, holder, staleMs)) return undefined;
      breakStale(path, holder);
      continue;
    }
    const beat = setInterval(() => {
      try {
        const now = new Date();
        utimesSync(path, now, now);
      } catch {
        // Gone: released, or broken by a waiter that judged it stale.
      }
    }, HEARTBEAT_MS);
    beat.unref?.();
    return {
      release() {
        clearInterval(beat);
        // Only our own: a lock broken and retaken by another is theirs.
        if (readHolder(path)?.nonce === me.nonce) rmSync(path, { force: true });
      },
    };
  }
  return undefined;
}

/** Waits for the lock, calling `waiting` between polls (a waiter shows the holder's progress). */
export async function acquireLock(
  path: string,
  options: { pollMs?: number; staleMs?: number; waiting?: () => void; signal?: AbortSignal } = {},
): Promise<HeldLock> {
  for (;;) {
    const held = tryLock(path, options.staleMs);
    if (held) return held;
    options.signal?.throwIfAborted();
    options.waiting?.();
    await Bun.sleep(options.pollMs ?? 250);
  }
}
