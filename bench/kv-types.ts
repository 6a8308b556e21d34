// Quantized KV cache (issue 50): what each KV type costs and gives, superfluid
// beside llama.cpp's llama-server on the same model and llama.cpp build. Per
// type (f16, q8_0, q4_0, and 84 = K q8_0 / V q4_0), one server at a time, each
// stopped (process group and all) before the next starts and whatever way the
// run ends:
//
//   1. memory: superfluid `--kv-bits N --max-batch 1 --max-context CTX` and
//      llama-server `-c CTX -np 1 -fa on -ctk K -ctv V`, after one short
//      request (so lazy allocations happened): the resident memory of the
//      process holding the KV (superfluid's worker, a child of the serve
//      process; llama-server itself), and superfluid's /props kv_cache;
//   2. greedy equality: the same raw prompts through /v1/completions
//      (temperature 0, --max-tokens, logprobs for the tokens) on both, one
//      request at a time; identical, or the first token that differs; then the
//      first prompt again (a warm repeat: superfluid serves it from its prefix
//      cache) against its first reply;
//   3. the largest window in a KV budget (--budgets GiB), from /props
//      bytes_per_token, and one start of superfluid at a --big-type window
//      that f16 could not give in --big-budget GiB (llama-server beside it at
//      the same window);
//   4. a perplexity-style comparison in this process, at the engine level
//      (LlamaModel, one LlamaContext per type): a fixed English text decoded
//      in one batch, every position's log-probability of the next token; the
//      mean, the perplexity, and the drift from f16 (mean |delta log p|,
//      mean KL(f16 || type), top-1 agreement). The fixture's weights are
//      random, so absolute perplexity means nothing: only the differences do.
//
//   bun bench/kv-types.ts [--model large-vocab|PATH] [--llama DIR] [--threads 2] [--ctx 32768]
//                         [--types f16,q8_0,q4_0,84] [--max-tokens 64] [--budgets 1,4]
//                         [--big-type q4_0] [--big-budget 1] [--skip servers,big,ppl]
//                         [--shipped-lib] [--out /tmp/kv-bench.md] [--json PATH]
//
// superfluid runs on llama-server's libllama (SUPERFLUID_LLAMA_LIB=DIR) unless
// --shipped-lib, so both sides run the same kernels; the in-process
// comparison loads that library too. Progress goes to stderr, the Markdown
// tables to stdout and --out.
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { LlamaContext } from "../src/engine/context.ts";
import { LlamaModel } from "../src/engine/model.ts";
import { ensureFixture } from "../src/fixtures/index.ts";
import { describeKvTypes, type KvTypes } from "../src/gguf/kv-type.ts";
import { machineLine, variantIn } from "./machine.ts";
import { children, fail, parseOptions, scratchFolder, stopGroup } from "./support.ts";
import { type Server, type Setup, startLlama, startSuperfluid } from "./turns.ts";

const USAGE = `bun bench/kv-types.ts [options]
  --model M          large-vocab (default: the benchmark fixture), tiny-chat, or a GGUF path
  --llama DIR        llama-server's folder (default ../shared/anchors/llama.cpp); missing: superfluid alone
  --threads N        compute threads of each server and of the in-process comparison
                     (default 2, never more than the cores; one server runs at a time)
  --ctx N            the window of the memory and greedy runs (default 32768)
  --types LIST       KV types, of f16, q8_0, q4_0, 84 (K q8_0, V q4_0) (default all four)
  --max-tokens N     greedy reply length (default 64)
  --budgets LIST     KV budgets in GiB for the largest-window table (default 1,4)
  --big-type T       the type of the large-window start (default q4_0)
  --big-budget G     its budget in GiB (default 1)
  --skip LIST        parts to leave out: servers (memory and greedy), big, ppl
  --shipped-lib      superfluid on its own libllama (default: llama-server's, SUPERFLUID_LLAMA_LIB=DIR)
  --out PATH         the Markdown tables (default /tmp/kv-bench.md)
  --json PATH        also every measurement
  --timeout S        per-request timeout in seconds (default 180)`;

