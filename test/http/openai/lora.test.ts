// LoRA adapters on llama.cpp (docs/api/lora.md), on the built-in model and
// the adapter fixture made by our GGUF writer (src/fixtures/lora-adapter.ts):
// loaded, the reply is the token the adapter's weights boost; unloaded, the
// base reply comes back byte for byte; a prefix cached under one adapter set
// is never served under another, and is served again under the same set.
import { describe, expect, test } from "bun:test";
import { ensureLoraFixture, LORA_REPLY, SCRIPTED_REPLY } from "../../../src/fixtures/index.ts";
import { FIXTURE_DIR, fixturePath } from "../../support/models.ts";
import { getJson, post, postJson, useServer } from "../support.ts";

const s = useServer({ fixture: "tiny-chat", maxBatch: 2 });
// Long enough that its rendered prompt is a prefix worth reusing (at least 16 tokens).
const messages = [{ role: "user", content: "Tell me about the adapters you are running with today, please." }];

async function chat(extra: Record<string, unknown> = {}) {
  const r = await postJson(s, "/v1/chat/completions", {
    model: s.model,
    messages,
    max_tokens: 32,
    temperature: 0,
    ...extra,
  });
  expect(r.status).toBe(200);
  return {
    content: r.json.choices[0].message.content as string,
    finish: r.json.choices[0].finish_reason as string,
    cached: r.json.usage.prompt_tokens_details.cached_tokens as number,
    prompt: r.json.usage.prompt_tokens as number,
  };
}

