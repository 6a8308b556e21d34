import { afterEach, describe, expect, test } from "bun:test";
import {
  closeSync,
  ftruncateSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { encodeRecord, FfiSyncer, scanLog, WalCorruptError, WalWriter } from "../../src/session-log/wal.ts";
import type { SessionEvent } from "../../src/session-log/events.ts";

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "sf-wal-"));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const ev = (session: number, event_id: number, text: string): SessionEvent => ({
  session,
  event_id,
  epoch: 1,
  ts_unix_ms: 1700000000000,
  body: { Appended: { text, span: [event_id] } },
});

describe("wal", () => {
  test("encodeRecord writes <crc32 of the JSON bytes> <json>\\n and scanLog reads it back", () => {
    const line = encodeRecord(ev(3, 0, "naïve 😀"));
    const json = line.slice(9, -1);
    expect(line.endsWith("\n")).toBe(true);
    expect(Number.parseInt(line.slice(0, 8), 16)).toBe(Bun.hash.crc32(Buffer.from(json)) >>> 0);
    expect(JSON.parse(json)).toEqual(ev(3, 0, "naïve 😀"));
    const path = join(tempDir(), "wal.log");
    writeFileSync(path, line + encodeRecord(ev(13, 0, "other")) + encodeRecord(ev(3, 1, "b")));
    const seen: Array<[number, number]> = [];
    const r = scanLog(path, (e, off) => seen.push([e.session, off]), '{"session":3,');
    expect(seen).toEqual([
      [3, 0],
      [3, Buffer.byteLength(line) + Buffer.byteLength(encodeRecord(ev(13, 0, "other")))],
    ]);
    expect(r.records).toBe(3);
    expect(r.validBytes).toBe(r.fileBytes);
  });

  test("scanLog: a malformed complete line is corruption, a torn tail is not", () => {
    const path = join(tempDir(), "wal.log");
    const good = encodeRecord(ev(1, 0, "a"));
    writeFileSync(path, `${good}hello\n`);
    expect(() => scanLog(path, null)).toThrow(WalCorruptError);
    writeFileSync(path, `${good}\n`);
    expect(() => scanLog(path, null)).toThrow(/byte offset \d+/);
    writeFileSync(path, good.toUpperCase()); // checksum in upper case hex: not ours
    expect(() => scanLog(path, null)).toThrow(WalCorruptError);
    writeFileSync(path, good + good.slice(0, 20));
    expect(scanLog(path, null)).toEqual({ records: 1, validBytes: good.length, fileBytes: good.length + 20 });
  });

  test("a failed sync fails its batch and what is buffered behind it, cuts the file back, and the next batch commits", async () => {
    const path = join(tempDir(), "wal.log");
    const fd = openSync(path, "a");
    let fail = false;
    const w = new WalWriter(path, fd, "data", {
      sync: async () => {
        if (fail) throw Object.assign(new Error("EIO: i/o error, fdatasync"), { code: "EIO" });
      },
    });
    const failures: Error[] = [];
    w.onFailure = (e) => failures.push(e);
    const good = encodeRecord(ev(1, 0, "ok"));
    w.push(good);
    await w.flush();
    expect(w.stats.syncs).toBe(1);
    fail = true;
    w.push(encodeRecord(ev(1, 1, "bad")));
    const p1 = w.flush();
    await Promise.resolve(); // that batch is under way: the next push waits for the following one
    w.push(encodeRecord(ev(1, 2, "queued")));
    const p2 = w.flush().then(
      () => null,
      (e: Error) => e,
    ); // (settles with p1: handled at once)
    await expect(p1).rejects.toThrow(/^EIO: i\/o error/);
    expect(String(await p2)).toMatch(/EIO/); // dropped with it: it may continue what the failed batch carried
    expect(failures.map((e) => e.message)).toEqual(["EIO: i/o error, fdatasync"]);
    expect(w.failure?.message).toBe("EIO: i/o error, fdatasync");
    expect(w.stats.failedBatches).toBe(1);
    expect(readFileSync(path, "utf8")).toBe(good); // written but never synced: cut off
    expect(w.size).toBe(good.length);

    fail = false;
    const later = encodeRecord(ev(2, 0, "later"));
    w.push(later);
    await w.flush();
    expect(w.failure).toBeNull();
    expect(readFileSync(path, "utf8")).toBe(good + later);
    expect(w.stats.bytes).toBe(statSync(path).size);
    await w.close();
  });

  test("a write cut short by a full disk leaves no torn record: the log is cut back to its last committed batch", async () => {
    const path = join(tempDir(), "wal.log");
    const fd = openSync(path, "a");
    let room = Infinity; // bytes the "disk" still takes
    const w = new WalWriter(path, fd, "data", {
      write(fd, data) {
        const n = Math.min(room, data.length);
        if (n > 0) writeSync(fd, data, 0, n);
        room -= n;
        if (n < data.length)
          throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
      },
    });
    const first = encodeRecord(ev(1, 0, "first"));
    w.push(first);
    await w.flush();
    room = 30; // the next record gets 30 bytes in: a torn line
    w.push(encodeRecord(ev(1, 1, "x".repeat(100))));
    await expect(w.flush()).rejects.toThrow(/ENOSPC/);
    expect(readFileSync(path, "utf8")).toBe(first);
    expect(scanLog(path, null)).toEqual({ records: 1, validBytes: first.length, fileBytes: first.length });

    room = Infinity; // space freed: the next batch goes where the torn one started
    const next = encodeRecord(ev(2, 0, "after"));
    w.push(next);
    await w.flush();
    expect(w.failure).toBeNull();
    const seen: number[] = [];
    expect(scanLog(path, (e) => seen.push(e.session))).toEqual({
      records: 2,
      validBytes: first.length + next.length,
      fileBytes: first.length + next.length,
    });
    expect(seen).toEqual([1, 2]);
    await w.close();
  });

  test("a cut that fails is tried again before the next write, and that batch fails if it fails again", async () => {
    const path = join(tempDir(), "wal.log");
    const fd = openSync(path, "a");
    let failWrite = true;
    let truncateFailures = 3; // after the first write, before the second batch, after it
    const w = new WalWriter(path, fd, "data", {
      write(fd, data) {
        writeSync(fd, data, 0, failWrite ? 5 : data.length);
        if (failWrite) throw Object.assign(new Error("EIO: i/o error, write"), { code: "EIO" });
      },
      truncate(fd, len) {
        if (truncateFailures-- > 0) throw new Error("EIO: i/o error, ftruncate");
        ftruncateSync(fd, len);
      },
    });
    w.push(encodeRecord(ev(1, 0, "a")));
    await expect(w.flush()).rejects.toThrow(/write/); // the write fails, then its cut fails
    expect(statSync(path).size).toBe(5); // five torn bytes still there
    failWrite = false;
    w.push(encodeRecord(ev(2, 0, "b")));
    await expect(w.flush()).rejects.toThrow(/cannot cut a failed write off the log: EIO/); // nothing written behind the torn bytes
    expect(w.failure?.message).toMatch(/cannot cut/);
    expect(statSync(path).size).toBe(5);
    const c = encodeRecord(ev(3, 0, "c"));
    w.push(c);
    await w.flush(); // the cut works now, then the write
    expect(readFileSync(path, "utf8")).toBe(c);
    expect(w.failure).toBeNull();
    await w.close();
  });

  test("a failed write rejects the flush and is reported until a batch commits", async () => {
    const path = join(tempDir(), "wal.log");
    writeFileSync(path, "");
    const fd = openSync(path, "r"); // read-only: write() fails with EBADF
    const w = new WalWriter(path, fd, "data");
    w.push(encodeRecord(ev(1, 0, "x")));
    await expect(w.flush()).rejects.toThrow(/EBADF/);
    expect(w.failure?.message).toMatch(/EBADF/);
    await w.close().catch(() => {});
  });

  test.if(process.platform !== "win32")("FfiSyncer runs the sync on a worker thread and reports errno", async () => {
    const path = join(tempDir(), "f");
    writeFileSync(path, "data");
    const fd = openSync(path, "r+");
    const s = new FfiSyncer(process.platform === "darwin" ? "full" : "fsync");
    try {
      await s.sync(fd);
      await Promise.all([s.sync(fd), s.sync(fd)]);
      // (not expect().rejects: it waits without taking the worker's reply)
      const err = await s.sync(100000).then(
        () => null,
        (e: unknown) => e,
      );
      expect(String(err)).toMatch(/errno 9/); // EBADF
    } finally {
      s.close();
      closeSync(fd);
    }
  });
});