const { opts, int, num } = parseOptions(
  USAGE,
  [
    "model",
    "llama",
    "threads",
    "ctx",
    "types",
    "max-tokens",
    "budgets",
    "big-type",
    "big-budget",
    "skip",
    "out",
    "json",
    "timeout",
  ],
  ["shipped-lib"],
);

const modelArg = opts.get("model") ?? "large-vocab";
const modelPath =
  modelArg === "tiny-chat" || modelArg === "large-vocab"
    ? await ensureFixture(modelArg)
    : existsSync(modelArg)
      ? resolve(modelArg)
      : fail(`--model: no such file ${modelArg}`);
const llamaDir = resolve(opts.get("llama") ?? join(import.meta.dir, "../../shared/anchors/llama.cpp"));
const haveLlama = existsSync(join(llamaDir, "llama-server"));
if (!haveLlama) console.error(`kv-types: no llama-server in ${llamaDir}; superfluid runs alone`);
const sameBuild = haveLlama && !opts.has("shipped-lib");
const cores = navigator.hardwareConcurrency;
const threads = int("threads", Math.min(2, cores), 1);
if (threads > cores) console.error(`kv-types: --threads ${threads} is more than the ${cores} cores`);
const ctx = int("ctx", 32768, 256);
const maxTokens = int("max-tokens", 64, 1);
const timeoutS = int("timeout", 180, 1);
const outPath = opts.get("out") ?? "/tmp/kv-bench.md";
const skip = new Set((opts.get("skip") ?? "").split(",").filter(Boolean));
for (const s of skip) if (!["servers", "big", "ppl"].includes(s)) fail(`--skip: unknown part ${s}`);
const GIB = 2 ** 30;
const MIB = 2 ** 20;
const budgets = (opts.get("budgets") ?? "1,4").split(",").map((b) => {
  const v = Number(b);
  return Number.isFinite(v) && v > 0 ? v : fail(`--budgets: ${b} is not a positive number of GiB`);
});
const bigBudget = num("big-budget", 1, 0.01);

interface KvType {
  /** The row's name: f16, q8_0, q4_0, 84. */
  name: string;
  /** superfluid's --kv-bits. */
  bits: string;
  types: KvTypes;
}
const ALL_TYPES: KvType[] = [
  { name: "f16", bits: "16", types: { k: "f16", v: "f16" } },
  { name: "q8_0", bits: "8", types: { k: "q8_0", v: "q8_0" } },
  { name: "q4_0", bits: "4", types: { k: "q4_0", v: "q4_0" } },
  { name: "84", bits: "84", types: { k: "q8_0", v: "q4_0" } },
];
const typeNames = (opts.get("types") ?? "f16,q8_0,q4_0,84").split(",");
const kvTypes = typeNames.map(
  (n) => ALL_TYPES.find((t) => t.name === n) ?? fail(`--types: unknown type ${n} (f16, q8_0, q4_0, 84)`),
);
const bigType = ALL_TYPES.find((t) => t.name === (opts.get("big-type") ?? "q4_0")) ?? fail("--big-type: unknown type");
const label = (t: KvType) => (t.name === "84" ? "84 (K q8_0, V q4_0)" : t.name);
const ourFlags = (t: KvType) => ["--kv-bits", t.bits];
const llamaFlags = (t: KvType) => ["-fa", "on", "-ctk", t.types.k, "-ctv", t.types.v];

const scratch = scratchFolder("kv-types-");
const log = (line: string) => console.error(`kv-types: ${line}`);

/** The turns benches' Setup, as far as startLlama and startSuperfluid read it. */
const setupFor = (window: number): Setup =>
  ({ modelPath, ctx: window, lanes: 1, threads, llamaDir, sameBuild, tmp: scratch }) as Setup;

