// OpenAI's Batches API routes (docs/api/batches.md): POST /v1/batches, GET
// /v1/batches, GET /v1/batches/{id}, POST /v1/batches/{id}/cancel. What a
// batch does is src/batches/service.ts; these only read the request and
// answer the service's objects (its RequestErrors in OpenAI's envelope, by
// the app's error handler).
import type { Elysia } from "elysia";
import type { LineReply } from "../../batches/output.ts";
import type { ServedModel } from "../../daemon/served-model.ts";
import { QOS } from "../../engine/scheduler.ts";
import type { GenerationDefaults } from "../../pipeline/engine-request.ts";
import { scopeOf } from "../auth/principal.ts";
import { readJsonBody } from "../body.ts";
import { RequestError } from "../../daemon/request-error.ts";
import type { ServerContext } from "../server-context.ts";
import { runChatCompletion } from "./chat.ts";
import { runEmbeddings } from "./embeddings.ts";

/**
 * A batch line's defaults: the model's own sampling defaults (the operator's
 * sampling flags are for interactive traffic), and 2048 tokens for a line
 * that names no max_tokens or max_completion_tokens.
 */
const LINE_DEFAULTS: GenerationDefaults = { operatorSampling: {}, maxTokens: 2048 };

/**
 * Runs one /v1/chat/completions batch line: the chat completions handler in process, on `model` whatever the line
 * names, in the background class.
 */
export function runBatchLine(
  ctx: ServerContext,
  model: ServedModel,
  body: Record<string, unknown>,
  signal: AbortSignal,
): Promise<LineReply> {
  return runChatCompletion(ctx, body, { qos: QOS.background, signal, model, defaults: LINE_DEFAULTS });
}

/**
 * Runs one /v1/embeddings batch line: the embeddings handler in process, on
 * the model the line names (the default model is normally a chat model,
 * which cannot embed). The embed path has no QoS classes: the line's inputs
 * queue with interactive embedding requests in the worker's one embed queue.
 */
export function runBatchEmbedding(
  ctx: ServerContext,
  body: Record<string, unknown>,
  signal: AbortSignal,
): Promise<LineReply> {
  return runEmbeddings(ctx, body, signal);
}

/** A batch id from the path; a malformed %-escape names no batch. */
function batchId(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new RequestError(404, `No batch found with id '${raw}'`, "batch_not_found", "batch_id");
  }
}

export function mountBatches(app: Elysia, ctx: ServerContext): void {
  const noParse = { parse: "none" as const };
  app
    // Each route names the caller's scope: a batch is seen only by the key that created it.
    .post(
      "/v1/batches",
      async ({ request }) => ctx.batches.create(await readJsonBody(request), scopeOf(request)),
      noParse,
    )
    .get("/v1/batches", ({ query, request }) => {
      const q = query as Record<string, string | undefined>;
      return ctx.batches.list({ limit: q.limit ?? null, after: q.after ?? null }, scopeOf(request));
    })
    .get("/v1/batches/:id", ({ params, request }) => ctx.batches.get(batchId(params.id), scopeOf(request)))
    // The body, if any, is not read: cancel takes no parameters.
    .post(
      "/v1/batches/:id/cancel",
      ({ params, request }) => ctx.batches.cancel(batchId(params.id), scopeOf(request)),
      noParse,
    );
}
