// Speculative decoding (src/engine/speculation.ts, src/engine/draft-model.ts):
// prompt lookup's drafter, the gates, and the engine's verification with
// either drafter: greedy and seeded sampled output the same with drafts as
// without, drafts counted, rejected drafts cut off the KV.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Engine, type GenerateJob } from "../../../src/engine/engine.ts";
import type { SpecTally } from "../../../src/engine/jobs.ts";
import { LlamaModel } from "../../../src/engine/model.ts";
import { GREEDY, type SamplingSpec } from "../../../src/engine/sampling.ts";
import {
  lookupDraft,
  probeDepths,
  RequestYield,
  SPECULATION_DEFAULTS,
  SpeculationGates,
  type SpeculationConfig,
} from "../../../src/engine/speculation.ts";
import { draftIncompatibility, ModelDrafter } from "../../../src/engine/draft-model.ts";
import { fixturePath } from "../../support/models.ts";
import { binomialUpperQuantile } from "../../support/binomial.ts";
import { expectGreedyReply } from "../../support/greedy-check.ts";

const CONFIG: SpeculationConfig = { strategy: "prompt-lookup", ...SPECULATION_DEFAULTS };
/** Drafting on whatever it measures: the engine tests are about exactness, not the gates. */
const ALWAYS: SpeculationConfig = { ...CONFIG, throughputGate: false, minYield: 0 };

let nextId = 0;
/** Runs greedy-or-sampled jobs on one engine to completion: each job's tokens, and its speculation tally. */
function run(
  engine: Engine,
  prompts: number[][],
  sampling: SamplingSpec,
  maxTokens = 48,
  extra: Partial<GenerateJob> = {},
) {
  const jobs: GenerateJob[] = prompts.map((prompt) => ({
    id: `s${nextId++}`,
    prompt,
    sampling,
    maxTokens,
    ignoreEos: true,
    ...extra,
  }));
  for (const j of jobs) engine.submit(j);
  const out = new Map<string, number[]>(jobs.map((j) => [j.id, []]));
  const finished = new Map<string, SpecTally | undefined>();
  while (engine.hasWork()) {
    const events = engine.tick();
    for (const [id, t] of events.tokens) out.get(id)!.push(t);
    for (const f of events.finished) finished.set(f.id, f.spec);
  }
  return { outputs: jobs.map((j) => out.get(j.id)!), specs: jobs.map((j) => finished.get(j.id)) };
}

describe("lookupDraft", () => {
  test("drafts what followed the last earlier occurrence of the final three tokens", () => {
    // context: 1 2 3 4 5 | 9 1 2 3 7 8 | 1 2 (next 3): last earlier "1 2 3" is at 6, followed by 7 8 1 2
    expect(lookupDraft([1, 2, 3, 4, 5, 9, 1, 2, 3, 7, 8, 1, 2], 3, 4)).toEqual([7, 8, 1, 2]);
  });
  test("falls back to the final two tokens, and stops at the depth", () => {
    expect(lookupDraft([5, 6, 1, 2, 8, 9, 4], 2, 3)).toEqual([]);
    expect(lookupDraft([5, 1, 2, 8, 9, 4, 1], 2, 2)).toEqual([8, 9]);
  });
  test("an occurrence reaching the end is continued into the draft (a loop drafts its full depth)", () => {
    expect(lookupDraft([7, 7, 7], 7, 4)).toEqual([7, 7, 7, 7]);
    // period 2: ... 1 2 1 2 | next 1 -> 2 1 2 1
    expect(lookupDraft([5, 1, 2, 1, 2], 1, 4)).toEqual([2, 1, 2, 1]);
  });
  test("nothing recurs: no draft", () => {
    expect(lookupDraft([1, 2, 3, 4], 5, 4)).toEqual([]);
    expect(lookupDraft([], 5, 4)).toEqual([]);
  });
});

