// Linux scheduling policy of the daemon and its workers. When every core runs
// a decode thread (the default: as many threads as physical cores), each
// token's tick message wakes the daemon (journal, sync, SSE), and a woken
// SCHED_OTHER task preempts the thread that is running: that is the worker's
// main thread, between its send and the next llama_decode, so the daemon's
// work on the token sat on the decode path (0.3-0.5 ms of a 4.5 ms token at
// one lane, measured with bench/tick-profile.ts). A SCHED_BATCH task does not
// preempt on wakeup; it runs in the time the scheduler shares out as usual,
// and never later than a time slice. So the daemon runs SCHED_BATCH and each
// worker, which inherits it, sets itself back to SCHED_OTHER (told so by
// SUPERFLUID_SCHED_RESET in its environment). Either is a policy any
// unprivileged process may choose for its own threads; a daemon thread someone
// set to another policy (chrt -f, -i) is left alone. Elsewhere than Linux, and
// with SUPERFLUID_DAEMON_SCHED=normal, nothing changes.
// (docs/design.md#threads)
import { dlopen, ptr } from "bun:ffi";
import { readdirSync } from "node:fs";

const SCHED_OTHER = 0;
const SCHED_BATCH = 3;

type Libc = {
  sched_getscheduler(tid: number): number;
  sched_setscheduler(tid: number, policy: number, param: ReturnType<typeof ptr>): number;
};

let libc: Libc | null | undefined;

function openLibc(): Libc | null {
  if (libc !== undefined) return libc;
  libc = null;
  if (process.platform !== "linux") return libc;
  try {
    libc = dlopen("libc.so.6", {
      sched_getscheduler: { args: ["i32"], returns: "i32" },
      sched_setscheduler: { args: ["i32", "i32", "ptr"], returns: "i32" },
    }).symbols as unknown as Libc;
  } catch {} // no glibc (musl, ...): the default policy stays
  return libc;
}

/** Moves this process's threads that hold policy `from` to `to`; the count moved. */
function move(from: number, to: number): number {
  const c = openLibc();
  if (!c) return 0;
  const param = new Int32Array(1); // sched_priority: 0, the only one these policies take
  let moved = 0;
  let tids: string[];
  try {
    tids = readdirSync("/proc/self/task");
  } catch {
    return 0;
  }
  for (const tid of tids.map(Number)) {
    if (c.sched_getscheduler(tid) !== from) continue;
    if (c.sched_setscheduler(tid, to, ptr(param)) === 0) moved++;
  }
  return moved;
}

/** The daemon's threads (and the threads they start later) stop preempting decode threads on wakeup. */
export function daemonYieldsOnWakeup(env = process.env): number {
  if (env.SUPERFLUID_DAEMON_SCHED === "normal") return 0;
  const moved = move(SCHED_OTHER, SCHED_BATCH);
  // The workers this daemon starts from now on inherit the policy: they put it back.
  if (moved > 0) env.SUPERFLUID_SCHED_RESET = "1";
  return moved;
}

/** A worker started by a SCHED_BATCH daemon takes the normal policy back, before it starts its compute threads. */
export function workerRunsNormally(env = process.env): number {
  if (env.SUPERFLUID_SCHED_RESET !== "1") return 0;
  return move(SCHED_BATCH, SCHED_OTHER);
}

/** The policy of a thread of this process (0 SCHED_OTHER, 3 SCHED_BATCH), or undefined off Linux; for tests. */
export function threadPolicy(tid: number): number | undefined {
  return openLibc()?.sched_getscheduler(tid);
}