/** Starts a server, runs `body` on it, and stops it whatever happens; the start's seconds go to `body`. */
async function withServer<T>(
  start: () => Promise<Server>,
  body: (s: Server, startS: number) => Promise<T>,
): Promise<T> {
  const t = performance.now();
  try {
    const server = await start();
    return await body(server, (performance.now() - t) / 1000);
  } finally {
    // The server, or one whose start failed with its process still running.
    for (const child of [...children]) await stopGroup(child, 5_000);
  }
}

// ---------------------------------------------------------------- memory

interface Mem {
  pid: number;
  /** VmRSS, RssAnon (the KV, compute buffers, heap), RssFile (the mapped weights and libraries), in bytes. */
  rss: number;
  anon: number;
  file: number;
}

function memOf(pid: number): Mem | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN) * 1024;
    return { pid, rss: kb("VmRSS"), anon: kb("RssAnon"), file: kb("RssFile") };
  } catch {
    return undefined; // gone, or not Linux
  }
}

/** The process ids `pid` started (Linux: every thread's children file). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const text = readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8").trim();
      if (text) out.push(...text.split(/\s+/).map(Number));
    }
  } catch {}
  return out;
}

/** superfluid's worker: the child of the serve process that runs `main.ts worker`, the largest if several. */
function workerMem(daemon: number): Mem | undefined {
  const workers = childrenOf(daemon)
    .filter((c) => {
      try {
        return readFileSync(`/proc/${c}/cmdline`, "utf8").split("\0").includes("worker");
      } catch {
        return false;
      }
    })
    .map(memOf)
    .filter((m): m is Mem => m !== undefined);
  return workers.sort((a, b) => b.rss - a.rss)[0];
}

interface KvCache {
  type_k: string;
  type_v: string;
  layout: string;
  sequences: number;
  cells_per_sequence: number;
  cells_total: number;
  bytes: number;
  bytes_per_token: number;
  sizing: string;
}

// ---------------------------------------------------------------- requests

/** Raw prompts, each starting with a different word so no prefix but BOS is shared; the last one longer. */
const PROMPTS = [
  "The old lighthouse keeper climbed the stairs every evening to light the lamp, and",
  "def fibonacci(n):\n    if n < 2:\n        return n\n",
  "Write a short note to a colleague about moving the weekly meeting to Thursday afternoon.",
  readFileSync(join(import.meta.dir, "passages/story.txt"), "utf8"),
];

interface Reply {
  prompt: number;
  ok: boolean;
  error?: string;
  text: string;
  tokens: string[];
  finish?: string;
  promptTokens?: number;
  cached?: number;
}

/** The first request on every server, before the memory is read: none of PROMPTS, so prompt 1 starts cold. */
const WARM_UP = "Hello";

