// The durable session store (docs/design.md#durable-sessions): one append-only log per sessions
// directory, <dir>/wal.log (format and durability: wal.ts), owned by one server at a
// time through <dir>/serve.lock (lock.ts).
//
// Opening:
//   1. mkdir -p <dir> (folders created 0700, files 0600: private-files.ts), take
//      serve.lock (SessionsLockedError if another server holds it).
//   2. cache mode (--sessions-cache): a non-empty wal.log becomes wal.log.prev (replacing
//      an older one) and a fresh log starts; wal.log.store-id gets a new id, since session
//      ids start over in the fresh log.
//   3. wal.log.store-id: a random hex id, written once if absent.
//   4. Replay: every complete record is verified (WalCorruptError on a bad one, the file
//      left as it is); a torn last record is cut off (recovered.truncatedBytes).
//   5. Epoch: a fresh or empty log starts at epoch 1 with no record written. A log with
//      records continues at (highest epoch in it) + 1, and an EpochBump record (session 0)
//      is appended and synced before open() resolves: whatever generation was in flight
//      before the restart belongs to an older epoch and is fenced off (docs/design.md#recovery-and-epochs).
//      Every open of a non-empty log bumps, crash or clean stop alike.
//
// Ids: sessions count from 1, continuing after the highest id in the log (never reused
// within a log); session 0 carries store-wide records (EpochBump). Event ids count from
// 0 (Created) within a session.
//
// Memory: only a counter (next event id) per live session, dropped by release(); events
// themselves are never kept, read() goes back to the file.
//
// A failed write (disk full, I/O error) drops the failed batch and everything buffered
// behind it (wal.ts) and ends every live session: a session whose records were lost
// must not go on with a gap in its event ids, so its generation is stopped too (the
// worker client fails every generation in flight). The ids of sessions lost that way
// are not reused. `failure` reports the error until a later write succeeds: the store
// itself stays usable, and new sessions retry the log.
import { randomBytes } from "node:crypto";
import { closeSync, existsSync, fsyncSync, openSync, renameSync, statSync, truncateSync } from "node:fs";
import { join } from "node:path";
import type { EventBody, SessionEvent } from "./events.ts";
import { acquireDirLock, setCloseOnExec, type DirLock } from "./lock.ts";
import { makePrivateDir, openPrivate, replacePrivateFile, tightenFile } from "../runtime/private-files.ts";
import { encodeRecord, scanLog, WAL_FILE, WalWriter, type SyncMode, type WalFileOps, type WalPacing } from "./wal.ts";
import { fsyncDir } from "../runtime/private-files.ts";

export { WalCorruptError } from "./wal.ts";
export { SessionsLockedError, acquireDirLock, type DirLock } from "./lock.ts";
export { FINISH, type EventBody, type SessionEvent } from "./events.ts";

export interface StoreOptions {
  /** --sessions-cache: keep the previous log as wal.log.prev and start a fresh one. */
  cache?: boolean;
  /**
   * macOS: sync with fcntl(F_FULLFSYNC) (default: env SUPERFLUID_FULLFSYNC set and not "" or "0"). No effect elsewhere.
   */
  fullFsync?: boolean;
  /** false: never sync (benchmark floor only; records are not durable). Default true. */
  fsync?: boolean;
  /** Test seam: the log writer's file calls (a failing write stands in for a full disk). */
  fileOps?: Partial<WalFileOps>;
  /** The group-commit window and the clock it is measured on (wal.ts; tests and benchmarks). */
  pacing?: WalPacing;
}

export interface RecoveredStats {
  /** Complete records replayed from the log. */
  records: number;
  /** Sessions in the log (Created records). */
  sessions: number;
  /** Bytes of a torn last record cut off the end of the log. */
  truncatedBytes: number;
}

function envFullFsync(): boolean {
  const v = process.env.SUPERFLUID_FULLFSYNC;
  return v !== undefined && v !== "" && v !== "0";
}

export class SessionStore {
  readonly dir: string;
  readonly path: string;
  readonly epoch: number;
  readonly recovered: RecoveredStats;
  /** Contents of wal.log.store-id. */
  readonly storeId: string;
  /** Next event id per live session. */
  private live = new Map<number, number>();
  private nextSession: number;
  private nextGlobal: number;
  private closing: Promise<void> | null = null;
  /** Listeners told when a failed write ended every live session (onSessionsEnded). */
  private readonly failureListeners = new Set<() => void>();
  /** Listeners told of each record once it is durable (onDurable). */
  private readonly durableListeners = new Set<(event: SessionEvent) => void>();
  /** Records appended while someone listens and not yet durable, oldest first; `undeliveredBase` numbers the first. */
  private undelivered: SessionEvent[] = [];
  private undeliveredBase = 0;

