// The daemon's main thread runs SCHED_BATCH while generations stream and none
// awaits its first token, SCHED_OTHER otherwise; a worker started while it is
// batch takes SCHED_OTHER back (src/runtime/sched-policy.ts). Run in child
// processes, so the test runner's own policy stays as it was.
import { describe, expect, test } from "bun:test";

const policyModule = new URL("../../src/runtime/sched-policy.ts", import.meta.url).pathname;
const OTHER = 0;
const BATCH = 3;

async function runChild(
  script: string,
  env: Record<string, string | undefined> = {},
): Promise<Record<string, unknown>> {
  const child = Bun.spawn([process.execPath, "-e", script], {
    env: { ...process.env, SUPERFLUID_SCHED_RESET: undefined, ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited,
  ]);
  if (code !== 0) throw new Error(`child failed (${code}): ${err}`);
  return JSON.parse(out.trim().split("\n").at(-1)!);
}

// Two generations' lives, the main thread's policy after each step, and a worker started mid-stream.
const LIVES = `
import { daemonYieldsWhileStreaming, trackGeneration, threadPolicy } from ${JSON.stringify(policyModule)};
const seen = [];
const main = () => seen.push(threadPolicy(process.pid));
const enabled = daemonYieldsWhileStreaming();
const { readdirSync } = await import("node:fs");
const tids = () => readdirSync("/proc/self/task").map(Number);
main();                 // idle
const a = trackGeneration();
main();                 // a awaits its first token
a.firstToken();
main();                 // a streams
// A thread started while the main thread is batch (Bun's pool, a prompt thread) inherits it...
const before = new Set(tids());
const thread = new Worker("data:text/javascript,setInterval(() => {}, 1000)");
await new Promise((r) => thread.addEventListener("open", r));
const born = tids().filter((t) => !before.has(t));
const bornPolicies = () => [...new Set(born.map((t) => threadPolicy(t)))];
const bornWhileBatch = bornPolicies();
const b = trackGeneration();
// ...and comes back to SCHED_OTHER with the main thread.
const bornAfter = bornPolicies();
thread.terminate();
main();                 // b awaits its first token
b.firstToken(); b.firstToken();
main();                 // both stream
const worker = Bun.spawn([process.execPath, "-e", ${JSON.stringify(`
import { workerRunsNormally, threadPolicy } from ${JSON.stringify(policyModule)};
const inherited = threadPolicy(process.pid);
workerRunsNormally();
console.log(JSON.stringify({ inherited, now: threadPolicy(process.pid) }));`)}], { stdout: "pipe", env: { ...process.env } });
const w = JSON.parse((await new Response(worker.stdout).text()).trim());
a.ended(); a.ended();
main();                 // b still streams
b.ended();
main();                 // idle again
const c = trackGeneration();
c.ended();              // ended before any token
main();
console.log(JSON.stringify({ enabled, seen, reset: process.env.SUPERFLUID_SCHED_RESET ?? null, worker: w, bornWhileBatch, bornAfter, born: born.length }));
`;

describe.skipIf(process.platform !== "linux")("scheduling policy (Linux)", () => {
  test("batch only while generations stream and none awaits its first token; threads and workers started then come back to SCHED_OTHER", async () => {
    const r = await runChild(LIVES);
    // A sandbox that refuses sched_setscheduler leaves the policy alone (and there is nothing to check).
    if (!r.enabled) return;
    expect(r.born).toBeGreaterThan(0);
    expect(r.bornWhileBatch).toContain(BATCH);
    expect(r.bornAfter).toEqual([OTHER]);
    expect(r.seen).toEqual([OTHER, OTHER, BATCH, OTHER, BATCH, BATCH, OTHER, OTHER]);
    expect(r.reset).toBe("1");
    expect(r.worker).toEqual({ inherited: BATCH, now: OTHER });
  });

  test("SUPERFLUID_DAEMON_SCHED=normal leaves the policy alone, and a worker not told to reset keeps what it has", async () => {
    const r = await runChild(LIVES, { SUPERFLUID_DAEMON_SCHED: "normal" });
    expect(r).toMatchObject({
      enabled: false,
      seen: [OTHER, OTHER, OTHER, OTHER, OTHER, OTHER, OTHER, OTHER],
      reset: null,
      worker: { inherited: OTHER, now: OTHER },
      bornWhileBatch: [OTHER],
    });
  });
});
