// Embeddings throughput against llama.cpp's llama-server on the same model:
// inputs per second through POST /v1/embeddings at several inputs per
// request (batch 1, 8, 32), both servers on the same machine with the same
// threads, rounds alternating between them (the order flips each round),
// medians reported, and the ratio superfluid / llama-server.
//
//   bun bench/embeddings.ts [--model small|tiny|PATH] [--batches 1,8,32] [--inputs 96]
//                           [--rounds 5] [--warmup 1] [--threads 1] [--window 2048]
//                           [--llama DIR] [--shipped-lib] [--json out.json]
//
// Models: `small` (default) is a MiniLM-sized llama-architecture embedding
// model (384 wide, 6 blocks, 30k vocabulary, mean pooling, seeded random
// weights: speed does not depend on weight values) generated into the run's
// scratch folder; `tiny` is the test fixture (64 wide), where per-request
// overhead dominates; or any embedding GGUF.
//
// Each round sends `--inputs` distinct short texts (12-20 words) as
// sequential requests of `batch` inputs each, so a round is the same work
// on both sides. llama-server runs with --embeddings, -np 32 (so one
// request's 32 inputs can share a decode, as they do here), -c and -b/-ub
// equal to --window; superfluid with --max-context --window (its inputs'
// limit and the tokens one decode holds). Every reply is checked to carry
// one vector per input. superfluid runs on llama-server's own llama.cpp build
// (SUPERFLUID_LLAMA_LIB) unless --shipped-lib: the pinned npm build computes
// this model's forward pass ~3x slower a token on this machine, which would
// measure the library, not the server (docs/api/embeddings.md#throughput).
import type { ChildProcess } from "node:child_process";
import { closeSync, existsSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { ensureFixture, largeVocab, writeFixture } from "../src/fixtures/index.ts";
import type { MetaValue } from "../src/gguf/writer.ts";
import { uniform } from "../src/fixtures/prng.ts";
import { LEAD_WORDS, NUMBER_WORDS } from "./prompt-words.ts";
import { fail, freePort, parseOptions, scratchFolder, spawnGroup, stopGroup } from "./support.ts";

const USAGE = `usage: bun bench/embeddings.ts [options]

  --model M        small (default: MiniLM-sized, generated), tiny (the test fixture) or a GGUF path
  --batches LIST   inputs per request (default 1,8,32)
  --inputs N       inputs per round (default 96)
  --rounds N       measured rounds per batch size and server (default 5)
  --warmup N       unmeasured rounds first (default 1)
  --threads N      compute threads of both servers (default 1)
  --window N       tokens per decode and per input on both (default 2048)
  --llama DIR      llama-server's folder (default ../shared/anchors/llama.cpp)
  --shipped-lib    superfluid on its own libllama (default: SUPERFLUID_LLAMA_LIB=DIR, llama-server's build)
  --json PATH      also write every round as JSON`;

const { opts, int } = parseOptions(
  USAGE,
  ["model", "batches", "inputs", "rounds", "warmup", "threads", "window", "llama", "json"],
  ["shipped-lib"],
);
const batches = (opts.get("batches") ?? "1,8,32").split(",").map((s) => Number(s.trim()));
if (batches.some((b) => !Number.isInteger(b) || b < 1))
  fail(`--batches must be positive integers, got ${opts.get("batches")}`);
const inputsPerRound = int("inputs", 96, 1);
const rounds = int("rounds", 5, 1);
const warmup = int("warmup", 1, 0);
const threads = int("threads", 1, 1);
const window = int("window", 2048, 512);
const llamaDir = resolve(opts.get("llama") ?? join(import.meta.dir, "../../shared/anchors/llama.cpp"));
const jsonPath = opts.get("json");
if (!existsSync(join(llamaDir, "llama-server"))) fail(`no llama-server in ${llamaDir} (--llama DIR)`);

const log = (s: string) => process.stderr.write(`${s}\n`);
const tmp = scratchFolder("embeddings-bench-");

/** The model file: the generated MiniLM-sized model, the test fixture, or the path given. */
async function modelPath(): Promise<string> {
  const name = opts.get("model") ?? "small";
  if (name === "tiny") return ensureFixture("tiny-embed");
  if (name !== "small") return resolve(name);
  const spec = largeVocab(1, { vocabSize: 30_000, nEmbd: 384, nBlocks: 6, nFf: 1536 });
  // The large-vocabulary generator with no chat template and mean pooling: what makes llama.cpp embed with it.
  const metadata = (spec.gguf.metadata as [string, MetaValue][]).filter(([key]) => key !== "tokenizer.chat_template");
  metadata.push(["llama.pooling_type", { type: "u32", value: 1 }]);
  spec.gguf.metadata = metadata;
  const path = join(tmp, "embed-small.gguf");
  await writeFixture(spec, path);
  return path;
}

interface Server {
  name: string;
  url: string;
  child: ChildProcess;
}

async function start(
  name: string,
  cmd: string,
  args: string[],
  env: Record<string, string>,
  port: number,
): Promise<Server> {
  const logPath = join(tmp, `${name}.log`);
  const out = openSync(logPath, "w");
  const child = spawnGroup(cmd, args, { stdio: ["ignore", out, out], env: { ...process.env, ...env } });
  closeSync(out);
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 1200; i++) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`${name} exited:\n${readFileSync(logPath, "utf8").slice(-2000)}`);
    if (
      await fetch(`${url}/health`).then(
        (r) => r.status === 200,
        () => false,
      )
    )
      return { name, url, child };
    await Bun.sleep(100);
  }
  throw new Error(`${name} did not become healthy in 120 s`);
}

