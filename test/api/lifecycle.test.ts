// Server lifecycle: close() shuts the listener and the worker down promptly.
// The worker is asked to shut down over IPC; it should exit on its own, not
// wait out the daemon's SIGKILL fallback.
import { afterAll, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { startTestServer } from "./support.ts";

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
      body: JSON.stringify({ model: s.model, messages: [{ role: "user", content: "hi" }], max_tokens: 2 }),
    });
    expect(res.status).toBe(200);
    await res.text();
    const started = performance.now();
    await s.server.close();
    closeIfLeft = undefined;
    const elapsed = performance.now() - started;
    expect(alive(pid)).toBe(false);
    expect(await fetch(`${s.url}/health`).then(() => "answered", () => "refused")).toBe("refused");
    expect(elapsed).toBeLessThan(1500);
  });
});
