// What the engine takes and gives: a generation job, the events of a tick,
// how a generation ends, and the live snapshot /slots shows. Shared by the
// engine, the worker protocol and the daemon.
import type { TokenLogprob } from "./logprobs.ts";
import type { SamplingSpec } from "./sampling.ts";
import type { QosClass } from "./scheduler.ts";

export interface GenerateJob {
  id: string;
  prompt: number[];
  sampling: SamplingSpec;
  /** Most tokens to generate; the context window caps it further. */
  maxTokens: number;
  /** Decode to maxTokens even past end-of-generation tokens. */
  ignoreEos: boolean;
  /** Report each token's logprob and this many alternatives (0-20); off when undefined. */
  logprobs?: number;
  /** GBNF (root rule `root`) the reply must match. */
  grammar?: string;
  /**
   * Makes the grammar lazy: free text until this marker appears, the grammar from
   * the marker on (tool_choice "auto": a call that starts is held to its schema).
   */
  grammarTrigger?: string;
  /** Tokens never sampled (a tool wire's call openers when no call may be made). */
  bannedTokens?: number[];
  /** QoS class (docs/api/openai.md#qos-classes); agent when unset. */
  qos?: QosClass;
  /**
   * The request this job is one choice of (`n` > 1, or a completion's prompt
   * array): jobs of one group share their class's lanes fairly with other
   * requests (docs/design.md#fair-share). Unset: the job is a request of its own.
   */
  group?: string;
  /** Unix ms by which it must have started; still queued then, it finishes as "expired" (FIM deadline). */
  startBy?: number;
  /**
   * Prompt prefixes to keep in the KV pool (docs/design.md#pinned-prefixes): the first
   * `length` tokens for `ttlMs` milliseconds from admission; at most 4.
   */
  pins?: { length: number; ttlMs: number }[];
  /**
   * Seed each sampled draw from (sampling.seed, stream position) rather than
   * one random stream for the job: a generation continued after a cut (its
   * prompt the uncut one's stream so far) draws what the uncut one would.
   * The position of a token is prompt.length plus the tokens the job
   * generated before it. Only matters when temperature > 0.
   */
  positionSeeded?: boolean;
  /**
   * Parking (src/engine/park.ts): an absolute file path the lane's KV is
   * sealed to when the job finishes normally (stop, length, cancelled; never
   * on error or expiry).
   */
  park?: string;
  /**
   * A park artifact to restore before prefilling: used when it is intact, made
   * by this model, covers a prefix of the prompt (by token digest) and gives
   * more than the prefix cache would; ignored otherwise.
   */
  resume?: string;
}

/** A generation as the daemon asks for it: the job without its id (the daemon assigns one), ignoreEos optional. */
export type GenerateRequest = Omit<GenerateJob, "id" | "ignoreEos"> & { ignoreEos?: boolean };

export type FinishReason = "stop" | "length" | "cancelled" | "error" | "expired";

export interface FinishEvent {
  id: string;
  reason: FinishReason;
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
  error?: string;
  /** The error is the request's own fault (a grammar that cannot go on, a prompt that cannot fit). */
  clientError?: boolean;
  /** Speculative decoding's tally for this request, when it drafted at least once (src/engine/speculation.ts). */
  spec?: SpecTally;
  /** The lane's KV was sealed to GenerateJob.park: the tokens it covers and the file's size. */
  parked?: { tokens: number; bytes: number };
  /** Of cachedTokens, the ones restored from GenerateJob.resume (a park artifact), not the prefix cache. */
  resumedTokens?: number;
}

/** Draft tokens proposed for a request and how many of them the model accepted. */
export interface SpecTally {
  proposed: number;
  accepted: number;
}

export type TokenEvent = [id: string, token: number, logprobs?: TokenLogprob];

export interface TickEvents {
  /** Requests that got a lane this tick, with how many prompt tokens their KV already held. */
  admitted: { id: string; cachedTokens: number; resumedTokens?: number }[];
  /** [request id, token, logprobs when asked] in generation order. */
  tokens: TokenEvent[];
  finished: FinishEvent[];
}

