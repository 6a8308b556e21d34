// One in-process server per test file, started in beforeAll and closed in
// afterAll, with the helpers the HTTP API tests share: JSON posts, an SSE
// reader, /slots polling, and a raw-socket client for bodies fetch can't send.
import { afterAll, beforeAll } from "bun:test";
import { Elysia } from "elysia";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { startServer, type RunningServer } from "../../src/cli/serve.ts";
import { parseServeOptions, type ServeOptions } from "../../src/cli/serve-options.ts";
import type { FixtureKind } from "../../src/fixtures/index.ts";
import { FAMILIES } from "../../src/http/families.ts";
import type { ServerContext } from "../../src/http/server-context.ts";
import { fixturePath } from "../support/models.ts";

// One access-log line per request would drown the test output.
process.env.SUPERFLUID_QUIET ??= "1";

export interface TestServer {
  url: string;
  port: number;
  /** The served id of the tiny model, as GET /v1/models reports it. */
  model: string;
  client: OpenAI;
  server: RunningServer;
}

export interface ServerConfig {
  maxContext?: number;
  maxBatch?: number;
  extraArgs?: string[];
  /** The fixture served (default tiny-random). */
  fixture?: FixtureKind;
  /** --sessions (default: a fresh temporary folder, removed after the server). */
  sessions?: string;
  /**
   * A key the server accepts (pass the flags that make it one in extraArgs): sent by the helper's own requests and the
   * OpenAI client.
   */
  apiKey?: string;
  /** Where the server's startup lines go (default: nowhere). */
  log?: (line: string) => void;
}

/**
 * Starts a server on the tiny-random fixture (or cfg.fixture). One compute thread: on this
 * 2-core box llama.cpp's spinning thread barrier under CPU contention slows a
 * 2-thread decode by orders of magnitude, and greedy output does not depend
 * on it.
 */
export async function startTestServer(cfg: ServerConfig = {}): Promise<TestServer & { sessions: string }> {
  const sessions = cfg.sessions ?? mkdtempSync(join(tmpdir(), "superfluid-api-test-"));
  const path = await fixturePath(cfg.fixture ?? "tiny-random");
  const opts = parseServeOptions([
    path,
    "--port",
    "0",
    "--max-batch",
    String(cfg.maxBatch ?? 4),
    "--max-context",
    String(cfg.maxContext ?? 2048),
    "--threads",
    "1",
    "--sessions",
    sessions,
    ...(cfg.extraArgs ?? []),
  ]) as ServeOptions;
  const server = await startServer(opts, cfg.log ?? (() => {}));
  const auth: Record<string, string> = cfg.apiKey === undefined ? {} : { authorization: `Bearer ${cfg.apiKey}` };
  const models = (await (await fetch(`${server.url}/v1/models`, { headers: auth })).json()) as {
    data: { id: string }[];
  };
  return {
    url: server.url,
    port: Number(new URL(server.url).port),
    model: models.data[0]!.id,
    client: new OpenAI({ baseURL: `${server.url}/v1`, apiKey: cfg.apiKey ?? "unused", maxRetries: 0, timeout: 60_000 }),
    server,
    sessions,
  };
}

/**
 * Every route the app registers (method and Elysia path, `/v1/files/:id`): the families' routes,
 * mounted on a bare app (mounting only registers handlers), and src/http/app.ts's own, read off its
 * source (the app is built inside createApp).
 */
