// The routes around chat (docs/api/openai.md#models): /v1/models, /health, /props,
// /slots, /v1/tokenize and /v1/completions, streamed and not.
import { describe, expect, test } from "bun:test";
import { envelope, getJson, post, postJson, readSse, useServer } from "./support.ts";
import { loadLlama } from "../../ffi/llama.ts";

const s = useServer();

/** The ChatML rendering of one user turn, as the fixture's template writes it. */
const CHATML = (content: string) => `<|im_start|>user\n${content}<|im_end|>\n<|im_start|>assistant\n`;

describe("models", () => {
  test("GET /v1/models lists the served model with its window, modalities, runtime and dialect", async () => {
    const { status, json } = await getJson(s, "/v1/models");
    expect(status).toBe(200);
    expect(json.object).toBe("list");
    expect(json.data).toHaveLength(1);
    const m = json.data[0];
    expect(m.id).toBe(s.model);
    expect(m.id).toStartWith("tiny-random"); // the file stem of the fixture
    expect(m.id.endsWith(".gguf")).toBe(false);
    expect(m.object).toBe("model");
    expect(m.owned_by).toBe("superfluid");
    expect(m.loaded).toBe(true);
    expect(m.meta.n_ctx).toBe(2048);
    expect(m.architecture.input_modalities).toEqual(["text"]);
    expect(m.runtime.id).toBe("llamacpp");
    expect(typeof m.runtime.version).toBe("string");
    // The worker's processor and ggml CPU variant: what every speed figure must name.
    const cpu = loadLlama().cpu!;
    expect(m.runtime.cpu).toEqual({ model: cpu.model, variant: cpu.variant });
    expect(m.runtime.cpu.model.length).toBeGreaterThan(0);
    expect(m.capabilities.descriptor_version).toBe(1);
    const d = m.capabilities.dialect;
    expect(d.enable_thinking).toBe(true); // the template reads enable_thinking
    expect(d.reasoning_effort).toBe(false);
    expect(d.reasoning_effort_levels).toEqual([]);
    expect(d.fim).toBe(false); // tiny-random has no FIM tokens
    expect(d.fim_model).toBe(false);
  });

  test("GET /v1/models/{id} returns that entry; an unknown id is a 404 envelope", async () => {
    const list = await getJson(s, "/v1/models");
    const one = await getJson(s, `/v1/models/${encodeURIComponent(s.model)}`);
    expect(one.status).toBe(200);
    expect(one.json).toEqual(list.json.data[0]);
    for (const id of ["nope", "org/nope-GGUF", `${s.model}.gguf`]) {
      const miss = await getJson(s, `/v1/models/${id}`);
      expect(miss.status).toBe(404);
      expect(envelope(miss.json).type).toBe("not_found_error");
    }
  });

  test("the SDK lists and retrieves models", async () => {
    const ids: string[] = [];
    for await (const m of s.client.models.list()) ids.push(m.id);
    expect(ids).toEqual([s.model]);
    const m = await s.client.models.retrieve(s.model);
    expect(m.id).toBe(s.model);
    expect(m.owned_by).toBe("superfluid");
  });
});

