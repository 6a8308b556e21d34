// Server lifecycle: close() shuts the listener and the worker down promptly.
// The worker is asked to shut down over IPC; it should exit on its own, not
// wait out the daemon's SIGKILL fallback.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startTestServer } from "./support.ts";
import { fixturePath } from "../support/models.ts";

let sessions: string | undefined;
let closeIfLeft: (() => Promise<void>) | undefined;
afterAll(async () => {
  await closeIfLeft?.();
  if (sessions) rmSync(sessions, { recursive: true, force: true });
});

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe("lifecycle", () => {
  test("close() returns within 1.5 s, the worker process is gone and the port is closed", async () => {
    const s = await startTestServer();
    sessions = s.sessions;
    closeIfLeft = () => s.server.close();
    const pid = s.server.registry.default!.worker.pid!;
    expect(alive(pid)).toBe(true);
    const res = await fetch(`${s.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: s.model, messages: [{ role: "user", content: "hi" }], max_tokens: 2 }),
    });
    expect(res.status).toBe(200);
    await res.text();
    await s.server.close();
    closeIfLeft = undefined;
    expect(alive(pid)).toBe(false);
    expect(
      await fetch(`${s.url}/health`).then(
        () => "answered",
        () => "refused",
      ),
    ).toBe("refused");
  });
});

describe("listener", () => {
  test("a second server on a port in use exits 1 saying so (no silent port sharing)", async () => {
    const s = await startTestServer();
    // Its own sessions directory: the same one would be refused first, for the lock.
    const otherSessions = mkdtempSync(join(tmpdir(), "superfluid-second-"));
    try {
      const second = Bun.spawn(
        [
          process.execPath,
          `${import.meta.dir}/../../src/main.ts`,
          "serve",
          await fixturePath("tiny-random"),
          "--port",
          String(s.port),
          "--max-batch",
          "1",
          "--max-context",
          "512",
          "--threads",
          "1",
          "--sessions",
          otherSessions,
        ],
        { stdout: "ignore", stderr: "pipe" },
      );
      const timer = setTimeout(() => second.kill("SIGKILL"), 30_000);
      const code = await second.exited;
      clearTimeout(timer);
      expect(code).toBe(1);
      expect(await new Response(second.stderr).text()).toContain(`cannot listen on 127.0.0.1:${s.port}`);
    } finally {
      await s.server.close();
      rmSync(s.sessions, { recursive: true, force: true });
      rmSync(otherSessions, { recursive: true, force: true });
    }
  });
});
