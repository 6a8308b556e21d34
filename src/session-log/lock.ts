// One server per sessions directory
// (docs/design.md#the-sessions-lock): <dir>/serve.lock is held while running and holds the pid as text.
//
// POSIX: an advisory flock(LOCK_EX | LOCK_NB) on the open file, through bun:ffi. The
// kernel drops it when the process dies, however it dies, so a lock file left by a
// killed server is taken over silently. The descriptor is close-on-exec (Bun opens
// files with O_CLOEXEC; we set FD_CLOEXEC again to be sure) so a child process, such
// as the engine worker, never keeps the lock alive after its parent is killed. The
// file is never unlinked: unlinking a flock'd file lets two processes lock two
// different inodes under the same name.
//
// Windows (no flock): a pid file created exclusively, with a liveness check of the
// recorded pid (process.kill(pid, 0)) to take over a stale one.
import { dlopen, read as ffiRead } from "bun:ffi";
import { closeSync, constants, ftruncateSync, readFileSync, unlinkSync, writeSync } from "node:fs";
import { join } from "node:path";
import { openPrivate } from "../runtime/private-files.ts";
import { processAlive } from "../runtime/process-alive.ts";

export const LOCK_FILE = "serve.lock";

export class SessionsLockedError extends Error {
  constructor(
    readonly dir: string,
    readonly pid: number | null,
  ) {
    super(`sessions directory ${dir} is in use by another superfluid server (pid ${pid ?? "unknown"})`);
    this.name = "SessionsLockedError";
  }
}

export interface DirLock {
  /** <dir>/serve.lock */
  readonly path: string;
  /** Unlocks and closes; idempotent. The file stays (see the header). */
  release(): void;
}

const LOCK_EX = 2;
const LOCK_NB = 4;
const F_GETFD = 1;
const F_SETFD = 2;
const FD_CLOEXEC = 1;

interface Libc {
  flock(fd: number, op: number): number;
  fcntl(fd: number, cmd: number, arg: number): number;
  errno(): number;
  EWOULDBLOCK: number;
}

let libc: Libc | null | undefined;

/** libc through bun:ffi, or null where there is none (Windows). */
export function loadLibc(): Libc | null {
  if (libc !== undefined) return libc;
  if (process.platform === "win32") return (libc = null);
  const darwin = process.platform === "darwin";
  const names = darwin
    ? ["/usr/lib/libSystem.B.dylib"]
    : process.platform === "linux"
      ? ["libc.so.6", "libc.so", "libc.musl-x86_64.so.1", "libc.musl-aarch64.so.1"]
      : ["libc.so.7", "libc.so"];
  const errnoName = process.platform === "linux" ? "__errno_location" : "__error";
  let lastError: unknown;
  for (const name of names) {
    try {
      const lib = dlopen(name, {
        flock: { args: ["i32", "i32"], returns: "i32" },
        fcntl: { args: ["i32", "i32", "i32"], returns: "i32" },
        [errnoName]: { args: [], returns: "ptr" },
      });
      const s = lib.symbols as unknown as Record<string, (...a: number[]) => unknown>;
      const errnoFn = s[errnoName]! as () => number | null;
      return (libc = {
        flock: (fd, op) => s.flock!(fd, op) as number,
        fcntl: (fd, cmd, arg) => s.fcntl!(fd, cmd, arg) as number,
        errno: () => {
          const p = errnoFn();
          return p ? ffiRead.i32(p as never, 0) : 0;
        },
        EWOULDBLOCK: darwin || process.platform.endsWith("bsd") ? 35 : 11,
      });
    } catch (e) {
      lastError = e;
    }
  }
  throw new Error(`cannot load the C library for file locking (${names.join(", ")}): ${String(lastError)}`);
}

/** Sets FD_CLOEXEC on fd (a no-op where Bun already opened it with O_CLOEXEC). */
export function setCloseOnExec(fd: number): void {
  const c = loadLibc();
  if (!c) return;
  const flags = c.fcntl(fd, F_GETFD, 0);
  if (flags < 0) throw new Error(`fcntl(F_GETFD) failed on fd ${fd} (errno ${c.errno()})`);
  if (flags & FD_CLOEXEC) return;
  if (c.fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0)
    throw new Error(`fcntl(F_SETFD, FD_CLOEXEC) failed on fd ${fd} (errno ${c.errno()})`);
}

function readPid(path: string): number | null {
  try {
    const n = Number.parseInt(readFileSync(path, "utf8").trim(), 10);
    return Number.isInteger(n) && n > 0 ? n : null;
  } catch {
    return null;
  }
}

/** Takes <dir>/serve.lock (dir must exist). Throws SessionsLockedError when another live process holds it. */
export function acquireDirLock(dir: string): DirLock {
  const path = join(dir, LOCK_FILE);
  const c = loadLibc();
  return c ? flockLock(dir, path, c) : pidFileLock(dir, path);
}

function flockLock(dir: string, path: string, c: Libc): DirLock {
  const fd = openPrivate(path, constants.O_RDWR | constants.O_CREAT);
  try {
    setCloseOnExec(fd);
    if (c.flock(fd, LOCK_EX | LOCK_NB) !== 0) {
      const errno = c.errno();
      if (errno !== c.EWOULDBLOCK) throw new Error(`cannot lock ${path}: flock failed (errno ${errno})`);
      // The holder writes its pid right after locking: give it a moment if the file is still empty.
      let pid = readPid(path);
      for (let i = 0; pid === null && i < 20; i++) {
        Bun.sleepSync(5);
        pid = readPid(path);
      }
      throw new SessionsLockedError(dir, pid);
    }
    ftruncateSync(fd, 0);
    writeSync(fd, `${process.pid}\n`, 0);
  } catch (e) {
    closeSync(fd);
    throw e;
  }
  return heldLock(path, () => {
    try {
      ftruncateSync(fd, 0); // no pid left behind for a reader to blame
    } catch {}
    closeSync(fd); // drops the flock
  });
}

/** A lock whose release runs `release` once, however often it is called. */
function heldLock(path: string, release: () => void): DirLock {
  let held = true;
  return {
    path,
    release() {
      if (!held) return;
      held = false;
      release();
    },
  };
}

/** Pid-file locks held by this process (a pid file naming our own pid may be a stale one from an earlier process). */
const heldPidFiles = new Set<string>();

function pidFileLock(dir: string, path: string): DirLock {
  if (heldPidFiles.has(path)) throw new SessionsLockedError(dir, process.pid);
  for (let attempt = 0; ; attempt++) {
    let fd: number;
    try {
      fd = openPrivate(path, "wx");
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST" || attempt >= 2) throw e;
      const pid = readPid(path);
      if (pid !== null && pid !== process.pid && processAlive(pid)) throw new SessionsLockedError(dir, pid);
      try {
        unlinkSync(path); // stale: its process is gone
      } catch {}
      continue;
    }
    writeSync(fd, `${process.pid}\n`);
    closeSync(fd);
    heldPidFiles.add(path);
    return heldLock(path, () => {
      heldPidFiles.delete(path);
      if (readPid(path) === process.pid) {
        try {
          unlinkSync(path);
        } catch {}
      }
    });
  }
}