describe("utility routes", () => {
  test("GET /health", async () => {
    const { status, json } = await getJson(s, "/health");
    expect(status).toBe(200);
    expect(json).toEqual({ status: "ok", models_loaded: 1, models_known: 1 });
  });

  test("GET /props: default generation settings, max_context, the raw chat template, kv_cache, capabilities", async () => {
    const { status, json } = await getJson(s, "/props");
    expect(status).toBe(200);
    expect(json.max_context).toBe(2048);
    const d = json.default_generation_settings;
    expect(typeof d).toBe("object");
    expect(d.n_ctx).toBe(2048);
    // Nothing names a sampling value here: the constants apply (temperature 1, top_k 40 when sampling, repeat penalty
    // 1).
    expect(d.params.temperature).toBe(1);
    expect(d.params.top_k).toBe(40);
    expect(d.params.repeat_penalty).toBe(1);
    expect(typeof json.chat_template).toBe("string");
    expect(json.chat_template).toContain("<|im_start|>");
    expect(json.chat_template).toContain("enable_thinking");
    expect(json.kv_cache).toBeDefined();
    expect(json.capabilities.dialect.enable_thinking).toBe(true);
    const scoped = await getJson(s, `/props?model=${encodeURIComponent(s.model)}`);
    expect(scoped.status).toBe(200);
    expect(scoped.json.max_context).toBe(2048);
    const unknown = await getJson(s, "/props?model=nope");
    expect(unknown.status).toBe(404);
    envelope(unknown.json);
  });

  test("GET /slots: one aggregate entry in llama.cpp's slot shape", async () => {
    const { status, json } = await getJson(s, "/slots");
    expect(status).toBe(200);
    expect(Array.isArray(json)).toBe(true);
    expect(json).toHaveLength(1);
    const e = json[0];
    expect(e.id).toBe(0);
    expect(e.n_ctx).toBe(2048);
    expect(typeof e.is_processing).toBe("boolean");
    expect(e.lanes.total).toBe(4);
    expect(e.lanes.active).toBe(0);
    expect(e.kv_pool.cells_per_sequence).toBe(2048);
    for (const k of ["ticks", "decoded_tokens", "prefilled_tokens"]) expect(Number.isInteger(e.totals[k])).toBe(true);
  });

  test("POST /v1/tokenize: token ids of a text, no chat scaffold; text and input are aliases", async () => {
    const { status, json } = await postJson(s, "/v1/tokenize", { content: "hello world" });
    expect(status).toBe(200);
    expect(json.tokens.length).toBeGreaterThan(0);
    for (const t of json.tokens) expect(Number.isInteger(t) && t >= 0 && t < 2110).toBe(true);
    const props = await getJson(s, "/props");
    expect(json.tokens[0]).not.toBe(props.json.bos_token);
    expect((await postJson(s, "/v1/tokenize", { text: "hello world" })).json.tokens).toEqual(json.tokens);
    expect((await postJson(s, "/v1/tokenize", { input: "hello world", model: s.model })).json.tokens).toEqual(
      json.tokens,
    );
    const pieces = await postJson(s, "/v1/tokenize", { content: "hello world", with_pieces: true });
    expect(pieces.json.tokens.map((p: any) => p.id)).toEqual(json.tokens);
    expect(pieces.json.tokens.map((p: any) => p.piece).join("")).toBe("hello world");
  });

  test("the chat prompt is exactly the template's text: tokenize(ChatML) has prompt_tokens tokens", async () => {
    const tk = await postJson(s, "/v1/tokenize", { content: CHATML("how are you") });
    const c = await postJson(s, "/v1/chat/completions", {
      model: s.model,
      messages: [{ role: "user", content: "how are you" }],
      max_tokens: 1,
    });
    expect(c.json.usage.prompt_tokens).toBe(tk.json.tokens.length);
  });
});

