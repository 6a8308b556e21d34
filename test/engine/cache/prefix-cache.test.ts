// The prefix cache in the engine: the host tier (state export and import),
// burst coalescing, and the pressure watermarks. Each compares greedy output
// with the same prompt run cold, so a wrong import or copy shows as different
// tokens, not only as a wrong count.
import { describe, expect, test } from "bun:test";
import type { Engine, EngineOptions, GenerateJob, TickEvents } from "../../../src/engine/engine.ts";
import { GREEDY } from "../../../src/engine/sampling.ts";
import { useTinyEngines } from "../../support/engines.ts";
import { expectGreedyReply } from "../../support/greedy-check.ts";

const tiny = useTinyEngines({
  lanes: 1,
  cellsPerSequence: 1024,
  threads: 1,
  prefillBudget: 128,
  hostCacheBytes: 64 * 2 ** 20,
});
const engine = (opts: Partial<EngineOptions> = {}): Engine => tiny.engine(opts);

let nextId = 0;
const job = (prompt: number[], maxTokens = 8): GenerateJob => ({
  id: `c${nextId++}`,
  prompt,
  sampling: GREEDY,
  maxTokens,
  ignoreEos: true,
});

const text = (seed: string, words: number) =>
  Array.from({ length: words }, (_, i) => `${seed}${(i * 7919) % 101}`).join(" ");
const prompt = (s: string) => tiny.model.tokenize(s, { addSpecial: true, parseSpecial: true });
/** A prompt of exactly `tokens` tokens. */
const sized = (seed: string, tokens: number) => prompt(text(seed, tokens)).slice(0, tokens);

interface Run {
  out: Map<string, number[]>;
  cached: Map<string, number>;
  ticks: TickEvents[];
}

function run(e: Engine, jobs: GenerateJob[]): Run {
  for (const j of jobs) e.submit(j);
  const r: Run = { out: new Map(jobs.map((j) => [j.id, []])), cached: new Map(), ticks: [] };
  while (e.hasWork()) {
    const ev = e.tick();
    r.ticks.push(ev);
    for (const a of ev.admitted) r.cached.set(a.id, a.cachedTokens);
    for (const [id, t] of ev.tokens) r.out.get(id)?.push(t);
  }
  return r;
}

describe("host tier", () => {
  test("a prefix pushed out of the pool comes back from host memory, with the same reply", () => {
    const e = engine();
    const a = prompt(text("alpha", 120));
    const first = job(a);
    const reference = run(e, [first]).out.get(first.id)!;
    // One lane, four sequences: the fourth other prompt overwrites A, the least recently used.
    for (let i = 0; i < 4; i++) run(e, [job(prompt(text(`other${i}`, 100)))]);
    const again = job(a);
    const r = run(e, [again]);
    expect(r.cached.get(again.id)).toBe(a.length - 1);
    expect(e.snapshot().prefixCache.imports).toBeGreaterThanOrEqual(1);
    expectGreedyReply(tiny.model, a, r.out.get(again.id)!, 8);
    expectGreedyReply(tiny.model, a, reference, 8);
  });

  test("with the host tier off the same sequence of requests comes back cold", () => {
    const e = engine({ hostCacheBytes: 0 });
    const a = prompt(text("beta", 120));
    run(e, [job(a)]);
    for (let i = 0; i < 4; i++) run(e, [job(prompt(text(`else${i}`, 100)))]);
    const again = job(a);
    expect(run(e, [again]).cached.get(again.id)).toBeLessThan(16);
    expect(e.snapshot().prefixCache).toMatchObject({ imports: 0, spills: 0, hostEntries: 0 });
  });

  test("a prefix that only partly matches is imported and cut to the shared part", () => {
    const e = engine();
    const base = prompt(text("gamma", 150));
    run(e, [job(base)]);
    run(e, [job(prompt(text("delta", 100)))]); // pushes gamma to the host tier
    const branch = [...base.slice(0, 90), ...tiny.model.tokenize(" a different ending", { parseSpecial: true })];
    const j = job(branch);
    const r = run(e, [j]);
    expect(r.cached.get(j.id)).toBe(90);
    expectGreedyReply(tiny.model, branch, r.out.get(j.id)!, 8);
  });

  test("the host tier stays within its byte bound, dropping the least recently used", () => {
    // One lane, four sequences: the fifth prompt is the first to push one out.
    const probe = engine();
    for (let i = 0; i < 5; i++) run(probe, [job(sized(`probe${i}`, 300))]);
    const one = probe.snapshot().prefixCache.hostBytes;
    expect(probe.snapshot().prefixCache.hostEntries).toBe(1);
    const e = engine({ hostCacheBytes: Math.floor(one * 2.5) });
    for (let i = 0; i < 8; i++) run(e, [job(sized(`bound${i}`, 300))]);
    const pc = e.snapshot().prefixCache;
    expect(pc.spills).toBe(4);
    expect(pc.hostEntries).toBe(2);
    expect(pc.hostEvictions).toBe(2);
    expect(pc.hostBytes).toBeLessThanOrEqual(one * 2.5);
  });
});

