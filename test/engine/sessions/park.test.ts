// Parking (src/engine/park.ts, GenerateJob.park / resume): a finishing lane's
// KV sealed to a file; a fresh engine on the same model restores it instead
// of prefilling and generates what a cold run would. A history that differs
// (by token digest), a damaged file or another model's artifact resumes cold,
// never wrong. And the park directory's budget sweep (src/session-log/park-budget.ts).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Engine, FinishEvent, GenerateJob } from "../../../src/engine/engine.ts";
import { modelIdentity, openPark } from "../../../src/engine/park.ts";
import { GREEDY } from "../../../src/engine/sampling.ts";
import { sweepParkDir } from "../../../src/session-log/park-budget.ts";
import { useTinyEngines } from "../../support/engines.ts";

const tiny = useTinyEngines({ lanes: 2, cellsPerSequence: 1024, threads: 1, prefillBudget: 256 });

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "sf-park-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Outcome {
  tokens: number[];
  admitted: { cachedTokens: number; resumedTokens?: number };
  finish: FinishEvent;
}

let nextId = 0;
function generate(e: Engine, prompt: number[], maxTokens: number, extra: Partial<GenerateJob> = {}): Outcome {
  const job: GenerateJob = { id: `k${nextId++}`, prompt, sampling: GREEDY, maxTokens, ignoreEos: true, ...extra };
  e.submit(job);
  const tokens: number[] = [];
  let admitted: Outcome["admitted"] | undefined;
  let finish: FinishEvent | undefined;
  for (let ticks = 0; e.hasWork(); ticks++) {
    if (ticks > 100_000) throw new Error("the engine did not finish");
    const ev = e.tick();
    for (const a of ev.admitted) if (a.id === job.id) admitted = a;
    for (const [id, t] of ev.tokens) if (id === job.id) tokens.push(t);
    for (const f of ev.finished) if (f.id === job.id) finish = f;
  }
  return { tokens, admitted: admitted!, finish: finish! };
}

const text = (seed: string, words: number) =>
  Array.from({ length: words }, (_, i) => `${seed}${(i * 7919) % 101}`).join(" ");
const promptOf = (seed: string, words: number) =>
  tiny.model.tokenize(text(seed, words), { addSpecial: true, parseSpecial: true });

/** Parks a first generation of `prompt` and returns the stream a follow-up would send, and the artifact. */
function parkFirst(e: Engine, prompt: number[], path: string) {
  const first = generate(e, prompt, 16, { park: path });
  const extra = tiny.model.tokenize(" and then some more words", {});
  return { first, follow: [...prompt, ...first.tokens, ...extra] };
}