describe("/v1/completions", () => {
  const greedy = (extra: Record<string, unknown> = {}) => ({
    model: s.model,
    prompt: "once upon a time there was",
    temperature: 0,
    max_tokens: 16,
    ignore_eos: true,
    ...extra,
  });

  test("non-streaming: text_completion shape, usage, warm header", async () => {
    const { status, headers, json } = await postJson(s, "/v1/completions", greedy());
    expect(status).toBe(200);
    expect(json.id).toMatch(/^cmpl-superfluid-\d+$/);
    expect(json.object).toBe("text_completion");
    expect(Number.isInteger(json.created)).toBe(true);
    expect(json.model).toBe(s.model);
    expect(json.choices).toHaveLength(1);
    const c = json.choices[0];
    expect(c.index).toBe(0);
    expect(typeof c.text).toBe("string");
    expect(c.text.length).toBeGreaterThan(0);
    expect(c.logprobs).toBeNull();
    expect(c.finish_reason).toBe("length");
    expect(json.usage.completion_tokens).toBe(16);
    expect(json.usage.total_tokens).toBe(json.usage.prompt_tokens + 16);
    const tk = await postJson(s, "/v1/tokenize", { content: "once upon a time there was" });
    expect(json.usage.prompt_tokens).toBe(tk.json.tokens.length);
    expect(headers.get("x-superfluid-warm")).toBe(String(json.usage.prompt_tokens_details.cached_tokens));
  });

  test("a completion of the rendered ChatML prompt equals the chat reply (same tokens, same greedy text)", async () => {
    const chat = await postJson(s, "/v1/chat/completions", {
      model: s.model,
      messages: [{ role: "user", content: "hello there" }],
      temperature: 0,
      max_tokens: 12,
      ignore_eos: true,
    });
    const comp = await postJson(s, "/v1/completions", greedy({ prompt: CHATML("hello there"), max_tokens: 12 }));
    expect(comp.json.usage.prompt_tokens).toBe(chat.json.usage.prompt_tokens);
    expect(comp.json.choices[0].text).toBe(chat.json.choices[0].message.content);
  });

  test("echo puts the prompt in front of the text", async () => {
    const plain = await postJson(s, "/v1/completions", greedy());
    const echoed = await postJson(s, "/v1/completions", greedy({ echo: true }));
    expect(echoed.json.choices[0].text).toBe(`once upon a time there was${plain.json.choices[0].text}`);
  });

  test("logprobs: the legacy shape with tokens, token_logprobs, top_logprobs and text_offset", async () => {
    const { json } = await postJson(s, "/v1/completions", greedy({ logprobs: 3 }));
    const c = json.choices[0];
    const lp = c.logprobs;
    expect(lp.tokens).toHaveLength(16);
    expect(lp.token_logprobs).toHaveLength(16);
    expect(lp.top_logprobs).toHaveLength(16);
    expect(lp.text_offset).toHaveLength(16);
    expect(lp.tokens.join("")).toBe(c.text);
    let offset = lp.text_offset[0];
    expect(offset).toBe(0);
    lp.tokens.forEach((tok: string, i: number) => {
      expect(lp.text_offset[i]).toBe(offset);
      offset += tok.length;
      expect(lp.token_logprobs[i]).toBeLessThanOrEqual(0);
      const top = lp.top_logprobs[i];
      const entries = Object.entries(top) as [string, number][];
      expect(entries.length).toBeGreaterThan(0);
      expect(entries.length).toBeLessThanOrEqual(3);
      // Greedy: the chosen token is the most likely alternative.
      const best = Math.max(...entries.map(([, v]) => v));
      expect(lp.token_logprobs[i]).toBeCloseTo(best, 9);
      expect(top[tok]).toBeCloseTo(lp.token_logprobs[i], 9);
    });
  });

  test("streaming: the chunks join to the non-streamed text and logprobs, then a terminal chunk with usage, then [DONE]", async () => {
    const ref = await postJson(s, "/v1/completions", greedy({ logprobs: 2 }));
    const res = await post(s, "/v1/completions", greedy({ logprobs: 2, stream: true }));
    expect(res.headers.get("content-type")).toStartWith("text/event-stream");
    const sse = await readSse(res);
    expect(sse.data.at(-1)).toBe("[DONE]");
    const id = sse.events[0].id;
    for (const e of sse.events) {
      expect(e.id).toBe(id);
      expect(e.object).toBe("text_completion");
      expect(e.model).toBe(s.model);
    }
    expect(sse.events.map((e) => e.choices[0].text).join("")).toBe(ref.json.choices[0].text);
    const lp = sse.events.map((e) => e.choices[0].logprobs).filter(Boolean);
    expect(lp.flatMap((l: any) => l.tokens)).toEqual(ref.json.choices[0].logprobs.tokens);
    // The second run may reuse the first's KV (a different prefill shape), which
    // moves logits in the last bits (docs/design.md#determinism): compare to 1e-3.
    const streamed = lp.flatMap((l: any) => l.token_logprobs) as number[];
    const whole = ref.json.choices[0].logprobs.token_logprobs as number[];
    expect(streamed.length).toBe(whole.length);
    streamed.forEach((v, i) => expect(v).toBeCloseTo(whole[i]!, 3));
    expect(lp.flatMap((l: any) => l.text_offset)).toEqual(ref.json.choices[0].logprobs.text_offset);
    const last = sse.events.at(-1);
    expect(last.choices[0].finish_reason).toBe("length");
    expect(sse.events.filter((e) => e.choices[0].finish_reason !== null)).toHaveLength(1);
    expect(last.usage.completion_tokens).toBe(16);
  });

  test("streaming with echo sends the prompt first", async () => {
    const sse = await readSse(await post(s, "/v1/completions", greedy({ echo: true, stream: true, max_tokens: 4 })));
    expect(sse.events[0].choices[0].text).toBe("once upon a time there was");
  });

  test("the SDK's completions.create reads the same text", async () => {
    const ref = await postJson(s, "/v1/completions", greedy());
    const r = await s.client.completions.create(greedy() as any);
    expect(r.object).toBe("text_completion");
    expect(r.choices[0]!.text).toBe(ref.json.choices[0].text);
    expect(r.usage!.completion_tokens).toBe(16);
  });

  test("suffix on a model with no FIM support and no --fim-model: 400 fim_unsupported", async () => {
    const models = await getJson(s, "/v1/models");
    expect(models.json.data[0].capabilities.dialect.fim).toBe(false);
    const { status, json } = await postJson(s, "/v1/completions", {
      model: s.model,
      prompt: "def add(a, b):\n    ",
      suffix: "\n\nprint(add(1, 2))",
      max_tokens: 8,
    });
    expect(status).toBe(400);
    const e = envelope(json);
    expect(e.type).toBe("invalid_request_error");
    expect(e.code).toBe("fim_unsupported");
  });

  test("logit_bias is not read by /v1/completions (stop and n are: completions.test.ts)", async () => {
    const ref = await postJson(s, "/v1/completions", greedy());
    const text = ref.json.choices[0].text as string;
    const ignored = await postJson(s, "/v1/completions", greedy({ logit_bias: { "5": 100 } }));
    expect(ignored.status).toBe(200);
    expect(ignored.json.choices).toHaveLength(1);
    expect(ignored.json.choices[0].text).toBe(text);
  });
});
