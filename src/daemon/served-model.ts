// One model as the daemon serves it: its GGUF facts, a vocabulary-only copy of
// the model for turning tokens into text in the daemon (the worker only ever
// sees token ids), the prompt thread that renders its chat template and
// tokenizes request text, and the worker process that generates.
import { releaseLabel } from "../../ffi/abi.ts";
import { templateReads } from "../codec/index.ts";
import type { ReasoningMarkers } from "../codec/reasoning-markers.ts";
import type { ToolDialect } from "../codec/tool-dialects/index.ts";
import type { Tokenizer } from "../codec/tokenizer.ts";
import { LlamaModel } from "../engine/model.ts";
import { describeModel, readGguf, type ModelInfo } from "../gguf/index.ts";
import type { RequestError } from "./request-error.ts";
import { SessionJournal } from "../session-log/journal.ts";
import type { SessionStore } from "../session-log/store.ts";
import { PromptThread } from "./prompt-thread.ts";
import { templateWires } from "./template-wires.ts";
import { WorkerClient, type WorkerOptions } from "./worker-client.ts";

export interface ServedModelOptions extends Omit<WorkerOptions, "journal"> {
  id: string;
  /** The session log every generation is recorded in; none = generations are not durable (tests, benches). */
  sessions?: SessionStore;
}

/** The runtime a served model generates on, as /v1/models and /props name it. */
export interface Runtime {
  readonly id: "llamacpp";
  /** The llama.cpp release the loaded library was identified as (ffi/abi.ts checks its C API at load). */
  readonly version: string;
  /** The processor the worker decodes on and the ggml CPU variant it loaded (null: a build with one CPU backend). */
  readonly cpu: { readonly model: string; readonly variant: string | null };
  /** Where the weights went (docs/design.md#gpu-offload); null: all on the CPU, no GPU in the build or found. */
  readonly offload: {
    readonly gpu_layers: number;
    readonly layers: number;
    readonly devices: readonly {
      readonly name: string;
      readonly description: string;
      readonly layers: number;
      readonly weight_bytes: number;
      readonly kv_bytes: number;
    }[];
    readonly host_weight_bytes: number;
    readonly split_mode: string;
    readonly kv_offload: boolean;
  } | null;
  /** Every device the worker's backends registered, with memory when the model was loaded. */
  readonly devices: readonly {
    readonly name: string;
    readonly type: string;
    readonly description: string;
    readonly free_bytes: number;
    readonly total_bytes: number;
  }[];
}

export class ServedModel {
  readonly loadedAt = new Date();
  get runtime(): Runtime {
    const info = this.worker.info;
    const { model, variant } = info.library.cpu;
    const o = info.offload;
    return {
      id: "llamacpp",
      version: `llama.cpp ${releaseLabel(this.tokenizer.llama.release)}`,
      cpu: { model, variant },
      offload: o && {
        gpu_layers: o.gpuLayers,
        layers: o.layerCount,
        devices: o.devices.map((d) => ({
          name: d.name,
          description: d.description,
          layers: d.layers,
          weight_bytes: d.weightBytes,
          kv_bytes: d.kvBytes,
        })),
        host_weight_bytes: o.hostWeightBytes,
        split_mode: o.splitMode,
        kv_offload: o.kvOffload,
      },
      devices: info.devices.map((d) => ({
        name: d.name,
        type: d.type,
        description: d.description,
        free_bytes: d.freeBytes,
        total_bytes: d.totalBytes,
      })),
    };
  }
  /** Bytes of weights and KV llama.cpp was asked to place on GPUs (the offload plan); 0 when all is on the CPU. */
  get deviceBytes(): number {
    return (this.worker.info.offload?.devices ?? []).reduce((s, d) => s + d.weightBytes + d.kvBytes, 0);
  }
  /** --fim-model: the model (in its own worker) that this one's fill-in-the-middle requests run on. */
  fimModel?: ServedModel;

  private constructor(
    readonly id: string,
    readonly path: string,
    readonly info: ModelInfo,
    readonly tokenizer: LlamaModel,
    readonly worker: WorkerClient,
    /** Renders chat templates and tokenizes request text off the event loop. */
    readonly prompts: PromptThread,
    /** The markers its reasoning is written between (single tokens in its vocabulary); none: it does not reason. */
    readonly reasoningMarkers: ReasoningMarkers | undefined,
    /** The most bytes one token stands for: text of n bytes is at least n / this many tokens. */
    readonly maxTokenBytes: number,
    /** How this model writes tool calls, learned from its template; undefined when no known wire fits. */
    readonly toolDialect: ToolDialect | undefined,
    /** The tool wire's call openers that are single tokens: never sampled when no call may be made. */
    readonly callOpenerTokens: number[],
  ) {}

