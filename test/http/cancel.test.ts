// A client that disconnects cancels its generation at the next tick
// (docs/api/openai.md#streaming): the lane is freed and decoding stops, streamed or
// not, one choice or several. A 4096-token window makes an uncancelled
// generation run for seconds, so a lane still busy after the abort shows.
import Anthropic from "@anthropic-ai/sdk";
import { describe, expect, test } from "bun:test";
import { parseSse, post, slots, useServer, user, waitIdle } from "./support.ts";

const WINDOW = 4096;
const s = useServer({ maxContext: WINDOW });

const long = (extra: Record<string, unknown> = {}) => ({
  model: s.model,
  messages: user("write forever"),
  temperature: 0,
  ignore_eos: true,
  max_tokens: 100000,
  ...extra,
});

/** Waits until /slots shows `n` active lanes (the request was admitted). */
async function waitActive(n: number, timeoutMs = 10_000): Promise<void> {
  const started = performance.now();
  while (performance.now() - started < timeoutMs) {
    if ((await slots(s)).lanes.active >= n) return;
    await Bun.sleep(10);
  }
  throw new Error(`never saw ${n} active lanes`);
}

/** Reads a stream until `enough` holds for the text so far, or to its end; returns the text. */
async function readUntil(
  reader: { read(): Promise<{ done: boolean; value?: Uint8Array }> },
  enough: (text: string) => boolean,
): Promise<string> {
  const decoder = new TextDecoder();
  let text = "";
  while (!enough(text)) {
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  return text;
}

/** After an abort: idle, the worker holds nothing, and decoding really stopped well short of the cap. */
async function expectCancelled(decodedBefore: number, lanes = 1) {
  const idle = await waitIdle(s);
  expect(idle.idle).toBe(true);
  expect(s.server.registry.default!.worker.inflightCount).toBe(0);
  const settled = idle.entry.totals.decoded_tokens;
  // An uncancelled generation would decode ~4000 tokens per lane.
  expect(settled - decodedBefore).toBeLessThan((WINDOW / 2) * lanes);
  await Bun.sleep(100);
  expect((await slots(s)).totals.decoded_tokens).toBe(settled);
}

describe("disconnect cancels", () => {
  /** Streams `body` from `path` until `started` holds for what arrived, then aborts: the lane must be freed. */
  async function abortOnceStarted(path: string, body: unknown, started: (text: string) => boolean) {
    const before = (await slots(s)).totals.decoded_tokens;
    const controller = new AbortController();
    const res = await post(s, path, body, { signal: controller.signal });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const text = await readUntil(reader, started);
    expect(started(text)).toBe(true);
    expect((await slots(s)).lanes.active).toBe(1);
    controller.abort();
    await reader.cancel().catch(() => {});
    await expectCancelled(before);
  }

  test("aborting a streaming /v1/messages request (Anthropic's API) frees its lane", async () => {
    const body = { model: s.model, max_tokens: 100000, temperature: 0, stream: true, messages: user("write forever") };
    // Past message_start and ping, into the content deltas.
    await abortOnceStarted("/v1/messages", body, (text) => text.includes("content_block_delta"));
  });

  test("aborting a streaming /api/chat request (Ollama's API) frees its lane", async () => {
    const body = { model: s.model, messages: user("write forever"), options: { num_predict: 100000, temperature: 0 } };
    await abortOnceStarted("/api/chat", body, (text) => text.split("\n").length > 3);
  });

  test("aborting a raw streaming request frees its lane within 1 s", async () => {
    const before = (await slots(s)).totals.decoded_tokens;
    const controller = new AbortController();
    const res = await post(s, "/v1/chat/completions", long({ stream: true }), { signal: controller.signal });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let chunks = 0;
    while (chunks < 4) {
      const { done } = await reader.read();
      if (done) break;
      chunks++;
    }
    expect(chunks).toBe(4);
    expect((await slots(s)).lanes.active).toBe(1);
    controller.abort();
    await reader.cancel().catch(() => {});
    await expectCancelled(before);
  });

  test("aborting a non-streaming request mid-generation frees its lane within 1 s", async () => {
    const before = (await slots(s)).totals.decoded_tokens;
    const controller = new AbortController();
    const pending = post(s, "/v1/chat/completions", long(), { signal: controller.signal }).then(
      () => "answered",
      (err: Error) => err.name,
    );
    await waitActive(1);
    await Bun.sleep(50);
    controller.abort();
    expect(await pending).toBe("AbortError");
    await expectCancelled(before);
  });

  test("aborting a non-streaming n=3 request frees all three lanes", async () => {
    const before = (await slots(s)).totals.decoded_tokens;
    const controller = new AbortController();
    const pending = post(s, "/v1/chat/completions", long({ n: 3 }), { signal: controller.signal }).catch(
      (err: Error) => err.name,
    );
    await waitActive(3);
    await Bun.sleep(50);
    controller.abort();
    expect(await pending).toBe("AbortError");
    await expectCancelled(before, 3);
  });

  test("aborting an n=3 request with a long prompt right after admission frees everything, siblings included", async () => {
    const controller = new AbortController();
    const pending = post(s, "/v1/chat/completions", long({ n: 3, messages: user("prefill me ".repeat(400)) }), {
      signal: controller.signal,
    }).catch((err: Error) => err.name);
    await waitActive(1);
    controller.abort();
    expect(await pending).toBe("AbortError");
    const idle = await waitIdle(s);
    expect(idle.idle).toBe(true);
    await Bun.sleep(200); // siblings started late would show up here
    const entry = await slots(s);
    expect(entry.lanes.active).toBe(0);
    expect(s.server.registry.default!.worker.inflightCount).toBe(0);
  });

  test("breaking out of an SDK stream (controller.abort) frees the lane", async () => {
    const before = (await slots(s)).totals.decoded_tokens;
    const stream = (await s.client.chat.completions.create({
      ...(long() as any),
      stream: true,
    })) as unknown as AsyncIterable<any>;
    let seen = 0;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta?.content) seen++;
      if (seen >= 3) break; // break aborts the underlying request
    }
    expect(seen).toBe(3);
    await expectCancelled(before);
  });

  test("aborting a streaming /v1/completions request frees its lane", async () => {
    const before = (await slots(s)).totals.decoded_tokens;
    const controller = new AbortController();
    const res = await post(
      s,
      "/v1/completions",
      { model: s.model, prompt: "once upon a time", temperature: 0, ignore_eos: true, stream: true },
      { signal: controller.signal },
    );
    const reader = res.body!.getReader();
    await reader.read();
    await reader.read();
    controller.abort();
    await reader.cancel().catch(() => {});
    await expectCancelled(before);
  });

  test("aborting a request that waits in the queue (all lanes busy) removes it from the queue", async () => {
    const busy = new AbortController();
    const holders = [0, 1, 2, 3].map((i) =>
      post(s, "/v1/chat/completions", long({ messages: user(`hold ${i}`) }), { signal: busy.signal }).catch(
        (err: Error) => err.name,
      ),
    );
    await waitActive(4);
    const queued = new AbortController();
    const waiting = post(s, "/v1/chat/completions", long({ stream: true, messages: user("waiting") }), {
      signal: queued.signal,
    }).catch((err: Error) => err.name);
    const started = performance.now();
    while ((await slots(s)).lanes.queued < 1) {
      if (performance.now() - started > 5000) throw new Error("the fifth request never showed as queued");
      await Bun.sleep(10);
    }
    queued.abort();
    expect(await waiting).toBe("AbortError");
    let entry = await slots(s);
    const t0 = performance.now();
    while (entry.lanes.queued > 0 && performance.now() - t0 < 1000) {
      await Bun.sleep(20);
      entry = await slots(s);
    }
    expect(entry.lanes.queued).toBe(0);
    expect(entry.lanes.active).toBe(4);
    busy.abort();
    for (const h of holders) expect(await h).toBe("AbortError");
    const idle = await waitIdle(s);
    expect(idle.idle).toBe(true);
    expect(s.server.registry.default!.worker.inflightCount).toBe(0);
  });

  test("after the cancels the server still answers normally", async () => {
    const res = await post(s, "/v1/chat/completions", long({ max_tokens: 5 }));
    expect(res.status).toBe(200);
    const json = (await res.json()) as any;
    expect(json.usage.completion_tokens).toBe(5);
    expect((await slots(s)).respawns).toBe(0);
  });
});

