// Constrained decoding benchmark: decode tokens per second with and without a
// JSON-schema constraint, through a real worker, on the large-vocabulary
// fixture; beside llama-server's own `json_schema` on the same model file when
// its folder is given. Also prints the schema compile time over the corpus.
//
//   bun bench/grammar.ts [--model PATH] [--tokens 128] [--rounds 5] [--llama-server DIR]
import { accepted } from "../test/grammar/corpus/index.ts";
import { compileJsonSchema } from "../grammar/index.ts";
import { WorkerClient } from "../src/daemon/worker-client.ts";
import { GREEDY, type SamplingSpec } from "../src/engine/sampling.ts";
import { physicalCores } from "../src/engine/threads.ts";
import { ensureFixture } from "../src/fixtures/index.ts";
import { flag } from "./support.ts";

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const model = flag("model") ?? (await ensureFixture("large-vocab"));
const replyTokens = Number(flag("tokens", "128"));
const rounds = Number(flag("rounds", "5"));
const threads = physicalCores();

// A schema whose replies run long: free text inside a JSON object.
const SCHEMA = {
  type: "object",
  properties: { story: { type: "string" }, tags: { type: "array", items: { type: "string" } } },
  required: ["story", "tags"],
};

// 1. Compile time over the corpus.
const compileMs = accepted.map((c) => {
  const t0 = performance.now();
  compileJsonSchema(c.schema, c.options);
  return performance.now() - t0;
});
console.log(
  `schema compile over ${compileMs.length} corpus schemas: median ${median(compileMs).toFixed(2)} ms, worst ${Math.max(...compileMs).toFixed(2)} ms`,
);

// 2. Decode rate through superfluid's worker.
const gbnf = compileJsonSchema(SCHEMA).gbnf;
const sampling: SamplingSpec = { ...GREEDY, temperature: 1, topK: 40, seed: 1 };
const worker = await WorkerClient.start({ model, maxBatch: 1, maxContext: 1024, threads });
async function superfluidRate(constrained: boolean, round: number): Promise<number> {
  const t0 = performance.now();
  const r = await worker
    .generate({
      prompt: [1, 300 + round, 400],
      sampling: { ...sampling, seed: round + 1 },
      maxTokens: replyTokens,
      ...(constrained ? { grammar: gbnf } : { ignoreEos: true }),
    })
    .result();
  return (r.completionTokens * 1000) / (performance.now() - t0);
}

// 3. llama-server's own json_schema on the same file.
const serverDir = flag("llama-server");
let server: ReturnType<typeof Bun.spawn> | undefined;
const port = 18631;
async function llamaRate(constrained: boolean, round: number): Promise<number> {
  const t0 = performance.now();
  const res = await fetch(`http://127.0.0.1:${port}/completion`, {
    method: "POST",
    body: JSON.stringify({
      prompt: `story ${round}`,
      n_predict: replyTokens,
      temperature: 1,
      top_k: 40,
      seed: round + 1,
      cache_prompt: false,
      ...(constrained ? { json_schema: SCHEMA } : { ignore_eos: true }),
    }),
  });
  const body = (await res.json()) as { tokens_predicted: number };
  return (body.tokens_predicted * 1000) / (performance.now() - t0);
}
if (serverDir) {
  server = Bun.spawn(
    [
      `${serverDir}/llama-server`,
      "-m",
      model,
      "-c",
      "1024",
      "-np",
      "1",
      "-t",
      String(threads),
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
    ],
    {
      env: { ...process.env, LD_LIBRARY_PATH: serverDir },
      stdout: "ignore",
      stderr: "ignore",
    },
  );
  for (let i = 0; i < 100; i++) {
    if (
      (await fetch(`http://127.0.0.1:${port}/health`)
        .then((r) => r.status)
        .catch(() => 0)) === 200
    )
      break;
    await Bun.sleep(200);
  }
}

const rows: Record<string, number[]> = { sfFree: [], sfJson: [], llFree: [], llJson: [] };
try {
  await superfluidRate(false, 99);
  for (let r = 0; r < rounds; r++) {
    rows.sfFree!.push(await superfluidRate(false, r));
    rows.sfJson!.push(await superfluidRate(true, r));
    if (server) {
      rows.llFree!.push(await llamaRate(false, r));
      rows.llJson!.push(await llamaRate(true, r));
    }
  }
} finally {
  await worker.close();
  server?.kill();
}
console.log(`\nreply up to ${replyTokens} tokens, ${threads} threads, median of ${rounds} interleaved rounds\n`);
console.log("| system | unconstrained tok/s | json_schema tok/s | constrained / unconstrained |");
console.log("|---|---|---|---|");
const row = (name: string, free: number[], json: number[]) =>
  console.log(
    `| ${name} | ${median(free).toFixed(1)} | ${median(json).toFixed(1)} | ${(median(json) / median(free)).toFixed(2)} |`,
  );
row("superfluid", rows.sfFree!, rows.sfJson!);
if (server) row("llama-server", rows.llFree!, rows.llJson!);
