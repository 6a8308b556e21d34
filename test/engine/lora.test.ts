// LoRA adapters in the executor (src/engine/engine.ts setAdapters, docs/api/lora.md):
// the built-in model with the adapter fixture. A set change waits for the
// requests running under the current set, requests submitted after it wait
// behind it, and applying it empties the prefix cache; an adapter left out
// may be freed only once the set without it is applied.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cstr } from "../../ffi/llama.ts";
import { Engine, type GenerateJob, type TickEvents } from "../../src/engine/engine.ts";
import { LlamaModel } from "../../src/engine/model.ts";
import { GREEDY } from "../../src/engine/sampling.ts";
import { LoraAdapters } from "../../src/worker/lora.ts";
import { ensureLoraFixture, LORA_REPLY, SCRIPTED_REPLY } from "../../src/fixtures/index.ts";
import { FIXTURE_DIR, fixturePath } from "../support/models.ts";
import type { Pointer } from "bun:ffi";

let model: LlamaModel;
let engine: Engine;
let adapter: Pointer;

beforeAll(async () => {
  model = LlamaModel.load(await fixturePath("tiny-chat"));
  engine = new Engine(model, { lanes: 2, cellsPerSequence: 512, threads: 1, prefillBudget: 64 });
  adapter = model.llama.api.llama_adapter_lora_init(
    model.handle,
    cstr(await ensureLoraFixture(FIXTURE_DIR)),
  ) as Pointer;
  expect(adapter).toBeTruthy();
});
afterAll(() => {
  engine.close();
  model.free(); // frees the adapter with it
});

// The chat generation prompt with thinking off: it ends in "\n\n", the token the adapter reads.
const prompt = () =>
  model.tokenize(
    "<|im_start|>user\nTell me about the adapters you are running today.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
    { parseSpecial: true },
  );
let nextId = 0;
const job = (over: Partial<GenerateJob> = {}): GenerateJob => ({
  id: `j${nextId++}`,
  prompt: prompt(),
  sampling: GREEDY,
  maxTokens: 16,
  ignoreEos: false,
  ...over,
});
const text = (tokens: number[]) => tokens.map((t) => Buffer.from(model.tokenBytes(t)).toString()).join("");

/** Ticks until idle; tokens and admissions per job, and the tick each job was admitted and finished at. */
function run(): {
  tokens: Map<string, number[]>;
  cached: Map<string, number>;
  admittedAt: Map<string, number>;
  finishedAt: Map<string, number>;
  switchedAt: number[];
} {
  const tokens = new Map<string, number[]>();
  const cached = new Map<string, number>();
  const admittedAt = new Map<string, number>();
  const finishedAt = new Map<string, number>();
  const switchedAt: number[] = [];
  let tick = 0;
  let switches = engine.stats.adapterSwitches;
  const note = (e: TickEvents) => {
    for (const a of e.admitted) {
      cached.set(a.id, a.cachedTokens);
      admittedAt.set(a.id, tick);
    }
    for (const [id, t] of e.tokens) tokens.set(id, [...(tokens.get(id) ?? []), t]);
    for (const f of e.finished) finishedAt.set(f.id, tick);
  };
  while (engine.hasWork()) {
    note(engine.tick());
    if (engine.stats.adapterSwitches !== switches) {
      switches = engine.stats.adapterSwitches;
      switchedAt.push(tick);
    }
    tick++;
  }
  return { tokens, cached, admittedAt, finishedAt, switchedAt };
}

