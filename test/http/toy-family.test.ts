// A family is a translator (docs/design.md#adding-an-api-family): this toy
// wire, defined here and nowhere in src/, is a parse and a render, and the
// runner (src/http/chat-runner.ts) does the rest: the body read, the QoS
// header, prepareChat, the choices, the stream and the whole reply, the
// access log. The toy request is `{model, say, max, stream}`; its stream is
// SSE frames `{piece}` then `{done, tokens}`, its whole reply one object.
import { describe, expect, test } from "bun:test";
import { invalidRequest, RequestError } from "../../src/daemon/request-error.ts";
import { QOS } from "../../src/engine/scheduler.ts";
import { runChat, type ChatFamily, type ParsedChat } from "../../src/http/chat-runner.ts";
import { errorReply } from "../../src/http/errors.ts";
import type { ServerContext } from "../../src/http/server-context.ts";
import { sseFraming } from "../../src/http/stream.ts";
import { useServer } from "./support.ts";

interface ToyRequest extends ParsedChat {
  say: string;
  max: number;
}

const toyError = (err: RequestError) => ({ toy_error: err.message, status: err.status });

const TOY: ChatFamily<ToyRequest> = {
  route: "/toy",
  framing: sseFraming({ done: false, error: (err) => ({ data: toyError(err) }) }),
  errorBody: toyError,
  parse: async (ctx, body) => {
    const { model, say, max, stream } = (body ?? {}) as Record<string, unknown>;
    if (typeof say !== "string") throw invalidRequest("say: must be a string", "say");
    const served = await ctx.registry.resolve(String(model));
    if (!served) throw new RequestError(404, `no model ${String(model)}`);
    return { model: served, say, max: typeof max === "number" ? max : 8, stream: stream === true };
  },
  job: (_ctx, req, qos) => ({
    messages: [{ role: "user", content: req.say }],
    tools: [],
    toolChoice: "auto",
    parallelToolCalls: false,
    sampling: { temperature: 0 },
    maxTokens: req.max,
    ignoreEos: true,
    stop: [],
    n: 1,
    qos,
    templateKwargs: {},
    durable: false,
  }),
  reply: () => {
    let text = "";
    return {
      renderer: {
        delta: (_i, d) => {
          text += d.content + d.reasoning;
          const piece = d.content + d.reasoning;
          return piece ? [{ data: { piece } }] : [];
        },
        close: (_i, end) => [{ data: { done: end.finishReason, tokens: end.completionTokens } }],
        whole: ([end]) => ({ body: { text, done: end!.finishReason, tokens: end!.completionTokens } }),
      },
    };
  },
};

const s = useServer({ maxBatch: 2 });

/** A listener that serves only the toy family, on the test server's models. */
function toyServer(): { url: string; stop(): void } {
  const ctx = {
    registry: s.server.registry,
    operatorSampling: {},
    qos: { defaultQos: QOS.interactive, honourHeader: true, allowBatchInvariant: false },
    keepaliveSec: 0,
    nextId: (() => {
      let n = 0;
      return () => ++n;
    })(),
  } as unknown as ServerContext;
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: (request) => runChat(ctx, request, TOY).catch((err) => errorReply(err, toyError)),
  });
  return { url: `http://127.0.0.1:${server.port}/toy`, stop: () => server.stop(true) };
}

const send = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });

describe("a toy family runs through the runner", () => {
  test("streamed: its own frames, one per delta, then its end", async () => {
    const toy = toyServer();
    try {
      const res = await send(toy.url, { model: s.model, say: "Count to five", max: 6, stream: true });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("text/event-stream");
      const frames = (await res.text())
        .split("\n\n")
        .filter((f) => f.startsWith("data: "))
        .map((f) => JSON.parse(f.slice("data: ".length)));
      expect(frames.at(-1)).toEqual({ done: "length", tokens: 6 });
      const pieces = frames.slice(0, -1);
      expect(pieces.length).toBeGreaterThan(0);
      for (const p of pieces) expect(Object.keys(p)).toEqual(["piece"]);
    } finally {
      toy.stop();
    }
  });

  test("whole: one object built from the same deltas", async () => {
    const toy = toyServer();
    try {
      const res = await send(toy.url, { model: s.model, say: "Count to five", max: 5 });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { text: string; done: string; tokens: number };
      expect(body.done).toBe("length");
      expect(body.tokens).toBe(5);
      expect(typeof body.text).toBe("string");
    } finally {
      toy.stop();
    }
  });

  test("the runner's checks answer in the toy's envelope", async () => {
    const toy = toyServer();
    try {
      const bad = await send(toy.url, { model: s.model, say: 42 });
      expect(bad.status).toBe(400);
      expect(await bad.json()).toEqual({ toy_error: "say: must be a string", status: 400 });
      // The QoS header is read by the runner, not by the family.
      const qos = await send(toy.url, { model: s.model, say: "hi" }, { "x-superfluid-qos": "no-such-class" });
      expect(qos.status).toBe(400);
      expect(((await qos.json()) as { toy_error: string }).toy_error).toContain("x-superfluid-qos");
    } finally {
      toy.stop();
    }
  });
});
