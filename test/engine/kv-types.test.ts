// A quantized KV cache (--kv-bits, --cache-type-k/-v): the context is built
// with llama.cpp's type_k / type_v; the bytes a token takes follow the type;
// generation, the prefix cache's warm repeat and a park/restore round trip
// work on it as on f16. A model whose heads do not split into the type's
// blocks of 32 is refused with the reason. The model here is a small
// large-vocab fixture: its heads hold 32 values (tiny-random's hold 16).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LlamaContext } from "../../src/engine/context.ts";
import { Engine, type EngineOptions, type FinishEvent, type GenerateJob } from "../../src/engine/engine.ts";
import { LlamaModel } from "../../src/engine/model.ts";
import { GREEDY } from "../../src/engine/sampling.ts";
import { SPECULATION_DEFAULTS } from "../../src/engine/speculation.ts";
import { largeVocab, writeFixture } from "../../src/fixtures/index.ts";
import { F16_KV, type KvTypes } from "../../src/gguf/kv-type.ts";
import { fixturePath } from "../support/models.ts";

const Q8: KvTypes = { k: "q8_0", v: "q8_0" };
const Q4: KvTypes = { k: "q4_0", v: "q4_0" };

let dir: string;
let model: LlamaModel;
let draft: LlamaModel;
const engines: Engine[] = [];
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "sf-kv-types-"));
  const path = join(dir, "model.gguf");
  const size = { vocabSize: 3000, nEmbd: 128, nBlocks: 2, nFf: 256 };
  await writeFixture(largeVocab(1, size), path);
  // Its draft: the first block, the same embeddings and output (as large-vocab-draft).
  await writeFixture(largeVocab(1, { ...size, nBlocks: 1 }, "large-vocab-draft"), join(dir, "draft.gguf"));
  model = LlamaModel.load(path);
  draft = LlamaModel.load(join(dir, "draft.gguf"));
});
afterAll(() => {
  for (const e of engines) e.close();
  model?.free();
  draft?.free();
  rmSync(dir, { recursive: true, force: true });
});

const tiny = {
  get model() {
    return model;
  },
  engine(opts: Partial<EngineOptions> = {}): Engine {
    const e = new Engine(model, { lanes: 2, cellsPerSequence: 1024, threads: 1, prefillBudget: 256, ...opts });
    engines.push(e);
    return e;
  },
};

interface Outcome {
  tokens: number[];
  cachedTokens: number;
  finish: FinishEvent;
}

let nextId = 0;
function generate(e: Engine, prompt: number[], maxTokens: number, extra: Partial<GenerateJob> = {}): Outcome {
  const job: GenerateJob = { id: `q${nextId++}`, prompt, sampling: GREEDY, maxTokens, ignoreEos: true, ...extra };
  e.submit(job);
  const tokens: number[] = [];
  let cachedTokens = -1;
  let finish: FinishEvent | undefined;
  for (let ticks = 0; e.hasWork(); ticks++) {
    if (ticks > 100_000) throw new Error("the engine did not finish");
    const ev = e.tick();
    for (const a of ev.admitted) if (a.id === job.id) cachedTokens = a.cachedTokens;
    for (const [id, t] of ev.tokens) if (id === job.id) tokens.push(t);
    for (const f of ev.finished) if (f.id === job.id) finish = f;
  }
  return { tokens, cachedTokens, finish: finish! };
}

const promptOf = (seed: string, words: number) =>
  tiny.model.tokenize(Array.from({ length: words }, (_, i) => `${seed}${(i * 7919) % 101}`).join(" "), {
    addSpecial: true,
    parseSpecial: true,
  });

describe("a quantized KV cache", () => {
  test("a token's bytes follow the types: q8_0 about half of f16, q4_0 about a quarter", () => {
    const f16 = tiny.model.kvBytesPerToken(F16_KV);
    expect(tiny.model.kvBytesPerToken(Q8) / f16).toBeCloseTo(34 / 64, 5);
    expect(tiny.model.kvBytesPerToken(Q4) / f16).toBeCloseTo(18 / 64, 5);
    expect(tiny.model.kvBytesPerToken({ k: "q8_0", v: "q4_0" }) / f16).toBeCloseTo((34 + 18) / 128, 5);
  });

  for (const types of [Q8, Q4]) {
    test(`${types.k}: the context takes the type, generates, and a warm repeat comes from the prefix cache`, () => {
      const e = tiny.engine({ kvTypes: types });
      expect(e.context.kvTypes).toEqual(types);
      const prompt = promptOf("warm", 120);
      // The prompt into the cache first: both replies then prefill only its
      // last token (llama.cpp's logits depend on how the batch is shaped).
      expect(generate(e, prompt, 1).finish.reason).toBe("length");
      const first = generate(e, prompt, 12);
      expect(first.tokens).toHaveLength(12);
      const repeat = generate(e, prompt, 12);
      for (const r of [first, repeat]) expect(r.cachedTokens).toBe(prompt.length - 1);
      expect(repeat.tokens).toEqual(first.tokens);
    });
  }

  test("q4_0: a parked lane restores into a fresh engine and continues as the engine that parked it", () => {
    const path = join(dir, "q4.park");
    const prompt = promptOf("park", 90);
    const parking = tiny.engine({ kvTypes: Q4 });
    const first = generate(parking, prompt, 16, { park: path });
    expect(first.finish.parked?.tokens).toBe(prompt.length + 15);
    const follow = [...prompt, ...first.tokens, ...tiny.model.tokenize(" and then more", {})];
    // Both continue from the same KV (the parking engine's own, and the
    // artifact's copy of it), prefilling the same new tokens: the same batches.
    const kept = generate(parking, follow, 16);
    const resumed = generate(tiny.engine({ kvTypes: Q4 }), follow, 16, { resume: path });
    for (const r of [kept, resumed]) expect(r.cachedTokens).toBe(first.finish.parked!.tokens);
    expect(resumed.tokens).toEqual(kept.tokens);
  });

  test("an f16 artifact does not restore into a q4_0 engine: it resumes cold, never wrong", () => {
    const path = join(dir, "f16.park");
    const prompt = promptOf("mixed", 70);
    const first = generate(tiny.engine(), prompt, 8, { park: path });
    const follow = [...prompt, ...first.tokens];
    const cold = generate(tiny.engine({ kvTypes: Q4 }), follow, 8);
    const resumed = generate(tiny.engine({ kvTypes: Q4 }), follow, 8, { resume: path });
    expect(resumed.cachedTokens).toBe(0);
    expect(resumed.tokens).toEqual(cold.tokens);
  });

  test("q8_0: a draft model's pool takes the type too, and drafts", () => {
    const e = tiny.engine({
      kvTypes: Q8,
      speculation: { strategy: "draft-model", ...SPECULATION_DEFAULTS, throughputGate: false, minYield: 0 },
      draftModel: draft,
    });
    const out = generate(e, promptOf("draft", 40), 24);
    expect(out.tokens).toHaveLength(24);
    expect(e.snapshot().specProposed).toBeGreaterThan(0);
  });

  test("a model whose heads do not split into blocks of 32 is refused with the reason", async () => {
    const small = LlamaModel.load(await fixturePath("tiny-random"));
    try {
      const build = () =>
        new LlamaContext(small, {
          sequences: 1,
          cellsPerSequence: 512,
          batchSize: 512,
          microBatchSize: 512,
          threads: 1,
          kvTypes: Q8,
        });
      expect(build).toThrow(/q8_0 stores values in blocks of 32.*16/);
    } finally {
      small.free();
    }
  });
});
