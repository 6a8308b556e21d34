// The Files API's durable store (docs/api/files.md): uploads under <sessions>/files/.
//
// Layout:
//   <dir>/<id>.data   the bytes as uploaded
//   <dir>/<id>.json   its metadata; a file exists exactly when this exists
//   <dir>/tmp/        uploads still arriving (emptied at open: a torn upload is no file)
//
// One JSON per file rather than an append log: deleting or expiring a file is
// two unlinks with nothing to compact, recovery is one readdir, and a
// metadata file is written aside, fsynced and renamed into place, so it is
// whole or absent (no torn-record handling). Files are few (each an upload),
// so a readdir at open is cheap.
//
// A write is durable before it is visible: the content is fsynced in tmp/,
// renamed to <id>.data, the metadata written to <id>.json.tmp, fsynced,
// renamed to <id>.json and the folder fsynced; only then does create()
// resolve. A crash between those steps leaves a .data without its .json (or a
// .json.tmp), which open() removes. Deletion unlinks the .json first, so a
// crash midway leaves an orphan .data, removed the same way.
//
// Folders are 0700 and files 0600 (explicit modes; the umask can only take
// bits away), and files an older version left with the umask's modes are
// tightened at open: uploads may hold anything a client sent.
//
// Scoping (docs/api/security.md#scoping): each file records the scope of the
// request that uploaded it (`owner`, absent without one). Every read, list
// and delete names the caller's scope, and a file of another scope is
// answered exactly as an id that never existed.
import { randomBytes } from "node:crypto";
import { chmod, mkdir, open, readdir, readFile, rename, rm, stat, unlink, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { makePrivateDir, PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from "../runtime/private-files.ts";

export interface FileRecord {
  id: string;
  object: "file";
  bytes: number;
  /** Unix seconds. */
  created_at: number;
  filename: string;
  purpose: string;
  status: "processed";
  /** Unix seconds after which the file is gone (--files-expiry, or the upload's own expires_after), or null. */
  expires_at: number | null;
}

/** An upload would take the store past --files-max-bytes (413 files_quota_exceeded). */
export class FilesQuotaError extends Error {
  constructor(readonly maxBytes: number) {
    super(`the upload would take the file store past its limit of ${maxBytes} bytes`);
    this.name = "FilesQuotaError";
  }
}

/** list({after}) named an id this store has never held. */
export class FilesCursorError extends Error {
  constructor(readonly after: string) {
    super(`No such File object: ${after}`);
    this.name = "FilesCursorError";
  }
}

export interface FileStoreOptions {
  /** --files-max-bytes: all stored files together (uploads in progress counted); undefined = unbounded. */
  maxBytes?: number;
  /** --files-expiry: seconds a file lives after its upload; undefined = forever. */
  expirySec?: number;
  /** --files-sweep: seconds between expiry sweeps (default 300). */
  sweepSec?: number;
}

export type FileBody = ReadableStream<Uint8Array> | AsyncIterable<Uint8Array> | Uint8Array | string;

/** An upload written to tmp/ and synced, not yet a file: commit() or discard() it. */
export interface StagedUpload {
  readonly bytes: number;
}

interface Staged extends StagedUpload {
  path: string;
  bytes: number;
  settled: boolean;
}

/** What <id>.json holds: the record's own fields plus what orders and expires it. */
interface StoredMeta {
  id: string;
  bytes: number;
  created_at: number;
  /** Milliseconds, for expiry to the upload's instant. */
  created_ms: number;
  /** Upload order: list() pages by it (created_at ties within a second). */
  seq: number;
  filename: string;
  purpose: string;
  /** The upload's own expires_after, as Unix seconds, or null. */
  client_expires_at: number | null;
  /** The scope of the request that made it; absent when it had none (shared with every unscoped caller). */
  owner?: string;
}

interface Entry {
  meta: StoredMeta;
  record: FileRecord;
}

const ID = /^file-[0-9a-f]{24}$/;
const DEFAULT_SWEEP_SEC = 300;
/** Deleted ids remembered as list cursors, so a client paging while files go away keeps its place. */
const MAX_TOMBSTONES = 10_000;

/** Who may see a file: only a caller of the very scope that made it (undefined sees only owner-less files). */
const visibleTo = (meta: { owner?: string }, owner: string | undefined) => meta.owner === owner;

const newId = () => `file-${randomBytes(12).toString("hex")}`;

async function* chunksOf(body: FileBody): AsyncIterable<Uint8Array> {
  if (typeof body === "string") yield Buffer.from(body, "utf8");
  else if (body instanceof Uint8Array) yield body;
  else yield* body as AsyncIterable<Uint8Array>;
}

async function writeAll(fh: FileHandle, chunk: Uint8Array): Promise<void> {
  for (let at = 0; at < chunk.byteLength; ) {
    const { bytesWritten } = await fh.write(chunk, at, chunk.byteLength - at);
    at += bytesWritten;
  }
}

/** fsyncs a folder so an entry created or renamed in it survives a crash (best effort: not every platform can). */
async function syncDir(dir: string): Promise<void> {
  let fh: FileHandle | undefined;
  try {
    fh = await open(dir, "r");
    await fh.sync();
  } catch {
    // not supported here
  } finally {
    await fh?.close();
  }
}

const ignoreMissing = (err: NodeJS.ErrnoException) => {
  if (err.code !== "ENOENT") throw err;
};

export class FileStore {
  private readonly entries = new Map<string, Entry>();
  private readonly tombstones = new Map<string, { seq: number; owner?: string }>();
  private readonly tmpDir: string;
  private nextSeq = 1;
  /** Bytes of committed files, and of uploads still arriving or staged. */
  private used = 0;
  private reserved = 0;
  private sweeping = false;
  private timer: ReturnType<typeof setInterval> | undefined;

  private constructor(
    readonly dir: string,
    private readonly opts: FileStoreOptions,
  ) {
    this.tmpDir = join(dir, "tmp");
  }

  /** Opens (creating) the store in dir, recovers its files and starts the expiry sweep. */
  static async open(dir: string, opts: FileStoreOptions = {}): Promise<FileStore> {
    const store = new FileStore(dir, opts);
    await store.recover();
    await store.sweep();
    const every = (opts.sweepSec ?? DEFAULT_SWEEP_SEC) * 1000;
    store.timer = setInterval(() => void store.sweep().catch(() => {}), every);
    // The sweep is housekeeping: it never keeps the process alive.
    store.timer.unref?.();
    return store;
  }

  private async recover(): Promise<void> {
    makePrivateDir(this.dir);
    // Uploads that were arriving when the server stopped are no files.
    await rm(this.tmpDir, { recursive: true, force: true });
    await mkdir(this.tmpDir, { mode: PRIVATE_DIR_MODE });
    const names = new Set(await readdir(this.dir));
    const metas: StoredMeta[] = [];
    for (const name of names) {
      if (name.endsWith(".json.tmp")) {
        await unlink(join(this.dir, name)).catch(ignoreMissing);
        continue;
      }
      if (!name.endsWith(".json")) continue;
      const meta = await this.readMeta(name);
      if (meta === undefined) continue;
      const size = await stat(this.dataPath(meta.id)).then(
        (s) => s.size,
        () => -1,
      );
      if (size !== meta.bytes) {
        // Its content is missing or not what was recorded: not a file we can serve.
        await unlink(join(this.dir, name)).catch(ignoreMissing);
        await unlink(this.dataPath(meta.id)).catch(ignoreMissing);
        continue;
      }
      // Written by a version that left modes to the umask: tightened, as new files are.
      await Promise.all(
        [join(this.dir, name), this.dataPath(meta.id)].map((p) => chmod(p, PRIVATE_FILE_MODE).catch(() => {})),
      );
      metas.push(meta);
    }
    for (const name of names) {
      // Content whose metadata never landed: a commit cut short, or a delete midway.
      const id = name.endsWith(".data") ? name.slice(0, -5) : undefined;
      if (id !== undefined && ID.test(id) && !names.has(`${id}.json`))
        await unlink(join(this.dir, name)).catch(ignoreMissing);
    }
    metas.sort((a, b) => a.seq - b.seq);
    for (const meta of metas) this.add(meta);
    this.nextSeq = (metas.at(-1)?.seq ?? 0) + 1;
  }

  /** A metadata file's contents, or undefined when it is not ours or cannot be read (left on disk, not served). */
  private async readMeta(name: string): Promise<StoredMeta | undefined> {
    const id = name.slice(0, -5);
    if (!ID.test(id)) return undefined;
    try {
      const meta = JSON.parse(await readFile(join(this.dir, name), "utf8")) as StoredMeta;
      const ok =
        meta.id === id &&
        Number.isSafeInteger(meta.bytes) &&
        Number.isSafeInteger(meta.seq) &&
        Number.isFinite(meta.created_ms) &&
        typeof meta.filename === "string" &&
        typeof meta.purpose === "string" &&
        (meta.owner === undefined || typeof meta.owner === "string");
      return ok ? meta : undefined;
    } catch {
      return undefined;
    }
  }

  private dataPath(id: string): string {
    return join(this.dir, `${id}.data`);
  }

  /** The expiry instant of a file: the earlier of --files-expiry after its upload and its own expires_after. */
  private expiresAt(meta: StoredMeta): number | null {
    // Rounded up to the second: a file lives at least as long as it was given.
    const byFlag =
      this.opts.expirySec === undefined ? null : Math.ceil((meta.created_ms + this.opts.expirySec * 1000) / 1000);
    const own = meta.client_expires_at;
    if (byFlag === null) return own;
    return own === null ? byFlag : Math.min(own, byFlag);
  }

  private add(meta: StoredMeta): Entry {
    const record: FileRecord = Object.freeze({
      id: meta.id,
      object: "file",
      bytes: meta.bytes,
      created_at: meta.created_at,
      filename: meta.filename,
      purpose: meta.purpose,
      status: "processed",
      expires_at: this.expiresAt(meta),
    });
    const entry = { meta, record };
    this.entries.set(meta.id, entry);
    this.used += meta.bytes;
    return entry;
  }

  private expired(record: FileRecord, nowMs = Date.now()): boolean {
    return record.expires_at !== null && nowMs >= record.expires_at * 1000;
  }

  /**
   * Streams a body to tmp/ (never buffered whole) and fsyncs it. Throws
   * FilesQuotaError as soon as the bytes so far would take the store past
   * maxBytes; a failed or refused upload leaves nothing behind. Its bytes
   * count against the quota until it is committed or discarded.
   */
  async stage(body: FileBody): Promise<StagedUpload> {
    const staged: Staged = {
      path: join(this.tmpDir, `${randomBytes(12).toString("hex")}.part`),
      bytes: 0,
      settled: false,
    };
    const fh = await open(staged.path, "wx", PRIVATE_FILE_MODE);
    try {
      for await (const chunk of chunksOf(body)) {
        if (this.opts.maxBytes !== undefined && this.used + this.reserved + chunk.byteLength > this.opts.maxBytes) {
          throw new FilesQuotaError(this.opts.maxBytes);
        }
        staged.bytes += chunk.byteLength;
        this.reserved += chunk.byteLength;
        await writeAll(fh, chunk);
      }
      await fh.sync();
    } catch (err) {
      await fh.close().catch(() => {});
      await this.discard(staged);
      throw err;
    }
    await fh.close();
    return staged;
  }

  /** Drops a staged upload (once; later calls do nothing). */
  async discard(upload: StagedUpload): Promise<void> {
    const staged = upload as Staged;
    if (staged.settled) return;
    staged.settled = true;
    this.reserved -= staged.bytes;
    await unlink(staged.path).catch(ignoreMissing);
  }

  /** Makes a staged upload a file of scope `info.owner`, durably (content and metadata synced) before it resolves. */
  async commit(
    upload: StagedUpload,
    info: { filename: string; purpose: string; expiresAfterSec?: number; owner?: string },
  ): Promise<FileRecord> {
    const staged = upload as Staged;
    if (staged.settled) throw new Error("this upload was already committed or discarded");
    staged.settled = true;
    const now = Date.now();
    const meta: StoredMeta = {
      id: newId(),
      bytes: staged.bytes,
      created_at: Math.floor(now / 1000),
      created_ms: now,
      seq: this.nextSeq++,
      filename: info.filename,
      purpose: info.purpose,
      client_expires_at:
        info.expiresAfterSec === undefined ? null : Math.ceil((now + info.expiresAfterSec * 1000) / 1000),
      ...(info.owner === undefined ? {} : { owner: info.owner }),
    };
    const data = this.dataPath(meta.id);
    const json = join(this.dir, `${meta.id}.json`);
    try {
      await rename(staged.path, data);
      const fh = await open(`${json}.tmp`, "wx", PRIVATE_FILE_MODE);
      try {
        await writeAll(fh, Buffer.from(JSON.stringify(meta)));
        await fh.sync();
      } finally {
        await fh.close();
      }
      await rename(`${json}.tmp`, json);
      await syncDir(this.dir);
    } catch (err) {
      this.reserved -= staged.bytes;
      await Promise.all([staged.path, data, `${json}.tmp`, json].map((p) => unlink(p).catch(() => {})));
      throw err;
    }
    this.reserved -= staged.bytes;
    return this.add(meta).record;
  }

  /** Streams the body to disk and stores it as a file: stage() then commit(). */
  async create(input: {
    filename: string;
    purpose: string;
    body: FileBody;
    expiresAfterSec?: number;
    owner?: string;
  }): Promise<FileRecord> {
    const staged = await this.stage(input.body);
    return this.commit(staged, input);
  }

  /** A file's record as the scope `owner` sees it; undefined when unknown, another scope's, deleted or expired. */
  get(id: string, owner?: string): FileRecord | undefined {
    const entry = this.entries.get(id);
    return entry && visibleTo(entry.meta, owner) && !this.expired(entry.record) ? entry.record : undefined;
  }

  /**
   * The scope `owner`'s files in upload order (`desc`, the default, newest
   * first), filtered by purpose, after the cursor `after` (one of its files'
   * ids, deleted ones included while this process remembers them;
   * FilesCursorError for an id it never saw, another scope's included).
   */
  list(opts: { purpose?: string; limit?: number; after?: string; order?: "asc" | "desc"; owner?: string } = {}): {
    data: FileRecord[];
    has_more: boolean;
    first_id: string | null;
    last_id: string | null;
  } {
    const desc = (opts.order ?? "desc") === "desc";
    let afterSeq: number | undefined;
    if (opts.after !== undefined) {
      const cursor = this.entries.get(opts.after)?.meta ?? this.tombstones.get(opts.after);
      if (cursor === undefined || !visibleTo(cursor, opts.owner)) throw new FilesCursorError(opts.after);
      afterSeq = cursor.seq;
    }
    const now = Date.now();
    const matching = [...this.entries.values()].filter(
      (e) =>
        visibleTo(e.meta, opts.owner) &&
        !this.expired(e.record, now) &&
        (opts.purpose === undefined || e.meta.purpose === opts.purpose) &&
        (afterSeq === undefined || (desc ? e.meta.seq < afterSeq : e.meta.seq > afterSeq)),
    );
    // Commits can finish out of order, so the map's order is not the upload order.
    matching.sort((a, b) => (desc ? b.meta.seq - a.meta.seq : a.meta.seq - b.meta.seq));
    const limit = opts.limit ?? Infinity;
    const data = matching.slice(0, limit).map((e) => e.record);
    return {
      data,
      has_more: matching.length > data.length,
      first_id: data[0]?.id ?? null,
      last_id: data.at(-1)?.id ?? null,
    };
  }

  /** The content file on disk, for streaming reads (open it before relying on it: a delete may remove it). */
  contentPath(id: string): string {
    return this.dataPath(id);
  }

  /**
   * Removes one of the scope `owner`'s files; false when it was unknown,
   * another scope's (left alone), or had expired already (removed either way).
   */
  async delete(id: string, owner?: string): Promise<boolean> {
    const entry = this.entries.get(id);
    if (entry === undefined || !visibleTo(entry.meta, owner)) return false;
    return this.remove(entry);
  }

  private async remove(entry: Entry): Promise<boolean> {
    const id = entry.meta.id;
    const wasLive = !this.expired(entry.record);
    // Claimed at once: a second delete, or a get while the unlinks run, sees it gone.
    this.entries.delete(id);
    this.used -= entry.meta.bytes;
    try {
      await unlink(join(this.dir, `${id}.json`)).catch(ignoreMissing);
    } catch (err) {
      // The metadata is still there, so the file is too.
      this.entries.set(id, entry);
      this.used += entry.meta.bytes;
      throw err;
    }
    this.tombstones.set(id, {
      seq: entry.meta.seq,
      ...(entry.meta.owner === undefined ? {} : { owner: entry.meta.owner }),
    });
    if (this.tombstones.size > MAX_TOMBSTONES) this.tombstones.delete(this.tombstones.keys().next().value!);
    await unlink(this.dataPath(id)).catch(ignoreMissing);
    await syncDir(this.dir);
    return wasLive;
  }

  /** Deletes every expired file (what open() and the timer run). */
  async sweep(): Promise<number> {
    if (this.sweeping) return 0;
    this.sweeping = true;
    try {
      const now = Date.now();
      const due = [...this.entries.values()].filter((e) => this.expired(e.record, now));
      // Whoever owns them: a delete that raced the sweep has claimed its entry already.
      for (const e of due) if (this.entries.get(e.meta.id) === e) await this.remove(e);
      return due.length;
    } finally {
      this.sweeping = false;
    }
  }

  /** Stops the expiry sweep. */
  close(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }
}
