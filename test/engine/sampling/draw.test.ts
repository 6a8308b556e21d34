// The fast sampled draw (src/engine/draw.ts) against the chain of llama.cpp
// samplers it replaced (test/support/reference-sampler.ts) and against the
// exact distribution computed in double precision.
//
// Method: five logit shapes (peaked, long tail, flat, ties, a third of the
// tokens at -inf including the best) times five truncation settings. For
// each, N seeded draws from the new path, the JavaScript fallback and the
// reference; a chi-square goodness-of-fit test of each against the exact
// distribution and a chi-square homogeneity test of new against reference,
// each at a critical value for alpha = 1e-6 (Wilson-Hilferty) from its own
// degrees of freedom, with tokens expected fewer than 5 times pooled into
// one bin (checked by a binomial bound when even the pool is that rare).
// Every stream is seeded, so the outcome is fixed for a given CPU kernel.
// On shapes without ties the seeded streams must also give the same tokens
// as the reference, draw for draw.
import { describe, expect, test } from "bun:test";
import { loadLlama } from "../../../ffi/llama.ts";
import { openVectorExpSum } from "../../../ffi/vector-exp.ts";
import { drawPosition, type ExpSum, jsExpSum, Mt19937, type Truncation } from "../../../src/engine/draw.ts";
import { positionLogprobs } from "../../../src/engine/logprobs.ts";
import { RowAdjustments, type SamplingSpec } from "../../../src/engine/sampling.ts";
import { uniform } from "../../../src/fixtures/prng.ts";
import { binomialUpperQuantile } from "../../support/binomial.ts";
import { ReferenceChain } from "../../support/reference-sampler.ts";

const VOCAB = 4096;
const DRAWS = 5000;
const ALPHA = 1e-6;
/** The standard normal quantile for 1 - ALPHA. */
const Z_ALPHA = 4.753;

function gaussian(rand: () => number): number {
  const u = Math.max(rand(), 1e-12);
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rand());
}

const SHAPES: Record<string, () => Float32Array> = {
  peaked: () => {
    const rand = uniform(11);
    const row = Float32Array.from({ length: VOCAB }, () => 2 * gaussian(rand));
    for (const [t, v] of [
      [17, 12],
      [900, 11.2],
      [2048, 10.5],
      [4000, 9.1],
    ] as const)
      row[t] = v;
    return row;
  },
  "long tail": () => {
    const rand = uniform(12);
    const ranks = Array.from({ length: VOCAB }, (_, i) => i + 1);
    for (let i = ranks.length - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1));
      [ranks[i], ranks[j]] = [ranks[j]!, ranks[i]!];
    }
    return Float32Array.from(ranks, (r) => -3.3 * Math.log(r) + 0.01 * rand());
  },
  flat: () => {
    const rand = uniform(13);
    return Float32Array.from({ length: VOCAB }, () => 0.05 * rand());
  },
  ties: () => {
    const rand = uniform(14);
    return Float32Array.from({ length: VOCAB }, () => Math.floor(rand() * 4) * 1.5);
  },
  "-inf": () => {
    const row = SHAPES.peaked!();
    const rand = uniform(15);
    for (let t = 0; t < VOCAB; t++) if (rand() < 1 / 3) row[t] = -Infinity;
    row[17] = -Infinity;
    return row;
  },
};

const SETTINGS: Record<string, Truncation> = {
  "temperature 0.8, top_p 0.95": { temperature: 0.8, topK: 0, topP: 0.95, minP: 0 },
  "temperature 1, top_k 40": { temperature: 1, topK: 40, topP: 1, minP: 0 },
  "temperature 0.6, top_k 20, top_p 0.95, min_p 0.05": { temperature: 0.6, topK: 20, topP: 0.95, minP: 0.05 },
  "temperature 1, no truncation": { temperature: 1, topK: 0, topP: 1, minP: 0 },
  "temperature 0.7, min_p 0.1": { temperature: 0.7, topK: 0, topP: 1, minP: 0.1 },
};

