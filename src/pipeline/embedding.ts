// The family-neutral embedding job (docs/api/embeddings.md): inputs (text or
// token ids) to token ids as llama-server tokenizes them, the window check
// per input, the worker's pooled vectors, and the vector arithmetic the
// routes share (L2 normalisation as llama.cpp's common_embd_normalize does
// it, cosine similarity for rerank on a model that only embeds).
import type { ServedModel } from "../daemon/served-model.ts";
import { invalidRequest, RequestError } from "../daemon/request-error.ts";

/** One input as sent: text, or token ids used as they are. */
export type EmbedInput = string | number[];

/** Inputs one request may carry (OpenAI's own limit). */
export const MAX_INPUTS = 2048;

/** What the model's worker embeds with (info.embedding), or 400 unsupported_model for a model that does not embed. */
export function embeddingFacts(model: ServedModel) {
  const facts = model.worker.info.embedding;
  if (!model.worker.info.capabilities.embeddings || !facts) {
    throw new RequestError(
      400,
      `the model '${model.id}' does not embed: its GGUF declares no pooling type, so it is not an embedding model`,
      "unsupported_model",
      "model",
    );
  }
  return facts;
}

export interface TokenizeInputsOptions {
  /** The request field the inputs came from, for messages (`input`, `documents`). */
  field: string;
  /** Cut an input over the window to its first tokens instead of refusing it (Ollama's `truncate`). */
  truncate?: boolean;
  /** Name each input by its index even when it is the only one (`documents[0]`). */
  indexed?: boolean;
}

function labelOf(opts: TokenizeInputsOptions, count: number, index: number): string {
  return count === 1 && !opts.indexed ? opts.field : `${opts.field}[${index}]`;
}

function tooLong(field: string, label: string, tokens: string, max: number): RequestError {
  return new RequestError(
    400,
    `${label} is ${tokens} tokens long; this model embeds at most ${max} tokens an input. Please shorten ${label}.`,
    "context_length_exceeded",
    field,
  );
}

/**
 * Token ids of every input, in order: text tokenized on the model's prompt
 * thread with the vocabulary's BOS/EOS and control-token text parsed (as
 * llama-server does), token ids checked against the vocabulary. An empty
 * input, or one over the window (unless `truncate`), is a 400 naming its
 * index; text that cannot fit is refused before it is tokenized.
 */
export async function tokenizeInputs(
  model: ServedModel,
  inputs: EmbedInput[],
  opts: TokenizeInputsOptions,
): Promise<number[][]> {
  const max = embeddingFacts(model).maxInputTokens;
  if (inputs.length === 0) throw invalidRequest(`${opts.field} must not be empty`, opts.field);
  if (inputs.length > MAX_INPUTS)
    throw invalidRequest(
      `${opts.field} has ${inputs.length} entries; a request may embed at most ${MAX_INPUTS}`,
      opts.field,
    );
  const size = model.tokenizer.vocabInfo.size;
  const out: number[][] = [];
  for (const [i, input] of inputs.entries()) {
    const label = labelOf(opts, inputs.length, i);
    let tokens: number[];
    if (typeof input === "string") {
      const fewest = model.minTokensFor(input.length);
      if (fewest > max && !opts.truncate) throw tooLong(opts.field, label, `at least ${fewest}`, max);
      tokens = Array.from(await model.prompts.tokenize(input, { addSpecial: true, parseSpecial: true }));
    } else {
      input.forEach((id, k) => {
        if (!Number.isInteger(id) || id < 0 || id >= size)
          throw invalidRequest(`${label}[${k}]: ${id} is not a token id of this model (0-${size - 1})`, opts.field);
      });
      tokens = input;
    }
    if (tokens.length === 0) throw invalidRequest(`${label} is empty: there is nothing to embed`, opts.field);
    if (tokens.length > max) {
      if (!opts.truncate) throw tooLong(opts.field, label, String(tokens.length), max);
      tokens = tokens.slice(0, max);
    }
    out.push(tokens);
  }
  return out;
}

/**
 * The model's pooled vectors for token-id inputs (raw, as llama.cpp pools
 * them). The worker packs them, with other requests' inputs, into shared
 * decodes; an aborted signal drops them while still queued.
 */
export async function embedTokens(
  model: ServedModel,
  inputs: number[][],
  signal?: AbortSignal,
): Promise<Float32Array[]> {
  embeddingFacts(model);
  const { vectors } = await model.worker.embed(inputs, signal);
  return vectors;
}

/**
 * The vector scaled to unit length (Euclidean), summed in double as common_embd_normalize; a zero vector stays zero.
 */
export function normalize(vector: Float32Array): Float32Array {
  let sum = 0;
  for (const x of vector) sum += x * x;
  const norm = Math.sqrt(sum);
  const out = new Float32Array(vector.length);
  if (norm === 0) return out;
  const scale = 1 / norm;
  for (let i = 0; i < vector.length; i++) out[i] = vector[i]! * scale;
  return out;
}

/** Cosine similarity (as llama.cpp's common_embd_similarity_cos: 1 for two zero vectors, 0 for one). */
export function cosine(a: Float32Array, b: Float32Array): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  if (na === 0 || nb === 0) return na === 0 && nb === 0 ? 1 : 0;
  return dot / (Math.sqrt(na) * Math.sqrt(nb));
}
