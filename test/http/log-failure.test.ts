// The session log on a full disk: while it cannot be written, generations end
// with session_log_failed and /health says degraded (503, with the reason);
// once space is freed the next generation is logged and served, /health is ok
// again, and the log replays clean (no torn record left behind). A server
// stopped while its log fails exits 0 with no trace.
//
// Needs a disk that really fills: a 2 MB tmpfs, so root and a working mount.
// Elsewhere these tests skip; test/session-log/ covers the same path with an
// injected failing write.
import { afterAll, describe, expect, test } from "bun:test";
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FINISH } from "../../src/session-log/events.ts";
import { scanLog } from "../../src/session-log/wal.ts";
import { ServerProcess } from "../scenarios/support.ts";
import { getJson, postJson, useServer, user, type TestServer } from "./support.ts";

/** A 2 MB tmpfs mounted for this file; null where mounting is not possible (not root, no mount). */
function mountSmallDisk(): string | null {
  if (process.platform !== "linux" || process.getuid?.() !== 0) return null;
  const dir = mkdtempSync(join(tmpdir(), "superfluid-small-disk-"));
  const mounted = Bun.spawnSync(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", dir], {
    stdout: "ignore",
    stderr: "ignore",
  });
  if (mounted.exitCode === 0) return dir;
  rmSync(dir, { recursive: true, force: true });
  return null;
}

const disk = mountSmallDisk();

afterAll(() => {
  if (!disk) return;
  // Servers are closed by now; a lazy unmount still frees the mount if something holds it.
  if (Bun.spawnSync(["umount", disk]).exitCode !== 0) Bun.spawnSync(["umount", "-l", disk]);
  rmSync(disk, { recursive: true, force: true });
});

/** Fills the disk with one file until it refuses more (ENOSPC). */
function fill(path: string): void {
  const fd = openSync(path, "w");
  const chunk = Buffer.alloc(64 * 1024, 1);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOSPC") throw e;
  } finally {
    closeSync(fd);
  }
}

/** Long enough to outgrow whatever slack the log's last page has left on a full disk. */
const long = (model: string) => ({ model, messages: user("hi"), max_tokens: 1500, ignore_eos: true, temperature: 0 });
const short = (model: string) => ({ model, messages: user("hi"), max_tokens: 4, ignore_eos: true, temperature: 0 });

describe.skipIf(!disk)("a full sessions disk (2 MB tmpfs)", () => {
  const sessions = disk ? join(disk, "in-process") : "";
  if (disk) mkdirSync(sessions);
  const s: TestServer = useServer({ maxBatch: 2, sessions });
  const filler = disk ? join(disk, "filler") : "";

  test("fill: generations fail with session_log_failed and /health is 503 degraded, naming the cause", async () => {
    expect((await postJson(s, "/v1/chat/completions", short(s.model))).status).toBe(200);
    expect((await getJson(s, "/health")).status).toBe(200);
    fill(filler);
    for (let i = 0; i < 2; i++) {
      // Twice: a failed write is retried, and fails again while the disk is full.
      const r = await postJson(s, "/v1/chat/completions", long(s.model));
      expect(r.status).toBe(500);
      expect(r.json.error.code).toBe("session_log_failed");
      expect(r.json.error.message).toContain("ENOSPC");
      expect(r.json.error.message).not.toContain(disk!); // no server paths in a reply
      const h = await getJson(s, "/health");
      expect(h.status).toBe(503);
      expect(h.json).toEqual({
        status: "degraded",
        reason: expect.stringMatching(/^session log: ENOSPC/),
        models_loaded: 1,
        models_known: 1,
      });
    }
  });

  test("free: the next generation is logged and served, /health is ok, and the log replays clean", async () => {
    rmSync(filler);
    const r = await postJson(s, "/v1/chat/completions", short(s.model));
    expect(r.status).toBe(200);
    expect(r.json.usage.completion_tokens).toBe(4);
    expect(await getJson(s, "/health")).toMatchObject({
      status: 200,
      json: { status: "ok", models_loaded: 1, models_known: 1 },
    });

    const store = s.server.sessions;
    const scan = scanLog(store.path, null); // throws on a bad complete record
    expect(scan.fileBytes).toBe(scan.validBytes); // no torn tail
    const events = store.read(store.lastSession);
    expect(events.map((e) => e.event_id)).toEqual(events.map((_, i) => i));
    const generated = events.flatMap((e) => ("Generated" in e.body ? [e.body.Generated] : []));
    expect(generated.flatMap((g) => g.span).length).toBe(4);
    expect(generated.at(-1)!.finish).toBe(FINISH.maxTokens);
  });
});

describe.skipIf(!disk)("a server stopped while its log fails", () => {
  test("SIGTERM with the disk still full exits 0, with no trace", async () => {
    const filler = join(disk!, "filler-2");
    const server = await ServerProcess.spawn([
      "--sessions",
      join(disk!, "process"),
      "--max-batch",
      "2",
      "--max-context",
      "2048",
    ]);
    try {
      expect(await server.waitHealthy()).toBe("healthy");
      const model = ((await (await fetch(`${server.url}/v1/models`)).json()) as { data: { id: string }[] }).data[0]!.id;
      fill(filler);
      const r = await fetch(`${server.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(long(model)),
      });
      expect(r.status).toBe(500);
      expect(((await r.json()) as { error: { code: string } }).error.code).toBe("session_log_failed");
      expect((await fetch(`${server.url}/health`)).status).toBe(503);
      server.proc.kill("SIGTERM");
      expect(await server.proc.exited).toBe(0);
      expect(server.stderr).not.toMatch(/^error:|\n\s+at /m);
    } finally {
      if (server.proc.exitCode === null) await server.killHard();
      rmSync(filler, { force: true });
    }
  });
});
