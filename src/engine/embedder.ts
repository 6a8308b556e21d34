// The embedding executor: an embedding model's context (embeddings on, the
// GGUF's pooling) and a queue of embed jobs, each a list of token-id inputs.
// Every step packs as many queued inputs as fit (one sequence each, whole
// inputs only: llama.cpp pools a sequence within one micro-batch) into one
// llama_decode, reads each sequence's pooled vector, and clears the memory
// again. Inputs of many requests share a decode, so N short inputs cost one
// step, not N.
//
// It has no lanes, sampling or prefix cache: a worker serving an embedding
// model runs this instead of the generation engine (src/worker/embed-mode.ts).
import type { Pointer } from "bun:ffi";
import { handle } from "../../ffi/llama.ts";
import { threadpoolApi } from "../../ffi/threadpool.ts";
import { KV_TYPES } from "../gguf/kv-type.ts";
import { DecodeError } from "./context.ts";
import type { EngineSnapshot } from "./jobs.ts";
import { floatView, type LlamaModel } from "./model.ts";

/** llama_pooling_type by value (llama.h); "none" is a model that does not embed. */
export const POOLING_NAMES = ["none", "mean", "cls", "last", "rank"] as const;
export type PoolingName = (typeof POOLING_NAMES)[number];

const POOLING_UNSPECIFIED = -1;
const POOLING_RANK = 4;

/**
 * The pooling a GGUF declares (`<arch>.pooling_type`), "none" when it declares
 * none: the one thing that makes llama.cpp pool a model's hidden states into
 * one vector per sequence, so it is what marks an embedding model.
 */
export function declaredPooling(model: LlamaModel): PoolingName {
  const arch = model.meta("general.architecture") ?? "";
  const value = Number(model.meta(`${arch}.pooling_type`));
  return Number.isInteger(value) && value > 0 && value < POOLING_NAMES.length ? POOLING_NAMES[value]! : "none";
}

export interface EmbedJob {
  id: string;
  /** Token ids of each input, in order; one vector comes back per input. */
  inputs: number[][];
}

export type EmbedOutcome = { id: string; vectors: Float32Array[] } | { id: string; error: string };

export interface EmbedderOptions {
  threads: number;
  /** The most tokens one decode (and so one input) holds: n_ctx = n_batch = n_ubatch. */
  window: number;
  /** Sequences one decode may carry, i.e. inputs packed together (at most 256, llama.cpp's limit). */
  sequences?: number;
}

export interface EmbedStats {
  /** llama_decode calls made. */
  decodes: number;
  /** Inputs embedded. */
  inputs: number;
  /** Tokens embedded. */
  tokens: number;
  /** Jobs (requests) finished. */
  jobs: number;
  /** Most inputs one decode carried. */
  largestBatch: number;
}

/** Inputs one decode may carry by default: enough for a request of 32 short inputs and then some. */
const DEFAULT_SEQUENCES = 64;

interface QueuedJob {
  job: EmbedJob;
  /** The next input to pack. */
  next: number;
  vectors: Float32Array[];
  done: number;
}

export class Embedder {
  readonly pooling: PoolingName;
  /** Floats per vector: the embedding width, or a reranker's score count (rank pooling). */
  readonly dimensions: number;
  readonly window: number;
  readonly sequences: number;
  private readonly ctx: Pointer;
  /** The context's KV memory; null for models without one (non-causal encoders such as BERT). */
  private readonly memory: Pointer | null;
  private readonly batch: Pointer;
  private readonly threadpool: Pointer;
  private readonly tokens: Int32Array;
  private readonly positions: Int32Array;
  private readonly seqIds: Int32Array;
  private readonly outputs: Int8Array;
  private readonly queue: QueuedJob[] = [];
  private readonly counters: EmbedStats = { decodes: 0, inputs: 0, tokens: 0, jobs: 0, largestBatch: 0 };
  private freed = false;

