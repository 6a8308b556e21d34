// A context's compute threads sleep once the worker runs out of work
// (LlamaContext.pauseThreads, called by the worker's loop when idle): without
// it ggml's threads poll for the next decode for 1024 x 128 x 50 rounds, a
// full core for ~125 ms after every burst, taken from whatever runs next.
// Measured in a child process, whose only compute threads are this context's.
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { fixturePath } from "../support/models.ts";

const root = new URL("../..", import.meta.url).pathname;

const CHILD = (modelPath: string) => `
import { readdirSync, readFileSync } from "node:fs";
import { LlamaContext } from "${root}src/engine/context.ts";
import { LlamaModel } from "${root}src/engine/model.ts";
import { threadpoolApi } from "${root}ffi/threadpool.ts";
const model = LlamaModel.load(${JSON.stringify(modelPath)});
const tids = () => readdirSync("/proc/self/task").map(Number);
const existing = new Set(tids());
const ctx = new LlamaContext(model, { sequences: 1, cellsPerSequence: 256, batchSize: 64, microBatchSize: 64, threads: 2 });
for (let i = 0; i < 8; i++) { ctx.stage(0, 1 + i, i, 0, true); ctx.decode(1); }
// The pool's threads: those that appeared with the context and its first decodes (not Bun's own).
const pool = tids().filter((t) => !existing.has(t));
const helpers = () => pool.filter((t) => tids().includes(t));
const state = (tid) => {
  const stat = readFileSync("/proc/self/task/" + tid + "/stat", "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
};
const cpuNs = (tid) => Number(readFileSync("/proc/self/task/" + tid + "/schedstat", "utf8").split(" ")[0]);
const before = new Map(helpers().map((t) => [t, cpuNs(t)]));
ctx.pauseThreads();
// Wait for the event: every thread but this one asleep, twice in a row (a hang guard, not a bound).
let asleep = 0;
for (let i = 0; i < 2000 && asleep < 2; i++) {
  asleep = helpers().every((t) => state(t) !== "R") ? asleep + 1 : 0;
  await Bun.sleep(5);
}
const spentMs = helpers().reduce((s, t) => s + (cpuNs(t) - (before.get(t) ?? cpuNs(t))) / 1e6, 0);
// The next decode wakes the pool by itself.
ctx.stage(0, 42, 8, 0, true); ctx.decode(1);
const row = ctx.logits(0);
console.log(JSON.stringify({ canPause: threadpoolApi(model.llama).canPause, poolThreads: pool.length, asleep: asleep >= 2, spentMs, decodedAfter: row.length > 0 }));
ctx.free(); model.free();
`;

describe.skipIf(process.platform !== "linux" || !existsSync("/proc/self/task"))("idle compute threads", () => {
  test("after pauseThreads the pool's threads sleep without polling on, and the next decode wakes them", async () => {
    const script = CHILD(await fixturePath("tiny-random"));
    const child = Bun.spawn([process.execPath, "-e", script], {
      env: { ...process.env },
      stdout: "pipe",
      stderr: "pipe",
    });
    const [out, err, code] = await Promise.all([
      new Response(child.stdout).text(),
      new Response(child.stderr).text(),
      child.exited,
    ]);
    expect(code, err).toBe(0);
    const r = JSON.parse(out.trim().split("\n").at(-1)!);
    // A library whose CPU backend does not export ggml_threadpool_pause (and an OpenMP build, which has no pool
    // threads) has nothing to check.
    if (!r.canPause || r.poolThreads === 0) return;
    expect(r.asleep).toBe(true);
    expect(r.decodedAfter).toBe(true);
    // Polling on would spend ~125 ms of CPU here; a pool put to sleep spends next to none.
    expect(r.spentMs).toBeLessThan(20);
  });
});
