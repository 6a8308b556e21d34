// Embeddings and rerank over HTTP (docs/api/embeddings.md) on the tiny-embed
// fixture: OpenAI's client (float and base64), every input form, usage,
// `dimensions`, one decode for many short inputs (the /slots tick counter),
// rerank ordered as the cosine order of the route's own vectors, the
// refusals (a chat model asked to embed, an embedding model asked to chat,
// inputs over the window), and Ollama's /api/embed and /api/embeddings
// through the `ollama` client.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Ollama } from "ollama";
import { apiError, envelope, postJson, slots, startTestServer, useServer, type TestServer } from "../support.ts";

const s = useServer({ fixture: "tiny-embed", maxContext: 512 });

const TEXTS = [
  "hello world",
  "the cat sat on the mat",
  "a b c",
  "superfluid serves embeddings",
  "one",
  "two three",
  "four five six",
  "seven",
];

const norm = (v: number[]) => Math.sqrt(v.reduce((sum, x) => sum + x * x, 0));
const cos = (a: number[], b: number[]) => a.reduce((sum, x, i) => sum + x * b[i]!, 0) / (norm(a) * norm(b));

async function embedFloat(input: unknown, extra: Record<string, unknown> = {}) {
  const r = await postJson(s, "/v1/embeddings", { model: s.model, input, ...extra });
  expect(r.status).toBe(200);
  return r.json;
}

describe("/v1/embeddings", () => {
  test("OpenAI's shape: a list of unit vectors, in input order, with usage", async () => {
    const json = await embedFloat(TEXTS.slice(0, 3));
    expect(json).toMatchObject({ object: "list", model: s.model });
    expect(json.data.map((d: any) => [d.object, d.index])).toEqual([
      ["embedding", 0],
      ["embedding", 1],
      ["embedding", 2],
    ]);
    for (const d of json.data) {
      expect(d.embedding).toHaveLength(64);
      expect(norm(d.embedding)).toBeCloseTo(1, 5);
    }
    // BOS plus each text's tokens.
    const model = s.server.registry.default!;
    const counted = TEXTS.slice(0, 3).reduce(
      (n, t) => n + model.tokenizer.tokenize(t, { addSpecial: true, parseSpecial: true }).length,
      0,
    );
    expect(json.usage).toEqual({ prompt_tokens: counted, total_tokens: counted });
  });

  test("the openai client's embeddings.create: float and base64 give the same vectors", async () => {
    const float = await s.client.embeddings.create({
      model: s.model,
      input: TEXTS.slice(0, 2),
      encoding_format: "float",
    });
    // The client's own default is base64, which it decodes into numbers.
    const base64 = await s.client.embeddings.create({ model: s.model, input: TEXTS.slice(0, 2) });
    expect(base64.data).toHaveLength(2);
    base64.data.forEach((d, i) => {
      const f = float.data[i]!.embedding;
      expect(d.embedding).toHaveLength(f.length);
      d.embedding.forEach((x, k) => expect(x).toBeCloseTo(f[k]!, 6));
    });
    expect(float.usage.prompt_tokens).toBeGreaterThan(2);
    // The raw base64 is little-endian float32.
    const raw = await embedFloat("hello world", { encoding_format: "base64" });
    const bytes = Buffer.from(raw.data[0].embedding, "base64");
    const floats = new Float32Array(new Uint8Array(bytes).buffer);
    const plain = await embedFloat("hello world");
    expect(Array.from(floats)).toEqual(plain.data[0].embedding);
  });

  test("token-id inputs: one array is one input; text and its tokens give one vector", async () => {
    const model = s.server.registry.default!;
    const ids = model.tokenizer.tokenize("hello world", { addSpecial: true, parseSpecial: true });
    const one = await embedFloat(ids);
    expect(one.data).toHaveLength(1);
    expect(one.usage.prompt_tokens).toBe(ids.length);
    const both = await embedFloat([ids, ids.slice(0, 2)]);
    expect(both.data).toHaveLength(2);
    const text = await embedFloat("hello world");
    expect(cos(one.data[0].embedding, text.data[0].embedding)).toBeGreaterThan(0.99999);
  });

  test("dimensions keeps the first n floats, scaled to unit length again", async () => {
    const full = (await embedFloat("hello world")).data[0].embedding as number[];
    const short = (await embedFloat("hello world", { dimensions: 16 })).data[0].embedding as number[];
    expect(short).toHaveLength(16);
    expect(norm(short)).toBeCloseTo(1, 5);
    expect(cos(short, full.slice(0, 16))).toBeGreaterThan(0.99999);
    const r = await postJson(s, "/v1/embeddings", { model: s.model, input: "x", dimensions: 65 });
    expect(r.status).toBe(400);
    expect(envelope(r.json).param).toBe("dimensions");
  });

  test("eight short inputs in one request take one decode (the /slots tick counter)", async () => {
    const before = (await slots(s)).totals.ticks;
    const json = await embedFloat(TEXTS);
    expect(json.data).toHaveLength(8);
    const after = (await slots(s)).totals.ticks;
    expect(after - before).toBe(1);
  });

  test("inputs over the window: 400 context_length_exceeded naming the input", async () => {
    const long = new Array(513).fill(10);
    const r = await postJson(s, "/v1/embeddings", { model: s.model, input: [[10, 11], long] });
    expect(r.status).toBe(400);
    const e = envelope(r.json);
    expect(e.code).toBe("context_length_exceeded");
    expect(e.message).toContain("input[1]");
    expect(e.message).toContain("512");
    const text = await postJson(s, "/v1/embeddings", { model: s.model, input: ["ok", "word ".repeat(600)] });
    expect(text.status).toBe(400);
    expect(envelope(text.json)).toMatchObject({ code: "context_length_exceeded", param: "input" });
    expect(envelope(text.json).message).toContain("input[1]");
  });

  test("malformed requests: 400 naming the field", async () => {
    const cases: [unknown, string][] = [
      [{ model: s.model }, "input"],
      [{ model: s.model, input: [] }, "input"],
      [{ model: s.model, input: [[1, 2], [99999]] }, "input"],
      [{ model: s.model, input: "x", encoding_format: "int8" }, "encoding_format"],
      [{ input: "x" }, "model"],
    ];
    for (const [body, param] of cases) {
      const r = await postJson(s, "/v1/embeddings", body);
      expect(r.status).toBe(400);
      expect(envelope(r.json).param).toBe(param);
    }
    const unknown = await postJson(s, "/v1/embeddings", { model: "nope", input: "x" });
    expect(unknown.status).toBe(404);
  });

  test("an embedding model refuses generation: 400 unsupported_model", async () => {
    const err = await apiError(
      s.client.chat.completions.create({ model: s.model, messages: [{ role: "user", content: "hi" }] }),
    );
    expect(err.status).toBe(400);
    expect(err.code).toBe("unsupported_model");
    const completion = await postJson(s, "/v1/completions", { model: s.model, prompt: "hi" });
    expect(completion.status).toBe(400);
    expect(envelope(completion.json).code).toBe("unsupported_model");
  });
});

