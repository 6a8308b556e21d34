// Which batches run (docs/api/batches.md#queue): at most `running` at once;
// the others wait first in, first out, and a full waiting line refuses new
// ones. The queue knows batches by id only; what running one means is the
// caller's `start`.

export interface QueueLimits {
  /** Batches that run at once. */
  running: number;
  /** Batches that may wait for a slot; one more is refused. */
  waiting: number;
}

export const DEFAULT_QUEUE_LIMITS: QueueLimits = { running: 4, waiting: 256 };

export class BatchQueue {
  private readonly waitingIds: string[] = [];
  private readonly runningIds = new Set<string>();

  constructor(
    readonly limits: QueueLimits,
    /** Called when a batch gets a slot; it must call `done(id)` when it leaves it. */
    private readonly start: (id: string) => void,
  ) {}

  /** True when a new batch would have to be refused. */
  get full(): boolean {
    return this.waitingIds.length >= this.limits.waiting && this.runningIds.size >= this.limits.running;
  }

  get waiting(): number {
    return this.waitingIds.length;
  }

  get running(): number {
    return this.runningIds.size;
  }

  /** Adds a batch at the tail (a check of `full` comes first where new batches are refused). */
  enqueue(id: string): void {
    this.waitingIds.push(id);
    this.pump();
  }

  /** Takes a waiting batch out of line (cancelled or expired before it ran); false if it was not waiting. */
  remove(id: string): boolean {
    const at = this.waitingIds.indexOf(id);
    if (at < 0) return false;
    this.waitingIds.splice(at, 1);
    return true;
  }

  /** A running batch has left its slot: the next waiting one starts. */
  done(id: string): void {
    if (this.runningIds.delete(id)) this.pump();
  }

  private pump(): void {
    while (this.runningIds.size < this.limits.running && this.waitingIds.length > 0) {
      const id = this.waitingIds.shift()!;
      this.runningIds.add(id);
      this.start(id);
    }
  }
}
