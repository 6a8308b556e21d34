// Pinned prompt prefixes (docs/design.md#pinned-prefixes): the pin set's
// arithmetic (union of shared prefixes, budget, expiry, refresh) on its own,
// then what a pin changes in the engine. Each engine scenario runs with the
// host tier off, so a warm prompt can only have been served from the pool,
// and each has a control without the pin that comes back cold. Expiry runs
// on a fake clock: nothing here sleeps or measures time.
import { describe, expect, test } from "bun:test";
import type { Engine, EngineOptions, GenerateJob } from "../../../src/engine/engine.ts";
import { PinSet } from "../../../src/engine/pins.ts";
import { GREEDY } from "../../../src/engine/sampling.ts";
import { WorkerClient } from "../../../src/daemon/worker-client.ts";
import { parseWorkerArgs } from "../../../src/worker/args.ts";
import { useTinyEngines } from "../../support/engines.ts";
import { expectGreedyReply } from "../../support/greedy-check.ts";
import { fixturePath } from "../../support/models.ts";

describe("PinSet", () => {
  /** Distinct token prefixes of all pins: what the union must count. */
  const bruteUnion = (pins: number[][]) =>
    new Set(pins.flatMap((p) => p.map((_, i) => p.slice(0, i + 1).join(",")))).size;

  test("the union counts shared prefixes once", () => {
    const pins = new PinSet({ capacity: 1000, budgetPct: 100, now: () => 0 });
    pins.add([1, 2, 3, 4], 10);
    pins.add([1, 2, 3, 5, 6], 10);
    pins.add([1, 2], 10);
    pins.add([7, 8], 10);
    expect(pins.summary()).toEqual({ count: 4, tokens: 8, budgetTokens: 1000, yielded: 0 });
  });

  test("the union stays exact through random additions and expiries", () => {
    let clock = 0;
    const pins = new PinSet({ capacity: 1e6, budgetPct: 100, now: () => clock });
    let seed = 12345;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const live = new Map<string, { tokens: number[]; expiresAt: number }>();
    for (let step = 0; step < 400; step++) {
      // Small alphabet and lengths, so pins share prefixes, repeat and extend each other.
      const tokens = Array.from({ length: 1 + rand(8) }, () => rand(3));
      const ttl = 1 + rand(50);
      pins.add(tokens, ttl);
      const key = tokens.join(",");
      live.set(key, { tokens, expiresAt: Math.max(live.get(key)?.expiresAt ?? 0, clock + ttl) });
      clock += rand(3);
      for (const [k, p] of live) if (p.expiresAt <= clock) live.delete(k);
      const expected = [...live.values()].map((p) => p.tokens);
      expect(pins.count).toBe(expected.length);
      expect(pins.tokens).toBe(bruteUnion(expected));
    }
  });

  test("a new pin past the budget drops the oldest first; one larger than the budget is not kept", () => {
    const pins = new PinSet({ capacity: 100, budgetPct: 10, now: () => 0 });
    expect(pins.budgetTokens).toBe(10);
    expect(pins.add([1, 1, 1, 1, 1, 1], 10)).toBe(true);
    expect(pins.add([2, 2, 2, 2, 2, 2], 10)).toBe(true); // 12 > 10: the first goes
    expect(pins.summary()).toMatchObject({ count: 1, tokens: 6, yielded: 1 });
    expect(pins.pinnedLength([1, 1, 1, 1, 1, 1, 9])).toBe(0);
    expect(pins.add([2, 2, 2, 2, 3, 3], 10)).toBe(true); // shares 4: the union is 8
    expect(pins.summary()).toMatchObject({ count: 2, tokens: 8, yielded: 1 });
    expect(
      pins.add(
        Array.from({ length: 11 }, () => 5),
        10,
      ),
    ).toBe(false);
    expect(pins.summary()).toMatchObject({ count: 2, tokens: 8, yielded: 2 });
  });

  test("a pin expires at its TTL; pinning the same tokens again refreshes it and makes it the newest", () => {
    let clock = 0;
    const pins = new PinSet({ capacity: 100, budgetPct: 10, now: () => clock });
    const a = [1, 1, 1, 1];
    pins.add(a, 1000);
    clock = 500;
    pins.add([1, 1, 1, 1], 200); // a shorter TTL never shortens it
    expect(pins.count).toBe(1);
    pins.add([2, 2, 2, 2], 1000);
    pins.add([1, 1, 1, 1], 1000); // A is now newer than B: expires at 1500
    pins.add([3, 3, 3], 2000); // 11 > 10: B, the least recently pinned, goes
    expect(pins.pinnedLength([1, 1, 1, 1, 7])).toBe(4);
    expect(pins.pinnedLength([2, 2, 2, 2, 7])).toBe(0);
    clock = 1499;
    expect(pins.count).toBe(2);
    clock = 1500;
    expect(pins.pinnedLength([1, 1, 1, 1, 7])).toBe(0);
    expect(pins.summary()).toEqual({ count: 1, tokens: 3, budgetTokens: 10, yielded: 1 });
    clock = 1 / 0;
    expect(pins.count).toBe(0);
  });

  test("the pinned length is the longest pin that is a prefix, within a maximum", () => {
    const pins = new PinSet({ capacity: 100, budgetPct: 50, now: () => 0 });
    pins.add([1, 2], 10);
    pins.add([1, 2, 3, 4], 10);
    pins.add([1, 2, 3, 9, 9, 9], 10);
    expect(pins.pinnedLength([1, 2, 3, 4, 5])).toBe(4);
    expect(pins.pinnedLength([1, 2, 3, 4, 5], 3)).toBe(2);
    expect(pins.pinnedLength([1, 2, 3])).toBe(2);
    expect(pins.pinnedLength([5, 2, 3, 4])).toBe(0);
  });

  test("a budget of 0% records pins but protects nothing", () => {
    const pins = new PinSet({ capacity: 100, budgetPct: 0, now: () => 0 });
    pins.add([1, 2, 3], 10);
    expect(pins.pinnedLength([1, 2, 3, 4])).toBe(0);
    expect(pins.cutBy([1, 2, 3, 4], 0)).toEqual([]);
    expect(pins.summary()).toEqual({ count: 1, tokens: 3, budgetTokens: 0, yielded: 0 });
  });
});

