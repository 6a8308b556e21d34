// The HTTP app: one Elysia app, every API family's routes (families.ts) plus /health, /props, /slots, /metrics.
// Bodies are read by our own capped reader (parse: "none") so size limits,
// content types and malformed JSON get OpenAI's envelope. Every request first
// has its session key checked (replica.ts; echoed on the reply), passes the
// Origin and Host checks, then (a CORS preflight excepted, answered there and
// needing no key) the gate (key, rate limits, the key's slots:
// src/http/auth/gate.ts); whatever no route takes, or any route throws, is
// answered in the envelope too (404, 405 with Allow, 500), never with a stack
// or a path of this machine. Every reply to an allowed page origin, refusals
// included, carries the CORS headers (cors.ts).
import { Elysia } from "elysia";
import { health, props, readiness, slots, tokenize } from "./admin.ts";
import { readJsonBody } from "./body.ts";
import { errorResponse, FAMILIES, familyOf } from "./families.ts";
import { RequestError } from "../daemon/request-error.ts";
import { asRequestError } from "../pipeline/request-failure.ts";
import type { HttpHandler } from "./listener.ts";
import { ServerMetrics } from "./metrics.ts";
import { RouteTable } from "./methods.ts";
import { namedOrDefault } from "./models.ts";
import { unauthenticated, type RequestGate } from "./auth/gate.ts";
import { principalOf, runAs } from "./auth/principal.ts";
import { corsOrigin, isPreflight, preflightReply, withCors } from "./cors.ts";
import { allowedOrigins, foreignRequestRefusal, type HostPolicy } from "./origin-guard.ts";
import { runWithSessionKey, SESSION_KEY_HEADER, sessionKeyOf } from "./replica.ts";
import type { ServerContext } from "./server-context.ts";

const retired = () =>
  new RequestError(501, "slot save and restore are retired: sessions are durable on their own", "route_retired");

function pathOf(request: Request): string {
  try {
    return new URL(request.url).pathname;
  } catch {
    return request.url;
  }
}

/** The reply with its body wrapped so `release` runs once the body has ended, failed or been cancelled. */
function releasedAtEnd(response: Response, release: () => void): Response {
  if (!response.body) {
    release();
    return response;
  }
  const reader = response.body.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const step = await reader.read();
        if (step.done) {
          release();
          controller.close();
        } else controller.enqueue(step.value);
      } catch (err) {
        release();
        controller.error(err);
      }
    },
    cancel(reason) {
      release();
      return reader.cancel(reason);
    },
  });
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

/** The reply with the request's session key echoed (docs/guides/scale-out.md#affinity). */
function withSessionKey(response: Response, key: string | undefined): Response {
  if (key !== undefined) response.headers.set(SESSION_KEY_HEADER, key);
  return response;
}

/** The app as the listener's handler. */
export function createApp(
  ctx: ServerContext,
  hosts: HostPolicy,
  gate: RequestGate,
  metrics = new ServerMetrics(ctx.registry, gate),
): HttpHandler {
  const noParse = { parse: "none" as const };
  const exposition = async ({ request }: { request: Request }) =>
    new Response(await metrics.scrape(principalOf(request), gate.authenticating && !principalOf(request)), {
      headers: { "content-type": metrics.contentType },
    });
  const app = new Elysia()
    .onError(({ code, error, request }) => {
      const path = pathOf(request);
      if (code === "NOT_FOUND") return errorResponse(path, table.unrouted(request.method, path));
      const err = asRequestError(error);
      metrics.noteError(err);
      if (err.code === "admin_required") gate.noteRejection(principalOf(request), err.code);
      // 501 is a route this server does not serve, and a 503 with a code
      // (model_loading, model_unloading) a state that passes: neither is a failure.
      if (err.status >= 500 && err.status !== 501 && !(err.status === 503 && err.code !== null))
        console.error(`superfluid: ${request.method} ${path}: ${err.message}`);
      return errorResponse(path, err);
    })
    .get("/health", () => health(ctx.registry, ctx.starting?.() ?? false, ctx.pulling?.()))
    .get("/health/ready", () => readiness(ctx.registry, ctx.starting?.() ?? false, ctx.draining?.() ?? false))
    .post("/v1/tokenize", async ({ request }) => tokenize(ctx.registry, await readJsonBody(request)), noParse)
    .get("/props", ({ query }) => {
      const q = query as { model?: string; autoload?: string };
      return props(ctx.registry, ctx.operatorSampling, q.model ?? null, q.autoload ?? null);
    })
    .get("/slots", () => slots(namedOrDefault(ctx.registry, null)))
    // docs/api/metrics.md: Prometheus text exposition.
    .get("/metrics", exposition)
    .get("/v1/metrics", exposition)
    .post("/slots/:id/save", ({ request }) => errorResponse(pathOf(request), retired()), noParse)
    .post("/slots/:id/restore", ({ request }) => errorResponse(pathOf(request), retired()), noParse);
  for (const family of FAMILIES) family.mount(app as unknown as Elysia, ctx);
  const table = new RouteTable(app.routes);
  const admitted = async (request: Request, path: string, sessionKey: string | undefined): Promise<Response> => {
    const foreign = foreignRequestRefusal(request, hosts);
    if (foreign) return errorResponse(path, foreign);
    // A preflight carries no key (browsers never send one on it): the request that follows is checked.
    if (isPreflight(request)) {
      const methods = table.allowed(path);
      return methods.length > 0
        ? preflightReply(request, methods)
        : errorResponse(path, table.unrouted("OPTIONS", path));
    }
    const admission = gate.admit(request, path);
    if ("refusal" in admission) {
      metrics.noteError(admission.refusal);
      return errorResponse(path, admission.refusal);
    }
    const release = admission.release;
    const handle = () => runAs(principalOf(request), () => runWithSessionKey(sessionKey, () => app.handle(request)));
    if (!release) return handle();
    let response: Response;
    try {
      response = await handle();
    } catch (err) {
      release();
      throw err;
    }
    return releasedAtEnd(response, release);
  };
  const origins = allowedOrigins(hosts);
  const answer = async (request: Request, path: string): Promise<Response> => {
    let sessionKey: string | undefined;
    try {
      sessionKey = sessionKeyOf(request);
    } catch (err) {
      return errorResponse(path, asRequestError(err));
    }
    return withSessionKey(await admitted(request, path, sessionKey), sessionKey);
  };
  return {
    fetch: async (request) => {
      const path = pathOf(request);
      let response: Response;
      try {
        response = await answer(request, path);
      } catch (err) {
        // Answered here rather than by the listener, so a page reading the error gets the CORS headers too.
        response = errorResponse(path, err);
      }
      return withCors(response, corsOrigin(request, origins));
    },
    // A request line the parser refused carries no headers we can read: with keys on, it is not told which methods a
    // path takes.
    refuse: (method, target) => (gate.authenticating ? unauthenticated() : table.unrouted(method, target)),
    errorBody: (path, err) => familyOf(path).errorBody(err),
  };
}
