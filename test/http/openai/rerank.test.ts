// /v1/rerank on a reranker GGUF (rank pooling) served in embedding mode: the
// tiny-rerank fixture (src/fixtures/rerank-model.ts) is a BERT encoder with
// a classification head whose hand-set weights score a pair by its share of
// topic-word tokens, so every score is predicted here from the pair as
// llama-server builds it (`<s> query </s> </s> document </s>` on this
// vocabulary). Also: results best first, top_n and return_documents, the
// pairs of one request in one decode, a pair over the window, the routes a
// reranker refuses (embeddings, generation), and, with ../shared/anchors,
// the same scores and token counts as llama.cpp's own llama-server
// (--rerank) on the same file. The cosine path on a model that only embeds
// is tested in embeddings.test.ts.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { rerankScore, tinyRerank, topicTokenIds } from "../../../src/fixtures/index.ts";
import { HAVE_LLAMA_SERVER, startLlamaServer, type LlamaServer } from "../../support/llama-server.ts";
import { fixturePath } from "../../support/models.ts";
import { apiError, envelope, getJson, postJson, slots, useServer } from "../support.ts";

const s = useServer({ fixture: "tiny-rerank" });

const QUERY = "where do fish live";
// Distinct shares of topic words (water, river, sea, fish, ship) in each
// pair, so there is one right order (here and in the llama-server cases).
const DOCS = [
  "a dog ran home",
  "the fish swim in the river",
  "water",
  "hello world",
  "ship on the sea with fish and water",
  "the quick brown fox jumps over the lazy dog",
];

const fixture = tinyRerank();
const topic = topicTokenIds(fixture.vocab);
const BOS = fixture.vocab.special["<s>"]!;
// EOS and SEP are both </s> here.
const EOS = fixture.vocab.special["</s>"]!;

/** The pair as llama-server builds it without a rerank template: BOS, query, EOS, SEP, document, EOS. */
function pair(query: string, document: string): number[] {
  const tokenize = (text: string) =>
    s.server.registry.default!.tokenizer.tokenize(text, { addSpecial: false, parseSpecial: false });
  return [BOS, ...tokenize(query), EOS, EOS, ...tokenize(document), EOS];
}

function expectedScore(query: string, document: string): number {
  const tokens = pair(query, document);
  return rerankScore(tokens.filter((t) => topic.has(t)).length / tokens.length);
}

async function rerank(body: Record<string, unknown>) {
  const r = await postJson(s, "/v1/rerank", { model: s.model, ...body });
  expect(r.status).toBe(200);
  return r.json;
}

describe("/v1/rerank on a reranker (rank pooling)", () => {
  test("each score is the model's own score of its pair, results best first", async () => {
    const expected = DOCS.map((d, index) => ({ index, score: expectedScore(QUERY, d) })).sort(
      (a, b) => b.score - a.score,
    );
    // The fixture's scores are distinct, so the order below is the only right one.
    expect(new Set(expected.map((e) => e.score)).size).toBe(DOCS.length);
    const json = await rerank({ query: QUERY, documents: DOCS });
    expect(json).toMatchObject({ model: s.model, object: "list" });
    expect(json.results.map((x: any) => x.index)).toEqual(expected.map((e) => e.index));
    json.results.forEach((x: any, i: number) => {
      expect(Math.abs(x.relevance_score - expected[i]!.score)).toBeLessThan(1e-4);
      expect(x.document).toBeUndefined();
    });
    for (let i = 1; i < json.results.length; i++)
      expect(json.results[i - 1].relevance_score).toBeGreaterThan(json.results[i].relevance_score);
    // Every pair's tokens, markers included.
    const counted = DOCS.reduce((n, d) => n + pair(QUERY, d).length, 0);
    expect(json.usage).toEqual({ prompt_tokens: counted, total_tokens: counted });
  });

  test("top_n keeps the best n; return_documents and {text} documents; the /rerank alias", async () => {
    const full = await rerank({ query: QUERY, documents: DOCS });
    const r = await postJson(s, "/rerank", {
      model: s.model,
      query: QUERY,
      documents: DOCS.map((text) => ({ text })),
      top_n: 2,
      return_documents: true,
    });
    expect(r.status).toBe(200);
    expect(r.json.results).toHaveLength(2);
    r.json.results.forEach((x: any, i: number) => {
      expect(x.index).toBe(full.results[i].index);
      expect(x.relevance_score).toBe(full.results[i].relevance_score);
      expect(x.document).toEqual({ text: DOCS[x.index] });
    });
    // top_n past the list keeps them all.
    expect((await rerank({ query: QUERY, documents: DOCS, top_n: 50 })).results).toHaveLength(DOCS.length);
  });

  test("a request's pairs share one decode, and a pair scores the same alone", async () => {
    const before = (await slots(s)).totals.ticks;
    const together = await rerank({ query: QUERY, documents: DOCS });
    expect((await slots(s)).totals.ticks - before).toBe(1);
    for (const [index, document] of DOCS.entries()) {
      const alone = await rerank({ query: QUERY, documents: [document] });
      const inBatch = together.results.find((x: any) => x.index === index).relevance_score;
      expect(Math.abs(alone.results[0].relevance_score - inBatch)).toBeLessThan(1e-6);
    }
  });

  test("a pair over the window: 400 context_length_exceeded naming the document", async () => {
    const r = await postJson(s, "/v1/rerank", {
      model: s.model,
      query: QUERY,
      documents: ["fine", "word ".repeat(600)],
    });
    expect(r.status).toBe(400);
    expect(envelope(r.json)).toMatchObject({ code: "context_length_exceeded", param: "documents" });
    expect(envelope(r.json).message).toContain("documents[1]");
    expect(envelope(r.json).message).toContain("512");
  });

  test("/v1/models describes it: rank pooling, one score per pair", async () => {
    const m = await getJson(s, `/v1/models/${encodeURIComponent(s.model)}`);
    expect(m.status).toBe(200);
    expect(m.json.capabilities.embedding).toMatchObject({ pooling: "rank", dimensions: 1, max_input_tokens: 512 });
  });
});

