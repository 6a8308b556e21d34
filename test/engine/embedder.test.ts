// The embedding executor (src/engine/embedder.ts) on the tiny-embed fixture:
// the GGUF's pooling is found, inputs of several jobs share one decode (the
// decode counter), a batched vector equals the same input embedded alone,
// an input over the window fails only its own job, cancel drops a queued
// job, and a chat model is no embedding model.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { declaredPooling, Embedder, type EmbedOutcome } from "../../src/engine/embedder.ts";
import { LlamaModel } from "../../src/engine/model.ts";
import { cosine } from "../../src/pipeline/embedding.ts";
import { fixturePath } from "../support/models.ts";

let model: LlamaModel;
let embedder: Embedder;

beforeAll(async () => {
  model = LlamaModel.load(await fixturePath("tiny-embed"));
  embedder = new Embedder(model, { threads: 1, window: 256, sequences: 16 });
});

afterAll(() => {
  embedder?.close();
  model?.free();
});

const tokens = (text: string) => model.tokenize(text, { addSpecial: true, parseSpecial: true });

/** Steps until every submitted job has an outcome. */
function drain(): Map<string, EmbedOutcome> {
  const out = new Map<string, EmbedOutcome>();
  while (embedder.hasWork()) for (const o of embedder.step()) out.set(o.id, o);
  return out;
}

function vectorsOf(outcome: EmbedOutcome | undefined): Float32Array[] {
  if (!outcome || "error" in outcome) throw new Error(`no vectors: ${JSON.stringify(outcome)}`);
  return outcome.vectors;
}

describe("embedder", () => {
  test("the fixture declares mean pooling; the context pools that way, one vector of n_embd floats", () => {
    expect(declaredPooling(model)).toBe("mean");
    expect(embedder.pooling).toBe("mean");
    expect(embedder.dimensions).toBe(model.embeddingLength);
    expect(embedder.window).toBe(256);
  });

  test("eight short inputs of two jobs take one decode", () => {
    const before = embedder.stats;
    const texts = ["hello world", "a b", "the cat sat", "on the mat", "one", "two three", "four five six", "seven"];
    embedder.submit({ id: "a", inputs: texts.slice(0, 5).map(tokens) });
    embedder.submit({ id: "b", inputs: texts.slice(5).map(tokens) });
    const out = drain();
    const after = embedder.stats;
    expect(after.decodes - before.decodes).toBe(1);
    expect(after.inputs - before.inputs).toBe(8);
    expect(after.largestBatch).toBeGreaterThanOrEqual(8);
    expect(vectorsOf(out.get("a"))).toHaveLength(5);
    expect(vectorsOf(out.get("b"))).toHaveLength(3);
  });

  test("a vector embedded beside others equals the same input embedded alone", () => {
    const inputs = ["hello world", "a much longer input with several more words in it", "x"].map(tokens);
    embedder.submit({ id: "together", inputs });
    const together = vectorsOf(drain().get("together"));
    inputs.forEach((input, i) => {
      embedder.submit({ id: `alone-${i}`, inputs: [input] });
      const [alone] = vectorsOf(drain().get(`alone-${i}`));
      expect(alone!.length).toBe(embedder.dimensions);
      expect(cosine(alone!, together[i]!)).toBeGreaterThan(0.99999);
    });
    // Different inputs, different vectors.
    expect(cosine(together[0]!, together[1]!)).toBeLessThan(0.999);
  });

  test("more inputs than sequences (or tokens) a decode holds go in several decodes, in order", () => {
    const before = embedder.stats.decodes;
    const inputs = Array.from({ length: 40 }, (_, i) => tokens(`input number ${i}`));
    embedder.submit({ id: "many", inputs });
    const vectors = vectorsOf(drain().get("many"));
    expect(vectors).toHaveLength(40);
    expect(embedder.stats.decodes - before).toBe(3); // 16 sequences a decode
    embedder.submit({ id: "check", inputs: [inputs[37]!] });
    expect(cosine(vectorsOf(drain().get("check"))[0]!, vectors[37]!)).toBeGreaterThan(0.99999);
  });

  test("an input over the window fails its own job only", () => {
    embedder.submit({ id: "long", inputs: [tokens("fine"), new Array(300).fill(5)] });
    embedder.submit({ id: "ok", inputs: [tokens("fine")] });
    const out = drain();
    expect(out.get("long")).toMatchObject({ error: expect.stringContaining("input 1 has 300 tokens") });
    expect(vectorsOf(out.get("ok"))).toHaveLength(1);
  });

  test("cancel drops a queued job", () => {
    embedder.submit({ id: "gone", inputs: [tokens("x")] });
    expect(embedder.cancel("gone")).toBe(true);
    expect(embedder.hasWork()).toBe(false);
    expect(embedder.cancel("gone")).toBe(false);
  });

  test("the snapshot counts a decode as a tick", () => {
    const s = embedder.snapshot();
    expect(s.ticks).toBe(embedder.stats.decodes);
    expect(s.embeddings).toMatchObject({
      pooling: "mean",
      dimensions: embedder.dimensions,
      decodes: embedder.stats.decodes,
    });
  });
});

test("a chat model declares no pooling and gets no embedder", async () => {
  const chat = LlamaModel.load(await fixturePath("tiny-random"));
  try {
    expect(declaredPooling(chat)).toBe("none");
    expect(() => new Embedder(chat, { threads: 1, window: 64 })).toThrow(/pools no embeddings/);
  } finally {
    chat.free();
  }
});