describe("engine adapter sets", () => {
  test("the prompt ends in the token the adapter reads", () => {
    expect(prompt().at(-1)).toBe(model.tokenize("\n\n")[0]!);
  });

  test("no set: the base reply, and a repeat reuses the cached prefix", () => {
    const a = job();
    engine.submit(a);
    const first = run();
    expect(text(first.tokens.get(a.id)!)).toBe(SCRIPTED_REPLY);
    const b = job();
    engine.submit(b);
    expect(run().cached.get(b.id)).toBeGreaterThan(0);
  });

  test("a change waits for the running request, then applies, empties the cache and holds the next request back until then", () => {
    const running = job({ ignoreEos: true, maxTokens: 24 });
    engine.submit(running);
    // Admitted and decoding under no adapter.
    const early: number[] = [];
    const collect = (e: TickEvents) => early.push(...e.tokens.filter(([id]) => id === running.id).map(([, t]) => t));
    while (early.length < 2) collect(engine.tick());
    let applied = false;
    engine.setAdapters([{ handle: adapter, scale: 1 }], () => (applied = true));
    expect(applied).toBe(false);
    const next = job();
    engine.submit(next);
    const r = run();
    expect(applied).toBe(true);
    // The running request finished first, under the set it started with.
    expect(text([...early, ...r.tokens.get(running.id)!]).startsWith(SCRIPTED_REPLY)).toBe(true);
    expect(r.switchedAt).toHaveLength(1);
    expect(r.switchedAt[0]!).toBeGreaterThan(r.finishedAt.get(running.id)!);
    expect(r.admittedAt.get(next.id)!).toBeGreaterThanOrEqual(r.switchedAt[0]!);
    // Under the adapter: its word, and nothing cached from before the change.
    expect(text(r.tokens.get(next.id)!)).toBe(LORA_REPLY);
    expect(r.cached.get(next.id)).toBe(0);
    const again = job();
    engine.submit(again);
    const r2 = run();
    expect(text(r2.tokens.get(again.id)!)).toBe(LORA_REPLY);
    expect(r2.cached.get(again.id)).toBeGreaterThan(0);
  });

  test("the same set again changes nothing (the cache stays); removing it restores the base reply", () => {
    const switches = engine.stats.adapterSwitches;
    let applied = false;
    engine.setAdapters([{ handle: adapter, scale: 1 }], () => (applied = true));
    expect(applied).toBe(true); // idle: applied at once
    expect(engine.stats.adapterSwitches).toBe(switches);
    const warm = job();
    engine.submit(warm);
    expect(run().cached.get(warm.id)).toBeGreaterThan(0);

    engine.setAdapters([]);
    expect(engine.stats.adapterSwitches).toBe(switches + 1);
    const base = job();
    engine.submit(base);
    const r = run();
    expect(text(r.tokens.get(base.id)!)).toBe(SCRIPTED_REPLY);
    expect(r.cached.get(base.id)).toBe(0);
  });
});

// The worker's adapter registry (src/worker/lora.ts) on the same engine: loading a file that
// is already loaded gives a new id without a second copy of its weights in libllama.
describe("worker adapters: one allocation per file", () => {
  let path: string;
  let adapters: LoraAdapters;
  const load = (id: number, scale: number) =>
    adapters.handle({ type: "lora-load", id: `m${id}`, adapter: { id, path, scale } });
  const unload = (id: number) => adapters.handle({ type: "lora-unload", id: `u${id}`, adapter: id });
  const reply = () => {
    const j = job();
    engine.submit(j);
    return text(run().tokens.get(j.id)!);
  };

  beforeAll(async () => {
    path = await ensureLoraFixture(FIXTURE_DIR);
    adapters = new LoraAdapters(model, engine);
  });

  test("the same file loaded twice: two ids, one allocation, applied at the sum of their scales", () => {
    // Below 0.5 the fixture leaves the reply as it is; its own word from 0.5 on (docs/api/lora.md#the-test-adapter).
    load(100, 0.4);
    expect(reply()).toBe(SCRIPTED_REPLY);
    const listed = load(101, 0.4);
    expect(listed.map((a) => a.id)).toEqual([100, 101]);
    expect(adapters.allocations).toBe(1);
    // 0.4 + 0.4: as one copy at 0.8 (llama.cpp keeps one scale per handle, so it is not put in twice at 0.4).
    expect(reply()).toBe(LORA_REPLY);

    unload(100);
    expect(adapters.allocations).toBe(1);
    expect(reply()).toBe(SCRIPTED_REPLY);
    unload(101);
    expect(adapters.allocations).toBe(0);
    expect(adapters.list()).toEqual([]);
    expect(reply()).toBe(SCRIPTED_REPLY);
  });

  test("repeated loads of one file, never unloaded, hold one copy; unloading them all frees it", () => {
    for (let id = 200; id < 264; id++) load(id, 0);
    expect(adapters.list()).toHaveLength(64);
    expect(adapters.allocations).toBe(1);
    for (let id = 200; id < 264; id++) unload(id);
    expect(adapters.allocations).toBe(0);
    expect(reply()).toBe(SCRIPTED_REPLY);
  });

  test("a file that is not an adapter allocates nothing and leaves the set as it was", () => {
    load(300, 0.8);
    expect(() => load(301, 1)).not.toThrow();
    expect(() =>
      adapters.handle({ type: "lora-load", id: "bad", adapter: { id: 302, path: `${path}.missing`, scale: 1 } }),
    ).toThrow(/could not load/);
    expect(adapters.allocations).toBe(1);
    expect(adapters.list().map((a) => a.id)).toEqual([300, 301]);
    expect(reply()).toBe(LORA_REPLY);
    unload(300);
    unload(301);
    expect(adapters.allocations).toBe(0);
  });
});
