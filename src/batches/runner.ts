// Running one batch's requests (docs/api/batches.md#running): one at a time,
// in file order, each recorded durably before the next starts; those already
// recorded (a batch resumed after a restart) are skipped. A stop (cancel,
// expiry, server shutdown) aborts the request in flight, whose cut-off reply
// is not a result: a cancelled or expired batch never ran it, and a resumed
// one runs it again from the start. The lines come from the input file as
// the run reaches them (input.ts batchLines), so one body is held at a time.
import type { BatchLine } from "./input.ts";
import { resultOf, type LineReply } from "./output.ts";
import type { LineResult, ResultLog } from "./state.ts";

/** Runs one request's body (the endpoint's handler in process); aborting `signal` cancels its generation. */
export type LineExecutor = (body: Record<string, unknown>, signal: AbortSignal) => Promise<LineReply>;

export type StopReason = "cancel" | "expire" | "shutdown";

export class BatchRun {
  private stopReason: StopReason | undefined;
  private inFlight: AbortController | undefined;

  constructor(
    /** The lines still to run (those with a recorded result left out), in file order. */
    private readonly lines: AsyncIterable<BatchLine>,
    private readonly log: ResultLog,
    private readonly execute: LineExecutor,
    /** Hears each result once it is on disk. */
    private readonly recorded: (r: LineResult) => void,
  ) {}

  /** Runs to the end ("done") or to the first stop, whose reason it returns. */
  async run(): Promise<"done" | StopReason> {
    // Leaving the loop early closes the input file.
    for await (const line of this.lines) {
      if (this.stopReason) return this.stopReason;
      const controller = new AbortController();
      this.inFlight = controller;
      let reply: LineReply;
      try {
        reply = await this.execute(line.body, controller.signal);
      } catch (err) {
        // The executor answers errors as replies; anything thrown is the server's fault
        // (logged here: its message may name this machine's folders, so the line does not carry it).
        console.error(`superfluid: batch line ${line.customId}: ${(err as Error)?.message ?? String(err)}`);
        reply = {
          status: 500,
          body: {
            error: {
              message: "internal error while running this request",
              type: "server_error",
              param: null,
              code: null,
            },
          },
        };
      } finally {
        this.inFlight = undefined;
      }
      if (controller.signal.aborted) return this.stopReason!;
      const result = resultOf(line.i, line.customId, reply);
      await this.log.append(result);
      this.recorded(result);
    }
    return this.stopReason ?? "done";
  }

  /** Stops before the next request and aborts the one in flight; the first reason given wins. */
  stop(reason: StopReason): void {
    this.stopReason ??= reason;
    this.inFlight?.abort();
  }
}
