// The HTTP listener: node:http carrying a fetch-style handler (the Elysia app).
//
// Not Bun.serve: its uWS core closes the connection when a pipelined request
// arrives behind a reply that is still pending (any generation), so the reply
// in flight is lost with 0 bytes sent; it resets the connection on a method it
// does not know; and what its error path answers is Bun's HTML debug page.
// Bun's node:http answers pipelined requests in order and hands us unknown
// methods and CONNECT, so every request gets an answer in the API's envelope.
import { createServer, METHODS, STATUS_CODES, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { IdleMemory } from "../runtime/idle-memory.ts";
import { errorReply } from "./errors.ts";
import { RequestError } from "../daemon/request-error.ts";

export interface HttpHandler {
  fetch(request: Request): Promise<Response> | Response;
  /**
   * The refusal of a request parsed no further than its request line: a method the parser does not know, or CONNECT.
   */
  refuse(method: string, target: string): RequestError;
  /** An error's JSON body in the envelope of the API family that owns `path`. */
  errorBody(path: string, err: RequestError): unknown;
}

export interface Listener {
  port: number;
  /** Replies begun and not yet closed (streams included). */
  replies(): number;
  close(): Promise<void>;
}

const peers = new WeakMap<Request, string>();

/**
 * The TCP peer's address of a request the listener made (X-Forwarded-For is never read,
 * docs/api/openai.md#fill-in-the-middle).
 */
export function peerAddress(request: Request): string {
  return peers.get(request) ?? "unknown";
}

/** The request body as a web stream, read from the socket only as fast as the handler pulls it. */
function bodyStream(req: IncomingMessage): ReadableStream<Uint8Array> {
  let finished = false;
  return new ReadableStream<Uint8Array>({
    start(controller) {
      req.on("data", (chunk: Buffer) => {
        if (finished) return;
        controller.enqueue(chunk);
        if ((controller.desiredSize ?? 0) <= 0) req.pause();
      });
      req.once("end", () => {
        if (!finished) controller.close();
        finished = true;
      });
      req.once("error", (err) => {
        if (!finished) controller.error(err);
        finished = true;
      });
    },
    pull() {
      req.resume();
    },
    cancel() {
      // The handler has what it needs (or refused the rest, 413): the rest is read and dropped.
      finished = true;
      req.resume();
    },
  });
}

function toRequest(req: IncomingMessage, base: string, signal: AbortSignal): Request {
  const target = req.url ?? "";
  if (!target.startsWith("/")) throw new RequestError(400, "the request target must be a path starting with '/'");
  const headers = new Headers();
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i]!, req.rawHeaders[i + 1]!);
  // HEAD is answered as GET; node:http leaves the body out.
  const method = req.method === "HEAD" ? "GET" : (req.method ?? "GET");
  const body = method === "GET" ? {} : { body: bodyStream(req), duplex: "half" as const };
  const request = new Request(base + target, { method, headers, signal, ...body });
  peers.set(request, req.socket.remoteAddress ?? "unknown");
  return request;
}

/** The handler's reply; whatever it throws is a reply in the envelope too. */
async function respond(
  handler: HttpHandler,
  req: IncomingMessage,
  base: string,
  signal: AbortSignal,
): Promise<Response> {
  let request: Request;
  try {
    request = toRequest(req, base, signal);
  } catch (err) {
    // Headers node:http let through that a Request cannot carry.
    return errorReply(err instanceof RequestError ? err : new RequestError(400, "malformed HTTP request"), (e) =>
      handler.errorBody(req.url ?? "/", e),
    );
  }
  try {
    return await handler.fetch(request);
  } catch (err) {
    return errorReply(err, (e) => handler.errorBody(req.url ?? "/", e));
  }
}

const PENDING = Symbol("pending");

/** Resolves when the socket takes more (or is gone). */
function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.on("drain", done);
    res.on("close", done);
  });
}

/** How long an unread request body is drained after its reply before the connection is closed. */
const LINGER_MS = 5000;