const tiny = useTinyEngines({ lanes: 2, cellsPerSequence: 512, threads: 1, prefillBudget: 128, hostCacheBytes: 0 });

let nextId = 0;
const job = (prompt: number[], pins?: GenerateJob["pins"], maxTokens = 8): GenerateJob => ({
  id: `p${nextId++}`,
  prompt,
  sampling: GREEDY,
  maxTokens,
  ignoreEos: true,
  ...(pins ? { pins } : {}),
});
const text = (seed: string, words: number) =>
  Array.from({ length: words }, (_, i) => `${seed}${(i * 7919) % 101}`).join(" ");
/** A prompt of exactly `tokens` tokens (BOS first). */
const sized = (seed: string, tokens: number) =>
  tiny.model.tokenize(text(seed, tokens), { addSpecial: true, parseSpecial: true }).slice(0, tokens);
/** `tokens` tokens of text with no BOS, to end a prompt with. */
const tail = (seed: string, tokens: number) =>
  tiny.model.tokenize(text(seed, tokens), { addSpecial: false }).slice(0, tokens);

interface Run {
  out: Map<string, number[]>;
  cached: Map<string, number>;
  finish: Map<string, string>;
}

function run(e: Engine, jobs: GenerateJob[]): Run {
  for (const j of jobs) e.submit(j);
  const r: Run = { out: new Map(jobs.map((j) => [j.id, []])), cached: new Map(), finish: new Map() };
  // A hang guard in ticks, not time: far more than the work needs.
  for (let ticks = 0; e.hasWork(); ticks++) {
    if (ticks > 100_000) throw new Error("the engine did not finish its work");
    const ev = e.tick();
    for (const a of ev.admitted) r.cached.set(a.id, a.cachedTokens);
    for (const [id, t] of ev.tokens) r.out.get(id)?.push(t);
    for (const f of ev.finished) r.finish.set(f.id, f.reason);
  }
  return r;
}

/** Warm tokens and reply of `prompt` run on `e` now. */
function again(e: Engine, prompt: number[], maxTokens = 8): { cached: number; out: number[] } {
  const j = job(prompt, undefined, maxTokens);
  const r = run(e, [j]);
  return { cached: r.cached.get(j.id)!, out: r.out.get(j.id)! };
}

