// Clients of the --web listener for tests (docs/api/sessions.md): a server
// process started with --web on a free loopback port, its token read from
// <sessions>/web-token, POST /web/rpc and /web/stream with both headers, and a
// WebSocket that queues every frame so a test waits for the frame it needs.
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FixtureKind } from "../../src/fixtures/index.ts";
import { freePort, ServerProcess } from "../scenarios/support.ts";

export const HANG_GUARD_MS = 60_000;
export const GREEDY = { temperature: 0, top_p: 1, min_p: 0, top_k: 0, seed: 0 };

export type Frame = any;

export class WebServer {
  private constructor(
    readonly server: ServerProcess,
    readonly sessions: string,
    readonly webPort: number,
    readonly token: string,
  ) {}

  /** Starts `superfluid serve <fixture> --web 127.0.0.1:<free port>` on `sessions` (a new temp dir by default). */
  static async start(opts: { fixture?: FixtureKind; sessions?: string; args?: string[] } = {}): Promise<WebServer> {
    const sessions = opts.sessions ?? mkdtempSync(join(tmpdir(), "superfluid-web-"));
    const webPort = await freePort();
    const server = await ServerProcess.spawn(
      ["--web", `127.0.0.1:${webPort}`, "--sessions", sessions, ...(opts.args ?? [])],
      undefined,
      opts.fixture ?? "tiny-chat",
    );
    if ((await server.waitHealthy(HANG_GUARD_MS)) !== "healthy")
      throw new Error(`the server did not start:\n${server.stderr}`);
    const tokenFile = join(sessions, "web-token");
    if (!existsSync(tokenFile)) throw new Error(`no ${tokenFile} after the start:\n${server.stderr}`);
    return new WebServer(server, sessions, webPort, readFileSync(tokenFile, "utf8").trim());
  }

  get base(): string {
    return `http://127.0.0.1:${this.webPort}`;
  }

  headers(extra: Record<string, string> = {}): Record<string, string> {
    return {
      authorization: `Bearer ${this.token}`,
      "x-superfluid-csrf": this.token,
      "content-type": "application/json",
      ...extra,
    };
  }

  /** POST /web/rpc with the token twice; the parsed reply. */
  async rpc(request: unknown): Promise<Frame> {
    const res = await fetch(`${this.base}/web/rpc`, {
      method: "POST",
      headers: this.headers(),
      body: JSON.stringify(request),
    });
    if (res.status !== 200) throw new Error(`/web/rpc answered ${res.status}: ${await res.text()}`);
    return res.json();
  }

  /** POST /web/stream; every `data:` payload, parsed (the final "[DONE]" as the string). */
  async stream(body: unknown, signal?: AbortSignal): Promise<Frame[]> {
    const res = await fetch(`${this.base}/web/stream`, {
      method: "POST",
      headers: this.headers(),
      body: JSON.stringify(body),
      ...(signal ? { signal } : {}),
    });
    const text = await res.text();
    return text
      .split("\n")
      .filter((l) => l.startsWith("data: "))
      .map((l) => l.slice(6))
      .map((d) => (d === "[DONE]" ? d : JSON.parse(d)));
  }

  /** A WebSocket on /web/ws with the listener's own Origin and the token as a subprotocol entry. */
  async socket(): Promise<SocketClient> {
    return SocketClient.open(`ws://127.0.0.1:${this.webPort}/web/ws`, {
      origin: this.base,
      protocols: ["superfluid.v1", `superfluid.token.${this.token}`],
    });
  }

  /** Creates a session with `params` (greedy by default) and returns its id. */
  async create(params: unknown = GREEDY): Promise<number> {
    const reply = await this.rpc({ Create: { parent: null, params } });
    if (!reply.Created) throw new Error(`Create failed: ${JSON.stringify(reply)}`);
    return reply.Created.session;
  }

  async stop(): Promise<void> {
    await this.server.killHard();
  }
}

export class SocketClient {
  private readonly frames: Frame[] = [];
  private waiters: (() => void)[] = [];
  closed = false;