describe("a reranker refuses", () => {
  test("/v1/embeddings: 400 unsupported_model (a score is no embedding)", async () => {
    const err = await apiError(s.client.embeddings.create({ model: s.model, input: "hello" }));
    expect(err.status).toBe(400);
    expect(err.code).toBe("unsupported_model");
    expect(err.param).toBe("model");
    expect(err.message).toContain("reranker");
  });

  test("Ollama's /api/embed and /api/embeddings: 400 in Ollama's envelope", async () => {
    for (const [path, body] of [
      ["/api/embed", { input: "x" }],
      ["/api/embeddings", { prompt: "x" }],
    ] as const) {
      const r = await postJson(s, path, { model: s.model, ...body });
      expect(r.status).toBe(400);
      expect(r.json.error).toContain("reranker");
    }
  });

  test("generation: 400 unsupported_model", async () => {
    const err = await apiError(
      s.client.chat.completions.create({ model: s.model, messages: [{ role: "user", content: "hi" }] }),
    );
    expect(err.status).toBe(400);
    expect(err.code).toBe("unsupported_model");
  });
});

describe.skipIf(!HAVE_LLAMA_SERVER)("scores equal llama-server's (--rerank, same file)", () => {
  let llama: LlamaServer | undefined;

  beforeAll(async () => {
    llama = await startLlamaServer(["-m", await fixturePath("tiny-rerank"), "--rerank", "-t", "1"]);
  });

  afterAll(async () => {
    await llama?.stop();
  });

  async function theirs(query: string, documents: string[]) {
    const res = await fetch(`${llama!.url}/v1/rerank`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ query, documents, top_n: documents.length }),
    });
    expect(res.status).toBe(200);
    return (await res.json()) as any;
  }

  test("every document's score within 1e-4, the same order and token count", async () => {
    const cases: [string, string[]][] = [
      [QUERY, DOCS],
      ["water", ["water water", "sea", "a fish on a ship", "no topic here at all"]],
      ["the sea and the river", ["hello", "the river runs to the sea, where the fish and the ships are", "a b"]],
    ];
    for (const [query, documents] of cases) {
      const ours = await rerank({ query, documents });
      const ref = await theirs(query, documents);
      expect(ours.results).toHaveLength(documents.length);
      expect(ref.results).toHaveLength(documents.length);
      for (const x of ours.results) {
        const y = ref.results.find((r: any) => r.index === x.index);
        expect(Math.abs(x.relevance_score - y.relevance_score)).toBeLessThan(1e-4);
      }
      expect(ours.results.map((x: any) => x.index)).toEqual(ref.results.map((x: any) => x.index));
      expect(ours.usage.prompt_tokens).toBe(ref.usage.prompt_tokens);
    }
  });
});
