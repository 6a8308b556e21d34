// Linux scheduling policy of the daemon's main thread. When every core runs a
// decode thread (the default: as many threads as physical cores), each token's
// tick message wakes the daemon (journal, sync, SSE), and a woken SCHED_OTHER
// thread preempts the one running: the worker's main thread, between its send
// and the next llama_decode, so the daemon's work on each token sat on the
// decode path (0.58 ms of a 5.3 ms token at one lane on a 2-core EPYC,
// bench/tick-profile.ts). A SCHED_BATCH thread does not preempt on wakeup; it
// runs in its share of the CPU as the scheduler gives it out, a little later.
// That suits streaming, where throughput is what counts, and not a request
// waiting for its first token, nor an idle server's next request. So the main
// thread runs SCHED_BATCH only while generations stream and none awaits its
// first token (trackGeneration), and SCHED_OTHER otherwise. A worker started
// while it is batch inherits that, and sets itself back to SCHED_OTHER (told
// so by SUPERFLUID_SCHED_RESET in its environment). Both are policies any
// unprivileged process may choose for its own threads. Elsewhere than Linux,
// and with SUPERFLUID_DAEMON_SCHED=normal, nothing changes.
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

/** daemonYieldsWhileStreaming was called and may change the main thread's policy. */
let enabled = false;
/** Generations in flight, and those of them without their first token yet. */
let streaming = 0;
let awaitingFirst = 0;
let applied = SCHED_OTHER;

/** The daemon's main thread yields on wakeup while generations stream (see the header). */
export function daemonYieldsWhileStreaming(env = process.env): boolean {
  const c = openLibc();
  if (env.SUPERFLUID_DAEMON_SCHED === "normal" || !c || threadPolicy(process.pid) !== SCHED_OTHER) return false;
  // Some sandboxes refuse sched_setscheduler (seccomp, gVisor): then the policy stays as it is.
  const param = ptr(new Int32Array(1));
  if (c.sched_setscheduler(process.pid, SCHED_BATCH, param) !== 0) return false;
  c.sched_setscheduler(process.pid, SCHED_OTHER, param);
  enabled = true;
  // The workers this daemon starts while batch inherit the policy: they put it back.
  env.SUPERFLUID_SCHED_RESET = "1";
  apply();
  return true;
}

function apply(): void {
  if (!enabled) return;
  const want = streaming > 0 && awaitingFirst === 0 ? SCHED_BATCH : SCHED_OTHER;
  if (want === applied) return;
  // The main thread's id is the process id.
  if (openLibc()!.sched_setscheduler(process.pid, want, ptr(new Int32Array(1))) !== 0) return;
  applied = want;
  // Threads the main thread started while batch (Bun's pool, which runs the journal's
  // fdatasync; a prompt thread) inherited it: they come back with it.
  if (want === SCHED_OTHER) move(SCHED_BATCH, SCHED_OTHER);
}

export interface GenerationTrack {
  /** Its first token was delivered (or it ended before one). Idempotent. */
  firstToken(): void;
  /** It ended. Idempotent; implies firstToken. */
  ended(): void;
}

/** Counts a generation in flight for the main thread's policy until it ends. */
export function trackGeneration(): GenerationTrack {
  streaming++;
  awaitingFirst++;
  apply();
  let first = false;
  let done = false;
  const track: GenerationTrack = {
    firstToken() {
      if (first) return;
      first = true;
      awaitingFirst--;
      apply();
    },
    ended() {
      if (done) return;
      done = true;
      track.firstToken();
      streaming--;
      apply();
    },
  };
  return track;
}

/** A worker started by a SCHED_BATCH daemon takes the normal policy back, before it starts its compute threads. */
export function workerRunsNormally(env = process.env): number {
  if (env.SUPERFLUID_SCHED_RESET !== "1") return 0;
  return move(SCHED_BATCH, SCHED_OTHER);
}

/** The policy of a thread of this process (0 SCHED_OTHER, 3 SCHED_BATCH), or undefined off Linux. */
export function threadPolicy(tid: number): number | undefined {
  return openLibc()?.sched_getscheduler(tid);
}
