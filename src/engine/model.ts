// One GGUF model opened through libllama: weights (or only the vocabulary),
// tokenization, and the vocabulary facts the rest of the engine needs.
import { ptr, toArrayBuffer, type Pointer } from "bun:ffi";
import { deviceFacts, listDevices, type DeviceFacts } from "../../ffi/devices.ts";
import { cstr, handle, loadLlama, type Llama } from "../../ffi/llama.ts";
import { openVectorExpSum } from "../../ffi/vector-exp.ts";
import { jsExpSum, type ExpSum } from "./draw.ts";
import { describeModel, kvBytesPerToken, kvRowBytes, readGgufSync } from "../gguf/index.ts";
import { F16_KV, type KvTypes } from "../gguf/kv-type.ts";
import {
  chooseDevices,
  layerBytesOf,
  OffloadError,
  planOffload,
  splitModeCode,
  type OffloadPlan,
  type OffloadRequest,
} from "./offload.ts";
import type { ModelMemoryKind } from "./speculation-directive.ts";

// llama_token_attr bits (llama.h).
const ATTR_NORMAL = 1 << 2;
const ATTR_BYTE = 1 << 5;

export interface GrammarPrefilter {
  /** Each token's key (prefixKeyOf), or -1 for tokens the grammar must always see. */
  prefixKey: Int16Array;
  /** For each key, a token that is exactly that prefix, or -1. */
  probeToken: Int32Array;
}

/** A token's leading ASCII byte b (0-127), or 128 + b for a space followed by b; -1 otherwise. */
export function prefixKeyOf(bytes: Uint8Array): number {
  const first = bytes[0];
  if (first === undefined || first >= 128) return -1;
  const second = bytes[1];
  if (first === 0x20 && second !== undefined && second < 128) return 128 + second;
  return first;
}

export interface VocabInfo {
  size: number;
  bos: number;
  eos: number;
  eot: number;
  addBos: boolean;
  /** Every end-of-generation token id (eos, eot, eom, ...). */
  eog: number[];
}

export class LlamaModel {
  readonly llama: Llama;
  readonly handle: Pointer;
  readonly vocab: Pointer;
  readonly vocabInfo: VocabInfo;
  private freed = false;
  private scratch?: Uint8Array;
  private vectorExp?: ExpSum;
  private readonly pieces = new Map<number, Uint8Array>();
  private readonly plainPieces = new Map<number, Uint8Array>();
  private readonly eogSet: ReadonlySet<number>;
  private prefilter?: GrammarPrefilter;
  /** Where the weights went (src/engine/offload.ts); undefined: a build with no GPU backend, all on the CPU. */
  offload?: OffloadPlan;
  /** Every device ggml registered when the weights were loaded. */
  devices: DeviceFacts[] = [];

  private constructor(llama: Llama, model: Pointer) {
    this.llama = llama;
    this.handle = model;
    this.vocab = handle(llama.api.llama_model_get_vocab(model), "vocabulary");
    this.vocabInfo = readVocabInfo(llama, this.vocab);
    this.eogSet = new Set(this.vocabInfo.eog);
  }

  /** Loads weights (or only the vocabulary, for tokenizing in the daemon). */
  static load(path: string, opts: { vocabOnly?: boolean; gpuLayers?: number } = {}): LlamaModel {
    // A vocabulary needs no compute backend (ffi/llama.ts loads them for weights).
    const llama = loadLlama(process.env, { backends: !opts.vocabOnly });
    const model = llama.shim.sf_model_load(cstr(path), opts.gpuLayers ?? -1, opts.vocabOnly ?? false);
    if (!model || typeof model === "bigint") throw new Error(`libllama could not load the model ${path}`);
    return new LlamaModel(llama, model);
  }