/** The truncated, renormalised distribution in double precision; ties ranked by lower id first. */
function exactDistribution(row: Float32Array, t: Truncation): Map<number, number> {
  const ids = [...row.keys()].filter((i) => row[i]! > -Infinity);
  const x = (i: number) => row[i]! / t.temperature;
  ids.sort((a, b) => x(b) - x(a) || a - b);
  const max = x(ids[0]!);
  const w = ids.map((i) => Math.exp(x(i) - max));
  const z = w.reduce((a, b) => a + b, 0);
  let length = ids.length;
  if (t.topP < 1) {
    let cum = 0;
    for (let j = 0; j < ids.length; j++) {
      cum += w[j]! / z;
      if (cum >= t.topP) {
        length = j + 1;
        break;
      }
    }
  }
  if (t.minP > 0) {
    let j = 1;
    while (j < length && x(ids[j]!) >= max + Math.log(t.minP)) j++;
    length = j;
  }
  if (t.topK > 0) length = Math.min(length, t.topK);
  const kept = w.slice(0, length).reduce((a, b) => a + b, 0);
  return new Map(ids.slice(0, length).map((id, j) => [id, w[j]! / kept]));
}

function chiSquareCritical(df: number): number {
  const a = 2 / (9 * df);
  return df * (1 - a + Z_ALPHA * Math.sqrt(a)) ** 3;
}

/** Bins: each key expected at least 5 times alone, the rest pooled. */
function bins(expected: Map<number, number>, n: number): { of: (key: number) => number; p: number[] } {
  const index = new Map<number, number>();
  const p: number[] = [];
  let rest = 0;
  for (const [key, prob] of expected) {
    if (prob * n >= 5) {
      index.set(key, p.length);
      p.push(prob);
    } else rest += prob;
  }
  p.push(rest);
  return { of: (key) => index.get(key) ?? p.length - 1, p };
}

function counts(draws: number[], b: ReturnType<typeof bins>): number[] {
  const c = new Array(b.p.length).fill(0);
  for (const d of draws) c[b.of(d)]++;
  return c;
}

/** Goodness of fit of `draws` to `expected` (keys never expected count as failures). */
function fits(draws: number[], expected: Map<number, number>): { stat: number; critical: number; stray: number } {
  const stray = draws.filter((d) => !expected.has(d)).length;
  const b = bins(expected, draws.length);
  const c = counts(draws, b);
  const rest = b.p.length - 1;
  let stat = 0;
  let df = -1;
  for (let i = 0; i < b.p.length; i++) {
    const e = b.p[i]! * draws.length;
    if (i === rest && e < 5) {
      // Too rare for the statistic: bounded on its own.
      expect(c[i]).toBeLessThanOrEqual(binomialUpperQuantile(draws.length, Math.max(b.p[i]!, 1e-9), ALPHA));
      continue;
    }
    stat += (c[i]! - e) ** 2 / e;
    df++;
  }
  return { stat, critical: df > 0 ? chiSquareCritical(df) : Infinity, stray };
}

/** Homogeneity of two samples of the same size over the bins of `expected`. */
function homogeneous(a: number[], b: number[], expected: Map<number, number>): { stat: number; critical: number } {
  const bn = bins(expected, a.length);
  const ca = counts(a, bn);
  const cb = counts(b, bn);
  let stat = 0;
  let df = -1;
  for (let i = 0; i < ca.length; i++) {
    const sum = ca[i]! + cb[i]!;
    if (sum === 0) continue;
    stat += (ca[i]! - cb[i]!) ** 2 / sum;
    df++;
  }
  return { stat, critical: df > 0 ? chiSquareCritical(df) : Infinity };
}

/** For the ties shape: a token stands for its value class (which equal token a chain keeps is its own order). */
function byValue(row: Float32Array, draws: number[]): number[] {
  return draws.map((d) => Math.round(row[d]! * 1000));
}
function classDistribution(row: Float32Array, dist: Map<number, number>): Map<number, number> {
  const out = new Map<number, number>();
  for (const [t, p] of dist) {
    const key = Math.round(row[t]! * 1000);
    out.set(key, (out.get(key) ?? 0) + p);
  }
  return out;
}