  private constructor(
    dir: string,
    private writer: WalWriter,
    private lock: DirLock,
    init: { epoch: number; recovered: RecoveredStats; storeId: string; nextSession: number; nextGlobal: number },
  ) {
    this.dir = dir;
    this.path = writer.path;
    this.epoch = init.epoch;
    this.recovered = init.recovered;
    this.storeId = init.storeId;
    this.nextSession = init.nextSession;
    this.nextGlobal = init.nextGlobal;
    writer.onFailure = () => {
      this.live.clear();
      for (const listener of this.failureListeners) listener();
    };
  }

  static async open(dir: string, opts: StoreOptions = {}): Promise<SessionStore> {
    makePrivateDir(dir);
    const lock = acquireDirLock(dir);
    let fd: number | undefined;
    let writer: WalWriter | undefined;
    try {
      const path = join(dir, WAL_FILE);
      const idPath = `${path}.store-id`;
      let rotated = false;
      if (opts.cache && existsSync(path) && statSync(path).size > 0) {
        renameSync(path, `${path}.prev`);
        rotated = true;
      }
      // Files the log keeps beside it, as an older version may have left them (wal.log itself is tightened when opened
      // below).
      tightenFile(`${path}.prev`);
      tightenFile(idPath);

      let storeId = "";
      if (!rotated && existsSync(idPath)) storeId = (await Bun.file(idPath).text()).trim();
      if (!storeId) {
        storeId = randomBytes(16).toString("hex");
        replacePrivateFile(idPath, `${storeId}\n`);
      }

      const recovered: RecoveredStats = { records: 0, sessions: 0, truncatedBytes: 0 };
      let maxEpoch = 0;
      let maxSession = 0;
      let nextGlobal = 0;
      const existed = existsSync(path);
      if (existed) {
        const scan = scanLog(path, (ev) => {
          if (ev.epoch > maxEpoch) maxEpoch = ev.epoch;
          if (ev.session > maxSession) maxSession = ev.session;
          if (ev.session === 0) nextGlobal = Math.max(nextGlobal, ev.event_id + 1);
          else if ("Created" in ev.body || "Forked" in ev.body || "Rebased" in ev.body) recovered.sessions++;
        });
        recovered.records = scan.records;
        if (scan.fileBytes > scan.validBytes) {
          // A torn last record: never acknowledged (its flush never resolved), cut it off.
          truncateSync(path, scan.validBytes);
          const tfd = openSync(path, "r+");
          try {
            fsyncSync(tfd);
          } finally {
            closeSync(tfd);
          }
          recovered.truncatedBytes = scan.fileBytes - scan.validBytes;
        }
      }

      fd = openPrivate(path, "a");
      setCloseOnExec(fd);
      if (!existed || rotated) fsyncDir(dir);
      const mode: SyncMode = opts.fsync === false ? "none" : (opts.fullFsync ?? envFullFsync()) ? "full" : "data";
      writer = new WalWriter(path, fd, mode, opts.fileOps, opts.pacing);
      fd = undefined; // the writer owns it now

      const epoch = recovered.records > 0 ? maxEpoch + 1 : 1;
      const store = new SessionStore(dir, writer, lock, {
        epoch,
        recovered,
        storeId,
        nextSession: maxSession + 1,
        nextGlobal,
      });
      if (recovered.records > 0) {
        store.appendGlobal({ EpochBump: {} });
        await writer.flush();
      }
      return store;
    } catch (e) {
      if (writer) await writer.close().catch(() => {});
      if (fd !== undefined) closeSync(fd);
      lock.release();
      throw e;
    }
  }

  /** Counters: records appended, syncs done, bytes written, by this store since open. */
  get stats(): { appended: number; syncs: number; bytes: number } {
    return this.writer.stats;
  }

  /** The newest session's id (0 when the log has none). */
  get lastSession(): number {
    return this.nextSession - 1;
  }

  /** Live sessions (created or resumed and not released). */
  get liveSessions(): number {
    return this.live.size;
  }

  /** The session takes appends: created or resumed, not released, not ended by a failed write. */
  isLive(session: number): boolean {
    return this.live.has(session);
  }

  /** Why the log could not be written, while it cannot: null once a later write succeeds. */
  get failure(): Error | null {
    return this.writer.failure;
  }

  private record(session: number, eventId: number, body: EventBody): SessionEvent {
    const event: SessionEvent = { session, event_id: eventId, epoch: this.epoch, ts_unix_ms: Date.now(), body };
    this.writer.push(encodeRecord(event));
    if (this.durableListeners.size > 0) this.undelivered.push(event);
    return event;
  }