  /**
   * Fewest tokens text of this many characters (UTF-16 code units, never more
   * than its UTF-8 bytes) can become. Lets a prompt that cannot fit be refused
   * before it is rendered and tokenized, work that for a 100 MB body would
   * keep its prompt thread busy for many seconds.
   */
  minTokensFor(chars: number): number {
    return Math.ceil(chars / this.maxTokenBytes);
  }

  static async load(opts: ServedModelOptions): Promise<ServedModel> {
    const info = describeModel(await readGguf(opts.model));
    // The worker starts first, so that the daemon's own vocabulary load (the first in this process opens libllama
    // and compiles the shim) runs while the worker process loads the model, not before it. The journal reads the
    // vocabulary only once a generation begins, after this load. The prompt thread starts after it: the shim's
    // compile (TinyCC) runs in one thread at a time (prompt-thread.ts).
    let tokenizer: LlamaModel | undefined;
    const vocabulary: Tokenizer = {
      tokenize: (text, o) => tokenizer!.tokenize(text, o),
      tokenBytes: (token, special) => tokenizer!.tokenBytes(token, special),
    };
    const journal = opts.sessions ? new SessionJournal(opts.sessions, opts.id, vocabulary) : undefined;
    const starting = WorkerClient.start({ ...opts, ...(journal ? { journal } : {}) });
    let vocabFailure: unknown;
    try {
      tokenizer = LlamaModel.load(opts.model, { vocabOnly: true });
    } catch (err) {
      vocabFailure = err;
    }
    const [worker, prompts] = await Promise.allSettled([
      starting,
      tokenizer === undefined
        ? Promise.reject(vocabFailure)
        : PromptThread.start({
            model: opts.model,
            chatTemplate: info.chatTemplate,
            toolTemplate: info.toolUseTemplate,
            bos: info.specialTokens.bos,
            eos: info.specialTokens.eos,
            loadedAt: new Date(),
          }),
    ]);
    if (tokenizer === undefined || worker.status === "rejected" || prompts.status === "rejected") {
      await Promise.all([
        worker.status === "fulfilled" && worker.value.close(),
        prompts.status === "fulfilled" && prompts.value.close(),
      ]);
      tokenizer?.free();
      throw tokenizer === undefined
        ? vocabFailure
        : worker.status === "rejected"
          ? worker.reason
          : (prompts as PromiseRejectedResult).reason;
    }
    worker.value.gatherWhile(() => prompts.value.inHand);
    let maxTokenBytes = 1;
    for (let t = 0; t < tokenizer.vocabInfo.size; t++)
      maxTokenBytes = Math.max(maxTokenBytes, tokenizer.tokenBytes(t).length);
    const { reasoningMarkers, toolDialect, callOpenerTokens } = templateWires(info, tokenizer);
    return new ServedModel(
      opts.id,
      opts.model,
      info,
      tokenizer,
      worker.value,
      prompts.value,
      reasoningMarkers,
      maxTokenBytes,
      toolDialect,
      callOpenerTokens,
    );
  }

  /** Tokens one request may hold in all: prompt plus reply. */
  get contextWindow(): number {
    return this.worker.info.contextPerSequence;
  }

  /** Its output may hold reasoning: the vocabulary has its reasoning markers. */
  get thinks(): boolean {
    return this.reasoningMarkers !== undefined;
  }

  /** The dialect object of /v1/models (docs/api/openai.md#models). */
  dialect() {
    const source = this.info.chatTemplate ?? "";
    return {
      enable_thinking: templateReads(source, "enable_thinking"),
      reasoning_effort: templateReads(source, "reasoning_effort"),
      reasoning_effort_levels: [] as string[],
      fim: this.hasFimTokens,
      fim_model: this.fimModel !== undefined,
      // The tool-call wire its template teaches and the markers of its reasoning (docs/design.md#tool-dialects).
      tool_call_wire: this.toolDialect?.name ?? null,
      reasoning_markers: this.reasoningMarkers ?? null,
    };
  }

  /** The vocabulary has the prefix, suffix and middle markers fill-in-the-middle needs. */
  get hasFimTokens(): boolean {
    const t = this.info.fimTokens;
    return t.prefix !== undefined && t.suffix !== undefined && t.middle !== undefined;
  }

  /** Where a fill-in-the-middle request for this model runs: the --fim-model, else itself when it has the markers. */
  fimTarget(): ServedModel | undefined {
    return this.fimModel ?? (this.hasFimTokens ? this : undefined);
  }

  /**
   * The model is being unloaded (src/daemon/registry.ts): a request that
   * found it before the unload began but has not started generating yet is
   * refused with a typed 503 instead of reaching a worker that is about to
   * stop (which would never answer it). Generations already running are
   * left to finish.
   */
  retire(refusal: () => RequestError): void {
    this.worker.generate = () => {
      throw refusal();
    };
  }

  async close(): Promise<void> {
    const fim = this.fimModel;
    this.fimModel = undefined;
    await Promise.all([this.worker.close(), this.prompts.close(), fim?.close()]);
    this.tokenizer.free();
  }
}
