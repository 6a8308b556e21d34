// A libllama context sized for the lanes, in one of two KV layouts: per lane
// (`sequences` KV buffers of `cellsPerSequence` cells each) or one shared pool
// of `poolCells` cells every sequence draws from (llama.cpp kv_unified); and
// one reusable batch. Everything here is a thin, synchronous wrapper: the
// policy lives in engine.ts and kv-pool.ts.
import { ptr, type Pointer } from "bun:ffi";
import { handle } from "../../ffi/llama.ts";
import { threadpoolApi } from "../../ffi/threadpool.ts";
import { describeKvTypes, F16_KV, isQuantized, KV_TYPES, type KvTypes } from "../gguf/kv-type.ts";
import type { LlamaModel } from "./model.ts";
import { floatView } from "./model.ts";

export interface ContextOptions {
  sequences: number;
  /** Per-lane layout: cells of each sequence's own buffer. Ignored with `sharedCells`. */
  cellsPerSequence: number;
  /** Shared layout: cells of the one pool all sequences draw from. */
  sharedCells?: number;
  /** Largest batch one decode call takes (llama.cpp n_batch). */
  batchSize: number;
  /** Physical micro-batch (llama.cpp n_ubatch). */
  microBatchSize: number;
  threads: number;
  /** The KV of offloaded layers lives on their device (llama.cpp offload_kqv; --no-kv-offload keeps it on the host). */
  kvOffload?: boolean;
  /** The KV cache's element types (f16 unless said: --kv-bits, --cache-type-k/-v). */
  kvTypes?: KvTypes;
}

export class DecodeError extends Error {
  constructor(readonly status: number) {
    super(`llama_decode failed with status ${status}`);
    this.name = "DecodeError";
  }

  /**
   * llama_decode found no KV cells for the batch. It places every micro-batch
   * before computing any, so nothing of the batch was applied.
   */
  get noSlot(): boolean {
    return this.status === 1;
  }
}

export class LlamaContext {
  readonly handle: Pointer;
  readonly memory: Pointer;
  readonly sequences: number;
  /** The most cells one sequence may hold: its own buffer, or the whole shared pool. */
  readonly cellsPerSequence: number;
  /** All sequences draw from one pool (kv_unified). */
  readonly shared: boolean;
  /** KV cells in all. */
  readonly poolCells: number;
  /** The KV cache's element types. */
  readonly kvTypes: KvTypes;
  readonly batchSize: number;
  /** Tokens llama.cpp computes in one step (n_ubatch). */
  readonly microBatchSize: number;
  private readonly batch: Pointer;
  private readonly threadpool: Pointer;
  // Flat per-token arrays handed to sf_decode; reused every tick.
  private readonly tokens: Int32Array;
  private readonly positions: Int32Array;
  private readonly seqIds: Int32Array;
  private readonly wantLogits: Int8Array;
  private freed = false;

  constructor(
    readonly model: LlamaModel,
    opts: ContextOptions,
  ) {
    const { api, shim } = model.llama;
    this.shared = opts.sharedCells !== undefined;
    const cells = opts.sharedCells ?? opts.sequences * opts.cellsPerSequence;
    const types = opts.kvTypes ?? F16_KV;
    refuseSplitHeads(model, types);
    const ctx = shim.sf_context_new(
      model.handle,
      cells,
      opts.batchSize,
      opts.microBatchSize,
      opts.sequences,
      opts.threads,
      false,
      -1,
      this.shared,
      opts.kvOffload ?? true,
      KV_TYPES[types.k].ggml,
      KV_TYPES[types.v].ggml,
    );
    const layout = this.shared
      ? `a shared pool of ${cells} cells`
      : `${opts.sequences} x ${opts.cellsPerSequence} cells`;
    // llama.cpp refuses a quantized V when flash attention is off for this model and backend.
    const why = isQuantized(types.v)
      ? `out of memory, or no flash attention here for a ${types.v} V cache (an f16 V cache needs none)`
      : "out of memory?";
    this.handle = handle(ctx, `context of ${layout}, KV ${describeKvTypes(types)} (${why})`);
    this.kvTypes = types;
    this.memory = handle(api.llama_get_memory(this.handle), "context memory");
    this.sequences = api.llama_n_seq_max(this.handle);
    this.cellsPerSequence = api.llama_n_ctx_seq(this.handle);
    this.poolCells = this.shared ? api.llama_n_ctx(this.handle) : this.sequences * this.cellsPerSequence;
    this.batchSize = api.llama_n_batch(this.handle);
    this.microBatchSize = api.llama_n_ubatch(this.handle);
    this.batch = handle(shim.sf_batch_new(this.batchSize), "batch (out of memory)");
    this.threadpool = threadpoolApi(model.llama).create(opts.threads);
    api.llama_attach_threadpool(this.handle, this.threadpool, this.threadpool);
    this.tokens = new Int32Array(this.batchSize);
    this.positions = new Int32Array(this.batchSize);
    this.seqIds = new Int32Array(this.batchSize);
    this.wantLogits = new Int8Array(this.batchSize);
  }