export function registeredRoutes(): { method: string; path: string }[] {
  const bare = new Elysia();
  const ctx = { registry: { all: () => [] } } as unknown as ServerContext;
  for (const f of FAMILIES) f.mount(bare as never, ctx);
  const routes = bare.routes.map((r) => ({ method: r.method.toUpperCase(), path: r.path }));
  const appSource = readFileSync(join(import.meta.dir, "../../src/http/app.ts"), "utf8");
  for (const m of appSource.matchAll(/\.(get|post|put|patch|delete)\(\s*"(\/[^"]*)"/g))
    routes.push({ method: m[1]!.toUpperCase(), path: m[2]! });
  return routes;
}

/** Registers beforeAll/afterAll for one server; the returned object is filled in beforeAll. */
export function useServer(cfg: ServerConfig = {}): TestServer {
  const handle = {} as TestServer;
  let sessions: string | undefined;
  beforeAll(async () => {
    const started = await startTestServer(cfg);
    if (cfg.sessions === undefined) sessions = started.sessions;
    Object.assign(handle, started);
  });
  afterAll(async () => {
    await handle.server?.close();
    if (sessions) rmSync(sessions, { recursive: true, force: true });
  });
  return handle;
}

/** The error an `openai` client call failed with; fails the test when the call succeeded. */
export async function apiError(call: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  try {
    await call;
  } catch (err) {
    if (err instanceof OpenAI.APIError) return err;
    throw err;
  }
  throw new Error("the call succeeded; it was expected to fail");
}

export async function post(s: TestServer, path: string, body: unknown, init: RequestInit = {}): Promise<Response> {
  return fetch(`${s.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
    ...init,
  });
}

/** POSTs and reads the JSON reply. */
export async function postJson(
  s: TestServer,
  path: string,
  body: unknown,
): Promise<{ status: number; headers: Headers; json: any }> {
  const res = await post(s, path, body);
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    throw new Error(`${path} answered ${res.status} with a body that is not JSON: ${text.slice(0, 200)}`);
  }
  return { status: res.status, headers: res.headers, json };
}

export async function getJson(s: TestServer, path: string): Promise<{ status: number; headers: Headers; json: any }> {
  const res = await fetch(`${s.url}${path}`);
  return { status: res.status, headers: res.headers, json: await res.json() };
}

export interface SseRead {
  /** Every `data:` payload parsed as JSON, `[DONE]` excluded. */
  events: any[];
  /** The raw `data:` payloads in order, `[DONE]` included. */
  data: string[];
  /** Keep-alive comment lines. */
  comments: string[];
  raw: string;
}

export function parseSse(raw: string): SseRead {
  const out: SseRead = { events: [], data: [], comments: [], raw };
  for (const block of raw.split("\n\n")) {
    if (block.trim() === "") continue;
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) out.comments.push(line);
      else if (line.startsWith("data: ")) {
        const payload = line.slice(6);
        out.data.push(payload);
        if (payload !== "[DONE]") out.events.push(JSON.parse(payload));
      } else if (line !== "") throw new Error(`unexpected SSE line: ${JSON.stringify(line)}`);
    }
  }
  return out;
}

export async function readSse(res: Response): Promise<SseRead> {
  return parseSse(await res.text());
}

/** The one aggregate /slots entry. */
export async function slots(s: TestServer): Promise<any> {
  const res = await fetch(`${s.url}/slots`);
  const body = (await res.json()) as any[];
  return body[0];
}

/**
 * Polls /slots until no lane is active or queued; returns the entry and how long it took, or the last entry when the
 * time ran out.
 */
/**
 * Polls /slots until no lane is active or queued; `hangGuardMs` only stops a hung wait, it is no bound on how long
 * idling may take.
 */
export async function waitIdle(
  s: TestServer,
  hangGuardMs = 60_000,
): Promise<{ idle: boolean; ms: number; entry: any }> {
  const started = performance.now();
  for (;;) {
    const entry = await slots(s);
    const ms = performance.now() - started;
    if (entry.lanes.active === 0 && entry.lanes.queued === 0) return { idle: true, ms, entry };
    if (ms > hangGuardMs) return { idle: false, ms, entry };
    await Bun.sleep(20);
  }
}

/** A user turn. */
export const user = (content: unknown) => [{ role: "user", content }];

/** A minimal HTTP/1.1 response read off a raw socket. */
export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Parses a complete response from what a socket has received so far, or undefined if it is not complete yet. */
export function parseRawResponse(buf: Buffer): RawResponse | undefined {
  const end = buf.indexOf("\r\n\r\n");
  if (end < 0) return undefined;
  const lines = buf.subarray(0, end).toString("latin1").split("\r\n");
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0]!)?.[1]);
  const headers: Record<string, string> = {};
  for (const l of lines.slice(1)) {
    const i = l.indexOf(":");
    headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  const rest = buf.subarray(end + 4);
  if (headers["content-length"] !== undefined) {
    const n = Number(headers["content-length"]);
    if (rest.length < n) return undefined;
    return { status, headers, body: rest.subarray(0, n).toString("utf8") };
  }
  if (headers["transfer-encoding"]?.includes("chunked")) {
    let body = "";
    let at = 0;
    for (;;) {
      const nl = rest.indexOf("\r\n", at);
      if (nl < 0) return undefined;
      const size = parseInt(rest.subarray(at, nl).toString("latin1"), 16);
      if (size === 0) return { status, headers, body };
      if (rest.length < nl + 2 + size + 2) return undefined;
      body += rest.subarray(nl + 2, nl + 2 + size).toString("utf8");
      at = nl + 2 + size + 2;
    }
  }
  return { status, headers, body: rest.toString("utf8") };
}

/** A raw TCP connection to the server that collects whatever it answers. */
export class RawConnection {
  private received = Buffer.alloc(0);
  closed = false;
  error?: Error;

  private constructor(readonly socket: Socket) {
    socket.on("data", (d: Buffer) => (this.received = Buffer.concat([this.received, d])));
    socket.on("close", () => (this.closed = true));
    socket.on("error", (e) => (this.error = e));
  }

  static open(port: number): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, "127.0.0.1");
      socket.once("connect", () => resolve(new RawConnection(socket)));
      socket.once("error", reject);
    });
  }

  get response(): RawResponse | undefined {
    return parseRawResponse(this.received);
  }

  /** Writes, waiting for the socket to drain; false once the peer is gone. */
  async write(data: string | Uint8Array): Promise<boolean> {
    if (this.closed || this.error || this.socket.destroyed) return false;
    const flushed = this.socket.write(data);
    if (!flushed) {
      await new Promise<void>((resolve) => {
        const done = () => {
          this.socket.off("drain", done);
          this.socket.off("close", done);
          this.socket.off("error", done);
          resolve();
        };
        this.socket.on("drain", done);
        this.socket.on("close", done);
        this.socket.on("error", done);
      });
    }
    return !(this.closed || this.error || this.socket.destroyed);
  }

  /** Waits until a whole response has arrived (or the connection closed, or the time ran out). */
  async waitResponse(timeoutMs: number): Promise<RawResponse | undefined> {
    const started = performance.now();
    while (performance.now() - started < timeoutMs) {
      const r = this.response;
      if (r || this.closed) return r;
      await Bun.sleep(10);
    }
    return this.response;
  }

  destroy(): void {
    this.socket.destroy();
  }
}

/** Checks an OpenAI error envelope and returns its `error` object. */
export function envelope(json: any): { message: string; type: string; param: string | null; code: string | null } {
  if (!json || typeof json !== "object" || typeof json.error !== "object" || json.error === null) {
    throw new Error(`not an OpenAI error envelope: ${JSON.stringify(json)}`);
  }
  const e = json.error;
  const keys = Object.keys(e).sort();
  if (JSON.stringify(keys) !== JSON.stringify(["code", "message", "param", "type"])) {
    throw new Error(`error envelope keys are ${keys.join(",")}, want code,message,param,type`);
  }
  if (typeof e.message !== "string" || e.message.length === 0)
    throw new Error("error.message must be a non-empty string");
  if (typeof e.type !== "string") throw new Error("error.type must be a string");
  return e;
}
