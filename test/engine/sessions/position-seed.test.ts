// Position-seeded sampling (GenerateJob.positionSeeded): each draw is seeded
// from (seed, stream position), so a generation cut after k tokens and
// continued with the stream so far as its prompt draws what the uncut one
// would, with or without speculative drafts. Requests without the flag keep
// one random stream per job.
import { describe, expect, test } from "bun:test";
import type { Engine, GenerateJob } from "../../../src/engine/engine.ts";
import { LlamaContext } from "../../../src/engine/context.ts";
import { GREEDY, positionSeed, SamplerChain, type SamplingSpec } from "../../../src/engine/sampling.ts";
import { SPECULATION_DEFAULTS, type SpeculationConfig } from "../../../src/engine/speculation.ts";
import { useTinyEngines } from "../../support/engines.ts";

const tiny = useTinyEngines({ lanes: 2, cellsPerSequence: 1024, threads: 1, prefillBudget: 256 });
/** Drafting on whatever it measures: these tests are about exactness, not the gates. */
const ALWAYS: SpeculationConfig = {
  strategy: "draft-model",
  ...SPECULATION_DEFAULTS,
  throughputGate: false,
  minYield: 0,
};

let nextId = 0;
function generate(
  e: Engine,
  prompt: number[],
  sampling: SamplingSpec,
  maxTokens: number,
  positionSeeded = true,
): number[] {
  const job: GenerateJob = { id: `p${nextId++}`, prompt, sampling, maxTokens, ignoreEos: true, positionSeeded };
  e.submit(job);
  const out: number[] = [];
  // A hang guard in ticks, not time.
  for (let ticks = 0; e.hasWork(); ticks++) {
    if (ticks > 100_000) throw new Error("the engine did not finish");
    const ev = e.tick();
    for (const [id, t] of ev.tokens) if (id === job.id) out.push(t);
    for (const f of ev.finished) if (f.id === job.id && f.reason === "error") throw new Error(f.error);
  }
  return out;
}

/** A prompt that repeats a passage, so prompt lookup finds drafts. */
function repetitive(seed: number): number[] {
  const passage = tiny.model.tokenize(
    `story ${seed}: the quick brown fox jumps over the lazy dog near the river bank at dawn`,
  );
  return [
    ...tiny.model.tokenize("<|im_start|>user\n", { addSpecial: true, parseSpecial: true }),
    ...passage,
    ...passage,
    ...passage.slice(0, 6),
  ];
}

const N = 24;

/** For each seed: [uncut, cut at k then continued] outputs. */
function cutAndContinue(
  e: Engine,
  seeds: number[],
  k: (seed: number) => number,
  spec: Partial<SamplingSpec>,
): [number[], number[]][] {
  return seeds.map((seed) => {
    const sampling: SamplingSpec = { ...GREEDY, temperature: 1, ...spec, seed };
    const prompt = repetitive(seed);
    const whole = generate(e, prompt, sampling, N);
    const cut = k(seed);
    const head = generate(e, prompt, sampling, cut);
    const tail = generate(e, [...prompt, ...head], sampling, N - cut);
    return [whole, [...head, ...tail]];
  });
}