  constructor(
    readonly model: LlamaModel,
    opts: EmbedderOptions,
  ) {
    const { api, shim } = model.llama;
    this.sequences = Math.max(1, Math.min(256, opts.sequences ?? DEFAULT_SEQUENCES));
    // One shared pool (kv_unified) of one decode's tokens: every decode starts
    // from empty memory, so all inputs of a step draw from the same cells.
    const ctx = shim.sf_context_new(
      model.handle,
      opts.window,
      opts.window,
      opts.window,
      this.sequences,
      opts.threads,
      true,
      POOLING_UNSPECIFIED,
      true,
      true,
      KV_TYPES.f16.ggml,
      KV_TYPES.f16.ggml,
    );
    this.ctx = handle(ctx, `embedding context of ${opts.window} tokens (out of memory?)`);
    const pooling = api.llama_pooling_type(this.ctx);
    this.pooling = POOLING_NAMES[pooling] ?? "none";
    if (this.pooling === "none") {
      api.llama_free(this.ctx);
      throw new Error("the model pools no embeddings (no pooling type in its GGUF)");
    }
    this.dimensions =
      pooling === POOLING_RANK ? Math.max(1, api.llama_model_n_cls_out(model.handle)) : model.embeddingLength;
    const memory = api.llama_get_memory(this.ctx);
    this.memory = memory && typeof memory !== "bigint" ? memory : null;
    this.window = api.llama_n_ubatch(this.ctx);
    this.batch = handle(shim.sf_batch_new(this.window), "batch (out of memory)");
    this.threadpool = threadpoolApi(model.llama).create(opts.threads);
    api.llama_attach_threadpool(this.ctx, this.threadpool, this.threadpool);
    this.tokens = new Int32Array(this.window);
    this.positions = new Int32Array(this.window);
    this.seqIds = new Int32Array(this.window);
    // Pooling reads every token's hidden state, so every token is an output.
    this.outputs = new Int8Array(this.window).fill(1);
  }

  get stats(): EmbedStats {
    return { ...this.counters };
  }

  submit(job: EmbedJob): void {
    this.queue.push({ job, next: 0, vectors: new Array(job.inputs.length), done: 0 });
  }

  /** Drops a queued job (its client went away); true when it was still queued. */
  cancel(id: string): boolean {
    const at = this.queue.findIndex((q) => q.job.id === id);
    if (at < 0) return false;
    this.queue.splice(at, 1);
    return true;
  }

  hasWork(): boolean {
    return this.queue.length > 0;
  }

  /** One decode over as many queued inputs as fit; returns the jobs it finished (or failed). */
  step(): EmbedOutcome[] {
    const outcomes: EmbedOutcome[] = [];
    const picked: { entry: QueuedJob; index: number; seq: number }[] = [];
    let n = 0;
    pack: for (const entry of [...this.queue]) {
      while (entry.next < entry.job.inputs.length) {
        const input = entry.job.inputs[entry.next]!;
        if (input.length === 0 || input.length > this.window) {
          // The daemon checks sizes first; a job that slips through fails alone.
          this.drop(entry);
          outcomes.push({
            id: entry.job.id,
            error: `input ${entry.next} has ${input.length} tokens; an input holds 1-${this.window}`,
          });
          continue pack;
        }
        if (picked.length === this.sequences || n + input.length > this.window) break pack;
        const seq = picked.length;
        for (let p = 0; p < input.length; p++) {
          this.tokens[n] = input[p]!;
          this.positions[n] = p;
          this.seqIds[n] = seq;
          n++;
        }
        picked.push({ entry, index: entry.next, seq });
        entry.next++;
      }
    }
    if (picked.length === 0) return outcomes;
    try {
      this.decode(n);
    } catch (err) {
      for (const entry of new Set(picked.map((p) => p.entry))) {
        this.drop(entry);
        outcomes.push({ id: entry.job.id, error: (err as Error).message });
      }
      this.clearMemory();
      return outcomes;
    }
    const api = this.model.llama.api;
    for (const { entry, index, seq } of picked) {
      const p = handle(api.llama_get_embeddings_seq(this.ctx, seq), `pooled embedding of sequence ${seq}`);
      entry.vectors[index] = floatView(p, this.dimensions).slice();
      entry.done++;
    }
    this.clearMemory();
    this.counters.decodes++;
    this.counters.inputs += picked.length;
    this.counters.tokens += n;
    this.counters.largestBatch = Math.max(this.counters.largestBatch, picked.length);
    for (const entry of new Set(picked.map((p) => p.entry))) {
      if (entry.done < entry.job.inputs.length) continue;
      this.drop(entry);
      this.counters.jobs++;
      outcomes.push({ id: entry.job.id, vectors: entry.vectors });
    }
    return outcomes;
  }

