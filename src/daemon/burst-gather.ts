// Burst gathering (docs/design.md#burst-gathering). Requests that arrive
// together reach the worker one by one: each is tokenized on the prompt
// thread in turn, and the first one sent to an idle worker starts a prefill
// tick of its own, which then holds both cores while the others are still
// being tokenized. They all wait for that tick, and for a second one.
// Instead, a generation sent to an idle worker while other prompts are still
// being prepared is held until they are ready (or a few milliseconds pass),
// and then all go at once, to be prefilled in one tick. A request that
// arrives alone, or while the worker is decoding, is never held.

/** The longest a held generation waits for the prompts being prepared beside it. */
export const GATHER_MAX_MS = 10;

export class BurstGather<T> {
  private jobs: T[] = [];
  private timer?: ReturnType<typeof setTimeout>;

  constructor(
    /** Sends one job on to the worker. */
    private readonly send: (job: T) => void,
    private readonly maxWaitMs = GATHER_MAX_MS,
  ) {}

  /** Jobs held now. */
  get size(): number {
    return this.jobs.length;
  }

  /**
   * Takes `job` to hold, or returns false: send it now. `workerIdle`: no
   * generation runs in the worker (apart from those held here); `preparing`:
   * prompts of other requests still being rendered or tokenized; `lanes`:
   * the most a tick can admit, past which waiting gains nothing.
   */
  offer(job: T, workerIdle: boolean, preparing: number, lanes: number): boolean {
    if (this.jobs.length === 0 && (!workerIdle || preparing === 0)) return false;
    this.jobs.push(job);
    if (preparing === 0 || this.jobs.length >= lanes) this.release();
    else this.timer ??= setTimeout(() => this.release(), this.maxWaitMs);
    return true;
  }

  /** Sends every held job, in the order they came. */
  release(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const jobs = this.jobs;
    this.jobs = [];
    for (const job of jobs) this.send(job);
  }

  /** Forgets the held jobs without sending them (their worker is gone; they are sent again to the next). */
  drop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.jobs = [];
  }
}
