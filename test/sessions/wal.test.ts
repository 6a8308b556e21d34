import { afterEach, describe, expect, test } from "bun:test";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { encodeRecord, FfiSyncer, scanLog, WalCorruptError, WalWriter } from "../../src/sessions/wal.ts";
import type { SessionEvent } from "../../src/sessions/events.ts";

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
    writeFileSync(path, good + "hello\n");
    expect(() => scanLog(path, null)).toThrow(WalCorruptError);
    writeFileSync(path, good + "\n");
    expect(() => scanLog(path, null)).toThrow(/byte offset \d+/);
    writeFileSync(path, good.toUpperCase()); // checksum in upper case hex: not ours
    expect(() => scanLog(path, null)).toThrow(WalCorruptError);
    writeFileSync(path, good + good.slice(0, 20));
    expect(scanLog(path, null)).toEqual({ records: 1, validBytes: good.length, fileBytes: good.length + 20 });
  });

  test("a failed sync rejects the flush and every later one; the writer stops writing", async () => {
    const path = join(tempDir(), "wal.log");
    const fd = openSync(path, "a");
    let fail = false;
    const w = new WalWriter(path, fd, "data", async () => {
      if (fail) throw Object.assign(new Error("EIO: i/o error"), { code: "EIO" });
    });
    w.push(encodeRecord(ev(1, 0, "ok")));
    await w.flush();
    expect(w.stats.syncs).toBe(1);
    fail = true;
    w.push(encodeRecord(ev(1, 1, "bad")));
    const p1 = w.flush();
    await Promise.resolve(); // that batch is under way: the next push waits for the following one
    w.push(encodeRecord(ev(1, 2, "queued")));
    await expect(p1).rejects.toThrow(/writing the session log .* failed: EIO/);
    await expect(w.flush()).rejects.toThrow(/EIO/);
    expect(() => w.push(encodeRecord(ev(1, 3, "later")))).toThrow(/EIO/);
    await expect(w.close()).rejects.toThrow(/EIO/);
    expect(readFileSync(path, "utf8")).not.toContain("queued");
  });

  test("a failed write rejects the flush", async () => {
    const path = join(tempDir(), "wal.log");
    writeFileSync(path, "");
    const fd = openSync(path, "r"); // read-only: write() fails with EBADF
    const w = new WalWriter(path, fd, "data");
    w.push(encodeRecord(ev(1, 0, "x")));
    await expect(w.flush()).rejects.toThrow(/writing the session log/);
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
      const err = await s.sync(100000).then(() => null, (e: unknown) => e);
      expect(String(err)).toMatch(/errno 9/); // EBADF
    } finally {
      s.close();
      closeSync(fd);
    }
  });
});