/** Short distinct texts, the same on both sides. */
function texts(count: number, seed: number): string[] {
  const rand = uniform(seed);
  const words = [...LEAD_WORDS, ...NUMBER_WORDS];
  return Array.from({ length: count }, () => {
    const n = 12 + Math.floor(rand() * 9);
    return Array.from({ length: n }, () => words[Math.floor(rand() * words.length)]).join(" ");
  });
}

/** One round: `inputs` sent as sequential requests of `batch` inputs; inputs per second. */
async function round(server: Server, model: string, inputs: string[], batch: number): Promise<number> {
  const started = performance.now();
  for (let at = 0; at < inputs.length; at += batch) {
    const chunk = inputs.slice(at, at + batch);
    const res = await fetch(`${server.url}/v1/embeddings`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model, input: chunk }),
    });
    const body = (await res.json()) as { data?: unknown[] };
    if (res.status !== 200 || body.data?.length !== chunk.length)
      throw new Error(`${server.name} answered ${res.status}: ${JSON.stringify(body).slice(0, 300)}`);
  }
  return inputs.length / ((performance.now() - started) / 1000);
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

const model = await modelPath();
const sameBuild = !opts.has("shipped-lib");
log(
  `embeddings: model ${model}, threads ${threads}, window ${window}, ${inputsPerRound} inputs a round, ${rounds} rounds (+${warmup} warmup), superfluid on ${sameBuild ? `SUPERFLUID_LLAMA_LIB=${llamaDir}` : "its shipped libllama"}`,
);
const [ourPort, llamaPort] = [await freePort(), await freePort()];
const ours = await start(
  "superfluid",
  process.execPath,
  [
    join(import.meta.dir, "../src/main.ts"),
    "serve",
    model,
    "--port",
    String(ourPort),
    "--sessions",
    join(tmp, "sessions"),
    "--threads",
    String(threads),
    "--max-context",
    String(window),
  ],
  sameBuild ? { SUPERFLUID_LLAMA_LIB: llamaDir } : {},
  ourPort,
);
const theirs = await start(
  "llama-server",
  join(llamaDir, "llama-server"),
  [
    "-m",
    model,
    "--embeddings",
    "-t",
    String(threads),
    "-c",
    String(window),
    "-b",
    String(window),
    "-ub",
    String(window),
    "-np",
    "32",
    "--host",
    "127.0.0.1",
    "--port",
    String(llamaPort),
  ],
  { LD_LIBRARY_PATH: llamaDir },
  llamaPort,
);
const modelId = ((await (await fetch(`${ours.url}/v1/models`)).json()) as { data: { id: string }[] }).data[0]!.id;

const results: { batch: number; round: number; server: string; inputsPerSecond: number }[] = [];
const summary: { batch: number; superfluid: number; llama: number; ratio: number }[] = [];
try {
  for (const batch of batches) {
    const perServer: Record<string, number[]> = { superfluid: [], "llama-server": [] };
    for (let r = 0; r < warmup + rounds; r++) {
      const inputs = texts(inputsPerRound, 1000 * batch + r);
      // The order flips every round, so neither side always runs on a cooler machine.
      const order = r % 2 === 0 ? [ours, theirs] : [theirs, ours];
      for (const server of order) {
        const rate = await round(server, server === ours ? modelId : "model", inputs, batch);
        if (r < warmup) continue;
        perServer[server.name]!.push(rate);
        results.push({ batch, round: r - warmup, server: server.name, inputsPerSecond: rate });
      }
    }
    const a = median(perServer.superfluid!);
    const b = median(perServer["llama-server"]!);
    summary.push({ batch, superfluid: a, llama: b, ratio: a / b });
    log(
      `batch ${String(batch).padStart(2)}: superfluid ${a.toFixed(1)} inputs/s, llama-server ${b.toFixed(1)} inputs/s, ratio ${(a / b).toFixed(2)}`,
    );
  }
} finally {
  await Promise.all([stopGroup(ours.child), stopGroup(theirs.child)]);
}

console.log("| inputs per request | superfluid (inputs/s) | llama-server (inputs/s) | ratio |");
console.log("|---:|---:|---:|---:|");
for (const s of summary)
  console.log(`| ${s.batch} | ${s.superfluid.toFixed(1)} | ${s.llama.toFixed(1)} | ${s.ratio.toFixed(2)} |`);
if (jsonPath)
  writeFileSync(
    jsonPath,
    JSON.stringify({ model, sameBuild, threads, window, inputsPerRound, rounds, summary, results }, null, 2),
  );
process.exit(0);