describe("/v1/rerank", () => {
  const query = "the cat";
  const docs = ["hello world", "the cat sat on the mat", "a b c", "superfluid serves embeddings", "cats"];

  test("ordered as the cosine of each document's embedding to the query's, best first", async () => {
    const vectors = (await embedFloat([query, ...docs])).data.map((d: any) => d.embedding as number[]);
    const expected = docs
      .map((_, i) => ({ index: i, score: cos(vectors[0]!, vectors[i + 1]!) }))
      .sort((a, b) => b.score - a.score);
    const r = await postJson(s, "/v1/rerank", { model: s.model, query, documents: docs });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ model: s.model, object: "list" });
    expect(r.json.results.map((x: any) => x.index)).toEqual(expected.map((e) => e.index));
    r.json.results.forEach((x: any, i: number) => {
      expect(x.relevance_score).toBeCloseTo(expected[i]!.score, 5);
      expect(x.document).toBeUndefined();
    });
    expect(r.json.usage.prompt_tokens).toBeGreaterThan(docs.length);
  });

  test("top_n, return_documents, documents as {text}, and the /rerank alias", async () => {
    const full = await postJson(s, "/v1/rerank", { model: s.model, query, documents: docs });
    const r = await postJson(s, "/rerank", {
      model: s.model,
      query,
      documents: docs.map((text) => ({ text })),
      top_n: 2,
      return_documents: true,
    });
    expect(r.status).toBe(200);
    expect(r.json.results).toHaveLength(2);
    r.json.results.forEach((x: any, i: number) => {
      expect(x.index).toBe(full.json.results[i].index);
      expect(x.document).toEqual({ text: docs[x.index] });
    });
  });

  test("refusals: no query, no documents, a document over the window", async () => {
    expect((await postJson(s, "/v1/rerank", { model: s.model, documents: ["a"] })).status).toBe(400);
    const empty = await postJson(s, "/v1/rerank", { model: s.model, query: "q", documents: [] });
    expect(empty.status).toBe(400);
    expect(envelope(empty.json).param).toBe("documents");
    const long = await postJson(s, "/v1/rerank", {
      model: s.model,
      query: "q",
      documents: ["fine", "word ".repeat(600)],
    });
    expect(long.status).toBe(400);
    expect(envelope(long.json)).toMatchObject({ code: "context_length_exceeded", param: "documents" });
    expect(envelope(long.json).message).toContain("documents[1]");
  });
});

