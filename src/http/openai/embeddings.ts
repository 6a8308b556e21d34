// POST /v1/embeddings (docs/api/embeddings.md): OpenAI's embeddings route on
// an embedding model. Vectors are the model's pooled embeddings scaled to unit
// length, as llama-server's /v1/embeddings gives them; `dimensions` keeps the
// first n and scales them to unit length again (how OpenAI shortens its own
// embeddings); `encoding_format: "base64"` sends each vector as its
// little-endian float32 bytes, which OpenAI's clients ask for by default.
// The Batches API runs its /v1/embeddings lines through the same code in
// process (runEmbeddings).
import * as v from "valibot";
import {
  embedTokens,
  embeddingFacts,
  MAX_INPUTS,
  normalize,
  tokenizeInputs,
  type EmbedInput,
} from "../../pipeline/embedding.ts";
import { checkArrayLength } from "../chat-limits.ts";
import { readJsonBody } from "../body.ts";
import { asRequestError } from "../../pipeline/request-failure.ts";
import { invalidRequest, RequestError } from "../../daemon/request-error.ts";
import { loadedOr404 } from "../models.ts";
import type { ServerContext } from "../server-context.ts";
import { int, opt, parseWith } from "../validate.ts";
import { openaiErrorBody } from "./envelope.ts";

/**
 * A string, an array of token ids, or an array of inputs each a string or a
 * token-id array (as /v1/completions' prompt; strings and token arrays may
 * mix, as llama-server allows).
 */
export const embeddingInputField = v.union(
  [v.string(), v.array(v.number()), v.array(v.union([v.string(), v.array(v.number())]))],
  "must be a string, an array of strings, an array of token ids or an array of token-id arrays",
);

const embeddingSchema = v.looseObject({
  model: v.string("model must be a string"),
  input: embeddingInputField,
  encoding_format: opt(v.picklist(["float", "base64"], "must be 'float' or 'base64'")),
  dimensions: opt(int(1)),
  user: opt(v.string()),
});

/** The inputs a request carries, in order; an array of numbers is one input of token ids, not many. */
export function embeddingInputs(input: v.InferOutput<typeof embeddingInputField>): EmbedInput[] {
  if (typeof input === "string") return [input];
  if (input.length === 0) throw invalidRequest("input must not be an empty array", "input");
  if (typeof input[0] === "number") return [input as number[]];
  return input as EmbedInput[];
}

/** The first `dimensions` floats scaled to unit length again. */
function shorten(vector: Float32Array, dimensions: number | undefined): Float32Array {
  return dimensions === undefined || dimensions >= vector.length ? vector : normalize(vector.subarray(0, dimensions));
}

function encoded(vector: Float32Array, format: "float" | "base64"): number[] | string {
  if (format === "float") return Array.from(vector);
  return Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString("base64");
}

export async function embeddings(ctx: ServerContext, request: Request): Promise<Response> {
  return Response.json(await embed(ctx, await readJsonBody(request), request.signal));
}

/**
 * An embeddings body run in process, outside any HTTP request (the Batches
 * API's lines, docs/api/batches.md): the status and the JSON body the route
 * would answer (errors in OpenAI's envelope). It runs on the model the body
 * names; aborting `signal` drops its inputs while they are still queued.
 */
export async function runEmbeddings(
  ctx: ServerContext,
  body: unknown,
  signal: AbortSignal,
): Promise<{ status: number; body: unknown }> {
  try {
    return { status: 200, body: await embed(ctx, body, signal) };
  } catch (err) {
    const e = asRequestError(err);
    return { status: e.status, body: openaiErrorBody(e) };
  }
}

/** A parsed body to OpenAI's embedding list: the route's work, shared by the route and the batch lines. */
async function embed(ctx: ServerContext, body: unknown, signal: AbortSignal) {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw invalidRequest("request body must be a JSON object");
  if ((body as { model?: unknown }).model === undefined)
    throw invalidRequest("you must provide a model parameter", "model");
  const { input } = body as { input?: unknown };
  if (input === undefined) throw invalidRequest("you must provide an input parameter", "input");
  // MAX_INPUTS (the pipeline's bound) before validation walks them; an array of token ids is one input.
  if (Array.isArray(input) && typeof input[0] !== "number") checkArrayLength(input, "input", MAX_INPUTS);
  const req = parseWith(embeddingSchema, body);
  const model = await loadedOr404(ctx.registry, req.model);
  const facts = embeddingFacts(model);
  if (facts.pooling === "rank") {
    throw new RequestError(
      400,
      `the model '${model.id}' is a reranker (rank pooling): it scores pairs on /v1/rerank and gives no embeddings`,
      "unsupported_model",
      "model",
    );
  }
  const dimensions = req.dimensions ?? undefined;
  if (dimensions !== undefined && dimensions > facts.dimensions) {
    throw invalidRequest(`dimensions (${dimensions}) must be at most the model's ${facts.dimensions}`, "dimensions");
  }
  // Held on the worker: an unload that starts meanwhile lets this request finish first.
  const { tokens, vectors } = await model.worker.hold(async () => {
    const tokens = await tokenizeInputs(model, embeddingInputs(req.input), { field: "input" });
    return { tokens, vectors: await embedTokens(model, tokens, signal) };
  });
  const format = req.encoding_format ?? "float";
  const promptTokens = tokens.reduce((sum, t) => sum + t.length, 0);
  return {
    object: "list",
    data: vectors.map((vector, index) => ({
      object: "embedding",
      index,
      embedding: encoded(shorten(normalize(vector), dimensions), format),
    })),
    model: model.id,
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  };
}