  /**
   * Loads the weights with layers placed as the offload request asks
   * (planOffload over the GGUF's tensor sizes and the devices' free memory;
   * `kvCells` is the KV the worker means to allocate, so that auto leaves it
   * room). A machine without a GPU loads as load() does. Throws OffloadError
   * when the request cannot be met (an unknown --device, `all` that does not fit).
   */
  static loadPlaced(path: string, request: OffloadRequest, kvCells: (trainedContext: number) => number): LlamaModel {
    const llama = loadLlama();
    const all = listDevices(llama);
    let chosen: ReturnType<typeof chooseDevices<(typeof all)[number]>>;
    try {
      chosen = chooseDevices(all, request);
    } catch (err) {
      // A GPU the user named may be missing because its backend did not load: say why.
      const failed = llama.unloadedBackends.map((f) => `; ${f.file} did not load: ${f.reason}`).join("");
      throw new OffloadError(`${(err as Error).message}${failed}`);
    }
    if (chosen.length === 0 && request.devices === undefined) {
      const model = LlamaModel.load(path);
      model.devices = all.map(deviceFacts);
      return model;
    }
    const file = readGgufSync(path);
    const layers = layerBytesOf(file);
    const trained = describeModel(file).contextLength ?? 4096;
    const n = layers.layers.length;
    const kvPerLayer = n > 0 ? (kvBytesPerToken(file) * kvCells(trained)) / n : 0;
    const plan = planOffload(request, chosen, layers, kvPerLayer);
    // NULL-terminated ggml_backend_dev_t[]; llama.cpp reads one tensor-split share per device (at most 16).
    const devices = new BigUint64Array(chosen.length + 1);
    chosen.forEach((d, i) => {
      devices[i] = BigInt(d.handle);
    });
    const split = request.tensorSplit ? new Float32Array(16) : null;
    if (split) request.tensorSplit!.forEach((s, i) => i < 16 && (split[i] = s));
    const loaded = llama.shim.sf_model_load_offload(
      cstr(path),
      plan.gpuLayers,
      splitModeCode(request.splitMode),
      0,
      split,
      devices,
    );
    if (!loaded || typeof loaded === "bigint") throw new Error(`libllama could not load the model ${path}`);
    const model = new LlamaModel(llama, loaded);
    model.offload = plan;
    model.devices = all.map(deviceFacts);
    return model;
  }

  get embeddingLength(): number {
    return this.llama.api.llama_model_n_embd(this.handle);
  }

  get trainedContext(): number {
    return this.llama.api.llama_model_n_ctx_train(this.handle);
  }

  /** Bytes of the model's tensors (its weights in memory). */
  get weightBytes(): number {
    return Number(this.llama.api.llama_model_size(this.handle));
  }

  /**
   * Recurrent, hybrid or sliding-window state: what decides whether a rejected draft can be cut off the KV (a full load
   * only).
   */
  memoryKind(): ModelMemoryKind {
    const api = this.llama.api;
    return {
      recurrent: api.llama_model_is_recurrent(this.handle),
      hybrid: api.llama_model_is_hybrid(this.handle),
      slidingWindow: Math.max(0, api.llama_model_n_swa(this.handle)),
    };
  }

  /** A metadata value as text (e.g. `qwen3.attention.key_length`); undefined when the GGUF has no such key. */
  meta(key: string): string | undefined {
    const buf = new Uint8Array(256);
    const n = this.llama.api.llama_model_meta_val_str(this.handle, cstr(key), buf, BigInt(buf.length));
    return n < 0 ? undefined : Buffer.from(buf.subarray(0, Math.min(n, buf.length - 1))).toString("utf8");
  }

  /**
   * KV bytes one token takes, K and V of `types` (f16 unless said) in every
   * layer: layers x (a K row of KV heads x key head size + a V row of KV heads
   * x value head size), in each type's bytes. Head sizes come from
   * `<arch>.attention.key_length` / `value_length` where the GGUF has them
   * (Qwen3's 128 is not embedding / heads), else embedding / heads.
   */
  kvBytesPerToken(types: KvTypes = F16_KV): number {
    const api = this.llama.api;
    const layers = api.llama_model_n_layer(this.handle);
    if (layers <= 0) return 0; // a vocabulary-only load (llama.cpp aborts on per-layer getters then)
    const { key, value } = this.headSizes();
    return layers * kvRowBytes(api.llama_model_n_head_kv(this.handle), key, value, types);
  }

  /** Values in one attention head's key and value: the GGUF's key_length / value_length, else embedding / heads. */
  headSizes(): { key: number; value: number } {
    const arch = this.meta("general.architecture") ?? "";
    const heads = this.llama.api.llama_model_n_head(this.handle);
    const fallback = heads > 0 ? this.embeddingLength / heads : 0;
    const size = (key: string) => {
      const n = Number(this.meta(`${arch}.attention.${key}`));
      return Number.isFinite(n) && n > 0 ? n : fallback;
    };
    return { key: size("key_length"), value: size("value_length") };
  }

