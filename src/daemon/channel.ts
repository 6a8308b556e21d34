// A push-to-pull queue: the producer pushes events as they come, the consumer
// reads them with `for await`. Ending it (close or fail) wakes the reader.
export class Channel<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private waiter?: () => void;
  private ended = false;
  private failure?: Error;

  /** `onEnd` runs once, when the channel is closed or failed. */
  constructor(private readonly onEnd?: () => void) {}

  push(item: T): void {
    if (this.ended) return;
    this.items.push(item);
    this.wake();
  }

  close(): void {
    if (!this.ended) this.onEnd?.();
    this.ended = true;
    this.wake();
  }

  fail(error: Error): void {
    if (this.ended) return;
    this.failure = error;
    this.ended = true;
    this.onEnd?.();
    this.wake();
  }

  get closed(): boolean {
    return this.ended;
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      if (this.items.length > 0) {
        yield this.items.shift()!;
        continue;
      }
      if (this.failure) throw this.failure;
      if (this.ended) return;
      await new Promise<void>((resolve) => (this.waiter = resolve));
    }
  }
}
