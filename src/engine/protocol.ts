// Messages between the daemon and a worker process (Bun IPC, JSON). Token
// streams travel as one message per tick carrying every lane's new tokens, not
// one message per token.
import type { EngineSnapshot, FinishEvent, GenerateJob, TickEvents } from "./jobs.ts";

/** Bumped whenever a message changes shape; a peer on another version fails the handshake. */
export const PROTOCOL_VERSION = 3;

export interface WorkerInfo {
  protocol: number;
  model: string;
  lanes: number;
  sequences: number;
  /** The window: the most tokens one conversation (prompt and reply) may hold. */
  contextPerSequence: number;
  /** The KV pool as built, and why (kv-sizing.ts). */
  kv: {
    layout: "shared" | "per-lane";
    /** KV cells in all. */
    cells: number;
    bytes: number;
    bytesPerToken: number;
    /** One line for the startup log: the window, the pool and why. */
    summary: string;
  };
  trainedContext: number;
  embeddingLength: number;
  threads: number;
  prefillBudget: number;
  vocab: { size: number; bos: number; eos: number; eot: number; addBos: boolean; eog: number[] };
  capabilities: { generate: true; prefixCopy: true; embeddings: boolean; grammar: true };
  library: { path: string; source: string };
}

/** A request for the engine: the job itself, as the executor takes it. */
export type GenerateMessage = { type: "generate" } & GenerateJob;

export type DaemonToWorker =
  | GenerateMessage
  | { type: "cancel"; id: string }
  | { type: "stats"; id: string }
  | { type: "shutdown" };

export type WorkerToDaemon =
  | { type: "ready"; info: WorkerInfo }
  | ({ type: "tick" } & TickEvents)
  | { type: "stats"; id: string; snapshot: EngineSnapshot; at: number }
  | { type: "fatal"; message: string };

export type { EngineSnapshot, FinishEvent, TickEvents };
