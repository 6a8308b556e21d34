// The HTTP app: one Elysia app, OpenAI routes plus /health, /props, /slots.
// Bodies are read by our own capped reader (parse: "none") so size limits,
// content types and malformed JSON get OpenAI's envelope. Every request first
// passes the Origin and Host checks; whatever no route takes, or any route
// throws, is answered in the envelope too (404, 405 with Allow, 500), never
// with a stack or a path of this machine.
import { Elysia } from "elysia";
import { readJsonBody } from "./body.ts";
import { ApiError, asApiError } from "./errors.ts";
import { health, props, slots, tokenize } from "./admin.ts";
import { peerAddress, type HttpHandler } from "./listener.ts";
import { RouteTable } from "./methods.ts";
import { chatCompletions } from "./openai/chat.ts";
import { completions } from "./openai/completions.ts";
import type { ServerContext } from "./openai/generation.ts";
import { modelOr404, namedOrDefault } from "./models.ts";
import { listModels, modelObject } from "./openai/models.ts";
import { foreignRequestRefusal, type HostPolicy } from "./origin-guard.ts";

const retired = () => new ApiError(501, "slot save and restore are retired: sessions are durable on their own", "route_retired");

/** A model id from the path; a malformed %-escape names no model. */
function decodeModelId(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new ApiError(404, `The model '${raw}' does not exist`, null, "model");
  }
}

function pathOf(request: Request): string {
  try {
    return new URL(request.url).pathname;
  } catch {
    return request.url;
  }
}

/** The app as the listener's handler. */
export function createApp(ctx: ServerContext, hosts: HostPolicy): HttpHandler {
  const noParse = { parse: "none" as const };
  const app = new Elysia()
    .onRequest(({ request }) => foreignRequestRefusal(request, hosts)?.toResponse())
    .onError(({ code, error, request }) => {
      if (code === "NOT_FOUND") return table.unrouted(request.method, pathOf(request)).toResponse();
      const api = asApiError(error);
      if (api.status >= 500) console.error(`superfluid: ${request.method} ${pathOf(request)}: ${api.message}`);
      return api.toResponse();
    })
    .get("/health", () => health(ctx.registry))
    .get("/v1/models", () => listModels(ctx.registry))
    .get("/v1/models/*", ({ params }) => modelObject(modelOr404(ctx.registry, decodeModelId(params["*"]))))
    .post("/v1/chat/completions", ({ request }) => chatCompletions(ctx, request), noParse)
    // The FIM bucket is keyed by the TCP peer's address (X-Forwarded-For is not read, api.md 16.4).
    .post("/v1/completions", ({ request }) => completions(ctx, request, peerAddress(request)), noParse)
    .post("/v1/tokenize", async ({ request }) => tokenize(ctx.registry, await readJsonBody(request)), noParse)
    .get("/props", ({ query }) => props(ctx.registry, ctx.operatorSampling, (query as { model?: string }).model ?? null))
    .get("/slots", () => slots(namedOrDefault(ctx.registry, null)))
    .post("/slots/:id/save", () => retired().toResponse(), noParse)
    .post("/slots/:id/restore", () => retired().toResponse(), noParse);
  const table = new RouteTable(app.routes);
  return {
    fetch: (request) => app.handle(request),
    refuse: (method, target) => table.unrouted(method, target),
  };
}
