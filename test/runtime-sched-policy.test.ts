// The daemon's threads run SCHED_BATCH (their wakeups do not preempt a decode
// thread) and a worker it starts takes SCHED_OTHER back before its compute
// threads start (src/runtime/sched-policy.ts). Run in child processes, so the
// test runner's own policy stays as it was.
import { describe, expect, test } from "bun:test";

const policyModule = new URL("../src/runtime/sched-policy.ts", import.meta.url).pathname;

async function runChild(script: string, env: Record<string, string | undefined> = {}): Promise<Record<string, unknown>> {
  const child = Bun.spawn([process.execPath, "-e", script], { env: { ...process.env, SUPERFLUID_SCHED_RESET: undefined, ...env }, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  if (code !== 0) throw new Error(`child failed (${code}): ${err}`);
  return JSON.parse(out.trim().split("\n").at(-1)!);
}

// The daemon side: move to batch, then start a "worker" that takes the normal policy back.
const DAEMON = `
import { daemonYieldsOnWakeup, threadPolicy } from ${JSON.stringify(policyModule)};
const before = threadPolicy(process.pid);
const moved = daemonYieldsOnWakeup();
const after = threadPolicy(process.pid);
const worker = Bun.spawn([process.execPath, "-e", ${JSON.stringify(`
import { workerRunsNormally, threadPolicy } from ${JSON.stringify(policyModule)};
const inherited = threadPolicy(process.pid);
workerRunsNormally();
console.log(JSON.stringify({ inherited, now: threadPolicy(process.pid) }));`)}], { stdout: "pipe", env: { ...process.env } });
const w = JSON.parse((await new Response(worker.stdout).text()).trim());
console.log(JSON.stringify({ before, moved, after, reset: process.env.SUPERFLUID_SCHED_RESET ?? null, worker: w }));
`;

describe.skipIf(process.platform !== "linux")("scheduling policy (Linux)", () => {
  test("the daemon's threads go SCHED_BATCH, and its worker comes back to SCHED_OTHER", async () => {
    const r = await runChild(DAEMON);
    expect(r.before).toBe(0); // SCHED_OTHER
    expect(r.moved).toBeGreaterThan(0);
    expect(r.after).toBe(3); // SCHED_BATCH
    expect(r.reset).toBe("1");
    expect(r.worker).toEqual({ inherited: 3, now: 0 });
  });

  test("SUPERFLUID_DAEMON_SCHED=normal leaves the policy alone, and a worker not told to reset keeps what it has", async () => {
    const r = await runChild(DAEMON, { SUPERFLUID_DAEMON_SCHED: "normal" });
    expect(r).toMatchObject({ before: 0, moved: 0, after: 0, reset: null, worker: { inherited: 0, now: 0 } });
  });
});
