// The loop every kind of worker runs (generation, embeddings): daemon
// messages in between turns of work, idle until a message brings some,
// `shutdown` or the daemon going away (its IPC channel closing) ending it.
import type { DaemonToWorker, WorkerInfo, WorkerToDaemon } from "../engine/protocol.ts";
import { IdleMemory } from "../runtime/idle-memory.ts";

export interface WorkerLoop {
  /** One daemon message other than shutdown. */
  onMessage(message: DaemonToWorker): void;
  hasWork(): boolean;
  /** One turn of work (a tick, a decode of queued inputs), with whatever it sends. */
  step(): void;
  /** The work ran out: let compute threads sleep rather than poll (ffi/threadpool.ts). */
  idle?(): void;
  close(): void;
}

/**
 * Announces the worker (`ready`) and serves until shutdown; the exit code of
 * `superfluid worker` (1 when a turn of work failed). `gatherFirst`: yield
 * to the event loop before a turn rather than after it, so messages that
 * arrive together join the same turn (embedding inputs sharing a decode).
 */
export async function serveLoop(
  loop: WorkerLoop,
  info: WorkerInfo,
  send: (message: WorkerToDaemon) => void,
  gatherFirst = false,
): Promise<number> {
  let wake: (() => void) | undefined;
  let closing = false;
  const yieldToMessages = () => new Promise<void>((resolve) => setImmediate(resolve));
  process.on("message", (message: DaemonToWorker) => {
    if (message.type === "shutdown") closing = true;
    else loop.onMessage(message);
    wake?.();
  });
  process.on("disconnect", () => {
    closing = true;
    wake?.();
  });
  send({ type: "ready", info });
  // A burst of work leaves its peak heap behind: given back once idle a while.
  const memory = new IdleMemory();
  try {
    while (!closing) {
      if (!loop.hasWork()) {
        loop.idle?.();
        memory.idleNow();
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        // Messages sent together (a gathered burst of generations) arrive in one read but
        // are handed over one by one: take them all before the first turn of work.
        await yieldToMessages();
        continue;
      }
      memory.working();
      if (gatherFirst) await yieldToMessages();
      loop.step();
      // Let IPC messages (new requests, cancels) in between turns.
      if (!gatherFirst) await yieldToMessages();
    }
  } catch (err) {
    send({ type: "fatal", message: (err as Error).stack ?? String(err) });
    return 1;
  }
  loop.close();
  return 0;
}
