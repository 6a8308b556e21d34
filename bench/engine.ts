// Engine benchmark: decode throughput at 1, 2, 4 and 8 lanes through a real
// worker process, fixed reply length (end-of-generation ignored), beside
// llama.cpp's own llama-bench on the same model file when its folder is given.
// Rounds are interleaved (superfluid's lanes, then one llama-bench run, round
// after round) so machine drift hits both alike; medians are reported.
//
//   bun bench/engine.ts [--model PATH] [--tokens 128] [--rounds 3] [--threads N]
//                       [--llama-bench DIR]   (e.g. ../shared/anchors/llama.cpp)
//
// Without --model it generates the large-vocabulary fixture into the cache.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { WorkerClient } from "../src/daemon/worker-client.ts";
import { GREEDY } from "../src/engine/sampling.ts";
import { physicalCores } from "../src/engine/threads.ts";
import { ensureFixture } from "../src/fixtures/index.ts";
import { flag } from "./support.ts";

const model = flag("model") ?? (await ensureFixture("large-vocab"));
const replyTokens = Number(flag("tokens", "128"));
const rounds = Number(flag("rounds", "3"));
const threads = Number(flag("threads", String(physicalCores())));
const laneCounts = [1, 2, 4, 8];

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function superfluidRate(worker: WorkerClient, lanes: number, round: number): Promise<number> {
  // Distinct short prompts so no lane reuses another's KV.
  const prompts = Array.from({ length: lanes }, (_, i) => [1, 100 + round * 31 + i, 200 + i, 300 + round]);
  const t0 = performance.now();
  const results = await Promise.all(
    prompts.map((prompt) =>
      worker.generate({ prompt, sampling: GREEDY, maxTokens: replyTokens, ignoreEos: true }).result(),
    ),
  );
  const seconds = (performance.now() - t0) / 1000;
  const tokens = results.reduce((n, r) => n + r.completionTokens, 0);
  return tokens / seconds;
}

function llamaBenchRate(dir: string): number | undefined {
  const exe = join(dir, "llama-bench");
  if (!existsSync(exe)) return undefined;
  const run = Bun.spawnSync(
    [exe, "-m", model, "-t", String(threads), "-p", "0", "-n", String(replyTokens), "-r", "1", "-o", "json"],
    {
      env: { ...process.env, LD_LIBRARY_PATH: dir },
      stdout: "pipe",
      stderr: "pipe",
    },
  );
  if (run.exitCode !== 0) {
    console.error(run.stderr.toString());
    return undefined;
  }
  const rows = JSON.parse(run.stdout.toString()) as { n_gen: number; avg_ts: number }[];
  return rows.find((r) => r.n_gen === replyTokens)?.avg_ts;
}

const benchDir = flag("llama-bench");
const worker = await WorkerClient.start({ model, maxBatch: 8, maxContext: 1024, threads });
console.log(
  `model ${model}\nthreads ${threads}, reply ${replyTokens} tokens, median of ${rounds} interleaved rounds\n`,
);
const samples: Record<number, number[]> = Object.fromEntries(laneCounts.map((l) => [l, []]));
const referenceSamples: number[] = [];
for (let r = 0; r < rounds; r++) {
  for (const lanes of laneCounts) {
    await superfluidRate(worker, lanes, 1000 + r); // warm-up, as llama-bench does before each run
    samples[lanes]!.push(await superfluidRate(worker, lanes, r));
  }
  const ref = benchDir ? llamaBenchRate(benchDir) : undefined;
  if (ref !== undefined) referenceSamples.push(ref);
}
await worker.close();
const rates = Object.fromEntries(laneCounts.map((l) => [l, median(samples[l]!)]));
const reference = referenceSamples.length > 0 ? median(referenceSamples) : undefined;
console.log("| lanes | superfluid tok/s (aggregate) | per lane | vs llama-bench tg |");
console.log("|---|---|---|---|");
for (const lanes of laneCounts) {
  const ratio = reference ? (rates[lanes]! / reference).toFixed(2) : "n/a";
  console.log(`| ${lanes} | ${rates[lanes]!.toFixed(1)} | ${(rates[lanes]! / lanes).toFixed(1)} | ${ratio} |`);
}
if (reference) console.log(`\nllama-bench tg${replyTokens}: ${reference.toFixed(1)} tok/s`);