describe("position-seeded sampling", () => {
  test("the seed mix: deterministic, spread over positions and seeds, never llama.cpp's random-seed value", () => {
    expect(positionSeed(7, 100)).toBe(positionSeed(7, 100));
    const seen = new Set<number>();
    for (let p = 0; p < 1000; p++) seen.add(positionSeed(42, p));
    for (let s = 0; s < 1000; s++) seen.add(positionSeed(s, 42));
    expect(seen.size).toBeGreaterThan(1990);
    for (let p = 0; p < 1000; p++) expect(positionSeed(0xffffffff, p)).not.toBe(0xffffffff);
  });

  test("temperature 1: a generation cut after k tokens and continued draws the uncut one's tokens", () => {
    const e = tiny.engine();
    const seeds = Array.from({ length: 12 }, (_, i) => i + 1);
    const runs = cutAndContinue(e, seeds, (seed) => 3 + ((seed * 5) % 17), {});
    // The continuation prefills in one batch what the uncut run decoded token by token, so its KV
    // may differ in the last bits: allow a rare rounding flip, but nearly every run is identical
    // (the draws themselves are checked exactly in the next test).
    const same = runs.filter(([a, b]) => Bun.deepEquals(a, b)).length;
    expect(same).toBeGreaterThanOrEqual(10);
    expect(runs.every(([a, b]) => a.length === N && b.length === N)).toBe(true);
  });

  test("the draw depends on the logits and the position only, not on the draws before it", () => {
    const model = tiny.model;
    const ctx = new LlamaContext(model, {
      sequences: 1,
      cellsPerSequence: 256,
      batchSize: 64,
      microBatchSize: 64,
      threads: 1,
    });
    try {
      const prompt = repetitive(5).slice(0, 32);
      prompt.forEach((t, i) => ctx.stage(i, t, i, 0, i === prompt.length - 1));
      ctx.decode(prompt.length);
      const row = prompt.length - 1;
      const spec: SamplingSpec = { ...GREEDY, temperature: 1.5, seed: 7 };
      const chain = (positionSeeded: boolean) => new SamplerChain(model, spec, [], undefined, [], positionSeeded);
      const walked = chain(true);
      const plain = chain(false);
      const walkedDraws: number[] = [];
      const freshDraws: number[] = [];
      const plainDraws: number[] = [];
      for (let p = 100; p < 140; p++) {
        walkedDraws.push(walked.sample(ctx.handle, row, p));
        plainDraws.push(plain.sample(ctx.handle, row, p));
        const fresh = chain(true);
        freshDraws.push(fresh.sample(ctx.handle, row, p));
        fresh.free();
      }
      walked.free();
      plain.free();
      // One chain drawing positions in turn and a new chain per position draw the same.
      expect(walkedDraws).toEqual(freshDraws);
      expect(new Set(walkedDraws).size).toBeGreaterThan(5);
      // The same logits at the same position again: the same token.
      const again = chain(true);
      expect(again.sample(ctx.handle, row, 120)).toBe(walkedDraws[20]!);
      again.free();
      // Without the flag one stream: the same position list draws other tokens.
      expect(plainDraws).not.toEqual(walkedDraws);
    } finally {
      ctx.free();
    }
  });

  test("with speculation on: the same draws as plain decoding, cut or not", () => {
    const plain = tiny.engine();
    // The model drafts for itself: greedy drafts that sampled draws accept or reject.
    const spec = tiny.engine({ speculation: ALWAYS, draftModel: tiny.model });
    const seeds = [11, 12, 13, 14, 15, 16];
    // A narrow top-k, so greedy drafts are often accepted and often rejected.
    const sampling: Partial<SamplingSpec> = { temperature: 1, topK: 3 };
    const a = cutAndContinue(plain, seeds, (seed) => 4 + (seed % 9), sampling);
    const b = cutAndContinue(spec, seeds, (seed) => 4 + (seed % 9), sampling);
    let same = 0;
    for (let i = 0; i < seeds.length; i++) {
      if (Bun.deepEquals(a[i]![0], b[i]![0])) same++;
      if (Bun.deepEquals(b[i]![0], b[i]![1])) same++;
    }
    expect(same).toBeGreaterThanOrEqual(2 * seeds.length - 1);
    const { specProposed, specAccepted } = spec.snapshot();
    expect(specAccepted).toBeGreaterThan(0);
    expect(specProposed).toBeGreaterThan(specAccepted);
  });

  test("without the flag one random stream per job, as before: a cut continuation draws differently", () => {
    const e = tiny.engine();
    const sampling: SamplingSpec = { ...GREEDY, temperature: 1, seed: 99 };
    const prompt = repetitive(99);
    const whole = generate(e, prompt, sampling, N, false);
    expect(generate(e, prompt, sampling, N, false)).toEqual(whole);
    const head = generate(e, prompt, sampling, 8, false);
    expect(head).toEqual(whole.slice(0, 8));
    const tail = generate(e, [...prompt, ...head], sampling, N - 8, false);
    expect([...head, ...tail]).not.toEqual(whole);
  });
});