/** PROMPTS[prompt] (or the warm-up, -1), greedy, its reply's tokens from logprobs. */
async function complete(server: Server, prompt: number, maxTokens: number): Promise<Reply> {
  const reply: Reply = { prompt, ok: false, text: "", tokens: [] };
  try {
    const res = await fetch(`${server.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: server.model,
        prompt: prompt < 0 ? WARM_UP : PROMPTS[prompt],
        max_tokens: maxTokens,
        temperature: 0,
        logprobs: 1,
      }),
      signal: AbortSignal.timeout(timeoutS * 1000),
    });
    const body = (await res.json()) as {
      choices?: {
        text: string;
        finish_reason: string;
        // superfluid: the legacy shape; llama-server: the chat shape.
        logprobs?: { tokens?: string[]; content?: { token: string }[] };
      }[];
      usage?: { prompt_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } };
      error?: { message?: string };
    };
    const choice = body.choices?.[0];
    if (!res.ok || !choice) {
      reply.error = `${res.status} ${body.error?.message ?? JSON.stringify(body).slice(0, 200)}`;
      return reply;
    }
    reply.ok = true;
    reply.text = choice.text;
    reply.finish = choice.finish_reason;
    reply.tokens = choice.logprobs?.tokens ?? choice.logprobs?.content?.map((c) => c.token) ?? [];
    reply.promptTokens = body.usage?.prompt_tokens;
    reply.cached = body.usage?.prompt_tokens_details?.cached_tokens;
  } catch (err) {
    reply.error = (err as Error).message;
  }
  return reply;
}

/** "identical (N tokens)", or where two replies part. */
function compare(a: Reply | undefined, b: Reply | undefined): string {
  if (!a?.ok || !b?.ok) return `n/a (${a?.error ?? b?.error ?? "no reply"})`;
  const n = Math.max(a.tokens.length, b.tokens.length);
  for (let i = 0; i < n; i++)
    if (a.tokens[i] !== b.tokens[i]) return `differs at token ${i} (of ${a.tokens.length} / ${b.tokens.length})`;
  if (a.text !== b.text) return "same tokens, different text";
  return `identical (${n})`;
}

// ---------------------------------------------------------------- servers

interface Run {
  side: "superfluid" | "llama-server";
  type: string;
  window: number;
  startS?: number;
  error?: string;
  /** The process holding the KV: superfluid's worker, llama-server itself. */
  kvProcess?: Mem;
  /** superfluid's serve process. */
  daemon?: Mem;
  kv?: KvCache;
  cpu?: unknown;
  replies: Reply[];
  repeat?: Reply;
}

const runs: Run[] = [];

/** One server at `window` with type `t`: a short request, the memory, then (if `greedy`) the prompts and a repeat. */
async function measure(side: Run["side"], t: KvType, window: number, greedy: boolean): Promise<Run> {
  const run: Run = { side, type: t.name, window, replies: [] };
  const ours = side === "superfluid";
  log(`${side} ${label(t)}, window ${window}`);
  try {
    await withServer(
      () =>
        ours
          ? startSuperfluid(setupFor(window), side, `sessions-${t.name}-${window}`, ourFlags(t))
          : startLlama(setupFor(window), side, llamaFlags(t)),
      async (server, startS) => {
        run.startS = startS;
        const warm = await complete(server, -1, 4);
        if (!warm.ok) throw new Error(`the first request failed: ${warm.error}`);
        await Bun.sleep(300);
        const pid = server.child.pid!;
        if (ours) {
          run.kvProcess = workerMem(pid);
          run.daemon = memOf(pid);
          run.kv = ((await (await fetch(`${server.url}/props`)).json()) as { kv_cache: KvCache }).kv_cache;
          const models = (await (await fetch(`${server.url}/v1/models`)).json()) as {
            data?: { runtime?: { cpu?: unknown } }[];
          };
          run.cpu = models.data?.[0]?.runtime?.cpu;
        } else run.kvProcess = memOf(pid);
        if (!greedy) return;
        for (let p = 0; p < PROMPTS.length; p++) run.replies.push(await complete(server, p, maxTokens));
        run.repeat = await complete(server, 0, maxTokens);
      },
    );
  } catch (err) {
    run.error = (err as Error).message.slice(-800);
    log(`${side} ${label(t)}: ${run.error}`);
  }
  runs.push(run);
  return run;
}

if (!skip.has("servers"))
  for (const t of kvTypes) {
    await measure("superfluid", t, ctx, true);
    if (haveLlama) await measure("llama-server", t, ctx, true);
  }

// ---------------------------------------------------------------- the largest window in a budget

const align = (cells: number) => Math.floor(cells / 256) * 256;
/** KV bytes a token per type: /props where a run gave it, else the GGUF arithmetic in this process (filled below). */
const bytesPerToken = new Map<string, number>();
/** Sequences superfluid keeps at one lane (the lane and the prefix cache's spares; 4 today). */
const sequencesAtOneLane = runs.find((r) => r.kv)?.kv?.sequences ?? 4;
for (const r of runs) if (r.kv) bytesPerToken.set(r.type, r.kv.bytes_per_token);

let model: LlamaModel | undefined;
/** The model in this process, on the same library as the servers (loaded once, after they ran). */
function loadModel(): LlamaModel {
  if (sameBuild) process.env.SUPERFLUID_LLAMA_LIB = llamaDir;
  model ??= LlamaModel.load(modelPath);
  return model;
}

let big: { budget: number; window: number; f16Window: number; ours?: Run; llama?: Run } | undefined;
if (!skip.has("big")) {
  const bpt = bytesPerToken.get(bigType.name) ?? loadModel().kvBytesPerToken(bigType.types);
  const f16 = bytesPerToken.get("f16") ?? loadModel().kvBytesPerToken();
  const seqs = sequencesAtOneLane;
  const window = align((bigBudget * GIB) / (seqs * bpt));
  big = { budget: bigBudget, window, f16Window: align((bigBudget * GIB) / (seqs * f16)) };
  // The model loaded here (for the arithmetic) stays mapped; it is not the measured process.
  big.ours = await measure("superfluid", bigType, window, false);
  if (haveLlama) big.llama = await measure("llama-server", bigType, window, false);
}

// ---------------------------------------------------------------- perplexity-style comparison, in process

/** English prose, ~360 words (545 tokens in the large-vocabulary fixture's vocabulary); the same every run. */
const TEXT = `The river town woke slowly in the autumn. Before the sun cleared the hills, the baker had already lit his ovens, and the smell of bread drifted down the narrow street toward the water. Fishermen checked their nets by lantern light, talking quietly about the weather and the price of fuel, while the first bus of the day waited at the square with its engine running.

Maria had lived in the town all her life. She remembered when the old bridge was still made of wood, when the school had only three classrooms, and when the library opened for two afternoons a week. Now she ran the library herself. Every morning she unlocked the heavy door, switched on the lights, and sorted the books that had come back the evening before. Children left picture books on the steps; farmers returned manuals about engines and soil; students borrowed novels they were supposed to read for exams and brought them back unread.

One winter a young engineer arrived to survey the river for a new dam. He spent his days measuring the current and his evenings in the library, reading everything he could find about past floods. Maria showed him the records kept in boxes in the basement: letters, photographs, and handwritten notes about the years when the water rose over the fields and into the houses. He was surprised that so much had been saved, and even more surprised that nobody had looked at it for decades.

By spring his report was finished. It recommended a smaller dam than planned, placed further upstream, and it quoted the old letters to explain why. The council accepted it after a long meeting. When the engineer left, he gave the library a copy of the report with a note on the first page, thanking the town for remembering what the river had done, and Maria put it on the shelf beside the letters.`;

interface PplRow {
  type: string;
  tokens: number;
  meanLogp: number;
  perplexity: number;
  deltaMean?: number;
  meanAbsDelta?: number;
  maxAbsDelta?: number;
  meanKl?: number;
  top1Agree?: number;
  /** The second decode of the text, ms (in --json only: one timing, not a speed measurement). */
  ms: number;
}
const ppl: PplRow[] = [];

/** log-sum-exp of a logits row, and its argmax. */
function lse(row: Float32Array): { lse: number; argmax: number } {
  let max = -Infinity;
  let argmax = 0;
  for (let j = 0; j < row.length; j++)
    if (row[j]! > max) {
      max = row[j]!;
      argmax = j;
    }
  let sum = 0;
  for (let j = 0; j < row.length; j++) sum += Math.exp(row[j]! - max);
  return { lse: max + Math.log(sum), argmax };
}

if (!skip.has("ppl")) {
  const m = loadModel();
  const tokens = m.tokenize(TEXT, { addSpecial: true });
  const n = tokens.length;
  const cells = Math.ceil(n / 256) * 256;
  /** A context of type `t` with the whole text decoded in one batch, logits at every position. */
  const decoded = (t: KvType): { ctx: LlamaContext; ms: number } => {
    const c = new LlamaContext(m, {
      sequences: 1,
      cellsPerSequence: cells,
      batchSize: cells,
      microBatchSize: Math.min(512, cells),
      threads,
      kvTypes: t.types,
    });
    // Twice, the second timed: the first also faults in the weights and the context's buffers.
    let ms = 0;
    for (let round = 0; round < 2; round++) {
      c.truncate(0, 0);
      for (let i = 0; i < n; i++) c.stage(i, tokens[i]!, i, 0, i < n - 1);
      const t0 = performance.now();
      c.decode(n);
      ms = performance.now() - t0;
    }
    return { ctx: c, ms };
  };
  const f16Type = ALL_TYPES[0]!;
  const base = decoded(f16Type);
  // The reference's per-position figures, once.
  const baseLse: number[] = [];
  const baseArg: number[] = [];
  const baseLogp: number[] = [];
  for (let i = 0; i < n - 1; i++) {
    const row = base.ctx.logits(i);
    const s = lse(row);
    baseLse.push(s.lse);
    baseArg.push(s.argmax);
    baseLogp.push(row[tokens[i + 1]!]! - s.lse);
  }
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const baseMean = mean(baseLogp);
  ppl.push({ type: "f16", tokens: n, meanLogp: baseMean, perplexity: Math.exp(-baseMean), ms: base.ms });
  log(`ppl f16: ${n} tokens, mean log p ${baseMean.toFixed(4)}`);
  for (const t of kvTypes) {
    if (t.name === "f16") continue;
    const { ctx: c, ms } = decoded(t);
    try {
      const logp: number[] = [];
      const absDelta: number[] = [];
      const kl: number[] = [];
      let agree = 0;
      for (let i = 0; i < n - 1; i++) {
        const a = base.ctx.logits(i);
        const b = c.logits(i);
        const s = lse(b);
        const lp = b[tokens[i + 1]!]! - s.lse;
        logp.push(lp);
        absDelta.push(Math.abs(lp - baseLogp[i]!));
        if (s.argmax === baseArg[i]) agree++;
        // KL(f16 || t) = sum p_f16 (log p_f16 - log p_t).
        let d = 0;
        const la = baseLse[i]!;
        for (let j = 0; j < a.length; j++) {
          const pa = a[j]! - la;
          d += Math.exp(pa) * (pa - (b[j]! - s.lse));
        }
        kl.push(d);
      }
      const mlp = mean(logp);
      ppl.push({
        type: t.name,
        tokens: n,
        meanLogp: mlp,
        perplexity: Math.exp(-mlp),
        deltaMean: mlp - baseMean,
        meanAbsDelta: mean(absDelta),
        maxAbsDelta: Math.max(...absDelta),
        meanKl: mean(kl),
        top1Agree: agree / (n - 1),
        ms,
      });
      log(`ppl ${t.name}: mean log p ${mlp.toFixed(4)}`);
    } finally {
      c.free();
    }
  }
  base.ctx.free();
}
model?.free();

// ---------------------------------------------------------------- the report

const mib = (b: number | undefined) => (b === undefined || Number.isNaN(b) ? "-" : (b / MIB).toFixed(0));
const memCell = (m: Mem | undefined) => (m ? `${mib(m.rss)} (anon ${mib(m.anon)})` : "-");
const find = (side: Run["side"], type: string, window = ctx) =>
  runs.find((r) => r.side === side && r.type === type && r.window === window);
const ourCpu = runs.find((r) => r.cpu)?.cpu as { variant?: string } | undefined;
const out: string[] = [];
out.push(
  `${machineLine()}; ggml CPU variant: superfluid ${ourCpu?.variant ?? "-"}, llama-server ${haveLlama ? (variantIn(llamaDir) ?? "one CPU backend") : "-"}`,
);
out.push(
  `model ${modelPath}; ${threads} thread(s); superfluid on ${sameBuild ? `SUPERFLUID_LLAMA_LIB=${llamaDir}` : "its shipped libllama"}; ${new Date().toISOString().slice(0, 10)}`,
);
out.push("");

if (!skip.has("servers")) {
  out.push(
    `### Memory at one lane, a ${ctx}-token window, after one short request`,
    "",
    `superfluid \`--max-batch 1 --max-context ${ctx} --kv-bits N\`; llama-server \`-c ${ctx} -np 1 -fa on -ctk K -ctv V\`. Resident MiB (VmRSS; anon = RssAnon, without the mapped weights and libraries).`,
    "",
    "| KV type | B/token | superfluid KV (/props) | superfluid worker RSS | superfluid daemon RSS | llama-server KV (1 buffer) | llama-server RSS |",
    "|---|---:|---|---:|---:|---:|---:|",
  );
  for (const t of kvTypes) {
    const o = find("superfluid", t.name);
    const l = find("llama-server", t.name);
    const kv = o?.kv;
    const bpt = kv?.bytes_per_token;
    out.push(
      `| ${label(t)} | ${bpt ?? "-"} | ${kv ? `${kv.layout} ${kv.sequences} x ${kv.cells_per_sequence} = ${kv.cells_total} cells, ${mib(kv.bytes)} MiB, ${kv.type_k}/${kv.type_v}` : (o?.error ?? "-")} | ${memCell(o?.kvProcess)} | ${memCell(o?.daemon)} | ${bpt ? mib(bpt * ctx) : "-"} | ${l?.error ? "failed" : memCell(l?.kvProcess)} |`,
    );
  }
  out.push("");
}

if (bytesPerToken.size > 0 || big) {
  for (const t of kvTypes)
    if (!bytesPerToken.has(t.name)) bytesPerToken.set(t.name, loadModel().kvBytesPerToken(t.types));
  const seqs = sequencesAtOneLane;
  out.push(
    "### The largest window in a KV budget",
    "",
    `From /props \`bytes_per_token\`. One buffer: llama-server \`-np 1 -c N\`, or superfluid \`--kv-pool N\` (a shared pool; its window is capped at the model's trained window). Per-lane: superfluid \`--max-batch 1 --max-context N\`, ${seqs} buffers (the lane and the prefix cache's spares). Cells rounded down to 256.`,
    "",
    `| KV type | B/token | vs f16 | ${budgets.map((b) => `${b} GiB: one buffer | ${b} GiB: per-lane, 1 lane`).join(" | ")} |`,
    `|---|---:|---:|${budgets.map(() => "---:|---:|").join("")}`,
  );
  const f16 = bytesPerToken.get("f16");
  for (const t of kvTypes) {
    const bpt = bytesPerToken.get(t.name)!;
    out.push(
      `| ${label(t)} | ${bpt} | ${f16 ? `${(f16 / bpt).toFixed(2)}x` : "-"} | ${budgets.map((b) => `${align((b * GIB) / bpt)} | ${align((b * GIB) / (seqs * bpt))}`).join(" | ")} |`,
    );
  }
  out.push("");
}

if (big) {
  const o = big.ours;
  const l = big.llama;
  out.push(
    `Large-window start, ${label(bigType)} in ${big.budget} GiB: superfluid \`--max-batch 1 --max-context ${big.window} --kv-bits ${bigType.bits}\` (f16 gives ${big.f16Window} in the same budget): ` +
      (o?.kv
        ? `started in ${o.startS?.toFixed(1)} s, served a request; /props ${o.kv.layout} ${o.kv.sequences} x ${o.kv.cells_per_sequence} cells, ${mib(o.kv.bytes)} MiB of KV; worker RSS ${memCell(o.kvProcess)} MiB.`
        : `failed: ${o?.error ?? "not run"}.`),
  );
  if (l)
    out.push(
      "",
      `llama-server \`-np 1 -c ${l.window} -fa on -ctk ${bigType.types.k} -ctv ${bigType.types.v}\` (the same window, in one buffer): ` +
        (l.error
          ? `failed: ${l.error.split("\n")[0]}.`
          : `started in ${l.startS?.toFixed(1)} s; RSS ${memCell(l.kvProcess)} MiB.`),
    );
  out.push("");
}

if (!skip.has("servers") && haveLlama) {
  out.push(
    `### Greedy replies, superfluid against llama-server at the same KV type`,
    "",
    `\`/v1/completions\`, raw prompt, \`temperature: 0\`, \`max_tokens: ${maxTokens}\`, one request at a time; tokens from \`logprobs\`. Prompts 1-3 are one line, prompt 4 the ${PROMPTS[3]!.split(/\s+/).length}-word bench/passages/story.txt. "Warm repeat": prompt 1 again after the others, against its first reply on the same server (superfluid's cached prompt tokens in brackets).`,
    "",
    `| KV type | ${PROMPTS.map((_, i) => `prompt ${i + 1}`).join(" | ")} | warm repeat, superfluid | warm repeat, llama-server |`,
    `|---|${PROMPTS.map(() => "---|").join("")}---|---|`,
  );
  for (const t of kvTypes) {
    const o = find("superfluid", t.name);
    const l = find("llama-server", t.name);
    const cells = PROMPTS.map((_, i) =>
      compare(
        o?.replies.find((r) => r.prompt === i),
        l?.replies.find((r) => r.prompt === i),
      ),
    );
    const ourRepeat = `${compare(o?.replies[0], o?.repeat)}${o?.repeat?.cached !== undefined ? ` [${o.repeat.cached} of ${o.repeat.promptTokens}]` : ""}`;
    out.push(`| ${label(t)} | ${cells.join(" | ")} | ${ourRepeat} | ${compare(l?.replies[0], l?.repeat)} |`);
  }
  out.push("");
  // Across types on one server: how far a quantized KV moves greedy replies from f16.
  out.push(
    "Against f16 on the same server (where a quantized KV first changes the greedy reply):",
    "",
    `| KV type | side | ${PROMPTS.map((_, i) => `prompt ${i + 1}`).join(" | ")} |`,
    `|---|---|${PROMPTS.map(() => "---|").join("")}`,
  );
  for (const t of kvTypes) {
    if (t.name === "f16") continue;
    for (const side of ["superfluid", "llama-server"] as const) {
      const base = find(side, "f16");
      const r = find(side, t.name);
      out.push(
        `| ${label(t)} | ${side} | ${PROMPTS.map((_, i) =>
          compare(
            base?.replies.find((x) => x.prompt === i),
            r?.replies.find((x) => x.prompt === i),
          ),
        ).join(" | ")} |`,
      );
    }
  }
  out.push("");
}

if (ppl.length > 0) {
  const f = (x: number | undefined, d = 4) => (x === undefined ? "-" : x.toFixed(d));
  out.push(
    "### Log-probability of a fixed text (engine, in process)",
    "",
    `${ppl[0]!.tokens} tokens of English prose, decoded in one batch per type; per position the log-probability of the next token. Random weights: only the differences from f16 mean anything.`,
    "",
    "| KV type | mean log p | perplexity | delta mean log p vs f16 | mean abs delta log p | max abs delta | mean KL(f16 ‖ type), nats | top-1 agrees with f16 |",
    "|---|---:|---:|---:|---:|---:|---:|---:|",
  );
  for (const r of ppl)
    out.push(
      `| ${label(ALL_TYPES.find((t) => t.name === r.type)!)} | ${f(r.meanLogp)} | ${f(r.perplexity, 1)} | ${f(r.deltaMean, 5)} | ${f(r.meanAbsDelta, 5)} | ${f(r.maxAbsDelta, 4)} | ${r.meanKl === undefined ? "-" : r.meanKl.toExponential(2)} | ${r.top1Agree === undefined ? "-" : `${(100 * r.top1Agree).toFixed(1)}%`} |`,
    );
  out.push("");
}

const report = out.join("\n");
console.log(report);
writeFileSync(outPath, `${report}\n`);
log(`tables in ${outPath}`);
const json = opts.get("json");
if (json)
  writeFileSync(
    json,
    JSON.stringify(
      {
        model: modelPath,
        threads,
        ctx,
        sameBuild,
        kvTypes: kvTypes.map((t) => ({ name: t.name, ...t.types, describe: describeKvTypes(t.types) })),
        runs,
        big,
        ppl,
      },
      null,
      1,
    ),
  );
process.exit(0);
