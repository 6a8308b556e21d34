// The executor in-process: determinism, batching, chunked prefill, cancel,
// prefix reuse. One model and one engine for the whole file.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Engine, type GenerateJob, type TickEvents } from "../../src/engine/engine.ts";
import { LlamaModel } from "../../src/engine/model.ts";
import { GREEDY, type SamplingSpec } from "../../src/engine/sampling.ts";
import { expectGreedyReply } from "../support/greedy-check.ts";
import { fixturePath } from "../support/models.ts";

let model: LlamaModel;
let engine: Engine;
const PREFILL_BUDGET = 64;

beforeAll(async () => {
  model = LlamaModel.load(await fixturePath("tiny-random"));
  engine = new Engine(model, { lanes: 8, cellsPerSequence: 1024, threads: 2, prefillBudget: PREFILL_BUDGET });
});
afterAll(() => {
  engine.close();
  model.free();
});

let nextId = 0;
function job(prompt: number[], over: Partial<GenerateJob> = {}): GenerateJob {
  return { id: `j${nextId++}`, prompt, sampling: GREEDY, maxTokens: 24, ignoreEos: true, ...over };
}

/** Runs jobs to completion; returns tokens per job id and every tick's events. */
function runAll(jobs: GenerateJob[]): { out: Map<string, number[]>; ticks: TickEvents[] } {
  for (const j of jobs) engine.submit(j);
  const out = new Map<string, number[]>(jobs.map((j) => [j.id, []]));
  const ticks: TickEvents[] = [];
  while (engine.hasWork()) {
    const events = engine.tick();
    ticks.push(events);
    for (const [id, t] of events.tokens) {
      if (!out.has(id)) out.set(id, []); // a job submitted before this call
      out.get(id)!.push(t);
    }
  }
  return { out, ticks };
}

function prompt(text: string): number[] {
  return model.tokenize(text, { addSpecial: true, parseSpecial: true });
}

/** Tokens of a continuation (no BOS). */
function more(text: string): number[] {
  return model.tokenize(text, { parseSpecial: true });
}

/** Evicts every cached prefix so the next run prefills cold. */
function coldPrompt(text: string): number[] {
  return prompt(`${text} ${nextId++}`);
}