  /** Decodes `n` tokens staged with stage(); throws DecodeError on failure. */
  decode(n: number): void {
    const status = this.model.llama.shim.sf_decode(
      this.handle,
      this.batch,
      n,
      this.tokens,
      this.positions,
      this.seqIds,
      this.wantLogits,
    );
    if (status !== 0) throw new DecodeError(status);
  }

  /** Puts one token at batch index i. */
  stage(i: number, token: number, pos: number, seq: number, logits: boolean): void {
    this.tokens[i] = token;
    this.positions[i] = pos;
    this.seqIds[i] = seq;
    this.wantLogits[i] = logits ? 1 : 0;
  }

  /** The logits row of batch index i from the last decode (a view, valid until the next decode). */
  logits(i: number): Float32Array {
    const p = handle(this.model.llama.api.llama_get_logits_ith(this.handle, i), `logits for batch index ${i}`);
    return floatView(p, this.model.vocabInfo.size);
  }

  /**
   * Makes `adapters` the LoRA set every later decode applies (all sequences
   * alike: llama.cpp keeps one set per context). An empty list removes them.
   * Scale 0 keeps an adapter loaded but out of the graph.
   */
  setAdapters(adapters: readonly { handle: Pointer; scale: number }[]): void {
    const n = adapters.length;
    const handles = n === 0 ? null : new BigUint64Array(adapters.map((a) => BigInt(a.handle)));
    const scales = n === 0 ? null : new Float32Array(adapters.map((a) => a.scale));
    const status = this.model.llama.api.llama_set_adapters_lora(this.handle, handles, BigInt(n), scales);
    if (status !== 0) throw new Error(`llama_set_adapters_lora failed with status ${status}`);
  }

  /**
   * Drops a sequence's cells from position `from` on. False when the memory
   * cannot cut there (recurrent and hybrid models keep only whole states);
   * cutting from 0 always works.
   */
  truncate(seq: number, from: number): boolean {
    return this.model.llama.api.llama_memory_seq_rm(this.memory, seq, from, -1);
  }

  /**
   * Makes `dst` hold positions [0, length) of `src`. In a shared pool this
   * only tags the cells with `dst` too (no data moves, no cells taken). Across
   * separate KV buffers llama.cpp copies only whole (the data moves at the
   * next decode), so copy all of it and cut the tail.
   */
  copyPrefix(src: number, dst: number, length: number): boolean {
    if (this.shared) {
      this.model.llama.api.llama_memory_seq_cp(this.memory, src, dst, 0, length);
      return true;
    }
    this.model.llama.api.llama_memory_seq_cp(this.memory, src, dst, -1, -1);
    if (this.truncate(dst, length)) return true;
    this.truncate(dst, 0);
    return false;
  }

  /**
   * A sequence's KV as llama.cpp's own state export (the host tier of the
   * prefix cache keeps these); undefined when the sequence is empty or the
   * export fails.
   */
  exportSequence(seq: number): Uint8Array | undefined {
    const api = this.model.llama.api;
    const size = Number(api.llama_state_seq_get_size(this.handle, seq));
    if (size === 0) return undefined;
    const blob = new Uint8Array(size);
    const written = Number(api.llama_state_seq_get_data(this.handle, ptr(blob), BigInt(size), seq));
    return written === size ? blob : undefined;
  }

  /** Loads a state export into an empty sequence; false (and the sequence emptied) when llama.cpp refuses it. */
  importSequence(seq: number, blob: Uint8Array): boolean {
    const read = Number(
      this.model.llama.api.llama_state_seq_set_data(this.handle, ptr(blob), BigInt(blob.length), seq),
    );
    if (read === 0) this.truncate(seq, 0);
    return read !== 0;
  }

  /** Its compute threads sleep until the next decode instead of polling for work (ffi/threadpool.ts). */
  pauseThreads(): void {
    if (!this.freed) threadpoolApi(this.model.llama).pause(this.threadpool);
  }

  free(): void {
    if (this.freed) return;
    this.freed = true;
    this.model.llama.shim.sf_batch_free(this.batch);
    this.model.llama.api.llama_detach_threadpool(this.handle);
    this.model.llama.api.llama_free(this.handle);
    threadpoolApi(this.model.llama).free(this.threadpool);
  }
}

/** A quantized type stores values in blocks of 32: a head of another size cannot be cached in it (llama.cpp refuses). */
function refuseSplitHeads(model: LlamaModel, types: KvTypes): void {
  const heads = model.headSizes();
  for (const [t, head] of [
    [types.k, heads.key],
    [types.v, heads.value],
  ] as const) {
    const block = KV_TYPES[t].block;
    if (head > 0 && head % block !== 0)
      throw new Error(
        `the KV type ${t} stores values in blocks of ${block}, and this model's attention heads hold ${head}: ` +
          "it needs an f16 KV cache",
      );
  }
}
