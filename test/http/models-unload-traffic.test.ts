// Unloading a model under traffic (docs/api/openai.md#loading-and-unloading-models):
// four streams running on it each end cleanly (complete, or a typed error
// frame then [DONE]; never a hang), requests arriving meanwhile get a clear
// answer, and the other model is not disturbed. First the unload waits for
// the streams to finish; then one whose grace runs out stops them. The same
// for embedding and rerank requests: those running when the unload starts
// finish (or, when the grace runs out and the worker is stopped, get 503
// `model_unloading`), later ones get 503 `model_unloading` or wait for the
// reload; none gets a 500.
import { describe, expect, test } from "bun:test";
import { servedIdOfPath } from "../../src/daemon/model-ref.ts";
import { fixtureFileName } from "../../src/fixtures/index.ts";
import { fixturePath } from "../support/models.ts";
import { parseSse } from "./support.ts";
import { CHAT_ID, RANDOM_ID, chat, listed, postServed, send, until, useMulti } from "./models-support.ts";

const EMBED_ID = servedIdOfPath(fixtureFileName("tiny-embed"));
const RERANK_ID = servedIdOfPath(fixtureFileName("tiny-rerank"));

const s = useMulti(async () => [
  await fixturePath("tiny-chat"),
  "--model",
  await fixturePath("tiny-random"),
  "--model",
  await fixturePath("tiny-embed"),
  "--model",
  await fixturePath("tiny-rerank"),
  "--max-batch",
  "4",
  "--max-context",
  "2048",
]);

interface OpenStream {
  /** Resolves once the first content chunk has arrived. */
  started: Promise<void>;
  /** The whole stream's text once it ends. */
  done: Promise<string>;
}

