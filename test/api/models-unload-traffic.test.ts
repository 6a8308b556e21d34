// Unloading a model under traffic (docs/api/openai.md#loading-and-unloading-models):
// four streams running on it each end cleanly (complete, or a typed error
// frame then [DONE]; never a hang), requests arriving meanwhile get a clear
// answer, and the other model is not disturbed. First the unload waits for
// the streams to finish; then one whose grace runs out stops them.
import { describe, expect, test } from "bun:test";
import { fixturePath } from "../support/models.ts";
import { parseSse } from "./support.ts";
import { CHAT_ID, RANDOM_ID, chat, listed, send, until, useMulti } from "./models-support.ts";

const s = useMulti(async () => [await fixturePath("tiny-chat"), "--model", await fixturePath("tiny-random"), "--max-batch", "4", "--max-context", "2048"]);

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
      body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], stream: true, ignore_eos: true, max_tokens: maxTokens }),
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
    // Meanwhile: the model being unloaded answers a clear 503 (or, once it is gone, starts loading again); the other model serves.
    const newcomer = await send(s, "POST", "/v1/chat/completions", { model: RANDOM_ID, messages: [{ role: "user", content: "hi" }], max_tokens: 4 });
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
