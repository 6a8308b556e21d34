// A worker serving an embedding model (its GGUF declares a pooling type): the
// embedder (src/engine/embedder.ts) in place of the generation engine. Embed
// jobs queue, and each loop turn packs what is queued into one decode, so
// inputs of requests that arrive together share it. Generation requests never
// reach such a worker (the daemon refuses them by the worker's capabilities);
// one that does ends at once with an error.
import { Embedder } from "../engine/embedder.ts";
import type { LlamaModel } from "../engine/model.ts";
import type { WorkerInfo, WorkerToDaemon } from "../engine/protocol.ts";
import type { WorkerArgs } from "./args.ts";
import { modelInfo } from "./model-info.ts";
import { serveLoop } from "./serve-loop.ts";

/**
 * Tokens one input may hold when --max-context is not given: the trained
 * window up to 2048. One decode holds at most this many tokens, and a
 * non-causal encoder's attention buffer grows with its square (llama-server
 * itself takes 512 unless its micro-batch is raised).
 */
const DEFAULT_WINDOW = 2048;

/**
 * The window: --max-context or DEFAULT_WINDOW, never past the trained
 * window. A BERT-style encoder has one learned position row per trained
 * position, and llama.cpp aborts the whole process (a failed assert in
 * get_rows) on a position past them, so a longer input must be refused
 * before it reaches the decode.
 */
function embeddingWindow(maxContext: number | undefined, trainedContext: number): number {
  const asked = maxContext ?? DEFAULT_WINDOW;
  return trainedContext > 0 ? Math.min(asked, trainedContext) : asked;
}

function describe(args: WorkerArgs, model: LlamaModel, embedder: Embedder): WorkerInfo {
  const bytesPerToken = model.kvBytesPerToken();
  return {
    ...modelInfo(args, model),
    lanes: embedder.sequences,
    sequences: embedder.sequences,
    contextPerSequence: embedder.window,
    kv: {
      layout: "shared",
      cells: embedder.window,
      bytes: embedder.window * bytesPerToken,
      bytesPerToken,
      typeK: "f16",
      typeV: "f16",
      summary: `embedding model (${embedder.pooling} pooling, ${embedder.dimensions} dimensions): inputs of up to ${embedder.window} tokens, up to ${embedder.sequences} inputs in one decode`,
    },
    prefillBudget: embedder.window,
    capabilities: { generate: false, prefixCopy: false, embeddings: true, grammar: false },
    embedding: {
      pooling: embedder.pooling,
      dimensions: embedder.dimensions,
      maxInputTokens: embedder.window,
      batchInputs: embedder.sequences,
    },
  };
}

/** Vectors of one job as base64 of their float32 bytes, inputs in order. */
function packVectors(vectors: Float32Array[], dimensions: number): string {
  const all = new Float32Array(vectors.length * dimensions);
  vectors.forEach((vector, i) => all.set(vector, i * dimensions));
  return Buffer.from(all.buffer, all.byteOffset, all.byteLength).toString("base64");
}

/** Serves embed jobs until shutdown; the exit code of `superfluid worker`. */
export async function serveEmbeddings(
  args: WorkerArgs,
  model: LlamaModel,
  send: (message: WorkerToDaemon) => void,
): Promise<number> {
  let embedder: Embedder;
  try {
    embedder = new Embedder(model, {
      threads: args.threads,
      window: embeddingWindow(args.maxContext, model.trainedContext),
    });
  } catch (err) {
    send({ type: "fatal", message: (err as Error).message });
    return 3;
  }
  return serveLoop(
    {
      onMessage(message) {
        if (message.type === "embed") embedder.submit({ id: message.id, inputs: message.inputs });
        else if (message.type === "cancel") embedder.cancel(message.id);
        else if (message.type === "stats")
          send({ type: "stats", id: message.id, snapshot: embedder.snapshot(), at: Date.now() });
        else if (message.type === "generate") {
          const error = "this model embeds: it does not generate text";
          send({
            type: "tick",
            admitted: [],
            tokens: [],
            finished: [
              {
                id: message.id,
                reason: "error",
                promptTokens: message.prompt.length,
                cachedTokens: 0,
                completionTokens: 0,
                error,
                clientError: true,
              },
            ],
          });
        } else if (message.type === "lora-load" || message.type === "lora-unload" || message.type === "lora-scale") {
          send({
            type: "lora-failed",
            id: message.id,
            error: "this model embeds: LoRA adapters apply to text generation only",
          });
        }
      },
      hasWork: () => embedder.hasWork(),
      idle: () => embedder.pauseThreads(),
      step() {
        for (const outcome of embedder.step()) {
          if ("error" in outcome) send({ type: "embed-failed", id: outcome.id, error: outcome.error });
          else
            send({
              type: "embedded",
              id: outcome.id,
              dimensions: embedder.dimensions,
              data: packVectors(outcome.vectors, embedder.dimensions),
            });
        }
      },
      close() {
        embedder.close();
        model.free();
      },
    },
    describe(args, model, embedder),
    send,
    // Embed jobs that arrived together go in first, so they share the decode.
    true,
  );
}
