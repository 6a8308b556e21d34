// KV layout benchmark: the same model and work on per-lane KV buffers and on
// one shared pool (kv-sizing.ts), engines in one process, rounds interleaved
// (every layout once per round, in rotated order) so machine drift hits all
// alike; medians reported.
//
//   bun bench/kv-layout.ts [--model PATH] [--threads 1] [--rounds 5] [--long 16000]
//                          [--layouts lane8k,lane32k,shared-auto,shared32k] [--json out.json]
//
// Per layout: the KV it allocates (bytes, and the process RSS it added), then
//   1. decode: 8 lanes, 40-token prompts, 128 tokens each (aggregate tok/s);
//   2. the same beside a live conversation of --long tokens (layouts whose
//      window holds it), which keeps decoding through every round;
//   3. prefill: 4 prompts of 2000 tokens beside that live conversation
//      (prompt tok/s), the case where a shared pool costs most: every prompt
//      token attends over the cells up to the highest in use.
// Without --model it uses the large-vocabulary fixture (trained window 32768).
import { writeFileSync } from "node:fs";
import { Engine, type EngineOptions, type GenerateJob } from "../src/engine/engine.ts";
import { planKv } from "../src/engine/kv-sizing.ts";
import { freeForKv } from "../src/engine/memory.ts";
import { LlamaModel } from "../src/engine/model.ts";
import { GREEDY } from "../src/engine/sampling.ts";
import { ensureFixture } from "../src/fixtures/index.ts";
import { flag } from "./support.ts";

const modelPath = flag("model") ?? (await ensureFixture("large-vocab"));
const threads = Number(flag("threads", "1"));
const rounds = Number(flag("rounds", "5"));
const longTokens = Number(flag("long", "16000"));
const LANES = 8;
const median = (xs: number[]) => (xs.length === 0 ? NaN : [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!);
const rss = () => process.memoryUsage().rss;

const model = LlamaModel.load(modelPath);
const vocab = model.vocabInfo.size;
const bpt = model.kvBytesPerToken();
const auto = planKv(
  {},
  {
    lanes: LANES,
    trainedContext: model.trainedContext,
    bytesPerToken: bpt,
    free: () => freeForKv(model.llama, model.weightBytes),
  },
);

const LAYOUTS: Record<string, Partial<EngineOptions>> = {
  lane8k: { cellsPerSequence: 8192 },
  lane32k: { cellsPerSequence: model.trainedContext },
  "shared-auto": { cellsPerSequence: 0, sharedCells: auto.poolCells, window: auto.window },
  shared32k: { cellsPerSequence: 0, sharedCells: model.trainedContext, window: model.trainedContext },
};
const names = (flag("layouts") ?? Object.keys(LAYOUTS).join(",")).split(",");

interface Bench {
  name: string;
  engine: Engine;
  kvBytes: number;
  rssBytes: number;
  window: number;
  decode: number[];
  decodeBesideLong: number[];
  prefillBesideLong: number[];
}

const benches: Bench[] = [];
for (const name of names) {
  const before = rss();
  const engine = new Engine(model, {
    lanes: LANES + 1,
    threads,
    prefillBudget: 512,
    cellsPerSequence: 0,
    ...LAYOUTS[name]!,
  });
  const kvBytes = engine.context.poolCells * bpt;
  benches.push({
    name,
    engine,
    kvBytes,
    rssBytes: rss() - before,
    window: engine.window,
    decode: [],
    decodeBesideLong: [],
    prefillBesideLong: [],
  });
  console.error(
    `${name}: ${engine.context.shared ? "shared pool" : "per-lane"} ${engine.context.poolCells} cells, window ${engine.window}, KV ${(kvBytes / 2 ** 20).toFixed(0)} MiB, RSS +${((rss() - before) / 2 ** 20).toFixed(0)} MiB`,
  );
}

let nextId = 0;
const ids = (seed: number, n: number) =>
  Array.from({ length: n }, (_, i) => 100 + ((seed * 7919 + i * 104729) % (vocab - 200)));

/** Runs jobs to the end on one engine (a live conversation, if any, keeps decoding); seconds taken. */
function run(engine: Engine, jobs: GenerateJob[]): number {
  for (const j of jobs) engine.submit(j);
  const open = new Set(jobs.map((j) => j.id));
  const started = performance.now();
  while (open.size > 0) for (const f of engine.tick().finished) open.delete(f.id);
  return (performance.now() - started) / 1000;
}
const job = (prompt: number[], maxTokens: number): GenerateJob => ({
  id: `b${nextId++}`,
  prompt,
  sampling: GREEDY,
  maxTokens,
  ignoreEos: true,
});

for (let r = 0; r < rounds; r++) {
  for (let k = 0; k < benches.length; k++) {
    const b = benches[(r + k) % benches.length]!;
    const jobs = Array.from({ length: LANES }, (_, i) => job(ids(r * 100 + i, 40), 128));
    b.decode.push((LANES * 128) / run(b.engine, jobs));
  }
  console.error(`decode round ${r + 1}/${rounds}`);
}

// A live conversation of longTokens tokens on every layout whose window holds it.
const withLong = benches.filter((b) => b.window > longTokens + 1000);
for (const b of withLong) {
  const t = performance.now();
  b.engine.submit({
    id: `long-${b.name}`,
    prompt: ids(999, longTokens),
    sampling: GREEDY,
    maxTokens: 1_000_000,
    ignoreEos: true,
  });
  while (b.engine.tick().tokens.length === 0);
  console.error(`${b.name}: ${longTokens}-token prompt prefilled in ${((performance.now() - t) / 1000).toFixed(1)} s`);
}
for (let r = 0; r < rounds; r++) {
  for (let k = 0; k < withLong.length; k++) {
    const b = withLong[(r + k) % withLong.length]!;
    b.decodeBesideLong.push(
      (LANES * 128) /
        run(
          b.engine,
          Array.from({ length: LANES }, (_, i) => job(ids(5000 + r * 100 + i, 40), 128)),
        ),
    );
    b.prefillBesideLong.push(
      (4 * 2000) /
        run(
          b.engine,
          Array.from({ length: 4 }, (_, i) => job(ids(9000 + r * 100 + i, 2000), 1)),
        ),
    );
  }
  console.error(`beside-long round ${r + 1}/${rounds}`);
}

const f = (n: number) => (Number.isNaN(n) ? "n/a" : n.toFixed(1));
console.log(
  `model ${modelPath} (KV ${bpt} bytes a token, trained window ${model.trainedContext}), ${threads} thread(s), ${LANES} lanes, median of ${rounds} interleaved rounds\n`,
);
console.log(
  `| layout | window | KV cells | KV MiB | RSS added MiB | decode 8x128 tok/s | same beside a live ${longTokens}-token conversation | prefill 4x2000 beside it, tok/s |`,
);
console.log("|---|---:|---:|---:|---:|---:|---:|---:|");
for (const b of benches) {
  console.log(
    `| ${b.name} | ${b.window} | ${b.engine.context.poolCells} | ${(b.kvBytes / 2 ** 20).toFixed(0)} | ${(b.rssBytes / 2 ** 20).toFixed(0)} | ${f(median(b.decode))} | ${f(median(b.decodeBesideLong))} | ${f(median(b.prefillBesideLong))} |`,
  );
}
const json = flag("json");
if (json)
  writeFileSync(
    json,
    JSON.stringify(
      { model: modelPath, threads, rounds, longTokens, benches: benches.map(({ engine: _, ...b }) => b) },
      null,
      2,
    ),
  );
for (const b of benches) b.engine.close();
model.free();
