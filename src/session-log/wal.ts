// The session log file: record format, replay scan and the group-committing writer.
//
// Format (<sessions>/wal.log): plain text, one record per line,
//   <crc32 of the JSON's UTF-8 bytes, 8 lowercase hex digits> <space> <SessionEvent JSON> "\n"
// A record is complete when its line ends with "\n". Scanning at open: an incomplete
// last line is a torn write and is cut off; a complete line whose checksum or JSON
// fails is corruption, and the server refuses to start (docs/design.md#recovery-and-epochs).
//
// Durability: records are buffered in memory by push() and made durable by flush():
// one write() of everything buffered (into the page cache, synchronously: a few KB take
// microseconds, and a thread-pool hop would cost more than the write), then one sync on
// Bun's thread pool, so the event loop keeps running while the disk works. Callers that
// flush while a sync is in flight share the next one (group commit), and syncs are paced:
// one starts at most once per window (GROUP_WINDOW_MS, 2 ms), so records flushed less
// than a window after the last sync began wait for the window's end and share one sync
// (docs/design.md#group-commit). A flush waits at most one window longer than it would
// unpaced, and never when ticks come a window or more apart. Sync per platform:
//   - Linux and others: fdatasync (covers the data and the file size).
//   - macOS: fsync, which reaches the drive but not through its write cache. With
//     SUPERFLUID_FULLFSYNC set (or StoreOptions.fullFsync) it is fcntl(fd, F_FULLFSYNC)
//     through bun:ffi on libSystem, run on a worker thread (an FFI call is synchronous),
//     falling back to fsync where the file system refuses F_FULLFSYNC. Elsewhere
//     fullFsync changes nothing.
// A failed write or sync (a full disk, an I/O error) fails its batch and every record
// buffered behind it, and the file is cut back to the end of the last committed batch,
// so a partly written record never stays in the log to be buried under later ones
// (replay would refuse it as corruption). The writer is not left failed: the next batch
// tries again, first repeating the cut if it failed too. `failure` holds the last
// batch's error until a batch commits.
import { closeSync, fdatasync, fstatSync, fsync, ftruncateSync, openSync, readSync, writeSync } from "node:fs";
import type { SessionEvent } from "./events.ts";

export const WAL_FILE = "wal.log";
const NL = 0x0a;
const SPACE = 0x20;

export class WalCorruptError extends Error {
  constructor(
    readonly path: string,
    readonly offset: number,
    readonly reason: string,
  ) {
    super(
      `session log ${path} is corrupt: the complete record at byte offset ${offset} ${reason}. ` +
        `Refusing to start rather than guess. Move ${path} aside (a fresh log is started), ` +
        `or start with --sessions-cache (the log is kept as wal.log.prev and a fresh one started).`,
    );
    this.name = "WalCorruptError";
  }
}

/** One log line for ev, newline included. Key order is fixed (session first: read() filters on it). */
export function encodeRecord(ev: SessionEvent): string {
  const json = JSON.stringify({
    session: ev.session,
    event_id: ev.event_id,
    epoch: ev.epoch,
    ts_unix_ms: ev.ts_unix_ms,
    body: ev.body,
  });
  return `${(Bun.hash.crc32(json) >>> 0).toString(16).padStart(8, "0")} ${json}\n`;
}

export interface ScanResult {
  /** Complete, verified records. */
  records: number;
  /** Bytes up to the end of the last complete record. */
  validBytes: number;
  /** Bytes read in all (validBytes + a torn tail). */
  fileBytes: number;
}

function hexDigit(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  return -1;
}

function isCount(v: unknown): v is number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
}

/**
 * Reads the log at path from the start, verifying every complete record, and calls
 * visit for each (or for those whose JSON starts with `prefix`, when given: a cheap
 * filter applied after the checksum). A torn last line is not an error: it is left out
 * and reported by validBytes < fileBytes. Throws WalCorruptError for a bad complete record.
 */