export interface EngineSnapshot {
  lanes: number;
  activeLanes: number;
  queued: number;
  prefilling: number;
  sequences: number;
  /** "per-lane": each sequence its own buffer; "shared": one pool all draw from. */
  layout: "per-lane" | "shared";
  /** The most tokens one conversation may hold (the window). */
  cellsPerSequence: number;
  /** KV cells in all. */
  poolCells: number;
  /** Cells in use, cells shared by several sequences counted once. */
  cellsUsed: number;
  /** The sequences (KV buffers) live lanes sit on, ascending. */
  liveSequences: number[];
  /** The prompt tokens the next tick may take, as the budget rules size it now. */
  prefillBudget: number;
  /** Learned milliseconds per prompt token (undefined until a prefill tick was seen). */
  msPerPromptToken?: number;
  /** Queued requests per class: interactive, completion, agent, background. */
  queueDepths: [number, number, number, number];
  /** Live lanes per class. */
  classLanes: [number, number, number, number];
  /** Preempted requests waiting to resume. */
  paused: number;
  preemptions: number;
  resumes: number;
  starvationGrants: number;
  expired: number;
  ticks: number;
  /**
   * Sampled tokens fed back through llama_decode: one per decoding lane a
   * tick, plus accepted draft tokens. A reply's last token is never fed back
   * (nothing follows it), so this trails generatedTokens.
   */
  decodedTokens: number;
  /** Tokens generated: what the replies' usage.completion_tokens add up to. */
  generatedTokens: number;
  prefilledTokens: number;
  reusedTokens: number;
  prefixCopies: number;
  /** Queued requests that waited for another lane's prefill of their prefix instead of prefilling it too. */
  coalesced: number;
  /**
   * Cached prefixes moved out of the pool because KV occupancy crossed the high watermark (or, shared, their share).
   */
  pressureEvictions: number;
  /** Cached prefixes (and paused lanes' cells) moved out of a shared pool to make room for a tick. */
  spaceEvictions: number;
  /** Lanes paused because a shared pool had no room for a tick. */
  spacePauses: number;
  /** Times the LoRA adapter set changed (each one empties the prefix cache, docs/api/lora.md). */
  adapterSwitches: number;
  /** Speculative decoding since the worker started: draft tokens proposed and accepted (0 when off). */
  specProposed: number;
  specAccepted: number;
  /** Lanes sealed to a park artifact at their finish (GenerateJob.park). */
  parks: number;
  /** Admissions seeded from a park artifact (GenerateJob.resume); `resumes` counts preempted lanes resumed. */
  parkResumes: number;
  prefixCache: {
    poolEntries: number;
    hostEntries: number;
    hostBytes: number;
    hostBudgetBytes: number;
    spills: number;
    imports: number;
    importFailures: number;
    hostEvictions: number;
  };
  /** Pinned prefixes (docs/design.md#pinned-prefixes). */
  pins: {
    /** Live pins. */
    count: number;
    /** The union of their token prefixes (shared prefixes counted once). */
    tokens: number;
    /** Cells all pins together may hold (0: pins protect nothing). */
    budgetTokens: number;
    /** Pins dropped for the budget or for space. */
    yielded: number;
  };
  /** Tokens per second of engine time over the recent ticks. */
  decodeRate: number;
  prefillRate: number;
  /**
   * Milliseconds summed over the ticks that decoded (engine.ts): whole ticks,
   * llama_decode, sampling, and the worker's time between back-to-back ticks.
   */
  timing?: { ticks: number; tickMs: number; decodeMs: number; sampleMs: number; betweenMs: number };
  /** An embedding worker's totals (embedder.ts; there one tick is one decode); absent on a generation worker. */
  embeddings?: {
    pooling: string;
    dimensions: number;
    decodes: number;
    inputs: number;
    tokens: number;
    jobs: number;
    largestBatch: number;
  };
}