  private constructor(readonly ws: WebSocket) {
    ws.onmessage = (m) => {
      this.frames.push(JSON.parse(String(m.data)));
      this.wake();
    };
    ws.onclose = () => {
      this.closed = true;
      this.wake();
    };
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  static open(
    url: string,
    opts: { origin?: string; protocols?: string[]; headers?: Record<string, string> },
  ): Promise<SocketClient> {
    const ws = new WebSocket(url, {
      headers: { ...(opts.origin ? { origin: opts.origin } : {}), ...opts.headers },
      protocols: opts.protocols ?? [],
    } as any);
    return new Promise((resolve, reject) => {
      ws.onopen = () => resolve(new SocketClient(ws));
      ws.onerror = () => reject(new Error(`the WebSocket ${url} was refused`));
    });
  }

  send(request: unknown): void {
    this.ws.send(JSON.stringify(request));
  }

  /** Takes the first queued frame that matches, waiting for it (hang guard only). */
  async next(match: (f: Frame) => boolean = () => true): Promise<Frame> {
    const deadline = performance.now() + HANG_GUARD_MS;
    for (;;) {
      const at = this.frames.findIndex(match);
      if (at >= 0) return this.frames.splice(at, 1)[0];
      if (this.closed) throw new Error("the WebSocket closed while a frame was awaited");
      if (performance.now() > deadline)
        throw new Error(`no matching frame; queued: ${JSON.stringify(this.frames).slice(0, 500)}`);
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 1000);
      });
    }
  }

  /** Sends a request and takes its reply (the next frame that is not a subscription's). */
  async call(request: unknown): Promise<Frame> {
    this.send(request);
    return this.next((f) => !isSubscriptionFrame(f));
  }

  /** Sends Generate and collects its Delta frames until the Generated summary (or Err). */
  generate(session: number, maxTokens?: number): Promise<{ deltas: Frame[]; reply: Frame }> {
    return generateWith(this, { session, max_tokens: maxTokens ?? null });
  }

  /** Skips the running generation's Delta frames to its Generated summary (or Err). */
  async untilSummary(): Promise<Frame> {
    for (;;) {
      const f = await this.next((x) => x.Delta || x.Generated || x.Err);
      if (!f.Delta) return f;
    }
  }

  /**
   * Takes every queued frame that matches, without waiting (after a request's reply, the frames sent before it are all
   * queued).
   */
  takeQueued(match: (f: Frame) => boolean): Frame[] {
    const taken = this.frames.filter(match);
    for (const f of taken) this.frames.splice(this.frames.indexOf(f), 1);
    return taken;
  }

  close(): void {
    this.ws.close();
  }
}

export function isSubscriptionFrame(f: Frame): boolean {
  return typeof f === "object" && f !== null && ("SubEvent" in f || "SubProvisional" in f || "SubEnded" in f);
}

/** The text a session's Generated events of channel 0 hold, in order. */
export function replyText(events: Frame[]): string {
  return events
    .filter((e) => e.body?.Generated && (e.body.Generated.channel ?? 0) === 0)
    .map((e) => e.body.Generated.text)
    .join("");
}

/**
 * Sends Generate with any fields (tool_choice, say) on a socket and collects
 * its Delta frames until the Generated summary (or Err), like SocketClient.generate.
 */
export async function generateWith(
  client: SocketClient,
  fields: Record<string, unknown>,
): Promise<{ deltas: Frame[]; reply: Frame }> {
  client.send({ Generate: { max_tokens: null, ...fields } });
  const deltas: Frame[] = [];
  for (;;) {
    const f = await client.next((x) => !isSubscriptionFrame(x));
    if (f.Delta) deltas.push(f.Delta.event);
    else return { deltas, reply: f };
  }
}

/** A session's events from `cursor` (Read over /web/rpc); throws on Err. */
export async function readEvents(web: WebServer, session: number, cursor = 0): Promise<Frame[]> {
  const reply = await web.rpc({ Read: { session, cursor } });
  if (!reply.Events) throw new Error(`Read ${session} failed: ${JSON.stringify(reply)}`);
  return reply.Events.events;
}