function openStream(model: string, maxTokens: number): OpenStream {
  let markStarted!: () => void;
  const started = new Promise<void>((resolve) => (markStarted = resolve));
  const done = (async () => {
    const res = await fetch(`${s.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model,
        messages: [{ role: "user", content: "hi" }],
        stream: true,
        ignore_eos: true,
        max_tokens: maxTokens,
      }),
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
      if (text.includes('"content"')) markStarted();
    }
    markStarted();
    return text;
  })();
  return { started, done };
}

/** Each stream ended with [DONE] after either a finish reason or one typed error frame. */
function endedCleanly(raw: string): "complete" | "error" {
  const sse = parseSse(raw);
  expect(sse.data.at(-1)).toBe("[DONE]");
  const error = sse.events.find((e) => e.error);
  if (error) {
    expect(typeof error.error.message).toBe("string");
    expect(error.error.type).toBeDefined();
    return "error";
  }
  expect(sse.events.some((e) => e.choices?.[0]?.finish_reason === "length")).toBe(true);
  return "complete";
}

describe("unload under traffic", () => {
  test("four running streams finish before the worker goes; newcomers get a clear answer; the other model is undisturbed", async () => {
    const streams = [1, 2, 3, 4].map(() => openStream(RANDOM_ID, 400));
    await Promise.all(streams.map((st) => st.started));
    const unload = send(s, "POST", "/v1/models/unload", { id: RANDOM_ID });
    // Meanwhile: the model being unloaded answers a clear 503 (or, once it is gone, starts loading again); the other
    // model serves.
    const newcomer = await send(s, "POST", "/v1/chat/completions", {
      model: RANDOM_ID,
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 4,
    });
    if (newcomer.status !== 200) {
      expect(newcomer.status).toBe(503);
      expect(["model_unloading", "model_loading"]).toContain(newcomer.json.error.code);
      expect(Number(newcomer.headers.get("retry-after"))).toBeGreaterThan(0);
    }
    const other = await chat(s, CHAT_ID);
    expect(other.status).toBe(200);
    expect(other.json.choices[0].message.content).toBe("Hello from superfluid's built-in test model.");
    const ends = (await Promise.all(streams.map((st) => st.done))).map(endedCleanly);
    // Within the grace they all ran to their end.
    expect(ends).toEqual(["complete", "complete", "complete", "complete"]);
    expect((await unload).status).toBe(200);
    // The newcomer may have started a reload; wait for either state to settle, then check the model still serves.
    expect((await chat(s, RANDOM_ID)).status).toBe(200);
  });

  test("when the grace runs out, each running stream ends with a typed error frame then [DONE]; the model reloads on demand", async () => {
    expect((await chat(s, RANDOM_ID)).status).toBe(200);
    const streams = [1, 2, 3, 4].map(() => openStream(RANDOM_ID, 1900));
    await Promise.all(streams.map((st) => st.started));
    const unloaded = s.server.registry.unload(RANDOM_ID, { graceMs: 0 });
    const ends = (await Promise.all(streams.map((st) => st.done))).map(endedCleanly);
    await unloaded;
    // Stopped mid-way: the streams had far more to go than the unload waited.
    expect(ends).toContain("error");
    expect((await listed(s, RANDOM_ID)).loaded).toBe(false);
    expect(s.server.registry.entry(CHAT_ID)!.served!.worker.respawns).toBe(0);
    const back = await chat(s, RANDOM_ID);
    expect(back.status).toBe(200);
    expect(await until(async () => (await listed(s, RANDOM_ID)).loaded === true)).toBe(true);
  });
});

const WORDS = ["hello world", "the cat sat on the mat", "superfluid serves embeddings", "four five six", "seven"];
/** Inputs long enough that a burst of requests is still running when the unload starts. */
const texts = (n: number) =>
  Array.from({ length: n }, (_, i) => Array.from({ length: 24 }, (_, k) => WORDS[(i + k) % WORDS.length]).join(" "));

interface Case {
  name: string;
  id: string;
  path: string;
  body: Record<string, unknown>;
}

const CASES: Case[] = [
  { name: "/v1/embeddings", id: EMBED_ID, path: "/v1/embeddings", body: { model: EMBED_ID, input: texts(16) } },
  { name: "Ollama's /api/embed", id: EMBED_ID, path: "/api/embed", body: { model: EMBED_ID, input: texts(16) } },
  {
    name: "/v1/rerank",
    id: RERANK_ID,
    path: "/v1/rerank",
    body: { model: RERANK_ID, query: "the cat", documents: texts(16) },
  },
];

/**
 * An answer a request on a model being unloaded may get: its reply, or 503 `model_unloading` with Retry-After; never a
 * 500.
 */
function expectFinishedOrUnloading(r: { status: number; headers: Headers; json: any }): void {
  if (r.status === 200) return;
  expect({ status: r.status, error: r.json?.error ?? r.json }).toMatchObject({ status: 503 });
  expect(JSON.stringify(r.json)).toMatch(/model_unloading|being unloaded/);
  expect(Number(r.headers.get("retry-after"))).toBeGreaterThan(0);
}

/**
 * Sends a burst of requests, and in the tick the model's worker first holds
 * one of them starts the unload in process; returns the burst's answers, one
 * request sent after the unload began, and how much was in flight when it began.
 */
async function burstThenUnload(c: Case, graceMs?: number) {
  expect((await postServed(s, c.path, c.body)).status).toBe(200);
  const worker = s.server.registry.entry(c.id)!.served!.worker;
  const burst = Array.from({ length: 12 }, () => send(s, "POST", c.path, c.body));
  const guard = performance.now() + 60_000;
  while (worker.inflightCount === 0 && performance.now() < guard) await Bun.sleep(1);
  const inflightAtUnload = worker.inflightCount;
  const unloaded = s.server.registry.unload(c.id, graceMs === undefined ? {} : { graceMs });
  const late = send(s, "POST", c.path, c.body);
  const answers = await Promise.all(burst);
  await unloaded;
  return { answers, late: await late, inflightAtUnload };
}

describe("unload under embedding and rerank traffic", () => {
  for (const c of CASES) {
    test(`${c.name}: requests running when the unload starts finish; the rest get 503 model_unloading or wait for the reload; the model reloads on demand`, async () => {
      const { answers, late, inflightAtUnload } = await burstThenUnload(c);
      expect(inflightAtUnload).toBeGreaterThan(0);
      answers.forEach(expectFinishedOrUnloading);
      // What was running when the unload began ran to its end.
      expect(answers.filter((r) => r.status === 200).length).toBeGreaterThan(0);
      // Sent once the unload had begun: it waited for the unload and the reload, or was told to retry.
      if (late.status !== 200) expectFinishedOrUnloading(late);
      expect((await postServed(s, c.path, c.body)).status).toBe(200);
      expect(s.server.registry.entry(CHAT_ID)!.served!.worker.respawns).toBe(0);
    });
  }

  test("/v1/tokenize under an unload: what was running finishes, the rest get 503 model_unloading, never a 500", async () => {
    // Tokenizing never loads a model: after the unload it is a 503 or 404 until the model is loaded again.
    const c: Case = {
      name: "/v1/tokenize",
      id: EMBED_ID,
      path: "/v1/tokenize",
      body: { model: EMBED_ID, content: texts(40).join(" "), with_pieces: true },
    };
    const { answers, inflightAtUnload } = await burstThenUnload(c);
    expect(inflightAtUnload).toBeGreaterThan(0);
    // One that reached the server only after the unload ended starts the load again: 503 model_loading.
    for (const r of answers)
      if (!(r.status === 503 && JSON.stringify(r.json).includes("model_loading"))) expectFinishedOrUnloading(r);
    expect(answers.filter((r) => r.status === 200).length).toBeGreaterThan(0);
    expect((await postServed(s, CASES[0]!.path, CASES[0]!.body)).status).toBe(200);
  });

  test("when the grace runs out, embedding requests the worker had get 503 model_unloading, not a 500", async () => {
    const c = CASES[0]!;
    const { answers, late } = await burstThenUnload(c, 0);
    answers.forEach(expectFinishedOrUnloading);
    if (late.status !== 200) expectFinishedOrUnloading(late);
    expect((await postServed(s, c.path, c.body)).status).toBe(200);
  });
});