describe("gates", () => {
  test("the yield floor judges a request after its rounds; two failing and none passing abandon the strategy", () => {
    const config = { ...CONFIG, yieldRounds: 4, minYield: 1 };
    const gates = new SpeculationGates({ ...config, throughputGate: false });
    const poor = new RequestYield(config);
    for (let i = 0; i < 3; i++) expect(poor.round(4, 0)).toBeUndefined();
    expect(poor.round(4, 1)).toBe("fail");
    expect(poor.stopped).toBe(true);
    gates.judged("fail");
    expect(gates.depth(1)).toBe(4);
    gates.judged("fail");
    expect(gates.abandoned).toBe(true);
    expect(gates.depth(1)).toBe(0);
    const good = new RequestYield(config);
    for (let i = 0; i < 3; i++) good.round(4, 2);
    expect(good.round(4, 2)).toBe("pass");
    expect(good.stopped).toBe(false);
  });

  test("one passing request keeps the strategy however many fail", () => {
    const gates = new SpeculationGates({ ...CONFIG, throughputGate: false });
    gates.judged("pass");
    for (let i = 0; i < 5; i++) gates.judged("fail");
    expect(gates.abandoned).toBe(false);
  });

  test("the throughput gate measures both sides per lane count and turns drafting off where it is slower, measuring again after more requests", () => {
    const gates = new SpeculationGates({ ...CONFIG, adaptive: false, probeTokens: 2, reprobe: 2, reprobeMax: 4 });
    const run = (lanes: number, specRate: number, plainRate: number) => {
      // until a verdict: speculative ticks, then plain ones (tokens per ms as given)
      for (let i = 0; i < 10; i++) {
        const depth = gates.depth(lanes);
        gates.observe(lanes, depth, depth > 0 ? specRate : plainRate, 1);
      }
    };
    run(8, 9, 10); // 0.9x: off at 8 lanes
    expect(gates.depth(8)).toBe(0);
    run(1, 20, 10); // 2x: on at 1 lane
    expect(gates.depth(1)).toBe(4);
    expect(gates.depth(8)).toBe(0);
    // Two requests later, 8 lanes is measured again (a speculative tick first).
    gates.requestStarted();
    gates.requestStarted();
    expect(gates.depth(8)).toBe(4);
  });

  test("adaptive: the probe tries the depth halved down to 1, then plain, and keeps the fastest depth", () => {
    const config = { ...CONFIG, draftTokens: 8, probeTokens: 2 };
    expect(probeDepths(config)).toEqual([8, 4, 2, 1, 0]);
    expect(probeDepths({ ...config, adaptive: false })).toEqual([8, 0]);
    const gates = new SpeculationGates(config);
    const rate: Record<number, number> = { 8: 11, 4: 15, 2: 13, 1: 12, 0: 10 };
    const seen: number[] = [];
    for (let i = 0; i < 12; i++) {
      const depth = gates.depth(1);
      seen.push(depth);
      gates.observe(1, depth, rate[depth]!, 1);
    }
    expect(seen.slice(0, 10)).toEqual([8, 8, 4, 4, 2, 2, 1, 1, 0, 0]);
    expect(gates.depth(1)).toBe(4);
  });

  test("without the throughput gate, drafting stays on at the configured depth", () => {
    const gates = new SpeculationGates({ ...CONFIG, throughputGate: false });
    for (let i = 0; i < 100; i++) gates.observe(8, i % 2 === 0 ? 4 : 0, 1, 100);
    expect(gates.depth(8)).toBe(4);
  });
});

/** Seeds of the seeded-sampling comparison: 48 x 4 prompts x 24 tokens, about 4,000 tokens compared. */
const SEEDS = 48;
/** The rate at which rounding may part a speculating lane's draws from a plain one's, per token. */
const ROUNDING_PARTS = 0.01;

