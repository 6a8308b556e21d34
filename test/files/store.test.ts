// The /v1/files store (src/files/store.ts): durable records, torn uploads
// after a crash, the quota, list order and cursors, expiry.
import { afterEach, describe, expect, setSystemTime, test } from "bun:test";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FilesCursorError, FilesQuotaError, FileStore, type FileStoreOptions } from "../../src/files/store.ts";

const dirs: string[] = [];
const stores: FileStore[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "sf-files-"));
  dirs.push(d);
  return join(d, "files");
}
async function open(dir: string, opts?: FileStoreOptions): Promise<FileStore> {
  const s = await FileStore.open(dir, opts);
  stores.push(s);
  return s;
}
afterEach(() => {
  setSystemTime();
  for (const s of stores.splice(0)) s.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A body arriving in chunks, optionally failing after them (a client that went away). */
function chunked(chunks: string[], failAfter = false): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (i < chunks.length) controller.enqueue(Buffer.from(chunks[i++]!));
      else if (failAfter) controller.error(new Error("connection reset"));
      else controller.close();
    },
  });
}

const entries = (dir: string) =>
  readdirSync(dir)
    .filter((n) => n !== "tmp")
    .sort();

describe("FileStore", () => {
  test("create, get, content and delete; records survive a reopen", async () => {
    const dir = tempDir();
    const store = await open(dir);
    const before = Math.floor(Date.now() / 1000);
    const rec = await store.create({
      filename: "in.jsonl",
      purpose: "batch",
      body: chunked(['{"a":1}\n', '{"b":2}\n']),
    });
    const after = Math.ceil(Date.now() / 1000);
    expect(rec).toMatchObject({
      object: "file",
      bytes: 16,
      filename: "in.jsonl",
      purpose: "batch",
      status: "processed",
      expires_at: null,
    });
    expect(rec.id).toMatch(/^file-[0-9a-f]{24}$/);
    // Stamped while it was created (bounded by the clock on both sides, not by how long that took).
    expect(rec.created_at).toBeGreaterThanOrEqual(before);
    expect(rec.created_at).toBeLessThanOrEqual(after);
    expect(readFileSync(store.contentPath(rec.id), "utf8")).toBe('{"a":1}\n{"b":2}\n');
    const other = await store.create({ filename: "é.txt", purpose: "user_data", body: "hello" });
    const empty = await store.create({ filename: "empty", purpose: "user_data", body: new Uint8Array(0) });
    expect(empty.bytes).toBe(0);
    store.close();

    const again = await open(dir);
    expect(again.get(rec.id)).toEqual(rec);
    expect(again.get(other.id)).toEqual(other);
    expect(again.get(empty.id)).toEqual(empty);
    expect(again.list().data.map((r) => r.id)).toEqual([empty.id, other.id, rec.id]);
    expect(await again.delete(rec.id)).toBe(true);
    expect(await again.delete(rec.id)).toBe(false);
    expect(again.get(rec.id)).toBeUndefined();
    expect(existsSync(again.contentPath(rec.id))).toBe(false);
    again.close();
    const third = await open(dir);
    expect(third.get(rec.id)).toBeUndefined();
    expect(third.list().data.map((r) => r.id)).toEqual([empty.id, other.id]);
  });

  test("files are 0600 and the folder 0700 whatever the umask", async () => {
    const dir = tempDir();
    const store = await open(dir);
    const rec = await store.create({ filename: "x", purpose: "batch", body: "x" });
    expect(statSync(store.contentPath(rec.id)).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, `${rec.id}.json`)).mode & 0o777).toBe(0o600);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
  });

  test("a torn upload after a crash is no file, and what it left is removed", async () => {
    const dir = tempDir();
    const store = await open(dir);
    const kept = await store.create({ filename: "kept", purpose: "batch", body: "kept" });
    store.close();
    // What a crash can leave at each step of a commit (src/files/store.ts):
    writeFileSync(join(dir, "tmp", "0123.part"), "half an upl"); // still arriving
    writeFileSync(join(dir, "file-aaaaaaaaaaaaaaaaaaaaaaaa.data"), "renamed, no metadata yet");
    writeFileSync(join(dir, "file-bbbbbbbbbbbbbbbbbbbbbbbb.data"), "metadata half written");
    writeFileSync(join(dir, "file-bbbbbbbbbbbbbbbbbbbbbbbb.json.tmp"), '{"id":"file-bbbb');
    // Metadata whose content is gone or of another size (a disk that lost it).
    const meta = (id: string, bytes: number) =>
      JSON.stringify({
        id,
        bytes,
        created_at: 1,
        created_ms: 1000,
        seq: 99,
        filename: "x",
        purpose: "batch",
        client_expires_at: null,
      });
    writeFileSync(join(dir, "file-cccccccccccccccccccccccc.json"), meta("file-cccccccccccccccccccccccc", 3));
    writeFileSync(join(dir, "file-dddddddddddddddddddddddd.json"), meta("file-dddddddddddddddddddddddd", 10));
    writeFileSync(join(dir, "file-dddddddddddddddddddddddd.data"), "short");

    const again = await open(dir);
    expect(again.list().data.map((r) => r.id)).toEqual([kept.id]);
    expect(readdirSync(join(dir, "tmp"))).toEqual([]);
    expect(entries(dir)).toEqual([`${kept.id}.data`, `${kept.id}.json`].sort());
    // The next id sequence continues after the kept file: a new upload lists first.
    const next = await again.create({ filename: "next", purpose: "batch", body: "n" });
    expect(again.list().data.map((r) => r.id)).toEqual([next.id, kept.id]);
  });

  test("an upload whose body fails midway leaves nothing and frees its quota", async () => {
    const dir = tempDir();
    const store = await open(dir, { maxBytes: 10 });
    await expect(
      store.create({ filename: "x", purpose: "batch", body: chunked(["12345", "678"], true) }),
    ).rejects.toThrow("connection reset");
    expect(readdirSync(join(dir, "tmp"))).toEqual([]);
    expect(entries(dir)).toEqual([]);
    expect(store.list().data).toEqual([]);
    // All 10 bytes are free again.
    expect((await store.create({ filename: "y", purpose: "batch", body: "0123456789" })).bytes).toBe(10);
  });

  test("the quota counts stored files and uploads in progress", async () => {
    const dir = tempDir();
    const store = await open(dir, { maxBytes: 100 });
    const a = await store.create({ filename: "a", purpose: "batch", body: "x".repeat(60) });
    const refused = store.create({ filename: "b", purpose: "batch", body: chunked(["y".repeat(30), "y".repeat(30)]) });
    await expect(refused).rejects.toBeInstanceOf(FilesQuotaError);
    expect(readdirSync(join(dir, "tmp"))).toEqual([]);
    expect(store.list().data.map((r) => r.id)).toEqual([a.id]);
    // Exactly at the limit fits.
    await store.create({ filename: "c", purpose: "batch", body: "z".repeat(40) });

    // Two uploads arriving at once share what is left: the second past it is refused.
    await store.delete(a.id);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const slow = new ReadableStream<Uint8Array>({
      async start(controller) {
        controller.enqueue(Buffer.from("s".repeat(40)));
        await gate;
        controller.close();
      },
    });
    const first = store.stage(slow);
    await Bun.sleep(10);
    await expect(store.create({ filename: "d", purpose: "batch", body: "d".repeat(30) })).rejects.toBeInstanceOf(
      FilesQuotaError,
    );
    release();
    const staged = await first;
    expect(staged.bytes).toBe(40);
    // A discarded stage gives its bytes back.
    await store.discard(staged);
    await store.create({ filename: "e", purpose: "batch", body: "e".repeat(60) });
    expect(readdirSync(join(dir, "tmp"))).toEqual([]);
  });

  test("list: newest first by default, asc, purpose, limit and after cursors", async () => {
    const store = await open(tempDir());
    const ids: string[] = [];
    for (let i = 0; i < 5; i++)
      ids.push((await store.create({ filename: `f${i}`, purpose: i % 2 ? "user_data" : "batch", body: String(i) })).id);
    const desc = [...ids].reverse();
    expect(store.list().data.map((r) => r.id)).toEqual(desc);
    expect(store.list({ order: "asc" }).data.map((r) => r.id)).toEqual(ids);
    const page1 = store.list({ limit: 2 });
    expect(page1).toMatchObject({ has_more: true, first_id: desc[0], last_id: desc[1] });
    const page2 = store.list({ limit: 2, after: page1.last_id! });
    expect(page2.data.map((r) => r.id)).toEqual(desc.slice(2, 4));
    const page3 = store.list({ limit: 2, after: page2.last_id! });
    expect(page3).toMatchObject({ has_more: false, first_id: desc[4], last_id: desc[4] });
    expect(store.list({ order: "asc", after: ids[2] }).data.map((r) => r.id)).toEqual(ids.slice(3));
    expect(store.list({ purpose: "batch" }).data.map((r) => r.id)).toEqual([ids[4]!, ids[2]!, ids[0]!]);
    expect(store.list({ purpose: "nothing" })).toEqual({ data: [], has_more: false, first_id: null, last_id: null });
    // A cursor deleted between pages keeps its place; an id never seen is refused.
    await store.delete(desc[1]!);
    expect(store.list({ after: desc[1] }).data.map((r) => r.id)).toEqual(desc.slice(2));
    expect(() => store.list({ after: "file-000000000000000000000000" })).toThrow(FilesCursorError);
  });

  test("uploads that finish out of order still list in upload order", async () => {
    const store = await open(tempDir());
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const slowBody = new ReadableStream<Uint8Array>({
      async start(controller) {
        controller.enqueue(Buffer.from("slow"));
        await gate;
        controller.close();
      },
    });
    const first = await store.stage("first");
    const second = await store.stage("second");
    const a = store.commit(first, { filename: "a", purpose: "batch" });
    const b = store.commit(second, { filename: "b", purpose: "batch" });
    const [ra, rb] = await Promise.all([a, b]);
    const c = store.create({ filename: "c", purpose: "batch", body: slowBody });
    release();
    const rc = await c;
    expect(store.list({ order: "asc" }).data.map((r) => r.id)).toEqual([ra.id, rb.id, rc.id]);
  });

  test("expiry: a file is gone at its expires_at, and the sweep removes it from disk", async () => {
    const dir = tempDir();
    const start = Date.now();
    setSystemTime(new Date(start));
    const store = await open(dir, { expirySec: 60 });
    const rec = await store.create({ filename: "x", purpose: "batch", body: "x" });
    const own = await store.create({ filename: "y", purpose: "batch", body: "y", expiresAfterSec: 30 });
    expect(rec.expires_at).toBe(Math.ceil(start / 1000 + 60));
    // The earlier of the flag and the upload's own expires_after.
    expect(own.expires_at).toBe(Math.ceil(start / 1000 + 30));
    // Rounded up to the second: alive at least 30 s, gone within 31.
    setSystemTime(new Date(start + 29_999));
    expect(store.get(own.id)).toEqual(own);
    setSystemTime(new Date(start + 31_000));
    expect(store.get(own.id)).toBeUndefined();
    expect(store.get(rec.id)).toEqual(rec);
    expect(store.list().data.map((r) => r.id)).toEqual([rec.id]);
    setSystemTime(new Date(start + 61_000));
    expect(store.get(rec.id)).toBeUndefined();
    // Hidden at once, removed from disk by the sweep.
    expect(existsSync(store.contentPath(rec.id))).toBe(true);
    expect(await store.sweep()).toBe(2);
    expect(entries(dir)).toEqual([]);
  });

  test("expiry applies to files stored before the flag was set, and the timer sweeps", async () => {
    const dir = tempDir();
    const first = await open(dir);
    const rec = await first.create({ filename: "x", purpose: "batch", body: "x" });
    first.close();
    // Reopened with an expiry: the file's own upload time counts.
    setSystemTime(new Date(Date.now() + 10_000));
    const again = await open(dir, { expirySec: 5 });
    expect(again.get(rec.id)).toBeUndefined();
    expect(entries(dir)).toEqual([]);
    setSystemTime();

    // The timer: a 1 s sweep removes a file expiring after 1 s (waited for, the guard only stops a hang).
    const timed = await open(join(dir, "..", "timed"), { expirySec: 1, sweepSec: 1 });
    const t = await timed.create({ filename: "t", purpose: "batch", body: "t" });
    const guard = Date.now() + 30_000;
    while (existsSync(timed.contentPath(t.id)) && Date.now() < guard) await Bun.sleep(50);
    expect(existsSync(timed.contentPath(t.id))).toBe(false);
  });

  test("metadata it cannot read is left on disk, not served", async () => {
    const dir = tempDir();
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "file-eeeeeeeeeeeeeeeeeeeeeeee.json"), "{not json");
    writeFileSync(join(dir, "file-eeeeeeeeeeeeeeeeeeeeeeee.data"), "data");
    writeFileSync(join(dir, "notes.txt"), "an operator's file");
    const store = await open(dir);
    expect(store.list().data).toEqual([]);
    expect(entries(dir)).toEqual([
      "file-eeeeeeeeeeeeeeeeeeeeeeee.data",
      "file-eeeeeeeeeeeeeeeeeeeeeeee.json",
      "notes.txt",
    ]);
  });
});
