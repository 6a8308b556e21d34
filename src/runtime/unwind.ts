// A start's clean-ups in one place: each step that opens something defers its undoing here, and a failed start
// undoes everything opened so far, last first (AsyncDisposableStack's order, with the failure handed to each step).
export class Unwind {
  private readonly steps: ((err: Error) => unknown)[] = [];

  /** `undo` runs if the start fails, before the undoing of everything deferred earlier; it is told the failure. */
  defer(undo: (err: Error) => unknown): void {
    this.steps.push(undo);
  }

  /**
   * Runs `start`; when it throws, everything deferred is undone, last first, and its error is thrown on. An undoing
   * that throws stops the rest, and its error is the one thrown.
   */
  async guard<T>(start: () => Promise<T>): Promise<T> {
    try {
      return await start();
    } catch (err) {
      for (const undo of this.steps.splice(0).reverse()) await undo(err as Error);
      throw err;
    }
  }
}