describe("engine with prompt lookup", () => {
  let model: LlamaModel;
  let plain: Engine;
  let spec: Engine;

  beforeAll(async () => {
    model = LlamaModel.load(await fixturePath("tiny-random"));
    plain = new Engine(model, { lanes: 4, cellsPerSequence: 1024, threads: 2, prefillBudget: 256 });
    spec = new Engine(model, { lanes: 4, cellsPerSequence: 1024, threads: 2, prefillBudget: 256, speculation: ALWAYS });
  });
  afterAll(() => {
    plain.close();
    spec.close();
    model.free();
  });

  /** Prompts that repeat a passage, so prompt lookup finds drafts. */
  function repetitive(seed: number): number[] {
    const passage = model.tokenize(
      `story ${seed}: the quick brown fox jumps over the lazy dog near the river bank at dawn`,
      { parseSpecial: false },
    );
    return [
      ...model.tokenize("<|im_start|>user\n", { addSpecial: true, parseSpecial: true }),
      ...passage,
      ...passage,
      ...passage.slice(0, 6),
    ];
  }

  test("greedy: the same tokens as without speculation, with drafts proposed and accepted", () => {
    const prompts = [0, 1, 2, 3, 4, 5].map(repetitive);
    const a = run(plain, prompts, GREEDY);
    const b = run(spec, prompts, GREEDY);
    // Each is the greedy continuation up to rounding: a verified draft's logits come from a wider batch.
    b.outputs.forEach((out, i) => expectGreedyReply(model, prompts[i]!, out, 48));
    const proposed = b.specs.reduce((s, x) => s + (x?.proposed ?? 0), 0);
    const accepted = b.specs.reduce((s, x) => s + (x?.accepted ?? 0), 0);
    expect(proposed).toBeGreaterThan(0);
    expect(accepted).toBeGreaterThan(0);
    expect(spec.snapshot().specProposed).toBeGreaterThanOrEqual(proposed);
    expect(a.specs.every((x) => x === undefined)).toBe(true);
  });

  test("the KV holds only what was accepted: a follow-up prompt reuses the reply's prefix exactly", () => {
    const prompt = repetitive(9);
    const first = run(spec, [prompt], GREEDY, 32).outputs[0]!;
    // The conversation goes on: its prompt is the old one, the reply, and more.
    const follow = [...prompt, ...first, ...prompt.slice(1, 8)];
    expectGreedyReply(model, follow, run(spec, [follow], GREEDY, 24).outputs[0]!, 24);
  });

  test("seeded sampling: the same draws as without speculation, up to rounding, over many seeds", () => {
    // Each token is one draw of the lane's own sampler, in order, so the same seed draws the
    // same tokens from the same logits. A verified draft's logits come from a wider batch,
    // whose rounding llama.cpp does not keep, so a draw near a boundary of the sampler's
    // cumulative distribution (or of top-p / min-p) may go the other way; from there the two
    // histories differ and nothing more is comparable. So each pair of runs is compared up to
    // its first difference, and the differences counted per token compared.
    const prompts = [0, 1, 2, 3].map(repetitive);
    let compared = 0;
    let parted = 0;
    let proposed = 0;
    let accepted = 0;
    for (let seed = 1; seed <= SEEDS; seed++) {
      const sampling: SamplingSpec = { ...GREEDY, temperature: 0.8, topK: 40, topP: 0.95, minP: 0.05, seed };
      const a = run(plain, prompts, sampling, 24).outputs;
      const b = run(spec, prompts, sampling, 24);
      for (const s of b.specs) {
        proposed += s?.proposed ?? 0;
        accepted += s?.accepted ?? 0;
      }
      for (let i = 0; i < prompts.length; i++) {
        const first = a[i]!.findIndex((t, k) => b.outputs[i]![k] !== t);
        compared += first < 0 ? a[i]!.length : first + 1;
        if (first >= 0) parted++;
      }
    }
    // Speculation ran: sampled lanes drafted, and drafts were accepted by the sampler's draws.
    expect(proposed).toBeGreaterThan(0);
    expect(accepted).toBeGreaterThan(0);
    // Rounding parted 0.1-0.25% of compared tokens here (11 of 4,512 on AVX-512's zen4
    // kernels, 9 of 4,534 on AVX2's haswell); ROUNDING_PARTS bounds it four times over. A sampler that took a draft it
    // did not
    // draw parts at most drafted tokens, far above the bound. The allowance is the count
    // Binomial(compared, ROUNDING_PARTS) stays under but once in 1,000 runs.
    expect(parted).toBeLessThanOrEqual(binomialUpperQuantile(compared, ROUNDING_PARTS, 1e-3));
  });

  test("a lane with logprobs, a grammar or logit_bias never drafts", () => {
    const prompts = [0, 1, 2, 3, 4, 5].map(repetitive);
    // Without any of them these requests draft.
    expect(run(spec, prompts, GREEDY, 48).specs.some((x) => x !== undefined)).toBe(true);
    const before = spec.snapshot().specProposed;
    const none = (r: { specs: unknown[] }) => r.specs.every((x) => x === undefined);
    expect(none(run(spec, prompts, { ...GREEDY, logitBias: { 5: 1 } }, 48))).toBe(true);
    expect(none(run(spec, prompts, GREEDY, 48, { logprobs: 2 }))).toBe(true);
    expect(none(run(spec, prompts, GREEDY, 48, { grammar: "root ::= [a-z ]+" }))).toBe(true);
    expect(spec.snapshot().specProposed).toBe(before);
  });
});

