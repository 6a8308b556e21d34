// The `--web` listener (docs/api/sessions.md#web-routes): the session API for
// browser front-ends on its own loopback port, apart from the OpenAI API.
//   GET  /web/health  200, no token
//   POST /web/rpc     one request, one reply (streaming requests refused)
//   POST /web/stream  one Generate as server-sent events (stream.ts)
//   GET  /web/ws      WebSocket, subprotocol superfluid.v1, one request per frame (socket.ts)
//   GET  /            the chat page (src/web/page/)
// Bun.serve, not the node:http listener of the main port: it carries
// WebSockets, and what made it unfit there (pipelined requests behind a
// pending reply) does not arise for a browser's fetches here.
import type { Server } from "bun";
import type { SessionService } from "../session-api/service.ts";
import type { Reply } from "../session-api/wire.ts";
import { type WebAuth, SUBPROTOCOL, type Refusal } from "./auth.ts";
import { pageAsset } from "./page/assets.ts";
import { socketHandlers, type SocketData } from "./socket.ts";
import { streamGeneration } from "./stream.ts";

/** A request body past this is refused (413): session requests are small; a long message is still far below it. */
export const MAX_WEB_BODY_BYTES = 16 * 1024 * 1024;

export interface WebListener {
  url: string;
  close(): Promise<void>;
}

const json = (body: Reply, status = 200, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json", "cache-control": "no-store", ...headers },
  });

const refused = (r: Refusal) => json({ Err: { message: r.message } }, r.status);

/** The JSON body of a request, or a reply refusing it. */
async function readJson(request: Request): Promise<{ value: unknown } | Response> {
  const declared = Number(request.headers.get("content-length") ?? 0);
  if (declared > MAX_WEB_BODY_BYTES)
    return json({ Err: { message: `the body is larger than ${MAX_WEB_BODY_BYTES} bytes` } }, 413);
  const text = await request.text();
  if (text.length > MAX_WEB_BODY_BYTES)
    return json({ Err: { message: `the body is larger than ${MAX_WEB_BODY_BYTES} bytes` } }, 413);
  try {
    return { value: JSON.parse(text) };
  } catch {
    return json({ Err: { message: "the body is not JSON: send one request in the session API's JSON form" } }, 400);
  }
}

export function startWebListener(opts: {
  host: string;
  port: number;
  service: SessionService;
  auth: (port: () => number) => WebAuth;
}): WebListener {
  const { service } = opts;
  let server: Server<SocketData> | undefined;
  const auth = opts.auth(() => server?.port ?? opts.port);
  // /web/rpc's Complete requests share one bucket (docs/api/sessions.md#complete); its frames have nowhere to go.
  const rpcConnection = { completionKey: "web-rpc", send: () => {} };
  server = Bun.serve<SocketData>({
    hostname: opts.host,
    port: opts.port,
    // A generation may send nothing for long stretches (a long prefill).
    idleTimeout: 0,
    async fetch(request, srv) {
      const path = new URL(request.url).pathname;
      if (path === "/web/health") {
        const refusal = auth.open(request);
        return refusal ? refused(refusal) : json({ status: "ok" });
      }
      if (path === "/web/ws") {
        if (request.method !== "GET")
          return json({ Err: { message: "GET /web/ws opens a WebSocket" } }, 405, { allow: "GET" });
        const refusal = auth.socket(request);
        if (refusal) return refused(refusal);
        const upgraded = srv.upgrade(request, {
          data: { queue: Promise.resolve(), running: new Set() } as SocketData,
          headers: { "sec-websocket-protocol": SUBPROTOCOL },
        });
        return upgraded ? undefined : json({ Err: { message: "GET /web/ws needs a WebSocket upgrade" } }, 426);
      }
      if (path === "/web/rpc" || path === "/web/stream") {
        if (request.method !== "POST") return json({ Err: { message: `${path} takes POST` } }, 405, { allow: "POST" });
        const refusal = auth.rpc(request);
        if (refusal) return refused(refusal);
        const body = await readJson(request);
        if (body instanceof Response) return body;
        if (path === "/web/stream") return streamGeneration(service, body.value, request.signal);
        const reply = (await service.handle(body.value, rpcConnection, { streaming: false })) ?? "Ack";
        if (typeof reply === "object" && "Throttled" in reply) {
          const ms = (reply.Throttled as { retry_after_ms: number }).retry_after_ms;
          return json(reply, 429, { "retry-after": String(Math.ceil(ms / 1000)) });
        }
        return json(reply);
      }
      if (request.method === "GET" || request.method === "HEAD") {
        const refusal = auth.open(request);
        if (refusal) return refused(refusal);
        const asset = pageAsset(path);
        if (asset) return asset;
      }
      return json(
        {
          Err: {
            message: `no route ${request.method} ${path} on the session API listener (/web/rpc, /web/stream, /web/ws, /web/health)`,
          },
        },
        404,
      );
    },
    websocket: socketHandlers(service),
  });
  const host = opts.host.includes(":") ? `[${opts.host}]` : opts.host;
  return {
    url: `http://${host}:${server.port}`,
    close: async () => {
      service.close();
      await server?.stop(true);
    },
  };
}