describe("host tier accounting", () => {
  test("an import llama.cpp refuses drops that entry once and serves the prompt cold", () => {
    const probe = engine();
    for (let i = 0; i < 5; i++) run(probe, [job(sized(`acct${i}`, 300))]);
    const one = probe.snapshot().prefixCache.hostBytes;
    // Room for one and a half exports: spilling the overwritten sequence trims the tier.
    const e = engine({ hostCacheBytes: Math.floor(one * 1.5) });
    const a = sized("acct-a", 300);
    run(e, [job(a)]);
    for (let i = 0; i < 4; i++) run(e, [job(sized(`acct-o${i}`, 300))]); // pushes A out to the host tier
    const importSequence = e.context.importSequence.bind(e.context);
    e.context.importSequence = () => false;
    try {
      const again = job(a);
      const r = run(e, [again]);
      expect(r.cached.get(again.id)).toBeLessThan(16);
      expectGreedyReply(tiny.model, a, r.out.get(again.id)!, 8);
    } finally {
      e.context.importSequence = importSequence;
    }
    const pc = e.snapshot().prefixCache;
    expect(pc.importFailures).toBe(1);
    // The byte count matches the entries held (each about `one` bytes).
    expect(pc.hostEntries).toBeGreaterThan(0);
    expect(pc.hostBytes).toBeGreaterThanOrEqual(pc.hostEntries * one * 0.9);
    expect(pc.hostBytes).toBeLessThanOrEqual(pc.hostEntries * one * 1.1);
  });
});

describe("burst coalescing", () => {
  test("requests sharing a long prefix wait for one prefill of it and copy it", () => {
    const e = engine({ lanes: 4, coalesceMin: 64 });
    const shared = prompt(text("shared", 160));
    const jobs = Array.from({ length: 4 }, (_, i) =>
      job([...shared, ...tiny.model.tokenize(` question ${i}?`, { parseSpecial: true })]),
    );
    const prefilledBefore = e.stats.prefilledTokens;
    const r = run(e, jobs);
    const warm = jobs.filter((j) => r.cached.get(j.id)! >= shared.length);
    expect(warm.length).toBe(3);
    const suffixes = jobs.reduce((n, j) => n + j.prompt.length - shared.length, 0);
    expect(e.stats.prefilledTokens - prefilledBefore).toBeLessThanOrEqual(shared.length + suffixes);
    expect(e.stats.coalesced).toBe(3);
    for (const j of jobs) expectGreedyReply(tiny.model, j.prompt, r.out.get(j.id)!, 8);
  });

  test("below the threshold nobody waits", () => {
    const e = engine({ lanes: 4, coalesceMin: 1024 });
    const shared = prompt(text("short", 60));
    const jobs = Array.from({ length: 4 }, (_, i) =>
      job([...shared, ...tiny.model.tokenize(` q${i}`, { parseSpecial: true })]),
    );
    const r = run(e, jobs);
    expect(r.ticks[0]!.admitted.length).toBe(4);
    expect(e.stats.coalesced).toBe(0);
  });
});

describe("pressure watermarks", () => {
  test("past the high mark cached prefixes leave the pool for the host tier, oldest first, down to the low mark", () => {
    const e = engine({ lanes: 2, cellsPerSequence: 512, pressureHigh: 0.5, pressureLow: 0.25 });
    const total = e.snapshot().sequences * e.snapshot().cellsPerSequence;
    const prompts = [0, 1, 2].map((i) => sized(`press${i}`, 400));
    const references = prompts.map((p) => run(e, [job(p)]).out);
    const snap = e.snapshot();
    expect(snap.pressureEvictions).toBeGreaterThan(0);
    expect(snap.cellsUsed).toBeLessThanOrEqual(0.25 * total);
    expect(snap.cellsUsed).toBeGreaterThan(0); // the newest stays in the pool
    expect(snap.prefixCache.hostEntries).toBeGreaterThan(0);
    // The first (oldest) prompt was evicted and still comes back warm.
    const again = job(prompts[0]!);
    const r = run(e, [again]);
    expect(r.cached.get(again.id)).toBe(prompts[0]!.length - 1);
    expect(r.out.get(again.id)).toEqual([...references[0]!.values()][0]);
  });
});