describe("engine", () => {
  test("greedy generation is deterministic", () => {
    const p = coldPrompt("<|im_start|>user\nhello there<|im_end|>\n<|im_start|>assistant\n");
    const a = runAll([job(p)])
      .out.values()
      .next().value!;
    const b = runAll([job(p)])
      .out.values()
      .next().value!;
    expect(a.length).toBe(24);
    expect(b).toEqual(a);
  });

  test("a seeded sampled generation is reproducible, another seed differs", () => {
    const p = coldPrompt("the weather today is");
    const sampled = (seed: number): SamplingSpec => ({ ...GREEDY, temperature: 1.0, topK: 0, topP: 1, seed });
    const a = [...runAll([job(p, { sampling: sampled(42), maxTokens: 32 })]).out.values()][0]!;
    const b = [...runAll([job(p, { sampling: sampled(42), maxTokens: 32 })]).out.values()][0]!;
    const c = [...runAll([job(p, { sampling: sampled(7), maxTokens: 32 })]).out.values()][0]!;
    expect(b).toEqual(a);
    expect(c).not.toEqual(a);
  });

  test("8 concurrent prompts each get their greedy continuation, as alone", () => {
    const prompts = Array.from({ length: 8 }, (_, i) =>
      coldPrompt(`question number ${i}: what is ${i * 7} plus ${i}?`),
    );
    const together = runAll(prompts.map((p) => job(p)));
    expect(Math.max(...together.ticks.map((t) => t.tokens.length))).toBe(8); // really batched
    [...together.out.values()].forEach((tokens, i) => expectGreedyReply(model, prompts[i]!, tokens, 24));
  });

  test("a prompt longer than one prefill chunk decodes correctly while other lanes keep producing", () => {
    const short = coldPrompt("short one");
    const long = coldPrompt(Array.from({ length: 90 }, (_, i) => `word${i}`).join(" "));
    expect(long.length).toBeGreaterThan(PREFILL_BUDGET * 3);
    // Start the short lane first so it is decoding when the long prompt arrives.
    const a = job(short, { maxTokens: 40 });
    engine.submit(a);
    engine.tick();
    const b = job(long);
    const { out, ticks } = runAll([b]);
    const prefillTicks = ticks.filter(
      (t) => !t.tokens.some(([id]) => id === b.id) && !t.finished.some((f) => f.id === b.id),
    );
    expect(prefillTicks.length).toBeGreaterThanOrEqual(3);
    // Every tick spent prefilling the long prompt still gave the short lane a token.
    for (const t of prefillTicks) expect(t.tokens.some(([id]) => id === a.id)).toBe(true);
    expectGreedyReply(model, long, out.get(b.id)!, 24);
  });

  test("cancel frees the lane at the next tick", () => {
    const j = job(coldPrompt("go on forever"), { maxTokens: 100000 });
    engine.submit(j);
    for (let i = 0; i < 3; i++) engine.tick();
    expect(engine.activeLanes).toBe(1);
    engine.cancel(j.id);
    const events = engine.tick();
    expect(events.finished).toEqual([expect.objectContaining({ id: j.id, reason: "cancelled", completionTokens: 3 })]);
    expect(engine.activeLanes).toBe(0);
    expect(engine.hasWork()).toBe(false);
  });

  test("a prompt that shares a prefix reuses its KV and generates the same tokens", () => {
    const base = coldPrompt("a long shared system prompt about many things, ".repeat(6));
    const first = runAll([job(base)]);
    expect(first.ticks[0]!.admitted[0]!.cachedTokens).toBe(0);
    const again = runAll([job(base)]);
    expect(again.ticks[0]!.admitted[0]!.cachedTokens).toBe(base.length - 1);
    expectGreedyReply(model, base, [...first.out.values()][0]!, 24);
    expectGreedyReply(model, base, [...again.out.values()][0]!, 24);
  });

  test("a request sharing a prefix with a live lane copies its KV", () => {
    const shared = coldPrompt("another shared prefix for lanes, ".repeat(5));
    const first = [...shared, ...more(" alpha")];
    const second = [...shared, ...more(" beta")];
    // `first` takes over the sequence that holds the shared prefix, so `second`
    // can only get it by copying from the live lane.
    const a = job(first, { maxTokens: 30 });
    engine.submit(a);
    engine.tick();
    engine.tick();
    const b = job(second, { maxTokens: 8 });
    const copiesBefore = engine.stats.prefixCopies;
    const { out, ticks } = runAll([b]);
    expect(ticks[0]!.admitted).toEqual([{ id: b.id, cachedTokens: shared.length }]);
    expect(engine.stats.prefixCopies).toBe(copiesBefore + 1);
    expectGreedyReply(model, second, out.get(b.id)!, 8);
  });

  test("without a prefix to reuse, live lanes sit on neighbouring KV buffers (a batch's attention spans every buffer between its lowest and highest sequence)", () => {
    // Use every sequence first, so cached entries are spread over all of them.
    for (let i = 0; i < 12; i++) runAll([job(coldPrompt(`warm-up ${i}`), { maxTokens: 1 })]);
    for (const j of Array.from({ length: 4 }, (_, i) => job(coldPrompt(`lane ${i}`), { maxTokens: 50 })))
      engine.submit(j);
    engine.tick();
    const live = engine.snapshot().liveSequences;
    expect(live.length).toBe(4);
    expect(live.at(-1)! - live[0]!).toBe(3);
    while (engine.hasWork()) engine.tick();
  });

  test("a tick stages its tokens in ascending sequence order (llama.cpp splits out-of-order batches into more steps)", () => {
    // A fresh engine: seven blockers take sequences 0-6, so a long prefix is
    // seated on 7; reused later beside two cold prompts seated below it, the
    // lane admitted first sits highest.
    const fresh = new Engine(model, { lanes: 8, cellsPerSequence: 1024, threads: 2, prefillBudget: PREFILL_BUDGET });
    const run = (jobs: GenerateJob[]) => {
      for (const j of jobs) fresh.submit(j);
      while (fresh.hasWork()) fresh.tick();
    };
    const seqsPerTick: number[][] = [];
    try {
      const blockers = Array.from({ length: 7 }, (_, i) => job(coldPrompt(`blocker ${i}`), { maxTokens: 6 }));
      const parked = coldPrompt("a prefix long enough to be worth reusing later, ".repeat(3));
      blockers.forEach((b) => fresh.submit(b));
      fresh.tick();
      run([job(parked, { maxTokens: 1 })]);
      const stage = fresh.context.stage.bind(fresh.context);
      fresh.context.stage = (i, token, pos, seq, logits) => {
        if (i === 0) seqsPerTick.push([]);
        seqsPerTick.at(-1)!.push(seq);
        stage(i, token, pos, seq, logits);
      };
      run([
        job([...parked, ...more(" again")], { maxTokens: 4 }),
        job(coldPrompt("low one"), { maxTokens: 4 }),
        job(coldPrompt("low two"), { maxTokens: 4 }),
      ]);
    } finally {
      fresh.close();
    }
    const orders = seqsPerTick.filter((t) => new Set(t).size > 1);
    expect(orders.length).toBeGreaterThan(0);
    expect(orders.some((t) => Math.max(...t) >= 7)).toBe(true);
    for (const t of orders) expect(t).toEqual([...t].sort((a, b) => a - b));
  });

  test("a prompt that does not fit the context fails that request only", () => {
    const huge = Array.from({ length: 1100 }, () => 300);
    const { ticks } = runAll([job(huge)]);
    expect(ticks.flatMap((t) => t.finished)).toEqual([expect.objectContaining({ reason: "error" })]);
  });
});

describe("grammar prefilter keys", () => {
  test("a token is keyed by its first ASCII byte, or by the byte after a leading space", async () => {
    const { prefixKeyOf } = await import("../../src/engine/model.ts");
    const key = (s: string) => prefixKeyOf(new TextEncoder().encode(s));
    expect(key("a")).toBe(97);
    expect(key("abc")).toBe(97);
    expect(key(" a")).toBe(128 + 97);
    expect(key(" ")).toBe(32);
    expect(key(" é")).toBe(32); // a space, then a non-ASCII byte: keyed by the space alone
    expect(key("é")).toBe(-1);
    expect(key("")).toBe(-1);
  });
});