/**
 * Pressure on per-lane buffers: 2 lanes, 4 sequences of 512 cells (2048),
 * high mark 50%, low 25%. Three 400-token prompts run one after another
 * (407 cells each once done): after the third the pool holds 1221 cells,
 * past the high mark, and eviction takes the oldest, A, first.
 */
function pressure(
  opts: Partial<EngineOptions>,
  pins: { a?: GenerateJob["pins"]; b?: GenerateJob["pins"] },
  between?: () => void,
) {
  const e = tiny.engine({ pressureHigh: 0.5, pressureLow: 0.25, ...opts });
  const [a, b, c] = ["pa", "pb", "pc"].map((s) => sized(s, 400)) as [number[], number[], number[]];
  run(e, [job(a, pins.a)]);
  between?.();
  run(e, [job(b, pins.b)]);
  run(e, [job(c)]);
  expect(e.snapshot().pressureEvictions).toBeGreaterThan(0);
  return { e, a, b };
}

describe("pins in the engine", () => {
  test("under pressure eviction a pinned prefix stays in the pool; unpinned, the same scenario evicts it", () => {
    const pinned = pressure({}, { a: [{ length: 300, ttlMs: 60_000 }] });
    // The pinned sequence was cut to its pin, not emptied.
    expect(pinned.e.snapshot().cellsUsed).toBeGreaterThanOrEqual(300);
    const warm = again(pinned.e, pinned.a);
    expect(warm.cached).toBe(300);
    expectGreedyReply(tiny.model, pinned.a, warm.out, 8);
    const s = pinned.e.snapshot();
    expect(s.prefixCache).toMatchObject({ imports: 0, hostEntries: 0 });
    expect(s.pins).toMatchObject({ count: 1, tokens: 300, budgetTokens: 1024, yielded: 0 });

    const control = pressure({}, {});
    expect(again(control.e, control.a).cached).toBeLessThan(16);
  });

  test("a pin past its TTL no longer protects", () => {
    let clock = 0;
    const { e, a } = pressure({ now: () => clock }, { a: [{ length: 300, ttlMs: 1000 }] }, () => (clock = 1000));
    expect(e.snapshot().pins.count).toBe(0);
    expect(again(e, a).cached).toBeLessThan(16);
  });

  test("with a small budget the older pin yields to the newer", () => {
    // 20% of 2048 cells: 409, room for one 300-token pin, not two.
    const { e, a, b } = pressure(
      { pinBudgetPct: 20 },
      { a: [{ length: 300, ttlMs: 60_000 }], b: [{ length: 300, ttlMs: 60_000 }] },
    );
    expect(e.snapshot().pins).toEqual({ count: 1, tokens: 300, budgetTokens: 409, yielded: 1 });
    expect(again(e, b).cached).toBe(300);
    expect(again(e, a).cached).toBeLessThan(16);
  });

  test("a budget of 0% protects nothing but counts the pins", () => {
    const { e, a } = pressure({ pinBudgetPct: 0 }, { a: [{ length: 300, ttlMs: 60_000 }] });
    expect(e.snapshot().pins).toEqual({ count: 1, tokens: 300, budgetTokens: 0, yielded: 0 });
    expect(again(e, a).cached).toBeLessThan(16);
  });

  test("a pin reaches at most the prompt's last token but one; shared prefixes count once", () => {
    const e = tiny.engine();
    const p = sized("clamp", 100);
    run(e, [
      job(p, [
        { length: 40, ttlMs: 1000 },
        { length: 80, ttlMs: 1000 },
        { length: 500, ttlMs: 1000 },
        { length: 0, ttlMs: 1000 },
      ]),
    ]);
    expect(e.snapshot().pins).toMatchObject({ count: 3, tokens: 99 });
  });

  test("a pinned sequence is the last a new prompt overwrites, and yields only when every free one is pinned", () => {
    // One lane, four sequences: the fourth other prompt would overwrite A, the least recently used.
    const setup = (pinA: boolean) => {
      const e = tiny.engine({ lanes: 1 });
      const a = sized("lru-a", 120);
      run(e, [job(a, pinA ? [{ length: 100, ttlMs: 60_000 }] : undefined)]);
      for (let i = 0; i < 4; i++) run(e, [job(sized(`lru${i}`, 120))]);
      return { e, a };
    };
    const pinned = setup(true);
    expect(again(pinned.e, pinned.a).cached).toBe(119);
    const control = setup(false);
    expect(again(control.e, control.a).cached).toBeLessThan(16);

    // Every free sequence pinned: the next new prompt takes the least recently used, whose pin yields.
    const e = tiny.engine({ lanes: 1 });
    const prompts = [0, 1, 2, 3].map((i) => sized(`all${i}`, 120));
    for (const p of prompts) run(e, [job(p, [{ length: 100, ttlMs: 60_000 }])]);
    run(e, [job(sized("all-new", 120))]);
    expect(e.snapshot().pins).toMatchObject({ count: 3, yielded: 1 });
    expect(again(e, prompts[0]!).cached).toBeLessThan(16);
    expect(again(e, prompts[3]!).cached).toBe(119);
  });

  test("a prompt that leaves a pinned prefix part way copies the shared part instead of cutting the pin", () => {
    const setup = (pinA: boolean) => {
      const e = tiny.engine();
      const a = sized("fork-a", 300);
      run(e, [job(a, pinA ? [{ length: 250, ttlMs: 60_000 }] : undefined)]);
      const fork = [...a.slice(0, 200), ...tail("fork-b", 60)];
      const forked = again(e, fork);
      expect(forked.cached).toBe(200);
      return { e, a, fork, forked };
    };
    const pinned = setup(true);
    expectGreedyReply(tiny.model, pinned.fork, pinned.forked.out, 8);
    expect(pinned.e.snapshot().prefixCopies).toBe(1);
    const warm = again(pinned.e, pinned.a);
    expect(warm.cached).toBe(299);
    expectGreedyReply(tiny.model, pinned.a, warm.out, 8);
    // Unpinned, the fork runs in place and cuts A at 200.
    const control = setup(false);
    expect(again(control.e, control.a).cached).toBe(200);
  });

  test("on a shared pool short of cells a pinned prefix yields after everything else, and the reply is unchanged", () => {
    // 1024 cells, 2 lanes: A (407 cells, 300 pinned) sits cached while B's 760-token prompt is prefilled.
    const e = tiny.engine({ sharedCells: 1024 });
    const a = sized("space-a", 400);
    const b = sized("space-b", 760);
    run(e, [job(a, [{ length: 300, ttlMs: 60_000 }])]);
    const j = job(b);
    const r = run(e, [j]);
    expect(r.finish.get(j.id)).toBe("length");
    expectGreedyReply(tiny.model, b, r.out.get(j.id)!, 8);
    const s = e.snapshot();
    // High-mark relief cut A to its pin; only a tick with no room left took the pin.
    expect(s.pressureEvictions).toBeGreaterThan(0);
    expect(s.spaceEvictions).toBeGreaterThan(0);
    expect(s.spacePauses).toBe(0);
    expect(s.pins).toMatchObject({ count: 0, yielded: 1 });
    expect(again(e, a).cached).toBeLessThan(16);
  });
});