describe("Ollama's routes", () => {
  const ollama = () => new Ollama({ host: s.url });

  test("/api/embed: unit vectors equal to /v1/embeddings, string or array input", async () => {
    const openai = (await embedFloat(TEXTS.slice(0, 2))).data.map((d: any) => d.embedding as number[]);
    const many = await ollama().embed({ model: s.model, input: TEXTS.slice(0, 2) });
    expect(many.model).toBe(s.model);
    expect(many.embeddings).toHaveLength(2);
    many.embeddings.forEach((v, i) => {
      expect(norm(v)).toBeCloseTo(1, 5);
      expect(cos(v, openai[i]!)).toBeGreaterThan(0.99999);
    });
    expect(many.prompt_eval_count).toBeGreaterThan(2);
    const one = await ollama().embed({ model: `${s.model}:latest`, input: TEXTS[0]! });
    expect(one.embeddings).toHaveLength(1);
    expect(cos(one.embeddings[0]!, openai[0]!)).toBeGreaterThan(0.99999);
  });

  test("/api/embed: truncate on by default, off refuses; dimensions", async () => {
    const long = "word ".repeat(600);
    const cut = await ollama().embed({ model: s.model, input: long });
    expect(cut.embeddings).toHaveLength(1);
    expect(cut.prompt_eval_count).toBe(512);
    const r = await postJson(s, "/api/embed", { model: s.model, input: long, truncate: false });
    expect(r.status).toBe(400);
    expect(r.json.error).toContain("512 tokens");
    const short = await ollama().embed({ model: s.model, input: "hello", dimensions: 8 } as any);
    expect(short.embeddings[0]).toHaveLength(8);
  });

  test("/api/embeddings: the raw (unnormalised) vector of one prompt", async () => {
    const raw = await ollama().embeddings({ model: s.model, prompt: "hello world" });
    const unit = (await embedFloat("hello world")).data[0].embedding as number[];
    expect(raw.embedding).toHaveLength(64);
    const n = norm(raw.embedding);
    expect(Math.abs(n - 1)).toBeGreaterThan(1e-3);
    raw.embedding.forEach((x, i) => expect(x / n).toBeCloseTo(unit[i]!, 5));
    const empty = await postJson(s, "/api/embeddings", { model: s.model, prompt: "" });
    expect(empty.json).toEqual({ embedding: [] });
  });

  test("errors in Ollama's envelope", async () => {
    const unknown = await postJson(s, "/api/embed", { model: "nope", input: "x" });
    expect(unknown.status).toBe(404);
    expect(typeof unknown.json.error).toBe("string");
    const noInput = await postJson(s, "/api/embed", { model: s.model });
    expect(noInput.status).toBe(400);
  });
});

describe("a chat model", () => {
  let chat: TestServer;
  beforeAll(async () => {
    chat = await startTestServer({ fixture: "tiny-random" });
  });
  afterAll(async () => {
    await chat?.server.close();
  });

  test("asked for embeddings or a rerank: 400 unsupported_model, on every route", async () => {
    const err = await apiError(chat.client.embeddings.create({ model: chat.model, input: "hello" }));
    expect(err.status).toBe(400);
    expect(err.code).toBe("unsupported_model");
    const rr = await postJson(chat, "/v1/rerank", { model: chat.model, query: "q", documents: ["a"] });
    expect(rr.status).toBe(400);
    expect(envelope(rr.json).code).toBe("unsupported_model");
    for (const [path, body] of [
      ["/api/embed", { input: "x" }],
      ["/api/embeddings", { prompt: "x" }],
    ] as const) {
      const r = await postJson(chat, path, { model: chat.model, ...body });
      expect(r.status).toBe(400);
      expect(r.json.error).toContain("does not embed");
    }
  });
});