  /** Text to token ids. `parseSpecial` lets control-token text (e.g. <|im_start|>) become its token. */
  tokenize(text: string, opts: { addSpecial?: boolean; parseSpecial?: boolean } = {}): number[] {
    const bytes = Buffer.from(text, "utf8");
    let capacity = bytes.length + 8;
    for (;;) {
      const out = new Int32Array(capacity);
      const n = this.llama.api.llama_tokenize(
        this.vocab,
        bytes.length > 0 ? ptr(bytes) : null,
        bytes.length,
        out,
        capacity,
        opts.addSpecial ?? false,
        opts.parseSpecial ?? false,
      );
      if (n >= 0) return Array.from(out.subarray(0, n));
      if (n === -2147483648) throw new Error("text too long to tokenize");
      capacity = -n;
    }
  }

  /** The bytes one token stands for (special tokens rendered as their text when `special`). */
  tokenBytes(token: number, special = true): Uint8Array {
    // Every streamed token is turned into text in the daemon: remember each
    // piece instead of asking libllama again (the cache is at most the vocabulary).
    const cache = special ? this.pieces : this.plainPieces;
    const known = cache.get(token);
    if (known) return known;
    const piece = this.readPiece(token, special);
    cache.set(token, piece);
    return piece;
  }

  private readPiece(token: number, special: boolean): Uint8Array {
    let buf = new Uint8Array(64);
    let n = this.llama.api.llama_token_to_piece(this.vocab, token, buf, buf.length, 0, special);
    if (n < 0) {
      buf = new Uint8Array(-n);
      n = this.llama.api.llama_token_to_piece(this.vocab, token, buf, buf.length, 0, special);
    }
    return buf.slice(0, Math.max(0, n));
  }

  /** A reusable buffer of one llama_token_data (12 bytes) per vocabulary entry, for constrained sampling. */
  /**
   * exp(x - max) over a row and its sum, for sampling (src/engine/draw.ts):
   * ggml's vectorized kernel from the CPU backend that decodes, else JavaScript.
   */
  expSum(): ExpSum {
    if (!this.vectorExp) {
      const cpu = this.llama.cpu;
      this.vectorExp = (cpu && openVectorExpSum(cpu.library, this.llama.location.dir)) || jsExpSum;
    }
    return this.vectorExp;
  }

  candidateScratch(): Uint8Array {
    this.scratch ??= new Uint8Array(this.vocabInfo.size * 12);
    return this.scratch;
  }

  /**
   * What the grammar's slow path needs to rule tokens out by how they start
   * (see sf_grammar_candidates in shim.c); built on first use (~150 ms on 150k tokens).
   */
  grammarPrefilter(): GrammarPrefilter {
    if (this.prefilter) return this.prefilter;
    const { api } = this.llama;
    const size = this.vocabInfo.size;
    const prefixKey = new Int16Array(size).fill(-1);
    const probeToken = new Int32Array(256).fill(-1);
    for (let t = 0; t < size; t++) {
      // Special tokens (control, user-defined, unknown) are always checked in full.
      if ((api.llama_vocab_get_attr(this.vocab, t) & (ATTR_NORMAL | ATTR_BYTE)) === 0) continue;
      const bytes = this.tokenBytes(t, false);
      const key = prefixKeyOf(bytes);
      if (key < 0) continue;
      prefixKey[t] = key;
      const isProbe = bytes.length === (key < 128 ? 1 : 2);
      if (isProbe && probeToken[key] === -1) probeToken[key] = t;
    }
    this.prefilter = { prefixKey, probeToken };
    return this.prefilter;
  }

  /** A control, user-defined or unknown token (turn markers, the stop set), not text. */
  isSpecial(token: number): boolean {
    return (
      this.isEog(token) || (this.llama.api.llama_vocab_get_attr(this.vocab, token) & (ATTR_NORMAL | ATTR_BYTE)) === 0
    );
  }

  isEog(token: number): boolean {
    return this.eogSet.has(token);
  }

  free(): void {
    if (this.freed) return;
    this.freed = true;
    this.llama.api.llama_model_free(this.handle);
  }
}

function readVocabInfo(llama: Llama, vocab: Pointer): VocabInfo {
  const api = llama.api;
  const size = api.llama_vocab_n_tokens(vocab);
  const eog: number[] = [];
  // One call per token: ~5 ms on a 150k vocabulary, once per load.
  for (let t = 0; t < size; t++) if (api.llama_vocab_is_eog(vocab, t)) eog.push(t);
  return {
    size,
    bos: api.llama_vocab_bos(vocab),
    eos: api.llama_vocab_eos(vocab),
    eot: api.llama_vocab_eot(vocab),
    addBos: api.llama_vocab_get_add_bos(vocab),
    eog,
  };
}

/** A zero-copy Float32Array view of n floats at a native pointer. */
export function floatView(p: Pointer, n: number): Float32Array {
  return new Float32Array(toArrayBuffer(p, 0, n * 4));
}
