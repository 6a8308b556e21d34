import { afterEach, describe, expect, test } from "bun:test";
import {
  appendFileSync,
  chmodSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FINISH, SessionsLockedError, SessionStore, WalCorruptError } from "../../src/session-log/store.ts";
import { encodeRecord } from "../../src/session-log/wal.ts";

const dirs: string[] = [];
const stores: SessionStore[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "sf-sessions-"));
  dirs.push(d);
  return d;
}
async function open(dir: string, opts?: Parameters<typeof SessionStore.open>[1]): Promise<SessionStore> {
  const s = await SessionStore.open(dir, opts);
  stores.push(s);
  return s;
}
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close().catch(() => {});
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const gen = (text: string, span: number[], finish: number = FINISH.open) => ({ Generated: { span, text, finish } });
const logLines = (dir: string) => readFileSync(join(dir, "wal.log"), "utf8").split("\n").filter(Boolean);

describe("SessionStore", () => {
  test("round trip: create, append, flush, read", async () => {
    const dir = tempDir();
    const store = await open(dir);
    expect(store.epoch).toBe(1);
    expect(store.recovered).toEqual({ records: 0, sessions: 0, truncatedBytes: 0 });
    const a = store.create({ model: "m", temperature: 0 });
    const b = store.create({ model: "m" }, a);
    expect(store.append(a, { Appended: { text: "Hello, wörld ✓", span: [1, 2, 3] } })).toBe(1);
    expect(store.append(b, gen("x", [7]))).toBe(1);
    expect(store.append(a, gen("Hi", [4, 5], FINISH.endOfTurn))).toBe(2);
    // Buffered until a flush: nothing in the file yet.
    expect(store.read(a)).toEqual([]);
    await store.flush();
    const evs = store.read(a);
    expect(evs.map((e) => e.event_id)).toEqual([0, 1, 2]);
    expect(evs.every((e) => e.session === a && e.epoch === 1 && Math.abs(e.ts_unix_ms - Date.now()) < 60_000)).toBe(
      true,
    );
    expect(evs[0]!.body).toEqual({ Created: { parent: null, params: { model: "m", temperature: 0 } } });
    expect(evs[1]!.body).toEqual({ Appended: { text: "Hello, wörld ✓", span: [1, 2, 3] } });
    expect(evs[2]!.body).toEqual(gen("Hi", [4, 5], FINISH.endOfTurn));
    const bev = store.read(b);
    expect(bev.map((e) => e.body)).toEqual([{ Created: { parent: a, params: { model: "m" } } }, gen("x", [7])]);
    expect(store.stats.appended).toBe(5);
    expect(store.stats.syncs).toBe(1);
    expect(store.stats.bytes).toBe(statSync(join(dir, "wal.log")).size);
    // Line format: <crc32 hex8> <json>
    for (const line of logLines(dir))
      expect(line).toMatch(/^[0-9a-f]{8} \{"session":\d+,"event_id":\d+,"epoch":\d+,"ts_unix_ms":\d+,"body":\{/);
    expect(readFileSync(join(dir, "wal.log.store-id"), "utf8").trim()).toMatch(/^[0-9a-f]{32}$/);
    await store.close();
  });

  test("event ids count from 0 per session; session ids continue after reopen; release forgets counters", async () => {
    const dir = tempDir();
    let store = await open(dir);
    const ids = [store.create({}), store.create({}), store.create({})];
    expect(ids).toEqual([1, 2, 3]);
    expect(store.append(2, gen("a", [1]))).toBe(1);
    expect(store.append(2, gen("b", [2]))).toBe(2);
    expect(store.append(3, gen("c", [3]))).toBe(1);
    expect(store.liveSessions).toBe(3);
    store.release(1);
    expect(store.liveSessions).toBe(2);
    expect(() => store.append(1, gen("z", [0]))).toThrow(/session 1 is not open/);
    await store.close();

    const storeId = readFileSync(join(dir, "wal.log.store-id"), "utf8");
    store = await open(dir);
    expect(store.recovered.sessions).toBe(3);
    expect(store.recovered.records).toBe(6);
    expect(store.create({})).toBe(4);
    expect(store.append(4, gen("d", [4]))).toBe(1);
    // Sessions from before the restart are not live until resumed.
    expect(() => store.append(2, gen("e", [5]))).toThrow(/not open/);
    expect(await store.resume(2)).toBe(3);
    expect(store.append(2, gen("e", [5]))).toBe(3);
    await expect(store.resume(99)).rejects.toThrow(/not in the session log/);
    await store.flush();
    expect(store.read(2).map((e) => [e.event_id, e.epoch])).toEqual([
      [0, 1],
      [1, 1],
      [2, 1],
      [3, 2],
    ]);
    expect(readFileSync(join(dir, "wal.log.store-id"), "utf8")).toBe(storeId);
    await store.close();
  });

  test("reopening a non-empty log bumps the epoch with an EpochBump record", async () => {
    const dir = tempDir();
    let store = await open(dir);
    await store.close();
    store = await open(dir); // an empty log: nothing to fence, no bump
    expect(store.epoch).toBe(1);
    expect(existsSync(join(dir, "wal.log")) && statSync(join(dir, "wal.log")).size).toBe(0);
    const s = store.create({});
    await store.close();

    store = await open(dir);
    expect(store.epoch).toBe(2);
    expect(store.read(0).map((e) => [e.event_id, e.epoch, e.body])).toEqual([[0, 2, { EpochBump: {} }]]);
    expect(store.stats.syncs).toBe(1); // synced before open() resolved
    const t = store.create({});
    await store.flush();
    expect(store.read(t)[0]!.epoch).toBe(2);
    expect(store.read(s)[0]!.epoch).toBe(1);
    await store.close();

    store = await open(dir);
    expect(store.epoch).toBe(3);
    expect(store.read(0).map((e) => [e.event_id, e.epoch])).toEqual([
      [0, 2],
      [1, 3],
    ]);
    await store.close();
  });

  test("a torn last record is truncated and the rest kept", async () => {
    const dir = tempDir();
    const path = join(dir, "wal.log");
    let store = await open(dir);
    const s = store.create({ p: 1 });
    store.append(s, gen("kept", [1, 2]));
    await store.close();
    const goodSize = statSync(path).size;
    const full = encodeRecord({ session: s, event_id: 2, epoch: 1, ts_unix_ms: 1, body: gen("lost", [3]) });
    const torn = full.slice(0, full.length - 7); // no newline: a write cut short
    appendFileSync(path, torn);

    store = await open(dir);
    expect(store.recovered).toEqual({ records: 2, sessions: 1, truncatedBytes: Buffer.byteLength(torn) });
    expect(store.read(s).map((e) => e.body)).toEqual([
      { Created: { parent: null, params: { p: 1 } } },
      gen("kept", [1, 2]),
    ]);
    const lines = logLines(dir);
    expect(lines.length).toBe(3); // two kept + the EpochBump
    expect(lines[2]).toContain('"EpochBump"');
    expect(readFileSync(path, "utf8")).not.toContain("lost");
    expect(statSync(path).size).toBe(goodSize + Buffer.byteLength(lines[2]!) + 1);
    await store.close();
  });

  test("a log holding only a torn record starts fresh", async () => {
    const dir = tempDir();
    const torn = '0badc0de {"session":1,"event_';
    writeFileSync(join(dir, "wal.log"), torn);
    const store = await open(dir);
    expect(store.recovered).toEqual({ records: 0, sessions: 0, truncatedBytes: torn.length });
    expect(store.epoch).toBe(1);
    expect(statSync(join(dir, "wal.log")).size).toBe(0);
    await store.close();
  });

  test("a complete record failing its checksum refuses to open and leaves the file untouched", async () => {
    const dir = tempDir();
    const path = join(dir, "wal.log");
    let store = await open(dir);
    const s = store.create({});
    store.append(s, gen("abc", [1]));
    store.append(s, gen("def", [2]));
    await store.close();
    const lines = logLines(dir);
    const offset = Buffer.byteLength(lines[0]!) + 1;
    lines[1] = lines[1]!.replace('"abc"', '"abd"'); // bit rot inside the second record
    const corrupt = Buffer.from(`${lines.join("\n")}\n12345678 {"torn`);
    writeFileSync(path, corrupt);

    const err = await SessionStore.open(dir).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(WalCorruptError);
    const msg = (err as Error).message;
    expect(msg).toContain(path);
    expect(msg).toContain(`byte offset ${offset}`);
    expect(msg).toContain("checksum");
    expect(msg).toMatch(/move .*wal\.log aside/i);
    expect(msg).toContain("--sessions-cache");
    expect(readFileSync(path).equals(corrupt)).toBe(true); // not even the torn tail was cut

    // A valid checksum over text that is not JSON is corruption too.
    const notJson = "not json at all";
    writeFileSync(path, `${(Bun.hash.crc32(notJson) >>> 0).toString(16).padStart(8, "0")} ${notJson}\n`);
    await expect(SessionStore.open(dir)).rejects.toThrow(WalCorruptError);

    // The failed opens released the lock; --sessions-cache is the way out.
    writeFileSync(path, corrupt);
    store = await open(dir, { cache: true });
    expect(readFileSync(join(dir, "wal.log.prev")).equals(corrupt)).toBe(true);
    await store.close();
  });

  test("--sessions-cache rotates wal.log to wal.log.prev and starts fresh", async () => {
    const dir = tempDir();
    let store = await open(dir);
    store.create({ first: true });
    await store.close();
    const firstLog = readFileSync(join(dir, "wal.log"));
    const firstId = readFileSync(join(dir, "wal.log.store-id"), "utf8");

    store = await open(dir, { cache: true });
    expect(readFileSync(join(dir, "wal.log.prev")).equals(firstLog)).toBe(true);
    expect(statSync(join(dir, "wal.log")).size).toBe(0);
    expect(store.recovered).toEqual({ records: 0, sessions: 0, truncatedBytes: 0 });
    expect(store.epoch).toBe(1);
    expect(store.create({ second: true })).toBe(1);
    // A new log is a new store: the id changes so old session ids are not mistaken for new ones.
    expect(readFileSync(join(dir, "wal.log.store-id"), "utf8")).not.toBe(firstId);
    await store.close();
    const secondLog = readFileSync(join(dir, "wal.log"));

    store = await open(dir, { cache: true });
    expect(readFileSync(join(dir, "wal.log.prev")).equals(secondLog)).toBe(true); // only the previous one is kept
    await store.close();
    // An empty log is not rotated over a useful .prev.
    store = await open(dir, { cache: true });
    expect(readFileSync(join(dir, "wal.log.prev")).equals(secondLog)).toBe(true);
    await store.close();
  });

  test("group commit: concurrent flushes share syncs, each resolves after its data is written and synced", async () => {
    const dir = tempDir();
    const path = join(dir, "wal.log");
    // Unpaced (window 0): this is about sharing the sync in flight; the window has its own tests
    // (group-commit.test.ts).
    const store = await open(dir, { pacing: { windowMs: 0 } });
    const s = store.create({});
    await store.flush();
    const before = store.stats.syncs;
    const N = 50;
    const results = await Promise.all(
      Array.from({ length: N }, async (_, i) => {
        if (i % 2) await Bun.sleep(0); // half of them arrive while the first sync may be in flight
        const syncsAtAppend = store.stats.syncs;
        store.append(s, gen(`tok${i}.`, [i]));
        await store.flush();
        return {
          inFile: readFileSync(path, "utf8").includes(`"tok${i}."`),
          syncedAfter: store.stats.syncs > syncsAtAppend,
        };
      }),
    );
    expect(results.every((r) => r.inFile)).toBe(true);
    expect(results.every((r) => r.syncedAfter)).toBe(true);
    const syncs = store.stats.syncs - before;
    expect(syncs).toBeGreaterThanOrEqual(1);
    expect(syncs).toBeLessThanOrEqual(5);
    expect(store.read(s).length).toBe(N + 1);

    // Appends made while a sync is in flight wait for the next one.
    const base = store.stats.syncs;
    store.append(s, gen("A", [1]));
    const p1 = store.flush();
    expect(statSync(path).size).toBe(store.stats.bytes); // flush() does not write synchronously
    await Promise.resolve(); // the batch starts on a microtask
    store.append(s, gen("B", [2]));
    const p2 = store.flush();
    await p1;
    expect(store.stats.syncs).toBe(base + 1);
    await p2;
    expect(store.stats.syncs).toBe(base + 2);
    expect(readFileSync(path, "utf8")).toContain('"text":"B"');
    // Nothing buffered: flush resolves without a sync.
    await store.flush();
    expect(store.stats.syncs).toBe(base + 2);
    await store.close();
  });

  test("a second store on the same directory in the same process is refused until the first closes", async () => {
    const dir = tempDir();
    const first = await open(dir);
    const err = await SessionStore.open(dir).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SessionsLockedError);
    expect((err as Error).message).toBe(
      `sessions directory ${dir} is in use by another superfluid server (pid ${process.pid})`,
    );
    await first.close();
    const again = await open(dir);
    await again.close();
  });

  test("records longer than the read buffer and fullFsync round trip", async () => {
    const dir = tempDir();
    let store = await open(dir, { fullFsync: true }); // fdatasync off macOS
    const big = "x".repeat(3 << 20);
    const s = store.create({ big });
    store.append(s, gen("after", [1]));
    await store.close();
    store = await open(dir);
    const evs = store.read(s);
    expect(evs.length).toBe(2);
    expect((evs[0]!.body as unknown as { Created: { params: { big: string } } }).Created.params.big.length).toBe(
      3 << 20,
    );
    expect(store.recovered.records).toBe(2);
    await store.close();
  });

  test("close flushes what is buffered and is idempotent", async () => {
    const dir = tempDir();
    let store = await open(dir);
    const s = store.create({});
    store.append(s, gen("tail", [9]));
    const closing = Promise.all([store.close(), store.close()]);
    expect(() => store.append(s, gen("late", [1]))).toThrow(/closed/); // refused while the last flush runs
    await closing;
    expect(() => store.append(s, gen("later", [1]))).toThrow();
    store = await open(dir);
    expect(store.read(s).length).toBe(2);
    await store.close();
  });

  test("a failed write ends the live sessions and is reported; later sessions retry the log and replay clean", async () => {
    const dir = tempDir();
    let full = false;
    const store = await open(dir, {
      fileOps: {
        write(fd, data) {
          if (full) {
            writeSync(fd, data, 0, Math.min(10, data.length)); // a torn start, then the disk is full
            throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
          }
          writeSync(fd, data);
        },
      },
    });
    const done = store.create({ n: 1 });
    store.append(done, gen("whole", [1], FINISH.endOfTurn));
    store.release(done);
    const open1 = store.create({ n: 2 });
    store.append(open1, gen("a", [2]));
    await store.flush();
    expect(store.failure).toBeNull();

    full = true;
    store.append(open1, gen("b", [3]));
    const cut = store.create({ n: 3 });
    await expect(store.flush()).rejects.toThrow(/ENOSPC/);
    expect(store.failure?.message).toBe("ENOSPC: no space left on device, write");
    // Neither session may go on: one lost a record, the other its Created.
    expect(store.isLive(open1)).toBe(false);
    expect(store.isLive(cut)).toBe(false);
    expect(store.liveSessions).toBe(0);
    expect(() => store.append(open1, gen("c", [4]))).toThrow(/not open/);
    const stillFull = store.create({ n: 4 });
    await expect(store.flush()).rejects.toThrow(/ENOSPC/);
    expect(store.isLive(stillFull)).toBe(false);

    full = false;
    const after = store.create({ n: 5 });
    store.append(after, gen("ok", [5], FINISH.endOfTurn));
    await store.flush();
    expect(store.failure).toBeNull();
    expect(store.read(open1).map((e) => e.event_id)).toEqual([0, 1]); // what was committed, no more
    expect(store.read(cut)).toEqual([]);
    expect(store.read(after).map((e) => e.event_id)).toEqual([0, 1]);
    expect(store.stats.bytes).toBe(statSync(join(dir, "wal.log")).size);
    await store.close();

    const again = await open(dir); // no torn bytes, no corruption
    expect(again.recovered).toEqual({ records: 6, sessions: 3, truncatedBytes: 0 });
    expect(again.create({})).toBe(after + 1);
    await again.close();
  });

  test.if(process.platform !== "win32")(
    "the sessions folder is created 0700 and its files 0600, even under umask 000",
    async () => {
      const dir = join(tempDir(), "home", "sessions");
      const old = process.umask(0);
      try {
        const store = await open(dir);
        store.create({});
        await store.close();
        expect(statSync(dir).mode & 0o777).toBe(0o700);
        expect(statSync(join(dir, "..")).mode & 0o777).toBe(0o700); // made by the same mkdir -p
        for (const f of ["wal.log", "wal.log.store-id", "serve.lock"])
          expect([f, statSync(join(dir, f)).mode & 0o777]).toEqual([f, 0o600]);
        // A log an older version left readable to all is made private on open.
        chmodSync(join(dir, "wal.log"), 0o644);
        const reopened = await open(dir);
        await reopened.close();
        expect(statSync(join(dir, "wal.log")).mode & 0o777).toBe(0o600);
        const rotated = await open(dir, { cache: true }); // a fresh log, a new store id
        await rotated.close();
        for (const f of ["wal.log", "wal.log.prev", "wal.log.store-id"])
          expect([f, statSync(join(dir, f)).mode & 0o777]).toEqual([f, 0o600]);
      } finally {
        process.umask(old);
      }
      expect(process.umask()).toBe(old);
    },
  );
});