function lingerThenClose(req: IncomingMessage, res: ServerResponse): void {
  res.once("finish", () => {
    if (req.complete) return;
    // Whatever still listens for the body (the handler's stream) pauses it when full.
    req.removeAllListeners("data");
    req.resume();
    const timer = setTimeout(() => req.socket.destroy(), LINGER_MS);
    // Both listeners go once either fires: a keep-alive socket serves many requests.
    const done = () => {
      clearTimeout(timer);
      req.off("end", done);
      req.socket.off("close", done);
    };
    req.once("end", done);
    req.socket.once("close", done);
  });
}

/** Writes a Response: a body ready whole goes out with a Content-Length, a stream as it comes. */
async function send(
  req: IncomingMessage,
  res: ServerResponse,
  response: Response,
  replyHeaders: Readonly<Record<string, string>>,
): Promise<void> {
  res.statusCode = response.status;
  for (const [name, value] of Object.entries(replyHeaders)) res.setHeader(name, value);
  for (const [name, value] of response.headers) if (name !== "set-cookie") res.setHeader(name, value);
  // A body the handler did not read to its end (a 413, a refusal) is read and
  // dropped for a while after the reply (a lingering close): closing at once
  // with unread bytes makes the kernel answer them with a reset, which can
  // destroy the reply before the client has read it.
  if (!req.complete) lingerThenClose(req, res);
  if (!response.body) return void res.end();
  const reader = response.body.getReader();
  const cancel = () => void reader.cancel().catch(() => {});
  // The client may be gone already (its close fired while the handler ran): the
  // body is cancelled either way, so whatever it holds (a generation, a key's slot) is let go.
  if (res.destroyed || res.closed) return cancel();
  res.once("close", cancel);
  const first = await reader.read();
  if (first.done) return void res.end();
  let next = reader.read();
  const ready = await Promise.race([
    next,
    new Promise<typeof PENDING>((resolve) => setImmediate(() => resolve(PENDING))),
  ]);
  if (ready !== PENDING && ready.done) {
    res.setHeader("content-length", first.value.byteLength);
    return void res.end(first.value);
  }
  let chunk = first.value;
  for (;;) {
    if (res.destroyed) return cancel();
    if (!res.write(chunk)) await drained(res);
    const step = await next;
    if (step.done) return void res.end();
    chunk = step.value;
    next = reader.read();
  }
}

/** A refusal written straight to a socket node:http did not make a request of, then closed. */
function writeRaw(
  handler: HttpHandler,
  socket: Duplex,
  error: RequestError,
  replyHeaders: Readonly<Record<string, string>>,
  path = "/",
): void {
  if (!socket.writable) return void socket.destroy();
  const body = JSON.stringify(handler.errorBody(path, error));
  const headers = {
    ...replyHeaders,
    "content-type": "application/json",
    ...error.headers,
    "content-length": String(Buffer.byteLength(body)),
    connection: "close",
  };
  const head = [
    `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status] ?? ""}`,
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
  ];
  socket.end(`${head.join("\r\n")}\r\n\r\n${body}`);
}

const REQUEST_LINE = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP\/1\.[01]$/;

/**
 * Method and target of the request the parser refused for its method. The raw
 * bytes may also hold requests pipelined before it (already answered): it is
 * the first line whose method the parser does not know.
 */
function refusedRequestLine(raw: Buffer | undefined): [string, string] | undefined {
  const lines = (raw ?? Buffer.alloc(0))
    .toString("latin1")
    .split("\r\n")
    .map((l) => REQUEST_LINE.exec(l))
    .filter((m) => m !== null);
  const m = lines.find((line) => !METHODS.includes(line[1]!.toUpperCase())) ?? lines.at(-1);
  return m ? [m[1]!, m[2]!] : undefined;
}

function clientError(
  handler: HttpHandler,
  err: Error & { code?: string; rawPacket?: Buffer },
  socket: Duplex,
  replyHeaders: Readonly<Record<string, string>>,
): void {
  if (err.code === "ECONNRESET") return void socket.destroy();
  const line = err.code === "HPE_INVALID_METHOD" ? refusedRequestLine(err.rawPacket) : undefined;
  if (line) return writeRaw(handler, socket, handler.refuse(...line), replyHeaders, line[1]);
  if (err.code === "HPE_HEADER_OVERFLOW")
    return writeRaw(handler, socket, new RequestError(431, "the request headers are too large"), replyHeaders);
  writeRaw(handler, socket, new RequestError(400, "malformed HTTP request"), replyHeaders);
}