/** The name of an event's record ("Generated", "Message", ...; a bare string for a record without fields). */
export function recordOf(event: Frame): string {
  return typeof event.body === "string" ? event.body : Object.keys(event.body)[0]!;
}

// Hand-written requests (rawRequest, wsHandshake) need the raw socket.
import { randomBytes } from "node:crypto";
import { connect } from "node:net";

export interface RawReply {
  status: number;
  /** Header names lower-cased. */
  headers: Record<string, string>;
  body: string;
}

/**
 * One HTTP/1.1 request written by hand on a TCP socket to 127.0.0.1:`port`,
 * for what fetch and WebSocket will not send as given (a foreign Host, a
 * WebSocket handshake whose refusal status the client hides). The reply is
 * read until the connection closes, or only to the end of its head for a 101.
 */
export function rawRequest(
  port: number,
  head: { method: string; path: string; headers: Record<string, string>; body?: string },
): Promise<RawReply> {
  const body = head.body ?? "";
  // The connection closes after the reply (its end is the reply's end), unless the request sets its own (an upgrade).
  const headers = Object.keys(head.headers).some((k) => k.toLowerCase() === "connection")
    ? head.headers
    : { ...head.headers, connection: "close" };
  const lines = [`${head.method} ${head.path} HTTP/1.1`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
  if (body !== "") lines.push(`content-length: ${Buffer.byteLength(body)}`);
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let data = "";
    let done = false;
    const guard = setTimeout(
      () => finish(new Error(`no reply from 127.0.0.1:${port}; got: ${data.slice(0, 300)}`)),
      HANG_GUARD_MS,
    );
    const finish = (err?: Error) => {
      if (done) return;
      done = true;
      clearTimeout(guard);
      socket.destroy();
      if (err) return reject(err);
      const end = data.indexOf("\r\n\r\n");
      const headLines = (end < 0 ? data : data.slice(0, end)).split("\r\n");
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(headLines[0] ?? "")?.[1] ?? 0);
      const headers: Record<string, string> = {};
      for (const l of headLines.slice(1)) {
        const at = l.indexOf(":");
        if (at > 0) headers[l.slice(0, at).trim().toLowerCase()] = l.slice(at + 1).trim();
      }
      resolve({ status, headers, body: end < 0 ? "" : data.slice(end + 4) });
    };
    socket.on("connect", () => socket.write(`${lines.join("\r\n")}\r\n\r\n${body}`));
    socket.on("data", (chunk: Buffer) => {
      data += chunk.toString("latin1");
      const end = data.indexOf("\r\n\r\n");
      if (end < 0) return;
      // A 101 keeps the connection open: its head is the whole answer. A kept-alive
      // reply ends where its content-length says.
      if (/^HTTP\/1\.1 101/.test(data)) return finish();
      const length = /\r\ncontent-length:\s*(\d+)/i.exec(data.slice(0, end))?.[1];
      if (length !== undefined && Buffer.byteLength(data.slice(end + 4), "latin1") >= Number(length)) finish();
    });
    socket.on("end", () => finish());
    socket.on("close", () => finish());
    socket.on("error", (err: Error) => finish(err));
  });
}

/**
 * A WebSocket handshake on /web/ws by hand (rawRequest), with `headers`
 * added to the upgrade's own: the status the listener answers (101 when it
 * upgrades) and its headers.
 */
export function wsHandshake(port: number, headers: Record<string, string>): Promise<RawReply> {
  return rawRequest(port, {
    method: "GET",
    path: "/web/ws",
    headers: {
      host: `127.0.0.1:${port}`,
      upgrade: "websocket",
      connection: "Upgrade",
      "sec-websocket-key": randomBytes(16).toString("base64"),
      "sec-websocket-version": "13",
      ...headers,
    },
  });
}

/** The sum of a Prometheus counter's samples (all label sets) in an exposition text; 0 when absent. */
export function counterTotal(exposition: string, name: string): number {
  let total = 0;
  for (const line of exposition.split("\n")) {
    const m = new RegExp(`^${name}(\\{[^}]*\\})?\\s+(\\S+)`).exec(line);
    if (m) total += Number(m[2]);
  }
  return total;
}