  /**
   * Appends a store-wide record (session 0: epoch bumps, session metadata, purges); returns it. Durable once a later
   * flush() resolves.
   */
  appendGlobal(body: EventBody): SessionEvent {
    return this.record(0, this.nextGlobal++, body);
  }

  /**
   * Hears every record once it is durable (its flush resolved), in log order:
   * what a subscriber may be shown. Records lost to a failed write are never
   * heard. Returns the way to stop listening.
   */
  onDurable(listener: (event: SessionEvent) => void): () => void {
    this.durableListeners.add(listener);
    return () => this.durableListeners.delete(listener);
  }

  /**
   * Hears each failed write, which drops the records buffered with it and
   * ends every live session: what a reader kept of those records is lost.
   * Returns the way to stop listening.
   */
  onSessionsEnded(listener: () => void): () => void {
    this.failureListeners.add(listener);
    return () => this.failureListeners.delete(listener);
  }

  /** Starts a new session: appends its Created record (event 0) and returns its id. */
  create(params: Record<string, unknown>, parent: number | null = null): number {
    return this.createWith({ Created: { parent, params } }, 0).session;
  }

  /**
   * Starts a new session whose first own record is `body` with id `firstEventId`
   * (0 for a new conversation; a fork's first own id follows the events it
   * shares with its parent). Returns the record.
   */
  createWith(body: EventBody, firstEventId: number): SessionEvent {
    const session = this.nextSession;
    const event = this.record(session, firstEventId, body);
    this.nextSession++;
    this.live.set(session, firstEventId + 1);
    return event;
  }

  /**
   * Appends one event to a live session; returns its event id. Buffered in memory:
   * durable once a later flush() resolves. Throws for a session that is not live
   * (never created, released, or from before a restart and not resumed).
   */
  append(session: number, body: EventBody): number {
    return this.appendEvent(session, body).event_id;
  }

  /** append(), returning the whole record. */
  appendEvent(session: number, body: EventBody): SessionEvent {
    const id = this.live.get(session);
    if (id === undefined) throw new Error(`session ${session} is not open in the session store`);
    const event = this.record(session, id, body);
    this.live.set(session, id + 1);
    return event;
  }

  /** The session is finished: forget its counter (the log keeps its events). */
  release(session: number): void {
    this.live.delete(session);
  }

  /**
   * Makes a session from the log live again (e.g. after a restart), returning the event
   * id its next append gets. Slow: flushes, then reads the log, unless the caller, who
   * has read the session, says what its next id is. Throws if the log has no such session.
   */
  async resume(session: number, nextEventId?: number): Promise<number> {
    const known = this.live.get(session);
    if (known !== undefined) return known;
    if (nextEventId !== undefined) {
      // The caller read the session already (the session API's view of it).
      this.live.set(session, nextEventId);
      return nextEventId;
    }
    await this.flush();
    const events = this.read(session);
    if (events.length === 0) throw new Error(`session ${session} is not in the session log`);
    const next = events[events.length - 1]!.event_id + 1;
    this.live.set(session, next);
    return next;
  }

  /**
   * Resolves once every event appended before the call is written and synced. Concurrent
   * callers share one write and sync; appends made while a sync is in flight go with the
   * next one. Rejects if writing fails; the sessions live then are ended (see the header),
   * and later sessions try the log again.
   */
  flush(): Promise<void> {
    if (this.durableListeners.size === 0 && this.undelivered.length === 0) return this.writer.flush();
    const mark = this.undeliveredBase + this.undelivered.length;
    return this.writer.flush().then(
      () => {
        while (this.undeliveredBase < mark && this.undelivered.length > 0) {
          const event = this.undelivered.shift()!;
          this.undeliveredBase++;
          for (const listener of this.durableListeners) {
            try {
              listener(event);
            } catch (err) {
              console.error(`superfluid: a session log listener failed: ${(err as Error).message}`);
            }
          }
        }
      },
      (err: unknown) => {
        // The failed write dropped everything buffered (wal.ts): none of it will be durable.
        this.undeliveredBase += this.undelivered.length;
        this.undelivered = [];
        throw err;
      },
    );
  }

  /**
   * A session's events, read back from the log file: what has been written by a flush
   * (not what is still buffered). Scans the whole file.
   */
  read(session: number): SessionEvent[] {
    const out: SessionEvent[] = [];
    scanLog(this.path, (ev) => out.push(ev), `{"session":${session},`);
    return out;
  }

  /**
   * Flushes, closes the log, releases serve.lock. Idempotent; rejects if the final flush fails (everything is closed
   * anyway).
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      try {
        await this.writer.close();
      } finally {
        this.live.clear();
        this.lock.release();
      }
    })();
    return this.closing;
  }
}