describe("parking", () => {
  test("a finished job seals its KV (prompt and the decoded reply) to a private file", () => {
    const e = tiny.engine();
    const path = join(dir, "park", "a.park");
    const prompt = promptOf("alpha", 80);
    const { first } = parkFirst(e, prompt, path);
    // Stopped by length: the last token sampled was never decoded.
    expect(first.finish.parked).toEqual({ tokens: prompt.length + 15, bytes: statSync(path).size });
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, "park")).mode & 0o777).toBe(0o700);
    expect(existsSync(`${path}.tmp`)).toBe(false);
    expect(e.snapshot().parks).toBe(1);
    // No park path: nothing sealed.
    expect(generate(e, prompt, 4).finish.parked).toBeUndefined();
  });

  test("a fresh engine resumes from the artifact and generates what a cold run does", () => {
    const path = join(dir, "b.park");
    const { first, follow } = parkFirst(tiny.engine(), promptOf("bravo", 90), path);
    const cold = generate(tiny.engine(), follow, 24);
    expect(cold.admitted.cachedTokens).toBe(0);
    const warm = tiny.engine();
    const resumed = generate(warm, follow, 24, { resume: path, park: path });
    expect(resumed.admitted).toMatchObject({
      cachedTokens: first.finish.parked!.tokens,
      resumedTokens: first.finish.parked!.tokens,
    });
    expect(resumed.finish).toMatchObject({
      cachedTokens: first.finish.parked!.tokens,
      resumedTokens: first.finish.parked!.tokens,
    });
    expect(resumed.tokens).toEqual(cold.tokens);
    expect(warm.snapshot()).toMatchObject({
      parkResumes: 1,
      parks: 1,
      prefilledTokens: follow.length - first.finish.parked!.tokens,
    });
    // Re-sealed at its finish: now it covers the longer stream.
    expect(resumed.finish.parked!.tokens).toBe(follow.length + 23);
  });

  test("a prompt the artifact covers whole still prefills its last token", () => {
    const path = join(dir, "c.park");
    const prompt = promptOf("charlie", 60);
    const { first } = parkFirst(tiny.engine(), prompt, path);
    const covered = [...prompt, ...first.tokens.slice(0, 15)];
    expect(covered.length).toBe(first.finish.parked!.tokens);
    const resumed = generate(tiny.engine(), covered, 8, { resume: path });
    expect(resumed.admitted.cachedTokens).toBe(covered.length - 1);
    expect(resumed.tokens).toEqual(generate(tiny.engine(), covered, 8).tokens);
  });

  test("a rewritten history (one token changed) resumes cold and correct", () => {
    const path = join(dir, "d.park");
    const { follow } = parkFirst(tiny.engine(), promptOf("delta", 70), path);
    const rewritten = follow.slice();
    rewritten[10] = rewritten[10] === 100 ? 101 : 100;
    const e = tiny.engine();
    const r = generate(e, rewritten, 16, { resume: path });
    expect(r.admitted.cachedTokens).toBe(0);
    expect(r.admitted.resumedTokens).toBeUndefined();
    expect(r.tokens).toEqual(generate(tiny.engine(), rewritten, 16).tokens);
    expect(e.snapshot().parkResumes).toBe(0);
    // A stale artifact is not damaged: it stays.
    expect(existsSync(path)).toBe(true);
  });

  test("a truncated or corrupted file is ignored (and removed); a missing one is cold", () => {
    const prompt = promptOf("echo", 70);
    for (const damage of ["truncate", "flip"] as const) {
      const path = join(dir, `e-${damage}.park`);
      const { follow } = parkFirst(tiny.engine(), prompt, path);
      const bytes = readFileSync(path);
      if (damage === "truncate") writeFileSync(path, bytes.subarray(0, bytes.length - 100));
      else {
        bytes[bytes.length - 500]! ^= 0xff;
        writeFileSync(path, bytes);
      }
      const r = generate(tiny.engine(), follow, 8, { resume: path });
      expect(r.admitted.cachedTokens).toBe(0);
      expect(r.tokens).toEqual(generate(tiny.engine(), follow, 8).tokens);
      expect(existsSync(path)).toBe(false);
    }
    expect(generate(tiny.engine(), prompt, 4, { resume: join(dir, "none.park") }).admitted.cachedTokens).toBe(0);
  });

  test("another model's artifact, or one no better than the prefix cache, is not used", () => {
    const path = join(dir, "f.park");
    const e = tiny.engine();
    const { first, follow } = parkFirst(e, promptOf("foxtrot", 70), path);
    expect(openPark(path, modelIdentity(tiny.model), follow, 0).ok).toBe(true);
    expect(openPark(path, modelIdentity(tiny.model).replace('"layers"', '"other"'), follow, 0)).toEqual({
      ok: false,
      why: "stale",
    });
    // The engine that parked still has the same tokens in its prefix cache: it uses those.
    const again = generate(e, follow, 8, { resume: path });
    expect(again.admitted.cachedTokens).toBe(first.finish.parked!.tokens);
    expect(again.admitted.resumedTokens).toBeUndefined();
  });

  test("a shared pool: a lane that copied its prefix from the cache parks its whole KV", () => {
    const shared = { cellsPerSequence: 0, sharedCells: 2048 };
    const e = tiny.engine(shared);
    const base = promptOf("golf", 60);
    generate(e, base, 4);
    const prompt = [...base, ...tiny.model.tokenize(" golf continues here with more", {})];
    const path = join(dir, "g.park");
    const { first, follow } = parkFirst(e, prompt, path);
    expect(first.admitted.cachedTokens).toBeGreaterThan(0);
    const warm = tiny.engine(shared);
    const resumed = generate(warm, follow, 16, { resume: path });
    expect(resumed.admitted.resumedTokens).toBe(first.finish.parked!.tokens);
    expect(resumed.tokens).toEqual(generate(tiny.engine(shared), follow, 16).tokens);
    // The restored cells are counted like prefilled ones (the finished lane's sequence is a cache entry now).
    expect(warm.snapshot().cellsUsed).toBe(follow.length + 15);
  });
});

describe("park budget sweep", () => {
  test("removes the oldest files until the rest fit; 0 removes nothing; a young .tmp stays", () => {
    const d = join(dir, "sweep");
    mkdirSync(d);
    const now = Date.now();
    const put = (name: string, size: number, ageSec: number) => {
      writeFileSync(join(d, name), Buffer.alloc(size));
      utimesSync(join(d, name), (now - ageSec * 1000) / 1000, (now - ageSec * 1000) / 1000);
    };
    put("old.park", 400, 300);
    put("mid.park", 300, 200);
    put("new.park", 200, 100);
    put("writing.park.tmp", 500, 5);
    expect(sweepParkDir(d, 0, now)).toEqual({ removed: 0, bytes: 0 });
    expect(sweepParkDir(d, 900, now)).toEqual({ removed: 2, bytes: 700 });
    expect(existsSync(join(d, "old.park")) || existsSync(join(d, "mid.park"))).toBe(false);
    expect(existsSync(join(d, "new.park")) && existsSync(join(d, "writing.park.tmp"))).toBe(true);
    expect(sweepParkDir(d, 900, now)).toEqual({ removed: 0, bytes: 0 });
    expect(sweepParkDir(join(dir, "absent"), 1, now)).toEqual({ removed: 0, bytes: 0 });
  });
});