describe("LoRA adapters", () => {
  let base: Awaited<ReturnType<typeof chat>>;
  let adapterPath: string;
  let adapterId: number;

  test("base model: the fixed reply, and a repeat is served from the prefix cache", async () => {
    adapterPath = await ensureLoraFixture(FIXTURE_DIR);
    base = await chat();
    expect(base.content).toBe(SCRIPTED_REPLY);
    const again = await chat();
    expect(again.content).toBe(base.content);
    expect(again.cached).toBeGreaterThan(0);
    const listed = await getJson(s, "/v1/lora");
    expect(listed.json).toEqual({ object: "list", model: s.model, data: [] });
  });

  test("load: the reply is what the adapter dictates, and the cache made without it is not served", async () => {
    const loaded = await postJson(s, "/v1/lora/load", { path: adapterPath });
    expect(loaded.status).toBe(200);
    expect(loaded.json.data).toHaveLength(1);
    expect(loaded.json.data[0]).toEqual({ id: expect.any(Number), path: adapterPath, scale: 1 });
    adapterId = loaded.json.data[0].id;

    const first = await chat();
    expect(first.content).toBe(LORA_REPLY);
    expect(first.finish).toBe("stop");
    // Same prompt right after the set changed: nothing reused.
    expect(first.cached).toBe(0);
    const repeat = await chat();
    expect(repeat.content).toBe(LORA_REPLY);
    expect(repeat.cached).toBeGreaterThan(0);

    // Streamed, the warm header says the same.
    const res = await post(s, "/v1/chat/completions", {
      model: s.model,
      messages,
      max_tokens: 32,
      temperature: 0,
      stream: true,
    });
    expect(res.headers.get("x-superfluid-warm")).toBe(String(repeat.cached));
    await res.text();

    expect((await getJson(s, "/v1/lora")).json.data).toEqual([{ id: adapterId, path: adapterPath, scale: 1 }]);
    expect((await getJson(s, "/lora-adapters")).json).toEqual([{ id: adapterId, path: adapterPath, scale: 1 }]);
  });

  test("llama-server's POST /lora-adapters: a scale too small to beat the script gives the base reply; the cache starts over", async () => {
    // At 0.25 the boost (200) is below the script's margin (400).
    const set = await postJson(s, "/lora-adapters", [{ id: adapterId, scale: 0.25 }]);
    expect(set.status).toBe(200);
    expect(set.json).toEqual({ success: true });
    const weak = await chat();
    expect(weak.content).toBe(SCRIPTED_REPLY);
    expect(weak.cached).toBe(0);
    // Back to 1: a new set again, so again nothing cached.
    await postJson(s, "/lora-adapters", [{ id: adapterId, scale: 1 }]);
    const strong = await chat();
    expect(strong.content).toBe(LORA_REPLY);
    expect(strong.cached).toBe(0);
  });

  test("a request running when the set changes finishes under the set it started with", async () => {
    const stream = post(s, "/v1/chat/completions", {
      model: s.model,
      messages,
      max_tokens: 200,
      ignore_eos: true,
      temperature: 0,
      stream: true,
    });
    const res = await stream;
    const reader = res.body!.getReader();
    const first = await reader.read(); // admitted and generating
    expect(first.done).toBe(false);
    const unloaded = await postJson(s, "/v1/lora/unload", { id: adapterId });
    expect(unloaded.status).toBe(200);
    expect(unloaded.json.data).toEqual([]);
    // Submitted after the unload: waits for the stream above, then runs on the base model.
    const after = chat();
    let text = new TextDecoder().decode(first.value);
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    const content = text
      .split("\n")
      .filter((l) => l.startsWith("data: {"))
      .map((l) => JSON.parse(l.slice(6)).choices[0]?.delta?.content ?? "")
      .join("");
    // Under the adapter the stream began with its word.
    expect(content.startsWith(LORA_REPLY)).toBe(true);
    const restored = await after;
    // Unloaded: the base reply, byte for byte, with nothing served from the adapter's cache.
    expect(restored.content).toBe(base.content);
    expect(restored.cached).toBe(0);
  });

  test("refusals: a file that is not an adapter, an unknown id, a bad body", async () => {
    const model = await postJson(s, "/v1/lora/load", { path: await fixturePath("tiny-chat") });
    expect(model.status).toBe(400);
    expect(model.json.error.code).toBe("invalid_adapter");
    expect((await getJson(s, "/v1/lora")).json.data).toEqual([]);
    const missing = await postJson(s, "/v1/lora/unload", { id: 999 });
    expect(missing.status).toBe(404);
    expect(missing.json.error.code).toBe("adapter_not_found");
    const bad = await postJson(s, "/v1/lora/load", { scale: 1 });
    expect(bad.status).toBe(400);
    const unknown = await postJson(s, "/lora-adapters", [{ id: 7, scale: 1 }]);
    expect(unknown.status).toBe(400);
    // Still serving the base model.
    expect((await chat()).content).toBe(SCRIPTED_REPLY);
  });

  // Last: it replaces the worker.
  test("a replacement worker loads the adapters its predecessor had, before it serves", async () => {
    const loaded = await postJson(s, "/v1/lora/load", { path: adapterPath, scale: 1 });
    const listed = loaded.json.data;
    expect((await chat()).content).toBe(LORA_REPLY);
    const worker = s.server.registry.default!.worker;
    const pid = worker.pid!;
    process.kill(pid, "SIGKILL");
    // Hang guard only: the replacement appears in well under this.
    for (const started = performance.now(); worker.pid === pid; await Bun.sleep(10)) {
      if (performance.now() - started > 30_000) throw new Error("no replacement worker");
    }
    const after = await chat();
    expect(after.content).toBe(LORA_REPLY);
    expect((await getJson(s, "/v1/lora")).json.data).toEqual(listed);
  });
});

test("a per-request lora list is refused by name (an empty one is accepted)", async () => {
  for (const [path, body] of [
    ["/v1/chat/completions", { messages: [{ role: "user", content: "hi" }], max_tokens: 4 }],
    ["/v1/completions", { prompt: "hi", max_tokens: 4 }],
  ] as const) {
    const refused = await postJson(s, path, { model: s.model, ...body, lora: [{ id: 0, scale: 1 }] });
    expect(refused.status).toBe(400);
    expect(refused.json.error.code).toBe("unsupported_parameter");
    expect(refused.json.error.param).toBe("lora");
    expect((await postJson(s, path, { model: s.model, ...body, lora: [] })).status).toBe(200);
  }
});
