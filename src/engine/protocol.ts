// Messages between the daemon and a worker process (Bun IPC, JSON). Token
// streams travel as one message per tick carrying every lane's new tokens, not
// one message per token.
import type { KvTypeName } from "../gguf/kv-type.ts";
import type { CpuInfo } from "../../ffi/cpu-variant.ts";
import type { DeviceFacts } from "../../ffi/devices.ts";
import type { BackendFailure } from "../../ffi/llama.ts";
import type { OffloadPlan } from "./offload.ts";
import type { EmbedJob, PoolingName } from "./embedder.ts";
import type { EngineSnapshot, FinishEvent, GenerateJob, TickEvents } from "./jobs.ts";
import type { SpeculationStrategyName } from "./speculation-directive.ts";

/** Bumped whenever a message changes shape; a peer on another version fails the handshake. */
export const PROTOCOL_VERSION = 9;

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
    /** The K and V element types (--kv-bits, --cache-type-k/-v). */
    typeK: KvTypeName;
    typeV: KvTypeName;
    /** One line for the startup log: the window, the pool and why. */
    summary: string;
  };
  trainedContext: number;
  embeddingLength: number;
  threads: number;
  prefillBudget: number;
  vocab: { size: number; bos: number; eos: number; eot: number; addBos: boolean; eog: number[] };
  /**
   * A worker serves either generation (a chat model) or embeddings (a model whose GGUF declares pooling), never both.
   */
  capabilities: { generate: boolean; prefixCopy: boolean; embeddings: boolean; grammar: boolean };
  /** An embedding worker's facts (src/engine/embedder.ts); absent on a generation worker. */
  embedding?: {
    pooling: PoolingName;
    /** Floats per vector: the embedding width, or a reranker's score count (rank pooling). */
    dimensions: number;
    /** The most tokens one input may hold. */
    maxInputTokens: number;
    /** Inputs one decode may carry. */
    batchInputs: number;
  };
  /** The libllama the worker opened, and the processor and ggml CPU variant its kernels run on (ffi/cpu-variant.ts). */
  library: { path: string; source: string; cpu: CpuInfo };
  /** Where the weights went (src/engine/offload.ts); null: no GPU took part, all on the CPU. */
  offload: OffloadPlan | null;
  /** Every device ggml registered (the CPU among them), with its memory when the weights were loaded. */
  devices: DeviceFacts[];
  /** GPU backends beside libllama that did not load, and why (ffi/llama.ts). */
  unloadedBackends: BackendFailure[];
  /**
   * The speculative decoding the worker runs (--speculate; docs/cli.md#speculative-decoding): "off" on embedding
   * workers.
   */
  speculation: SpeculationStrategyName;
  /** Why `--speculate auto` decodes this model plainly. */
  speculationNote?: string;
}

/** A LoRA adapter loaded on a worker (docs/api/lora.md): the daemon numbers them. */
export interface LoraAdapterInfo {
  id: number;
  path: string;
  scale: number;
}

/**
 * The LoRA admin messages, each answered by one `lora` message (the adapters
 * loaded after it, in id order) or `lora-failed`, under the request's `id`.
 * A new set applies to requests submitted after the message, once those
 * running under the previous set finish (Engine.setAdapters).
 */
export type LoraMessage =
  | { type: "lora-load"; id: string; adapter: LoraAdapterInfo }
  | { type: "lora-unload"; id: string; adapter: number }
  /** New scales for loaded adapters (those not named keep theirs). */
  | { type: "lora-scale"; id: string; scales: { id: number; scale: number }[] };

/** A request for the engine: the job itself, as the executor takes it. */
export type GenerateMessage = { type: "generate" } & GenerateJob;

/** Embed every input (token ids) of a request; answered by one `embedded` message. */
export type EmbedMessage = { type: "embed" } & EmbedJob;

export type DaemonToWorker =
  | GenerateMessage
  | EmbedMessage
  | LoraMessage
  | { type: "cancel"; id: string }
  | { type: "stats"; id: string }
  | { type: "shutdown" }
  /** To a standby worker (src/daemon/standby-worker.ts): the command line it now runs, "worker" left out. */
  | { type: "start"; argv: string[] };

export type WorkerToDaemon =
  | { type: "ready"; info: WorkerInfo }
  | ({ type: "tick" } & TickEvents)
  | { type: "stats"; id: string; snapshot: EngineSnapshot; at: number }
  /** `away`: what the worker needs is elsewhere and gone (an RPC worker), not broken here: the daemon answers 503. */
  | { type: "fatal"; message: string; away?: boolean }
  /**
   * The standby worker's devices, once its libllama and backends are loaded (null: the library did not open):
   * the daemon's fit check reads them instead of loading the backends itself (src/daemon/standby-worker.ts).
   */
  | { type: "devices"; devices: DeviceFacts[] | null }
  /**
   * An embed job's vectors, inputs in order, as one base64 string of
   * little-endian float32s (`dimensions` per input; a JSON number array
   * would be ~3x larger and slower to parse); or why it failed.
   */
  | { type: "embedded"; id: string; dimensions: number; data: string }
  | { type: "embed-failed"; id: string; error: string }
  | { type: "lora"; id: string; adapters: LoraAdapterInfo[] }
  | { type: "lora-failed"; id: string; error: string };

export type { EngineSnapshot, FinishEvent, TickEvents };
