// Gives memory back once a process has been idle for a moment: a full
// garbage collection, then (on glibc) malloc_trim, which returns the free
// pages of the C heap that a burst of large prompts left behind. Without it
// a daemon or worker keeps its peak footprint after a burst for as long as
// it stays idle, since neither collector runs without allocations to prompt
// it. Run only after IDLE_MS with nothing to do, and after enough work since the last one.
import { dlopen, FFIType } from "bun:ffi";

/** How long a process must have been idle before it collects. */
export const IDLE_MS = 2000;

/**
 * Units of work (requests, ticks) since the last release that make another
 * worth it: a lone health probe every few seconds must not buy a full
 * collection each time, a burst of requests does.
 */
export const MIN_WORK = 32;

/** glibc's malloc_trim(0), or a no-op where there is none (macOS, Windows, musl). */
function loadTrim(): () => void {
  if (process.platform !== "linux") return () => {};
  try {
    const libc = dlopen("libc.so.6", { malloc_trim: { args: [FFIType.u64], returns: FFIType.i32 } });
    return () => void libc.symbols.malloc_trim(0);
  } catch {
    return () => {};
  }
}

let trim: (() => void) | undefined;

/** A full collection and a trim of the C heap. */
export function releaseMemory(): void {
  Bun.gc(true);
  (trim ??= loadTrim())();
}

/**
 * Counts work in flight; once the count has been zero for `idleMs` after at
 * least `minWork` units of work, releases memory once (until more work comes
 * and goes). A request that arrives during a release waits for it: a full
 * collection of a server's heap takes a few milliseconds.
 */
export class IdleMemory {
  private inFlight = 0;
  /** Units of work since the last release. */
  private work = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly idleMs = IDLE_MS,
    private readonly release: () => void = releaseMemory,
    private readonly minWork = MIN_WORK,
  ) {}

  /** One more piece of work in flight (end it with done()). */
  busy(): void {
    this.inFlight++;
    this.working();
  }

  /** For a loop that knows only busy and idle turns: a turn of work ran (no count). */
  working(): void {
    this.work++;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  done(): void {
    this.inFlight = Math.max(0, this.inFlight - 1);
    this.settle();
  }

  /** For a loop that knows only busy and idle turns: it has nothing to do now. */
  idleNow(): void {
    this.inFlight = 0;
    this.settle();
  }

  private settle(): void {
    if (this.inFlight > 0 || this.work < this.minWork || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.inFlight > 0) return;
      this.work = 0;
      this.release();
    }, this.idleMs);
    // Never what keeps a process alive.
    this.timer.unref?.();
  }
}
