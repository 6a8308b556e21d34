import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { acquireDirLock, SessionsLockedError } from "../../src/session-log/lock.ts";

const PROBE = join(import.meta.dir, "lock-probe.ts");
const dirs: string[] = [];
const pids: number[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "sf-lock-"));
  dirs.push(d);
  return d;
}
function killQuietly(pid: number, sig: NodeJS.Signals = "SIGKILL") {
  try {
    process.kill(pid, sig);
  } catch {}
}
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
afterEach(() => {
  for (const p of pids.splice(0)) killQuietly(p);
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

interface ProbeResult {
  ok: boolean;
  name?: string;
  message?: string;
  child?: number;
}

/** Runs the probe to completion and returns what it printed. */
async function probe(mode: string, dir: string): Promise<ProbeResult> {
  const p = Bun.spawn([process.execPath, PROBE, mode, dir], { stdout: "pipe", stderr: "pipe" });
  const [out, err] = [await new Response(p.stdout).text(), await new Response(p.stderr).text()];
  await p.exited;
  if (!out.trim()) throw new Error(`probe printed nothing: ${err}`);
  return JSON.parse(out.trim().split("\n")[0]!);
}

/** Starts a probe that holds the lock, returns once it says so. */
async function holder(mode: "hold" | "hold-leak", dir: string): Promise<{ proc: Bun.Subprocess; child: number }> {
  const proc = Bun.spawn([process.execPath, PROBE, mode, dir], { stdout: "pipe", stderr: "inherit" });
  pids.push(proc.pid);
  const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`holder exited early: ${text}`);
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  const r = JSON.parse(text.split("\n")[0]!) as ProbeResult;
  if (!r.ok || !r.child) throw new Error(`holder failed: ${text}`);
  pids.push(r.child);
  return { proc, child: r.child };
}

describe("sessions directory lock", () => {
  test("in process: a second acquire fails while held, succeeds after release", () => {
    const dir = tempDir();
    const lock = acquireDirLock(dir);
    expect(lock.path).toBe(join(dir, "serve.lock"));
    expect(readFileSync(lock.path, "utf8").trim()).toBe(String(process.pid));
    expect(() => acquireDirLock(dir)).toThrow(SessionsLockedError);
    lock.release();
    lock.release(); // idempotent
    acquireDirLock(dir).release();
  });

  test("another process cannot take a held lock, and is told the holder's pid", async () => {
    const dir = tempDir();
    const lock = acquireDirLock(dir);
    try {
      const r = await probe("acquire", dir);
      expect(r).toEqual({
        ok: false,
        name: "SessionsLockedError",
        message: `sessions directory ${dir} is in use by another superfluid server (pid ${process.pid})`,
      });
      expect((await probe("open", dir)).name).toBe("SessionsLockedError");
    } finally {
      lock.release();
    }
    expect(await probe("acquire", dir)).toEqual({ ok: true });
  });

  test.if(process.platform !== "win32")(
    "a SIGKILLed holder's lock is taken over silently while its child process lives on",
    async () => {
      const dir = tempDir();
      const { proc, child } = await holder("hold", dir);
      const r1 = await probe("acquire", dir);
      expect(r1.name).toBe("SessionsLockedError");
      expect(r1.message).toContain(`(pid ${proc.pid})`);
      proc.kill("SIGKILL");
      await proc.exited;
      expect(alive(child)).toBe(true);
      // The stale file still names the dead holder; the lock must be free anyway.
      expect(readFileSync(join(dir, "serve.lock"), "utf8").trim()).toBe(String(proc.pid));
      expect(await probe("acquire", dir)).toEqual({ ok: true });
      expect(alive(child)).toBe(true); // the child did not keep the lock
      killQuietly(child);
    },
  );

  // Shows the test above can fail: a child that does inherit the lock's descriptor keeps the lock.
  test.if(process.platform === "linux")(
    "control: a child holding the lock's descriptor keeps the lock after the parent dies",
    async () => {
      const dir = tempDir();
      const { proc, child } = await holder("hold-leak", dir);
      proc.kill("SIGKILL");
      await proc.exited;
      expect(alive(child)).toBe(true);
      expect((await probe("acquire", dir)).name).toBe("SessionsLockedError");
      killQuietly(child);
      let r = await probe("acquire", dir); // free once the child is gone (it may linger a moment as a zombie)
      for (let i = 0; i < 20 && !r.ok; i++) {
        await Bun.sleep(50);
        r = await probe("acquire", dir);
      }
      expect(r).toEqual({ ok: true });
    },
  );
});