/**
 * How long a connection may take to deliver a request's head (its request
 * line and headers), counted from its opening or from the end of its last
 * reply. Bun's node:http ignores `headersTimeout` (its own undocumented idle
 * close, about 10 s in Bun 1.4, is not ours to rely on), so the bound on a
 * client that trickles header bytes, or opens sockets and sends nothing, is
 * kept here. Longer than any keep-alive a client keeps idle (the server
 * advertises 5 s).
 */
export const HEAD_DEADLINE_MS = 30_000;

/**
 * Closes `socket` when it has had no request in flight for `ms`: a head that never arrives, or a keep-alive left idle.
 */
function headDeadlines(ms: number): {
  opened(socket: Duplex): void;
  started(socket: Duplex): void;
  ended(socket: Duplex): void;
} {
  const state = new WeakMap<Duplex, { inFlight: number; timer?: ReturnType<typeof setTimeout> }>();
  const arm = (socket: Duplex, s: { inFlight: number; timer?: ReturnType<typeof setTimeout> }) => {
    clearTimeout(s.timer);
    s.timer = setTimeout(() => s.inFlight === 0 && socket.destroy(), ms);
    s.timer.unref?.();
  };
  return {
    opened(socket) {
      const s = { inFlight: 0 };
      state.set(socket, s);
      arm(socket, s);
      socket.once("close", () => clearTimeout(state.get(socket)?.timer));
    },
    started(socket) {
      const s = state.get(socket);
      if (!s) return;
      s.inFlight++;
      clearTimeout(s.timer);
    },
    ended(socket) {
      const s = state.get(socket);
      if (!s) return;
      if (--s.inFlight === 0 && !socket.destroyed) arm(socket, s);
    },
  };
}

export function listen(
  handler: HttpHandler,
  hostname: string,
  port: number,
  opts: {
    headDeadlineMs?: number;
    /** Headers every reply carries, refusals of unparsed requests included (x-superfluid-replica). */
    replyHeaders?: Readonly<Record<string, string>>;
  } = {},
): Promise<Listener> {
  const replyHeaders = opts.replyHeaders ?? {};
  let base = "";
  const heads = headDeadlines(opts.headDeadlineMs ?? HEAD_DEADLINE_MS);
  // A burst of requests leaves the daemon's peak heap behind: given back once none has run for a while.
  const memory = new IdleMemory();
  // Replies begun and not yet closed: a drain waits for them (docs/cli.md#startup-and-shutdown).
  let replying = 0;
  const server = createServer(async (req, res) => {
    heads.started(req.socket);
    memory.busy();
    replying++;
    res.once("close", () => {
      replying--;
      heads.ended(req.socket);
      memory.done();
    });
    const abort = new AbortController();
    // The client went away before the reply was whole: the handler's signal fires.
    res.once("close", () => res.writableFinished || abort.abort());
    const response = await respond(handler, req, base, abort.signal);
    try {
      await send(req, res, response, replyHeaders);
    } catch {
      res.destroy();
    }
  });
  // A reply may take as long as its generation; a request's head may not.
  server.requestTimeout = 0;
  server.timeout = 0;
  server.on("connection", (socket: Duplex) => heads.opened(socket));
  server.on("clientError", (err, socket) => clientError(handler, err, socket, replyHeaders));
  server.on("connect", (req: IncomingMessage, socket: Duplex) =>
    writeRaw(handler, socket, handler.refuse(req.method ?? "CONNECT", req.url ?? ""), replyHeaders),
  );
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host: hostname, port, exclusive: true }, () => {
      server.off("error", reject);
      const bound = (server.address() as AddressInfo).port;
      base = `http://${hostname.includes(":") ? `[${hostname}]` : hostname}:${bound}`;
      resolve({
        port: bound,
        replies: () => replying,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            server.closeAllConnections();
          }),
      });
    });
  });
}