// Killed last: these tests replace the worker.
describe("worker failure over HTTP", () => {
  const killWorker = async () => {
    const worker = s.server.registry.default!.worker;
    const pid = worker.pid!;
    process.kill(pid, "SIGKILL");
    return pid;
  };

  /** Waits for the replacement worker and for it to answer /slots. */
  const waitRespawn = async (oldPid: number) => {
    const started = performance.now();
    while (s.server.registry.default!.worker.pid === oldPid) {
      if (performance.now() - started > 10_000) throw new Error("no new worker");
      await Bun.sleep(10);
    }
    return slots(s);
  };

  test("a worker killed mid-stream ends the stream with an error frame, then [DONE]", async () => {
    const res = await post(s, "/v1/chat/completions", long({ stream: true }));
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let raw = "";
    for (let i = 0; i < 3; i++) raw += decoder.decode((await reader.read()).value);
    const pid = await killWorker();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      raw += decoder.decode(value);
    }
    const sse = parseSse(raw);
    expect(sse.data.at(-1)).toBe("[DONE]");
    const errorFrame = JSON.parse(sse.data.at(-2)!);
    expect(errorFrame.error.type).toBe("server_error");
    expect(typeof errorFrame.error.message).toBe("string");
    expect(sse.events.filter((e) => e.choices?.[0]?.finish_reason)).toHaveLength(0);
    const entry = await waitRespawn(pid);
    expect(entry.respawns).toBe(1);
  });

  test("a worker killed during a non-streaming request gives a 500 envelope; the next request works", async () => {
    const pending = post(s, "/v1/chat/completions", long());
    await waitActive(1);
    const pid = await killWorker();
    const res = await pending;
    expect(res.status).toBe(500);
    const body = (await res.json()) as any;
    expect(body.error.type).toBe("server_error");
    await waitRespawn(pid);
    const next = await post(s, "/v1/chat/completions", long({ max_tokens: 3 }));
    expect(next.status).toBe(200);
    expect(((await next.json()) as any).usage.completion_tokens).toBe(3);
    const idle = await waitIdle(s);
    expect(idle.idle).toBe(true);
    expect(s.server.registry.default!.worker.inflightCount).toBe(0);
  });

  const anthropicLong = () => ({
    model: s.model,
    max_tokens: 20000,
    temperature: 0,
    messages: user("write forever") as Anthropic.MessageParam[],
  });

  test("/v1/messages: a worker killed mid-stream ends the stream with an Anthropic error event", async () => {
    const res = await post(s, "/v1/messages", { ...anthropicLong(), stream: true });
    const reader = res.body!.getReader();
    const started = await readUntil(reader, (text) => text.includes("content_block_delta"));
    const pid = await killWorker();
    const raw = started + (await readUntil(reader, () => false));
    const last = raw.trim().split("\n\n").at(-1)!;
    expect(last.split("\n")[0]).toBe("event: error");
    const body = JSON.parse(last.split("\n")[1]!.slice("data: ".length));
    expect(body).toEqual({ type: "error", error: { type: "api_error", message: expect.any(String) } });
    expect(raw).not.toContain("message_stop");
    await waitRespawn(pid);
  });

  test('/api/chat (Ollama): a worker killed mid-stream ends the NDJSON with one {"error"} line', async () => {
    const res = await post(s, "/api/chat", {
      model: s.model,
      messages: user("write forever"),
      options: { num_predict: 20000, temperature: 0 },
    });
    expect(res.headers.get("content-type")).toContain("application/x-ndjson");
    const reader = res.body!.getReader();
    const started = await readUntil(reader, (text) => text.split("\n").length >= 4);
    const pid = await killWorker();
    const raw = started + (await readUntil(reader, () => false));
    const lines = raw
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(Object.keys(lines.at(-1))).toEqual(["error"]);
    expect(lines.some((l) => l.done === true)).toBe(false);
    await waitRespawn(pid);
  });

  test("/v1/messages: a worker killed during a non-streaming request is a 500 api_error (the SDK's InternalServerError)", async () => {
    const client = new Anthropic({ baseURL: s.url, apiKey: "x", maxRetries: 0 });
    const pending = client.messages.create(anthropicLong()).catch((e) => e);
    await waitActive(1);
    const pid = await killWorker();
    const err = await pending;
    expect(err).toBeInstanceOf(Anthropic.InternalServerError);
    expect(err.error).toMatchObject({ type: "error", error: { type: "api_error" } });
    await waitRespawn(pid);
  });
});
