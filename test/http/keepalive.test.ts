// --nonstream-keepalive (docs/api/openai.md#non-streaming-keep-alive): a non-streamed generation commits 200
// with `x-superfluid-keepalive: whitespace` at admission and writes a space
// every interval, so a client (or proxy) that drops idle sockets still gets
// the JSON of a slow reply. The client here is a raw socket that gives up
// after 1.5 s without a byte; the same request without the flag loses it.
import { describe, expect, test } from "bun:test";
import { connect } from "node:net";
import {
  envelope,
  parseRawResponse,
  post,
  slots,
  useServer,
  user,
  waitIdle,
  type RawResponse,
  type TestServer,
} from "./support.ts";

const IDLE_MS = 1500;
const WINDOW = 4096;
const padded = useServer({ maxBatch: 1, maxContext: WINDOW, extraArgs: ["--nonstream-keepalive", "1"] });
const plain = useServer({ maxBatch: 1, maxContext: WINDOW });

/** A long reply: on this box ~2.5 s of decoding on one lane, with nothing to send until the end. */
const slow = (srv: TestServer) => ({ model: srv.model, prompt: "go", max_tokens: 3000, ignore_eos: true });

interface IdleResult {
  response?: RawResponse;
  /** The socket was dropped for idling. */
  idled: boolean;
  ms: number;
  /** Time of each received chunk, ms after the request was sent. */
  arrivals: number[];
}

/** POSTs over a raw socket that is destroyed after `idleMs` without receiving a byte (an idle-timing proxy). */
function idleTimingPost(srv: TestServer, path: string, body: unknown, idleMs = IDLE_MS): Promise<IdleResult> {
  const payload = JSON.stringify(body);
  return new Promise((resolve) => {
    const socket = connect(srv.port, "127.0.0.1");
    let received = Buffer.alloc(0);
    let idled = false;
    const arrivals: number[] = [];
    let started = 0;
    socket.setTimeout(idleMs, () => {
      idled = true;
      socket.destroy();
    });
    socket.on("connect", () => {
      started = performance.now();
      socket.write(
        `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(payload)}\r\nConnection: close\r\n\r\n${payload}`,
      );
    });
    socket.on("data", (d: Buffer) => {
      arrivals.push(performance.now() - started);
      received = Buffer.concat([received, d]);
    });
    socket.on("error", () => {});
    socket.on("close", () =>
      resolve({ response: parseRawResponse(received), idled, ms: performance.now() - started, arrivals }),
    );
  });
}

describe("a slow non-streamed request through an idle-timing client", () => {
  test("with the flag: 200 at admission, spaces while it runs, then the whole JSON", async () => {
    const r = await idleTimingPost(padded, "/v1/completions", slow(padded));
    expect(r.idled).toBe(false);
    // The reply really took longer than the client's idle limit, so without padding it would have been dropped.
    expect(r.ms).toBeGreaterThan(IDLE_MS);
    const res = r.response!;
    expect(res.status).toBe(200);
    expect(res.headers["x-superfluid-keepalive"]).toBe("whitespace");
    expect(res.headers["content-type"]).toContain("application/json");
    const lead = /^ */.exec(res.body)![0].length;
    expect(lead).toBeGreaterThanOrEqual(2);
    const json = JSON.parse(res.body);
    expect(json.object).toBe("text_completion");
    expect(json.usage.completion_tokens).toBe(3000);
    // No silence as long as the client's limit: the client above never idled out.
  });

  test("without it the same client loses the reply (and the generation is cancelled)", async () => {
    const r = await idleTimingPost(plain, "/v1/completions", slow(plain));
    expect(r.idled).toBe(true);
    expect(r.response).toBeUndefined();
    expect((await waitIdle(plain)).idle).toBe(true);
  });
});

describe("other keep-alive rules", () => {
  test("chat: header, leading spaces, then the chat completion; x-superfluid-warm still sent", async () => {
    const res = await post(padded, "/v1/chat/completions", {
      model: padded.model,
      messages: user("hi"),
      max_tokens: 4,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-superfluid-keepalive")).toBe("whitespace");
    expect(res.headers.get("x-superfluid-warm")).toMatch(/^\d+$/);
    const text = await res.text();
    expect(text.startsWith(" ")).toBe(true);
    const json = JSON.parse(text);
    expect(json.object).toBe("chat.completion");
    expect(json.choices[0].message.role).toBe("assistant");
  });

  test("an error before admission keeps its status", async () => {
    const res = await post(padded, "/v1/completions", { model: padded.model, prompt: "word ".repeat(WINDOW * 2) });
    expect(res.status).toBe(400);
    expect(res.headers.get("x-superfluid-keepalive")).toBeNull();
    expect(envelope(await res.json()).code).toBe("context_length_exceeded");
  });

  test("an error after admission is the error envelope in the 200's body", async () => {
    const worker = padded.server.registry.default!.worker;
    const res = await post(padded, "/v1/chat/completions", {
      model: padded.model,
      messages: user("go on"),
      max_tokens: 100000,
      ignore_eos: true,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-superfluid-keepalive")).toBe("whitespace");
    process.kill(worker.pid!, "SIGKILL");
    const text = await res.text();
    expect(text.startsWith(" ")).toBe(true);
    const e = envelope(JSON.parse(text));
    expect(e.type).toBe("server_error");
    // The respawned worker serves the next request.
    const next = await post(padded, "/v1/chat/completions", {
      model: padded.model,
      messages: user("hi"),
      max_tokens: 2,
    });
    expect(JSON.parse(await next.text()).choices).toHaveLength(1);
  });

  test("a client that disconnects after the 200 still cancels the generation", async () => {
    const controller = new AbortController();
    const res = await post(
      padded,
      "/v1/completions",
      { ...slow(padded), max_tokens: 100000 },
      { signal: controller.signal },
    );
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    await reader.read();
    expect((await slots(padded)).lanes.active).toBe(1);
    controller.abort();
    await reader.cancel().catch(() => {});
    const idle = await waitIdle(padded);
    expect(idle.idle).toBe(true);
  });

  test("streams are not padded: SSE as before", async () => {
    const res = await post(padded, "/v1/chat/completions", {
      model: padded.model,
      messages: user("hi"),
      max_tokens: 2,
      stream: true,
    });
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    expect(res.headers.get("x-superfluid-keepalive")).toBeNull();
    expect((await res.text()).startsWith("data: ")).toBe(true);
  });
});
