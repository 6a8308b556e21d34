// Messages between the daemon and a worker process (Bun IPC, JSON). Token
// streams travel as one message per tick carrying every lane's new tokens, not
// one message per token.
import type { FinishEvent, TickEvents } from "./engine.ts";
import type { SamplingSpec } from "./sampling.ts";

/** Bumped whenever a message changes shape; a peer on another version fails the handshake. */
export const PROTOCOL_VERSION = 1;

export interface WorkerInfo {
  protocol: number;
  model: string;
  lanes: number;
  sequences: number;
  contextPerSequence: number;
  trainedContext: number;
  embeddingLength: number;
  threads: number;
  prefillBudget: number;
  vocab: { size: number; bos: number; eos: number; eot: number; addBos: boolean; eog: number[] };
  capabilities: { generate: true; prefixCopy: true; embeddings: boolean; grammar: boolean };
  library: { path: string; source: string };
}

export interface GenerateMessage {
  type: "generate";
  id: string;
  prompt: number[];
  sampling: SamplingSpec;
  maxTokens: number;
  ignoreEos: boolean;
}

export type DaemonToWorker = GenerateMessage | { type: "cancel"; id: string } | { type: "shutdown" };

export type WorkerToDaemon =
  | { type: "ready"; info: WorkerInfo }
  | ({ type: "tick" } & TickEvents)
  | { type: "fatal"; message: string };

export type { FinishEvent, TickEvents };