describe("pins through the worker", () => {
  test("--pin-budget-pct is parsed within 0-100, default 50", () => {
    expect(parseWorkerArgs(["--model", "m"]).pinBudgetPct).toBe(50);
    expect(parseWorkerArgs(["--model", "m", "--pin-budget-pct", "0"]).pinBudgetPct).toBe(0);
    expect(() => parseWorkerArgs(["--model", "m", "--pin-budget-pct", "101"])).toThrow("0 to 100");
  });

  test("a request's pins reach the worker's engine, under the worker's budget", async () => {
    const path = await fixturePath("tiny-random");
    const worker = await WorkerClient.start({
      model: path,
      maxBatch: 2,
      maxContext: 512,
      threads: 1,
      pinBudgetPct: 25,
    });
    try {
      const prompt = sized("worker", 64);
      for await (const e of worker.generate({
        prompt,
        sampling: GREEDY,
        maxTokens: 4,
        pins: [{ length: 32, ttlMs: 60_000 }],
      })) {
        if (e.type === "finished") expect(e.reason).toBe("length");
      }
      const { snapshot } = await worker.stats();
      // 4 sequences of 512 cells, 25% of them.
      expect(snapshot.pins).toEqual({ count: 1, tokens: 32, budgetTokens: 512, yielded: 0 });
    } finally {
      await worker.close();
    }
  });
});