export function scanLog(
  path: string,
  visit: ((ev: SessionEvent, offset: number) => void) | null,
  prefix?: string,
): ScanResult {
  const fd = openSync(path, "r");
  const want = prefix === undefined ? null : Buffer.from(prefix);
  let buf = Buffer.allocUnsafe(1 << 20);
  let fill = 0; // bytes of buf holding file data
  let base = 0; // file offset of buf[0]
  let records = 0;
  try {
    for (;;) {
      if (fill === buf.length) {
        const bigger = Buffer.allocUnsafe(buf.length * 2); // a line longer than the buffer
        buf.copy(bigger, 0, 0, fill);
        buf = bigger;
      }
      const n = readSync(fd, buf, fill, buf.length - fill, base + fill);
      if (n === 0) break;
      fill += n;
      const view = buf.subarray(0, fill);
      let pos = 0;
      for (;;) {
        const nl = view.indexOf(NL, pos);
        if (nl < 0) break;
        const at = base + pos;
        if (nl - pos < 11 || view[pos + 8] !== SPACE) throw new WalCorruptError(path, at, "is not `<crc32> <json>`");
        let crc = 0;
        for (let i = 0; i < 8; i++) {
          const d = hexDigit(view[pos + i]!);
          if (d < 0) throw new WalCorruptError(path, at, "does not start with a hexadecimal checksum");
          crc = crc * 16 + d;
        }
        const json = view.subarray(pos + 9, nl);
        if (Bun.hash.crc32(json) >>> 0 !== crc) throw new WalCorruptError(path, at, "fails its checksum");
        records++;
        if (visit && (want === null || (json.length >= want.length && json.subarray(0, want.length).equals(want)))) {
          let ev: SessionEvent;
          try {
            ev = JSON.parse(json.toString("utf8"));
          } catch {
            throw new WalCorruptError(path, at, "has a valid checksum but is not valid JSON");
          }
          if (
            typeof ev !== "object" ||
            ev === null ||
            !isCount(ev.session) ||
            !isCount(ev.event_id) ||
            !isCount(ev.epoch) ||
            typeof ev.body !== "object" ||
            ev.body === null
          )
            throw new WalCorruptError(path, at, "has a valid checksum but is not a session event");
          visit(ev, at);
        }
        pos = nl + 1;
      }
      if (pos > 0) {
        buf.copy(buf, 0, pos, fill);
        base += pos;
        fill -= pos;
      }
    }
    return { records, validBytes: base, fileBytes: base + fill };
  } finally {
    closeSync(fd);
  }
}

export type SyncMode = "data" | "full" | "none";

interface Deferred {
  promise: Promise<void>;
  resolve(): void;
  reject(e: unknown): void;
}