  /**
   * The live numbers in the generation engine's snapshot shape, so /slots reads an embedding worker too: one tick is
   * one decode.
   */
  snapshot(): EngineSnapshot {
    const queuedInputs = this.queue.reduce((sum, q) => sum + q.job.inputs.length - q.next, 0);
    const zero4: [number, number, number, number] = [0, 0, 0, 0];
    return {
      lanes: this.sequences,
      activeLanes: 0,
      queued: queuedInputs,
      prefilling: 0,
      sequences: this.sequences,
      layout: "shared",
      cellsPerSequence: this.window,
      poolCells: this.window,
      cellsUsed: 0,
      liveSequences: [],
      prefillBudget: this.window,
      queueDepths: zero4,
      classLanes: zero4,
      paused: 0,
      preemptions: 0,
      resumes: 0,
      starvationGrants: 0,
      expired: 0,
      ticks: this.counters.decodes,
      decodedTokens: 0,
      generatedTokens: 0,
      prefilledTokens: this.counters.tokens,
      reusedTokens: 0,
      prefixCopies: 0,
      coalesced: 0,
      pressureEvictions: 0,
      spaceEvictions: 0,
      spacePauses: 0,
      adapterSwitches: 0,
      specProposed: 0,
      specAccepted: 0,
      parks: 0,
      parkResumes: 0,
      prefixCache: {
        poolEntries: 0,
        hostEntries: 0,
        hostBytes: 0,
        hostBudgetBytes: 0,
        spills: 0,
        imports: 0,
        importFailures: 0,
        hostEvictions: 0,
      },
      pins: { count: 0, tokens: 0, budgetTokens: 0, yielded: 0 },
      decodeRate: 0,
      prefillRate: 0,
      embeddings: { pooling: this.pooling, dimensions: this.dimensions, ...this.stats },
    };
  }

  /** Its compute threads sleep until the next decode instead of polling for work (ffi/threadpool.ts). */
  pauseThreads(): void {
    if (!this.freed) threadpoolApi(this.model.llama).pause(this.threadpool);
  }

  close(): void {
    if (this.freed) return;
    this.freed = true;
    const { api, shim } = this.model.llama;
    shim.sf_batch_free(this.batch);
    api.llama_detach_threadpool(this.ctx);
    api.llama_free(this.ctx);
    threadpoolApi(this.model.llama).free(this.threadpool);
  }

  private decode(n: number): void {
    const status = this.model.llama.shim.sf_decode(
      this.ctx,
      this.batch,
      n,
      this.tokens,
      this.positions,
      this.seqIds,
      this.outputs,
    );
    if (status !== 0) throw new DecodeError(status);
  }

  /** Every sequence's cells freed (metadata only: the next decode overwrites them). */
  private clearMemory(): void {
    if (this.memory) this.model.llama.api.llama_memory_clear(this.memory, false);
  }

  private drop(entry: QueuedJob): void {
    const at = this.queue.indexOf(entry);
    if (at >= 0) this.queue.splice(at, 1);
  }
}
