// Ollama's embedding routes (docs/api/embeddings.md#ollama): POST /api/embed
// (`input` a string or an array of strings, vectors scaled to unit length,
// `truncate` on by default, `dimensions`) and the older POST /api/embeddings
// (`prompt` one string, the raw pooled vector). `options` and `keep_alive`
// are read and ignored: an embedding model is loaded while the server runs.
import * as v from "valibot";
import { embedTokens, embeddingFacts, MAX_INPUTS, normalize, tokenizeInputs } from "../../pipeline/embedding.ts";
import { invalidRequest, RequestError } from "../../daemon/request-error.ts";
import { RequestTimer } from "../access-log.ts";
import { readJsonBody } from "../body.ts";
import { checkArrayLength } from "../chat-limits.ts";
import type { ServerContext } from "../server-context.ts";
import { int, opt, parseWith } from "../validate.ts";
import { CURL_BODIES } from "./envelope.ts";
import { loadedOllamaModel } from "./model-name.ts";

export const EMBED_ROUTE = "/api/embed";
export const LEGACY_EMBED_ROUTE = "/api/embeddings";

const embedSchema = v.looseObject({
  model: v.string("model must be a string"),
  input: v.union([v.string(), v.array(v.string())], "must be a string or an array of strings"),
  truncate: opt(v.boolean()),
  dimensions: opt(int(1)),
});

const legacySchema = v.looseObject({
  model: v.string("model must be a string"),
  prompt: opt(v.string("must be a string")),
});

const ns = (ms: number) => Math.round(ms * 1e6);

function bodyObject(body: unknown): Record<string, unknown> {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw invalidRequest("request body must be a JSON object");
  if ((body as { model?: unknown }).model === undefined) throw invalidRequest("model is required", "model");
  return body as Record<string, unknown>;
}

/** An embedding model that pools (a reranker's scores are no embeddings). */
async function embedderOf(ctx: ServerContext, name: unknown) {
  const model = await loadedOllamaModel(ctx.registry, name);
  const facts = embeddingFacts(model);
  if (facts.pooling === "rank")
    throw new RequestError(400, `"${model.id}" is a reranker: it gives no embeddings`, "unsupported_model", "model");
  return { model, facts };
}

export async function embed(ctx: ServerContext, request: Request): Promise<Response> {
  const timer = new RequestTimer();
  const body = bodyObject(await readJsonBody(request, CURL_BODIES));
  if (body.input === undefined) throw invalidRequest("input is required", "input");
  // The pipeline's bound on inputs, before validation walks them.
  checkArrayLength(body.input, "input", MAX_INPUTS);
  const req = parseWith(embedSchema, body);
  const { model, facts } = await embedderOf(ctx, req.model);
  const dimensions = req.dimensions ?? undefined;
  if (dimensions !== undefined && dimensions > facts.dimensions)
    throw invalidRequest(`dimensions (${dimensions}) must be at most the model's ${facts.dimensions}`, "dimensions");
  // As Ollama: an empty string is no input at all, and no input gives no vectors.
  const inputs = typeof req.input === "string" ? (req.input === "" ? [] : [req.input]) : req.input;
  let vectors: Float32Array[] = [];
  let promptTokens = 0;
  if (inputs.length > 0) {
    // Held on the worker: an unload that starts meanwhile lets this request finish first.
    await model.worker.hold(async () => {
      const tokens = await tokenizeInputs(model, inputs, { field: "input", truncate: req.truncate ?? true });
      vectors = await embedTokens(model, tokens, request.signal);
      promptTokens = tokens.reduce((sum, t) => sum + t.length, 0);
    });
  }
  const shaped = vectors.map((vector) => {
    const unit = normalize(vector);
    return Array.from(
      dimensions === undefined || dimensions >= unit.length ? unit : normalize(unit.subarray(0, dimensions)),
    );
  });
  return Response.json({
    model: req.model,
    embeddings: shaped,
    total_duration: ns(performance.now() - timer.started),
    load_duration: 0,
    prompt_eval_count: promptTokens,
  });
}

export async function legacyEmbeddings(ctx: ServerContext, request: Request): Promise<Response> {
  const req = parseWith(legacySchema, bodyObject(await readJsonBody(request, CURL_BODIES)));
  const { model } = await embedderOf(ctx, req.model);
  // As Ollama: no prompt, no vector.
  if (!req.prompt) return Response.json({ embedding: [] });
  const [vector] = await model.worker.hold(async () =>
    embedTokens(model, await tokenizeInputs(model, [req.prompt!], { field: "prompt" }), request.signal),
  );
  return Response.json({ embedding: Array.from(vector!) });
}