function deferred(): Deferred {
  let resolve!: () => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Writes all of data at the end of the file (opened O_APPEND). A few KB into the page cache: microseconds. */
function writeAll(fd: number, data: Buffer): void {
  let off = 0;
  while (off < data.length) {
    const n = writeSync(fd, data, off, data.length - off);
    if (n <= 0) throw new Error("write returned 0 bytes");
    off += n;
  }
}

function syncFd(fd: number, fn: typeof fsync): Promise<void> {
  return new Promise((resolve, reject) => fn(fd, (err) => (err ? reject(err) : resolve())));
}

/**
 * A worker thread that runs one blocking sync call per request through bun:ffi, so a
 * sync the fs module does not offer (F_FULLFSYNC) does not block the event loop.
 * op "full": fcntl(fd, F_FULLFSYNC = 51), falling back to fsync if refused (macOS only);
 * op "fsync": plain fsync(fd) (any POSIX system; used by the tests on Linux).
 */
export class FfiSyncer {
  private worker: Worker;
  private nextId = 0;
  private waiting = new Map<number, Deferred>();
  private url: string;

  constructor(readonly op: "full" | "fsync") {
    const lib =
      process.platform === "darwin"
        ? "/usr/lib/libSystem.B.dylib"
        : process.platform === "linux"
          ? "libc.so.6"
          : "libc.so";
    const errnoName = process.platform === "linux" ? "__errno_location" : "__error";
    const src = `
      import { dlopen, read } from "bun:ffi";
      const lib = dlopen(${JSON.stringify(lib)}, {
        fcntl: { args: ["i32", "i32", "i32"], returns: "i32" },
        fsync: { args: ["i32"], returns: "i32" },
        ${errnoName}: { args: [], returns: "ptr" },
      }).symbols;
      const errno = () => read.i32(lib.${errnoName}(), 0);
      self.onmessage = (e) => {
        const { id, fd, op } = e.data;
        let r = -1, err = 0;
        if (op === "full") {
          r = lib.fcntl(fd, 51, 0);
          if (r !== 0) r = lib.fsync(fd);
        } else r = lib.fsync(fd);
        if (r !== 0) err = errno();
        postMessage({ id, r, err });
      };`;
    this.url = URL.createObjectURL(new Blob([src], { type: "application/typescript" }));
    this.worker = new Worker(this.url);
    this.worker.onmessage = (e: MessageEvent<{ id: number; r: number; err: number }>) => {
      const d = this.waiting.get(e.data.id);
      if (!d) return;
      this.waiting.delete(e.data.id);
      if (this.waiting.size === 0) this.worker.unref();
      if (e.data.r === 0) d.resolve();
      else
        d.reject(
          Object.assign(
            new Error(`${this.op === "full" ? "fcntl(F_FULLFSYNC)" : "fsync"} failed (errno ${e.data.err})`),
            { errno: e.data.err },
          ),
        );
    };
    this.worker.onerror = (e) => {
      const err = new Error(`sync worker failed: ${e.message}`);
      for (const d of this.waiting.values()) d.reject(err);
      this.waiting.clear();
    };
    this.worker.unref();
  }

  sync(fd: number): Promise<void> {
    const d = deferred();
    const id = this.nextId++;
    this.waiting.set(id, d);
    this.worker.ref(); // an answer is due: keep the process alive for it
    this.worker.postMessage({ id, fd, op: this.op });
    return d.promise;
  }

  close(): void {
    this.worker.terminate();
    URL.revokeObjectURL(this.url);
    const err = new Error("sync worker closed");
    for (const d of this.waiting.values()) d.reject(err);
    this.waiting.clear();
  }
}

/** Picks the sync call for a mode on this platform (see the header). */
function makeSync(mode: SyncMode): { sync: (fd: number) => Promise<void>; close(): void } {
  if (mode === "none") return { sync: () => Promise.resolve(), close() {} };
  if (mode === "full" && process.platform === "darwin") {
    const s = new FfiSyncer("full");
    return { sync: (fd) => s.sync(fd), close: () => s.close() };
  }
  const fn = process.platform === "linux" ? fdatasync : fsync;
  return { sync: (fd) => syncFd(fd, fn), close() {} };
}

/**
 * The longest a flush waits for the next sync to start, beyond a sync in flight:
 * syncs begin at most once per window. 2 ms is under a tenth of a token's
 * time to a reader and under one decode step of any model we serve at one lane.
 */
export const GROUP_WINDOW_MS = 2;

/** The writer's clock; tests replace it to step time by hand. */
export interface WalClock {
  now(): number;
  /** Runs fn after ms milliseconds. */
  after(ms: number, fn: () => void): void;
}

const REAL_CLOCK: WalClock = {
  now: () => performance.now(),
  after: (ms, fn) => void setTimeout(fn, ms),
};

/** The file calls a writer makes; tests replace them to fail the way a full or broken disk does. */
export interface WalFileOps {
  /** Writes all of data at the end of the file (opened O_APPEND); may write part of it, then throw. */
  write(fd: number, data: Buffer): void;
  /** Makes what is written durable. */
  sync(fd: number): Promise<void>;
  /** Cuts the file to len bytes. */
  truncate(fd: number, len: number): void;
}

export interface WalPacing {
  /** Syncs start at most once per this many ms (default GROUP_WINDOW_MS; 0: at once, as soon as none is in flight). */
  windowMs?: number;
  clock?: WalClock;
}

/** Appends records to an open log file with group commit. Owns fd (closes it on close()). */
export class WalWriter {
  readonly stats = { appended: 0, syncs: 0, bytes: 0, failedBatches: 0 };
  /**
   * Called, before any waiter hears of it, when a batch fails (its records and those buffered behind it are dropped).
   */
  onFailure: ((err: Error) => void) | null = null;
  private buffered: string[] = [];
  /** Waiters for the batch that will carry `buffered`. */
  private next: Deferred | null = null;
  /** The batch being written and synced. */
  private current: Promise<void> | null = null;
  private kickQueued = false;
  private lastFailure: Error | null = null;
  private closed = false;
  private syncer: { close(): void };
  private ops: WalFileOps;
  /** Bytes of the file holding committed records: where the next batch starts. */
  private committed: number;
  private readonly windowMs: number;
  private readonly clock: WalClock;
  /** When the last batch began (clock ms); the next waits until a window after it. */
  private lastKick = Number.NEGATIVE_INFINITY;
  /** The file may hold bytes past `committed` (a batch that failed, not yet cut off). */
  private tornTail = false;

  constructor(
    readonly path: string,
    readonly fd: number,
    readonly mode: SyncMode,
    ops: Partial<WalFileOps> = {},
    pacing: WalPacing = {},
  ) {
    this.committed = fstatSync(fd).size;
    this.windowMs = pacing.windowMs ?? GROUP_WINDOW_MS;
    this.clock = pacing.clock ?? REAL_CLOCK;
    const syncer = makeSync(ops.sync ? "none" : mode);
    this.syncer = syncer;
    this.ops = { write: ops.write ?? writeAll, sync: ops.sync ?? syncer.sync, truncate: ops.truncate ?? ftruncateSync };
  }

  /** Bytes of the file holding committed records. */
  get size(): number {
    return this.committed;
  }

  /** Why the last batch failed; null once a batch has committed since (or none ever failed). */
  get failure(): Error | null {
    return this.lastFailure;
  }

  /** Buffers one encoded record (see encodeRecord). */
  push(line: string): void {
    if (this.closed) throw new Error(`session log ${this.path} is closed`);
    this.buffered.push(line);
    this.stats.appended++;
  }

  /** Resolves when everything pushed before the call is written and synced; rejects if its batch fails. */
  flush(): Promise<void> {
    if (this.buffered.length > 0) {
      this.next ??= deferred();
      const p = this.next.promise;
      if (!this.current && !this.kickQueued) this.queueKick();
      return p;
    }
    return this.current ?? Promise.resolve();
  }

  /** Cuts a failed batch's bytes off the end of the file. Throws if the file system refuses. */
  private cutTornTail(): void {
    if (!this.tornTail) return;
    try {
      this.ops.truncate(this.fd, this.committed);
    } catch (e) {
      const err = asError(e);
      throw Object.assign(new Error(`cannot cut a failed write off the log: ${err.message}`), { cause: err });
    }
    this.tornTail = false;
  }

  /**
   * Starts the next batch on a microtask (callers flushing in the same turn share
   * its sync), or at the end of the window the last batch began, whichever is later.
   */
  private queueKick(): void {
    this.kickQueued = true;
    const wait = this.lastKick + this.windowMs - this.clock.now();
    if (wait > 0 && !this.closed) this.clock.after(wait, () => this.kick());
    else queueMicrotask(() => this.kick());
  }

  private kick(): void {
    this.kickQueued = false;
    if (this.current || this.buffered.length === 0 || !this.next) return;
    this.lastKick = this.clock.now();
    const waiters = this.next;
    this.next = null;
    const data = Buffer.from(this.buffered.join(""));
    this.buffered = [];
    const batch = (async () => {
      this.cutTornTail();
      this.tornTail = true; // until the sync returns, what follows `committed` is not known to be whole
      this.ops.write(this.fd, data);
      await this.ops.sync(this.fd);
    })();
    this.current = waiters.promise;
    batch.then(
      () => {
        this.committed += data.length;
        this.tornTail = false;
        this.lastFailure = null;
        this.stats.bytes += data.length;
        this.stats.syncs++;
        this.current = null;
        waiters.resolve();
        if (this.next && this.buffered.length > 0 && !this.kickQueued) this.queueKick();
      },
      (e: unknown) => {
        // Records buffered behind the batch may continue sessions whose records it
        // carried: they are dropped with it, so the log never holds a gap.
        const err = asError(e);
        this.lastFailure = err;
        this.stats.failedBatches++;
        try {
          this.cutTornTail();
        } catch {
          // the next batch tries the cut again before writing
        }
        this.current = null;
        this.buffered = [];
        this.onFailure?.(err);
        waiters.reject(err);
        if (this.next) {
          this.next.reject(err);
          this.next = null;
        }
      },
    );
  }

  /** Flushes what is buffered, then closes the file. Rejects (after closing) if that flush fails. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true; // push() refuses from here on: nothing can slip in behind the last flush
    let err: unknown = null;
    try {
      await this.flush();
    } catch (e) {
      err = e;
    }
    this.syncer.close();
    try {
      this.cutTornTail(); // a cut that failed before may work now: leave whole records behind
    } catch {}
    try {
      closeSync(this.fd);
    } catch {}
    if (err) throw err;
  }
}

function asError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}