function drawMany(row: Float32Array, t: Truncation, seed: number, expSum: ExpSum): number[] {
  const rng = new Mt19937(seed);
  const work = Float32Array.from(row);
  return Array.from({ length: DRAWS }, () => drawPosition(work, VOCAB, t, rng, expSum));
}

function referenceMany(row: Float32Array, t: Truncation, seed: number): number[] {
  const chain = new ReferenceChain(VOCAB, { ...t, seed });
  try {
    return Array.from({ length: DRAWS }, () => chain.draw(row));
  } finally {
    chain.free();
  }
}

const llama = loadLlama();
const vectorExp = llama.cpu ? openVectorExpSum(llama.cpu.library, llama.location.dir) : undefined;
const fast: ExpSum = vectorExp ?? jsExpSum;

describe("the sampled draw", () => {
  test("mt19937 is the standard generator (seed 5489: first output and the 10000th)", () => {
    const rng = new Mt19937(5489);
    expect(rng.nextU32()).toBe(3499211612);
    for (let i = 2; i < 10000; i++) rng.nextU32();
    expect(rng.nextU32()).toBe(4123659995);
  });

  test("the CPU backend exports ggml's vectorized exp here (else sampling falls back to JavaScript)", () => {
    if (process.platform === "win32") return;
    expect(vectorExp).toBeDefined();
    const x = Float32Array.from({ length: 1000 }, (_, i) => Math.sin(i) * 20);
    const y = new Float32Array(1000);
    const sum = vectorExp!(1000, y, x, 20);
    let exact = 0;
    for (let i = 0; i < 1000; i++) {
      const e = Math.exp(x[i]! - 20);
      exact += e;
      expect(Math.abs(y[i]! - e)).toBeLessThanOrEqual(4e-6 * e);
    }
    expect(Math.abs(sum - exact)).toBeLessThanOrEqual(1e-6 * exact);
  });

  for (const [shape, make] of Object.entries(SHAPES)) {
    for (const [setting, t] of Object.entries(SETTINGS)) {
      test(`${shape}, ${setting}: the distribution is the exact one, and the reference chain's`, () => {
        const row = make();
        const exact = exactDistribution(row, t);
        const seed = 1000 + Object.keys(SETTINGS).indexOf(setting);
        const mine = drawMany(row, t, seed, fast);
        const theirs = referenceMany(row, t, seed);
        const tied = shape === "ties";
        const target = tied ? classDistribution(row, exact) : exact;
        const a = tied ? byValue(row, mine) : mine;
        const b = tied ? byValue(row, theirs) : theirs;
        for (const sample of [a, b]) {
          const fit = fits(sample, target);
          expect(fit.stray).toBe(0);
          expect(fit.stat).toBeLessThan(fit.critical);
        }
        const same = homogeneous(a, b, target);
        expect(same.stat).toBeLessThan(same.critical);
        if (!tied && shape !== "flat") {
          // Draw for draw: the same stream, the same candidates in the same order.
          const differing = mine.filter((token, i) => token !== theirs[i]).length;
          expect(differing).toBeLessThanOrEqual(DRAWS / 1000);
        }
      });
    }
  }

  test("a 150k vocabulary with a long tail: the old chain's tokens, draw for draw (its float normaliser kept)", () => {
    // A nucleus of thousands of tokens, where llama.cpp's float sum of the
    // softmax (1e-5 to 1e-4 below the exact one) moves where top-p ends.
    const n = 150_000;
    const rand = uniform(21);
    const row = Float32Array.from({ length: n }, () => 3 * gaussian(rand));
    for (let t = 0; t < 40; t++) row[Math.floor(rand() * n)] = 9 + 3 * rand();
    for (const t of [
      { temperature: 1, topK: 0, topP: 0.95, minP: 0 },
      { temperature: 0.8, topK: 0, topP: 0.9, minP: 0.01 },
    ]) {
      const rng = new Mt19937(77);
      const chain = new ReferenceChain(n, { ...t, seed: 77 });
      const work = Float32Array.from(row);
      let differing = 0;
      try {
        for (let i = 0; i < 150; i++) if (drawPosition(work, n, t, rng, fast) !== chain.draw(row)) differing++;
      } finally {
        chain.free();
      }
      expect(differing).toBeLessThanOrEqual(1);
    }
  });

  test("the JavaScript fallback draws the same tokens as the vectorized exp", () => {
    for (const shape of ["peaked", "long tail"]) {
      const row = SHAPES[shape]!();
      for (const t of Object.values(SETTINGS)) {
        const a = drawMany(row, t, 7, fast).slice(0, 1000);
        const b = drawMany(row, t, 7, jsExpSum).slice(0, 1000);
        expect(a.filter((token, i) => token !== b[i]).length).toBeLessThanOrEqual(1);
      }
    }
  });

  test("nothing drawable: every token at -inf gives -1 and takes no draw", () => {
    const row = new Float32Array(VOCAB).fill(-Infinity);
    for (const t of Object.values(SETTINGS)) expect(drawPosition(row, VOCAB, t, new Mt19937(1), fast)).toBe(-1);
  });

  test("logit bias and penalties in place, then taken back: the reference chain's tokens, draw for draw", () => {
    const base = SHAPES["long tail"]!();
    const spec: SamplingSpec = {
      temperature: 0.9,
      topK: 0,
      topP: 0.9,
      minP: 0,
      seed: 4242,
      repeatPenalty: 1.3,
      presencePenalty: 0.4,
      frequencyPenalty: 0.2,
      logitBias: { 5: 4.5, 77: -2, 301: 6 },
    };
    const banned = [9];
    const tail = [5, 5, 77, 301, 12, 12, 12];
    const adjust = new RowAdjustments(spec, banned, tail, () => false);
    const reference = new ReferenceChain(VOCAB, {
      ...spec,
      bias: new Map([
        [5, 4.5],
        [77, -2],
        [301, 6],
        [9, -Infinity],
      ]),
    });
    for (const t of tail) reference.accept(t);
    const rng = new Mt19937(4242);
    const row = Float32Array.from(base);
    const mine: number[] = [];
    const theirs: number[] = [];
    try {
      for (let i = 0; i < 400; i++) {
        adjust.apply(row);
        const token = drawPosition(row, VOCAB, spec, rng, fast);
        adjust.restore(row);
        adjust.accept(token);
        mine.push(token);
        theirs.push(reference.draw(row));
      }
    } finally {
      reference.free();
    }
    expect(Array.from(row)).toEqual(Array.from(base));
    expect(mine).not.toContain(9);
    expect(mine.filter((token, i) => token !== theirs[i]).length).toBeLessThanOrEqual(1);
  });

  test("logprobs: the normaliser and the top tokens of the biased row, vectorized or not", () => {
    const row = SHAPES.peaked!();
    const bias = { 900: 3, 17: -Infinity, 5: 2 };
    const biased = (t: number) => row[t]! + ((bias as Record<number, number>)[t] ?? 0);
    let max = -Infinity;
    for (let t = 0; t < VOCAB; t++) max = Math.max(max, biased(t));
    let sum = 0;
    for (let t = 0; t < VOCAB; t++) sum += Math.exp(biased(t) - max);
    const logZ = max + Math.log(sum);
    const order = [...row.keys()].sort((a, b) => biased(b) - biased(a) || a - b).slice(0, 5);
    for (const expSum of [fast, jsExpSum]) {
      const got = positionLogprobs(row, 2048, 5, bias, expSum);
      expect(got.logprob).toBeCloseTo(biased(2048) - logZ, 5);
      expect(got.top.map(([t]) => t)).toEqual(order);
      got.top.forEach(([t, lp]) => expect(lp).toBeCloseTo(biased(t) - logZ, 5));
    }
  });
});