describe("engine with a draft model", () => {
  let model: LlamaModel;
  let draft: LlamaModel;
  let plain: Engine;
  let spec: Engine;

  beforeAll(async () => {
    model = LlamaModel.load(await fixturePath("tiny-random"));
    draft = LlamaModel.load(await fixturePath("tiny-random-draft"));
    plain = new Engine(model, { lanes: 4, cellsPerSequence: 1024, threads: 2, prefillBudget: 256 });
    spec = new Engine(model, {
      lanes: 4,
      cellsPerSequence: 1024,
      threads: 2,
      prefillBudget: 256,
      speculation: { ...ALWAYS, strategy: "draft-model" },
      draftModel: draft,
    });
  });
  afterAll(() => {
    plain.close();
    spec.close();
    draft.free();
    model.free();
  });

  test("the draft fixture shares the model's vocabulary; another model's is refused by name", async () => {
    expect(draftIncompatibility(model, draft)).toBeUndefined();
    const other = LlamaModel.load(await fixturePath("tiny-chat"));
    try {
      expect(draftIncompatibility(model, other)).toMatch(/vocabulary has \d+ tokens|token \d+ is a different piece/);
    } finally {
      other.free();
    }
  });

  test("greedy: the same tokens as without speculation, over prompts of different lengths at once, every draft proposed by the draft model", () => {
    const prompts = [
      "tell me a story",
      "what is the capital of France? answer in one word please",
      "a",
      "list three colours and then three animals, then stop",
    ].map((t) =>
      model.tokenize(`<|im_start|>user\n${t}<|im_end|>\n<|im_start|>assistant\n`, {
        addSpecial: true,
        parseSpecial: true,
      }),
    );
    const a = run(plain, prompts, GREEDY, 32);
    const b = run(spec, prompts, GREEDY, 32);
    b.outputs.forEach((out, i) => expectGreedyReply(model, prompts[i]!, out, 32));
    const proposed = b.specs.reduce((s, x) => s + (x?.proposed ?? 0), 0);
    const accepted = b.specs.reduce((s, x) => s + (x?.accepted ?? 0), 0);
    expect(proposed).toBeGreaterThan(0);
    expect(accepted).toBeLessThanOrEqual(proposed);
    // A second turn: the draft sequences are brought level with contexts they only partly hold.
    const follow = prompts.map((p, i) => [...p, ...a.outputs[i]!, ...p.slice(1, 6)]);
    run(spec, follow, GREEDY, 16).outputs.forEach((out, i) => expectGreedyReply(model, follow[i]!, out, 16));
  });
});

describe("the draft model's own KV (ModelDrafter)", () => {
  let draft: LlamaModel;
  beforeAll(async () => {
    draft = LlamaModel.load(await fixturePath("tiny-random-draft"));
  });
  afterAll(() => draft.free());

  const context = (n: number, salt: number) => Array.from({ length: n }, (_, i) => 10 + ((i * 7 + salt) % 1500));

  test("a request the pool has no room for gets no draft; sequences no request names are emptied for the next", () => {
    const drafter = new ModelDrafter(draft, { sequences: 2, cells: 40, threads: 1 });
    try {
      const a = { seq: 0, held: context(30, 1), next: 5, depth: 4 };
      const b = { seq: 1, held: context(30, 2), next: 6, depth: 4 };
      const both = drafter.propose([a, b]);
      expect(both.get(0)).toHaveLength(4);
      expect(both.has(1)).toBe(false); // 31 + 4 more cells beside a's 35 would pass 40
      const alone = drafter.propose([b]); // a's sequence is released
      expect(alone.get(1)).toHaveLength(4);
    } finally {
      drafter.close();
    }
  });

  test("a long new context is levelled one batch a tick and drafts once level; its draft is the draft model's greedy continuation", () => {
    const drafter = new ModelDrafter(draft, { sequences: 1, cells: 4096, threads: 1 });
    try {
      const r = { seq: 0, held: context(700, 3), next: 7, depth: 3 };
      expect(drafter.propose([r]).has(0)).toBe(false); // 512 of 701 tokens this tick
      const first = drafter.propose([r]).get(0);
      expect(first).toHaveLength(3);
      // The same context again: nothing left to level, the same greedy draft.
      expect(drafter.propose([r]).get(0)).toEqual(first!);
    } finally {
      drafter.close();
    }
  });
});
