// Ollama front-end overhead: the same server, the same model and the same
// work over Ollama's API and over OpenAI's, round by round.
//
//   bun bench/ollama.ts [--model large-vocab|PATH] [--pairs raw,chat] [--concurrency 1,8]
//                       [--tokens 128] [--rounds 5] [--warmup 1] [--prompt-words 150]
//                       [--threads 1] [--max-context 2048] [--gap-ms 250]
//                       [--url URL [--pid PID]] [--timeout 300] [--deadline 3600] [--json out.json]
//
// Pairs (each: Ollama route / OpenAI route doing the same work):
//   raw       POST /api/generate with raw: true  /  POST /v1/completions (a string prompt, untemplated)
//   chat      POST /api/chat                     /  POST /v1/chat/completions
//   generate  POST /api/generate (templated)     /  POST /v1/chat/completions (the prompt as the user turn)
//
// Both sides stream (NDJSON records / SSE chunks) at temperature 0 with the
// same reply cap (num_predict / max_tokens). Ollama's API has no ignore_eos,
// so the reply length is held by the model: the large-vocabulary fixture
// (random weights) almost never ends a reply early. Every reply is checked
// to have exactly --tokens tokens (eval_count on Ollama's terminal record,
// usage.completion_tokens on OpenAI's last chunk); a round with a shorter
// reply is reported and left out of the medians.
//
// By default the script starts its own superfluid (its own process group,
// a temporary sessions folder, killed on exit) so it can read the daemon's
// and the worker's CPU time (/proc: per-thread schedstat, utime+stime) around each round:
// the daemon runs the HTTP front-ends, the worker the model, so the daemon's
// CPU per identical round is the front-end's cost independent of other load
// on the machine. With --url it drives a running server (CPU only with --pid,
// the daemon's process id).
import { spawnSync, type ChildProcess } from "node:child_process";
import { closeSync, existsSync, openSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { ensureFixture } from "../src/fixtures/index.ts";
import { uniform } from "../src/fixtures/prng.ts";
import { LEAD_WORDS, NUMBER_WORDS } from "./prompt-words.ts";
import { ndjsonLines, sseEvents } from "./sse.ts";
import { fail, freePort, parseOptions, scratchFolder, spawnGroup, stopGroup } from "./support.ts";

// ---------------------------------------------------------------- arguments

const USAGE = `usage: bun bench/ollama.ts [options]

  --model M             large-vocab (default; generated once into the fixture cache) or a GGUF path
  --pairs LIST          raw, chat, generate (default raw,chat)
  --concurrency LIST    concurrent requests per round (default 1,8)
  --tokens N            reply tokens per request: num_predict = max_tokens (default 128)
  --rounds N            measured rounds per pair and level (default 5)
  --warmup N            unmeasured rounds per pair and level (default 1)
  --prompt-words N      words per prompt (default 150, ~310 tokens on the fixture)
  --threads N           the server's compute threads (default 1)
  --max-context N       the server's tokens per lane (default 2048)
  --max-batch N         the server's lanes (default: the highest --concurrency, at least 8)
  --gap-ms N            pause after each round before its CPU time is read (default 250)
  --url URL             drive a running server instead of starting one
  --pid PID             with --url: the daemon's process id, for its CPU time
  --timeout S           per-request timeout in seconds (default 300)
  --deadline S          the whole run stops after S seconds (default 3600)
  --json PATH           also write every round and request as JSON`;

const { opts, int } = parseOptions(USAGE, [
  "model",
  "pairs",
  "concurrency",
  "tokens",
  "rounds",
  "warmup",
  "prompt-words",
  "threads",
  "max-context",
  "max-batch",
  "gap-ms",
  "url",
  "pid",
  "timeout",
  "deadline",
  "json",
]);

type PairName = "raw" | "chat" | "generate";
const PAIR_NAMES: PairName[] = ["raw", "chat", "generate"];
const pairs = (opts.get("pairs") ?? "raw,chat").split(",").map((s) => s.trim()) as PairName[];
if (pairs.some((p) => !PAIR_NAMES.includes(p)))
  fail(`--pairs must name ${PAIR_NAMES.join(", ")}; got ${opts.get("pairs")}`);
const levels = (opts.get("concurrency") ?? "1,8").split(",").map((s) => Number(s.trim()));
if (levels.some((c) => !Number.isInteger(c) || c < 1))
  fail(`--concurrency must be positive integers, got ${opts.get("concurrency")}`);
const tokens = int("tokens", 128, 1);
const rounds = int("rounds", 5, 1);
const warmup = int("warmup", 1, 0);
const promptWords = int("prompt-words", 150, 3);
const threads = int("threads", 1, 1);
const maxContext = int("max-context", 2048, 512);
const maxBatch = int("max-batch", Math.max(8, ...levels), 1);
const gapMs = int("gap-ms", 250, 0);
const timeoutS = int("timeout", 300, 1);
const deadlineS = int("deadline", 3600, 1);
const jsonPath = opts.get("json");
const givenUrl = opts.get("url");
const givenPid = opts.has("pid") ? int("pid", 0, 1) : undefined;
if (givenPid !== undefined && !givenUrl) fail("--pid goes with --url");
if (maxBatch < Math.max(...levels))
  console.error(`ollama: --max-batch ${maxBatch} is below the highest concurrency; requests will queue`);
if (threads > navigator.hardwareConcurrency)
  console.error(`ollama: --threads ${threads} is more than the ${navigator.hardwareConcurrency} cores`);

const deadline = new AbortController();
const deadlineTimer = setTimeout(
  () => deadline.abort(new Error(`run deadline of ${deadlineS} s passed`)),
  deadlineS * 1000,
);

const log = (s: string) => process.stderr.write(`${s}\n`);

// ---------------------------------------------------------------- the server

// The server's log and sessions; whatever way the run ends, the server (and its worker, in the same group) does not
// outlive it.
const tmp = scratchFolder("ollama-bench-");
let server: ChildProcess | undefined;

const logPath = join(tmp, "server.log");
const serverLog = () => (existsSync(logPath) ? readFileSync(logPath, "utf8").slice(-2000) : "");

/**
 * Starts superfluid in its own process group, its output to a file (a full pipe would stall it); resolves on /health.
 */
async function startServer(modelPath: string): Promise<{ url: string; pid: number }> {
  const port = await freePort();
  const args = [
    join(import.meta.dir, "../src/main.ts"),
    "serve",
    modelPath,
    "--port",
    String(port),
    "--sessions",
    join(tmp, "sessions"),
  ];
  args.push("--max-batch", String(maxBatch), "--max-context", String(maxContext), "--threads", String(threads));
  const out = openSync(logPath, "w");
  server = spawnGroup(process.execPath, args, { stdio: ["ignore", out, out] });
  closeSync(out);
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 1200; i++) {
    if (server.exitCode !== null || server.signalCode !== null) throw new Error(`superfluid exited:\n${serverLog()}`);
    if (
      await fetch(`${url}/health`).then(
        (r) => r.status === 200,
        () => false,
      )
    )
      return { url, pid: server.pid! };
    await Bun.sleep(100);
  }
  throw new Error(`superfluid did not become healthy in 120 s:\n${serverLog()}`);
}

async function stopServer(): Promise<void> {
  if (!server) return;
  await stopGroup(server);
  server = undefined;
}

// ---------------------------------------------------------------- CPU time

const clockTicks = (() => {
  const r = spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" });
  const n = Number(r.stdout?.trim());
  return Number.isInteger(n) && n > 0 ? n : 100;
})();

/** A process's user + system CPU time in ms (all its threads, live and exited), or undefined when unreadable. */
function cpuMs(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return ((Number(rest[11]) + Number(rest[12])) * 1000) / clockTicks;
  } catch {
    return undefined;
  }
}

/** Each live thread's CPU time in ms, from the scheduler's nanosecond counters (/proc/PID/task/TID/schedstat). */
function threadMs(pid: number | undefined): Map<string, number> | undefined {
  if (pid === undefined) return undefined;
  try {
    const out = new Map<string, number>();
    for (const t of readdirSync(`/proc/${pid}/task`)) {
      try {
        out.set(t, Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, "utf8").split(" ")[0]) / 1e6);
      } catch {} // the thread ended between listing and reading
    }
    return out;
  } catch {
    return undefined;
  }
}

/**
 * CPU time between two readings: from the threads' nanosecond counters, finer
 * than the 10 ms ticks of utime+stime, unless a thread ended in between (its
 * time went with it), then from the ticks.
 */
function cpuDelta(
  t0: Map<string, number> | undefined,
  t1: Map<string, number> | undefined,
  tick0: number | undefined,
  tick1: number | undefined,
): number | undefined {
  if (t0 && t1 && [...t0.keys()].every((t) => t1.has(t))) {
    let ms = 0;
    for (const [t, v] of t1) ms += v - (t0.get(t) ?? 0);
    return ms;
  }
  return tick0 === undefined || tick1 === undefined ? undefined : tick1 - tick0;
}

/** The daemon's child process (its model worker), if there is exactly one. */
function workerOf(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const kids = readdirSync(`/proc/${pid}/task`).flatMap((t) =>
      readFileSync(`/proc/${pid}/task/${t}/children`, "utf8").trim().split(/\s+/).filter(Boolean),
    );
    return kids.length === 1 ? Number(kids[0]) : undefined;
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------- prompts

// Every request gets its own prompt: a lead word and a counter word, then
// seeded number words. The two APIs of a round get the same number words
// (the same length and nearly the same tokens: the same work) behind
// different lead words, and consecutive leads start with different letters,
// so no prompt shares more than the chat template's opening with any other
// in the prefix cache (the same few tokens on both APIs).
let bodyCounter = 0;
/** The number words of one round's n requests, given to both APIs. */
function makeBodies(n: number): string[] {
  return Array.from({ length: n }, () => {
    const rand = uniform(0x51ed270b ^ Math.imul(++bodyCounter, 0x85ebca6b));
    return Array.from({ length: promptWords - 2 }, () => NUMBER_WORDS[Math.floor(rand() * NUMBER_WORDS.length)]!).join(
      " ",
    );
  });
}

let leadCounter = 0;
function makePrompts(bodies: string[]): string[] {
  return bodies.map((body) => {
    const id = leadCounter++;
    return `${LEAD_WORDS[id % LEAD_WORDS.length]!} ${NUMBER_WORDS[Math.floor(id / LEAD_WORDS.length) % NUMBER_WORDS.length]!} ${body}`;
  });
}

// ---------------------------------------------------------------- one request

type Api = "ollama" | "openai";

interface RequestResult {
  ok: boolean;
  error?: string;
  ttftMs?: number; // sent -> first record/chunk carrying text
  totalMs: number; // sent -> end of stream
  records: number; // NDJSON records or SSE events received
  bytes: number; // body bytes received
  completionTokens?: number; // eval_count / usage.completion_tokens
  promptTokens?: number; // prompt_eval_count / usage.prompt_tokens
  cachedTokens?: number; // prompt_eval_cached_count / usage.prompt_tokens_details.cached_tokens
  prompt: string; // to replay a request (e.g. one that ended early)
  finish?: string; // done_reason / finish_reason
}

interface Route {
  path: string;
  body(model: string, prompt: string): Record<string, unknown>;
}

const ollamaOptions = { num_predict: tokens, temperature: 0 };
const openaiFields = { max_tokens: tokens, temperature: 0, stream: true, stream_options: { include_usage: true } };
const userTurn = (prompt: string) => [{ role: "user", content: prompt }];

const ROUTES: Record<PairName, Record<Api, Route>> = {
  raw: {
    ollama: {
      path: "/api/generate",
      body: (model, prompt) => ({ model, prompt, raw: true, stream: true, options: ollamaOptions }),
    },
    openai: { path: "/v1/completions", body: (model, prompt) => ({ model, prompt, ...openaiFields }) },
  },
  chat: {
    ollama: {
      path: "/api/chat",
      body: (model, prompt) => ({ model, messages: userTurn(prompt), stream: true, options: ollamaOptions }),
    },
    openai: {
      path: "/v1/chat/completions",
      body: (model, prompt) => ({ model, messages: userTurn(prompt), ...openaiFields }),
    },
  },
  generate: {
    ollama: {
      path: "/api/generate",
      body: (model, prompt) => ({ model, prompt, stream: true, options: ollamaOptions }),
    },
    openai: {
      path: "/v1/chat/completions",
      body: (model, prompt) => ({ model, messages: userTurn(prompt), ...openaiFields }),
    },
  },
};

/** Counts the bytes of a body as they pass. */
function counted(body: ReadableStream<Uint8Array>, into: { bytes: number }): ReadableStream<Uint8Array> {
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        into.bytes += chunk.byteLength;
        controller.enqueue(chunk);
      },
    }),
  );
}

function parse(text: string): any {
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`not JSON in stream: ${text.slice(0, 200)}`);
  }
}

async function readOllama(body: ReadableStream<Uint8Array>, r: RequestResult, t0: number): Promise<void> {
  let done = false;
  for await (const line of ndjsonLines(body)) {
    const rec = parse(line);
    r.records++;
    if (typeof rec?.error === "string") throw new Error(`stream error: ${rec.error.slice(0, 300)}`);
    const text =
      (rec?.response ?? "") + (rec?.message?.content ?? "") + (rec?.thinking ?? "") + (rec?.message?.thinking ?? "");
    if (text.length > 0) r.ttftMs ??= performance.now() - t0;
    if (rec?.done === true) {
      done = true;
      r.completionTokens = rec.eval_count;
      r.promptTokens = rec.prompt_eval_count;
      r.cachedTokens = rec.prompt_eval_cached_count;
      r.finish = rec.done_reason;
    }
  }
  if (!done) throw new Error("stream ended without a done record");
}

async function readOpenai(body: ReadableStream<Uint8Array>, r: RequestResult, t0: number): Promise<void> {
  let sawDone = false;
  for await (const ev of sseEvents(body)) {
    if (ev.error !== undefined) throw new Error(`stream error: ${ev.error.slice(0, 300)}`);
    const data = ev.data!.trim();
    r.records++;
    if (data === "[DONE]") {
      sawDone = true;
      break;
    }
    const chunk = parse(data);
    if (chunk?.error) throw new Error(`stream error: ${JSON.stringify(chunk.error).slice(0, 300)}`);
    const choice = Array.isArray(chunk?.choices) ? chunk.choices[0] : undefined;
    const text = (choice?.text ?? "") + (choice?.delta?.content ?? "") + (choice?.delta?.reasoning_content ?? "");
    if (text.length > 0) r.ttftMs ??= performance.now() - t0;
    if (choice?.finish_reason) r.finish = choice.finish_reason;
    const usage = chunk?.usage;
    if (usage && typeof usage.completion_tokens === "number") {
      r.completionTokens = usage.completion_tokens;
      r.promptTokens = usage.prompt_tokens;
      r.cachedTokens = usage.prompt_tokens_details?.cached_tokens;
    }
  }
  if (!sawDone) throw new Error("stream ended without [DONE]");
  if (r.completionTokens === undefined) throw new Error("stream had no usage");
}

async function runRequest(
  url: string,
  model: string,
  pair: PairName,
  api: Api,
  prompt: string,
): Promise<RequestResult> {
  const route = ROUTES[pair][api];
  const r: RequestResult = { ok: false, totalMs: 0, records: 0, bytes: 0, prompt };
  const signal = AbortSignal.any([AbortSignal.timeout(timeoutS * 1000), deadline.signal]);
  const t0 = performance.now();
  try {
    const res = await fetch(`${url}${route.path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(route.body(model, prompt)),
      signal,
    });
    if (!res.ok || !res.body)
      throw new Error(`HTTP ${res.status}: ${(await res.text().catch(() => "")).slice(0, 300)}`);
    const body = counted(res.body, r);
    await (api === "ollama" ? readOllama(body, r, t0) : readOpenai(body, r, t0));
    r.ok = true;
  } catch (e) {
    const err = e as Error;
    r.error =
      err.name === "TimeoutError"
        ? `timed out after ${timeoutS} s`
        : deadline.signal.aborted
          ? String(deadline.signal.reason?.message ?? "aborted")
          : err.message;
  }
  r.totalMs = performance.now() - t0;
  return r;
}

// ---------------------------------------------------------------- rounds

interface Round {
  pair: PairName;
  api: Api;
  concurrency: number;
  round: number; // negative for warm-up rounds
  wallMs: number;
  tokens: number;
  tokensPerSecond: number;
  daemonCpuMs?: number; // the round plus the gap after it (per-thread schedstat, else ticks)
  workerCpuMs?: number;
  daemonTickMs?: number; // the same from utime+stime
  workerTickMs?: number;
  clientCpuMs: number; // this process (reading the streams)
  requests: RequestResult[];
}

async function runRound(
  url: string,
  model: string,
  pids: { daemon?: number; worker?: number },
  pair: PairName,
  api: Api,
  bodies: string[],
  round: number,
): Promise<Round> {
  const concurrency = bodies.length;
  const prompts = makePrompts(bodies);
  const d0 = cpuMs(pids.daemon);
  const w0 = cpuMs(pids.worker);
  const s0 = threadMs(pids.daemon);
  const sw0 = threadMs(pids.worker);
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const requests = await Promise.all(prompts.map((p) => runRequest(url, model, pair, api, p)));
  const wallMs = performance.now() - t0;
  // The gap lets the server finish its after-reply work (journal, log) inside this round's CPU time.
  await Bun.sleep(gapMs);
  const d1 = cpuMs(pids.daemon);
  const w1 = cpuMs(pids.worker);
  const s1 = threadMs(pids.daemon);
  const sw1 = threadMs(pids.worker);
  const c1 = process.cpuUsage(c0);
  const total = requests.filter((q) => q.ok).reduce((n, q) => n + (q.completionTokens ?? 0), 0);
  return {
    pair,
    api,
    concurrency,
    round,
    wallMs,
    tokens: total,
    tokensPerSecond: total / (wallMs / 1000),
    daemonTickMs: d0 === undefined || d1 === undefined ? undefined : d1 - d0,
    workerTickMs: w0 === undefined || w1 === undefined ? undefined : w1 - w0,
    daemonCpuMs: cpuDelta(s0, s1, d0, d1),
    workerCpuMs: cpuDelta(sw0, sw1, w0, w1),
    clientCpuMs: (c1.user + c1.system) / 1000,
    requests,
  };
}

const median = (xs: number[]): number | undefined => {
  if (!xs.length) return undefined;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const defined = (xs: (number | undefined)[]): number[] =>
  xs.filter((x): x is number => x !== undefined && Number.isFinite(x));
const spread = (xs: number[], digits = 0) => {
  if (!xs.length) return "n/a";
  const [lo, hi] = [Math.min(...xs), Math.max(...xs)];
  return `${lo.toFixed(digits)}${lo < 0 ? " to " : "-"}${hi.toFixed(digits)}`;
};

interface Side {
  tokensPerSecond?: number;
  tpsRounds: number[];
  ttftMs?: number;
  totalMs?: number;
  daemonCpuMs?: number;
  daemonRounds: number[];
  daemonTickMs?: number;
  workerCpuMs?: number;
  clientCpuMs?: number;
  records?: number; // per request
  bytes?: number; // per request
  promptTokens?: number;
  cachedTokens?: number;
  requests: number;
  failed: number;
  wrongLength: number;
  notes: string[];
}

/**
 * A round is a fair sample when every request finished with the full reply:
 * the random-weight model now and then picks an end token in a batch (batched
 * arithmetic differs from one lane's in the last bits, so greedy picks differ
 * too), and a round with a shorter reply did less work.
 */
const isClean = (r: Round) => r.requests.every((q) => q.ok && q.completionTokens === tokens);

function side(measured: Round[], label: string): Side {
  const reqs = measured.flatMap((r) => r.requests);
  const done = reqs.filter((q) => q.ok);
  const clean = measured.filter(isClean);
  const notes: string[] = [];
  const failed = reqs.length - done.length;
  if (failed)
    notes.push(
      `${label}: ${failed}/${reqs.length} requests failed (${[...new Set(reqs.filter((q) => !q.ok).map((q) => q.error))].slice(0, 3).join("; ")})`,
    );
  const wrong = done.filter((q) => q.completionTokens !== tokens);
  if (wrong.length) {
    const got = [...new Set(wrong.map((q) => `${q.completionTokens} (${q.finish})`))];
    notes.push(`${label}: ${wrong.length}/${done.length} replies had ${got.join(", ")} tokens instead of ${tokens}`);
  }
  if (clean.length < measured.length)
    notes.push(`${label}: tok/s and CPU from the ${clean.length}/${measured.length} rounds with every reply full`);
  const full = done.filter((q) => q.completionTokens === tokens);
  const tps = clean.map((r) => r.tokensPerSecond);
  const daemon = defined(clean.map((r) => r.daemonCpuMs));
  return {
    tokensPerSecond: median(tps),
    tpsRounds: tps,
    ttftMs: median(defined(full.map((q) => q.ttftMs))),
    totalMs: median(full.map((q) => q.totalMs)),
    daemonCpuMs: median(daemon),
    daemonRounds: daemon,
    daemonTickMs: median(defined(clean.map((r) => r.daemonTickMs))),
    workerCpuMs: median(defined(clean.map((r) => r.workerCpuMs))),
    clientCpuMs: median(clean.map((r) => r.clientCpuMs)),
    records: median(full.map((q) => q.records)),
    bytes: median(full.map((q) => q.bytes)),
    promptTokens: median(defined(full.map((q) => q.promptTokens))),
    cachedTokens: median(defined(full.map((q) => q.cachedTokens))),
    requests: reqs.length,
    failed,
    wrongLength: wrong.length,
    notes,
  };
}

/** Ollama / OpenAI of each round pair (adjacent rounds), as median and range. */
function pairedRatios(o: Round[], a: Round[], of: (r: Round) => number | undefined): number[] {
  const out: number[] = [];
  for (let i = 0; i < Math.min(o.length, a.length); i++) {
    if (!isClean(o[i]!) || !isClean(a[i]!)) continue;
    const x = of(o[i]!);
    const y = of(a[i]!);
    if (x !== undefined && y !== undefined && y > 0) out.push(x / y);
  }
  return out;
}

// ---------------------------------------------------------------- run

let url: string;
let daemonPid: number | undefined;
let modelFile = "(the running server's)";
try {
  if (givenUrl) {
    url = givenUrl.replace(/\/+$/, "").replace(/\/v1$/, "");
    daemonPid = givenPid;
  } else {
    const m = opts.get("model") ?? "large-vocab";
    modelFile =
      m === "large-vocab"
        ? await ensureFixture("large-vocab")
        : existsSync(m)
          ? resolve(m)
          : fail(`--model: no such file ${m}`);
    log(
      `ollama: starting superfluid on ${modelFile} (--max-batch ${maxBatch} --max-context ${maxContext} --threads ${threads})`,
    );
    ({ url, pid: daemonPid } = await startServer(modelFile));
  }
} catch (e) {
  fail((e as Error).message);
}
const models = (await (await fetch(`${url}/v1/models`)).json()) as { data?: { id: string }[] };
const model = models.data?.[0]?.id ?? fail(`${url} lists no model`);
const pids = { daemon: daemonPid, worker: workerOf(daemonPid) };
log(
  `ollama: ${url} model ${model}; daemon pid ${pids.daemon ?? "unknown"}, worker pid ${pids.worker ?? "unknown"}; ` +
    `pairs ${pairs.join(",")}, concurrency ${levels.join(",")}, ${tokens} tokens, ${promptWords}-word prompts, ${warmup} warm-up + ${rounds} rounds`,
);

interface Result {
  pair: PairName;
  concurrency: number;
  ollama: Side;
  openai: Side;
  ratios: { tps: number[]; daemonCpu: number[] };
  /** Ollama's daemon CPU ms minus OpenAI's, per pair of adjacent rounds. */
  daemonCpuDiffMs: number[];
}
const results: Result[] = [];
const allRounds: Round[] = [];
let stoppedEarly: string | undefined;
const started = performance.now();

const fmt = (r: Round) => {
  const bad = r.requests.filter((q) => !q.ok).length;
  const cpu =
    r.daemonCpuMs === undefined
      ? ""
      : `, daemon CPU ${r.daemonCpuMs.toFixed(0)} ms, worker ${r.workerCpuMs?.toFixed(0) ?? "?"} ms`;
  return `${r.tokensPerSecond.toFixed(1)} tok/s in ${(r.wallMs / 1000).toFixed(2)} s${cpu}${bad ? `, ${bad} failed` : ""}`;
};

outer: for (const pair of pairs) {
  for (const c of levels) {
    const measured: Record<Api, Round[]> = { ollama: [], openai: [] };
    for (let r = -warmup; r < rounds; r++) {
      // Alternate which API goes first, so neither always follows the other.
      const order: Api[] = (r + warmup) % 2 === 0 ? ["ollama", "openai"] : ["openai", "ollama"];
      const bodies = makeBodies(c);
      for (const api of order) {
        if (deadline.signal.aborted) {
          stoppedEarly = `${String(deadline.signal.reason?.message ?? "stopped")} during ${pair} c=${c}`;
          break outer;
        }
        const round = await runRound(url, model, pids, pair, api, bodies, r);
        allRounds.push(round);
        log(`  ${pair} c=${c} ${api} ${r < 0 ? "warm-up" : `round ${r + 1}/${rounds}`}: ${fmt(round)}`);
        if (r >= 0) measured[api].push(round);
      }
    }
    results.push({
      pair,
      concurrency: c,
      ollama: side(measured.ollama, `${pair} c=${c} ${ROUTES[pair].ollama.path}`),
      openai: side(measured.openai, `${pair} c=${c} ${ROUTES[pair].openai.path}`),
      ratios: {
        tps: pairedRatios(measured.ollama, measured.openai, (x) => x.tokensPerSecond),
        daemonCpu: pairedRatios(measured.ollama, measured.openai, (x) => x.daemonCpuMs),
      },
      daemonCpuDiffMs: measured.ollama.flatMap((o, i) => {
        const a = measured.openai[i];
        return a && isClean(o) && isClean(a) && o.daemonCpuMs !== undefined && a.daemonCpuMs !== undefined
          ? [o.daemonCpuMs - a.daemonCpuMs]
          : [];
      }),
    });
  }
}
clearTimeout(deadlineTimer);
await stopServer();

// ---------------------------------------------------------------- report

const f = (v: number | undefined, digits = 1) => (v === undefined ? "n/a" : v.toFixed(digits));
const ratio = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined || b === 0 ? "n/a" : (a / b).toFixed(2);
const paired = (xs: number[]) => (xs.length ? `${median(xs)!.toFixed(2)} (${spread(xs, 2)})` : "n/a");
const label = (p: PairName) => `${ROUTES[p].ollama.path}${p === "raw" ? " raw" : ""} / ${ROUTES[p].openai.path}`;

const lines: string[] = [];
lines.push(
  `${tokens} tokens per reply (num_predict / max_tokens, temperature 0), ${promptWords}-word prompts (distinct per request, the same words after the first two on both APIs), ` +
    `${rounds} rounds per row, the two APIs alternating (first API swapped each round)`,
  "",
  "| pair | conc. | Ollama tok/s | OpenAI tok/s | tok/s O/A (rounds) | Ollama TTFT ms | OpenAI TTFT ms | TTFT O/A | Ollama total ms | OpenAI total ms | total O/A | daemon CPU ms O / A | CPU O/A (rounds) | worker CPU ms O / A | tokens check |",
  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
);
for (const r of results) {
  const o = r.ollama;
  const a = r.openai;
  const ok =
    o.failed + o.wrongLength + a.failed + a.wrongLength === 0
      ? "ok"
      : `${o.requests - o.failed - o.wrongLength}/${o.requests} / ${a.requests - a.failed - a.wrongLength}/${a.requests}`;
  lines.push(
    `| ${label(r.pair)} | ${r.concurrency} | ${f(o.tokensPerSecond)} | ${f(a.tokensPerSecond)} | ${paired(r.ratios.tps)} | ` +
      `${f(o.ttftMs)} | ${f(a.ttftMs)} | ${ratio(o.ttftMs, a.ttftMs)} | ${f(o.totalMs, 0)} | ${f(a.totalMs, 0)} | ${ratio(o.totalMs, a.totalMs)} | ` +
      `${f(o.daemonCpuMs, 0)} / ${f(a.daemonCpuMs, 0)} | ${paired(r.ratios.daemonCpu)} | ${f(o.workerCpuMs, 0)} / ${f(a.workerCpuMs, 0)} | ${ok} |`,
  );
}
lines.push(
  "",
  "| pair | conc. | Ollama tok/s rounds | OpenAI tok/s rounds | daemon CPU ms rounds O / A | daemon CPU ms from ticks O / A | daemon CPU O-A ms (rounds) | prompt tokens O / A | cached O / A | records per reply O / A | bytes per reply O / A | client CPU ms O / A |",
  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
);
for (const r of results) {
  const o = r.ollama;
  const a = r.openai;
  lines.push(
    `| ${label(r.pair)} | ${r.concurrency} | ${spread(o.tpsRounds, 1)} | ${spread(a.tpsRounds, 1)} | ${spread(o.daemonRounds)} / ${spread(a.daemonRounds)} | ${f(o.daemonTickMs, 0)} / ${f(a.daemonTickMs, 0)} | ` +
      `${r.daemonCpuDiffMs.length ? `${f(median(r.daemonCpuDiffMs), 0)} (${spread(r.daemonCpuDiffMs)})` : "n/a"} | ` +
      `${f(o.promptTokens, 0)} / ${f(a.promptTokens, 0)} | ${f(o.cachedTokens, 0)} / ${f(a.cachedTokens, 0)} | ${f(o.records, 0)} / ${f(a.records, 0)} | ` +
      `${f(o.bytes, 0)} / ${f(a.bytes, 0)} | ${f(o.clientCpuMs, 0)} / ${f(a.clientCpuMs, 0)} |`,
  );
}
lines.push(
  "",
  "tok/s: reply tokens of a round over its wall time (median round). TTFT: request sent to the first record or chunk with text; " +
    'total: request sent to the end of its stream (median request with a full reply). O/A: Ollama over OpenAI; "(rounds)" is the median and range of the ' +
    "ratios of adjacent rounds. Daemon CPU: the server process's CPU time over a round and the gap after it " +
    `(${gapMs} ms), from its threads' schedstat (from utime+stime in ${(1000 / clockTicks).toFixed(0)} ms ticks where a thread ended mid-round; the tick figure is also given); ` +
    "worker CPU: the model process's, the same work on both APIs.",
);
const notes = results.flatMap((r) => [...r.ollama.notes, ...r.openai.notes]);
if (pids.daemon === undefined) notes.push("daemon CPU not measured (no process id: pass --pid with --url)");
if (notes.length) lines.push("", "Notes:", ...notes.map((n) => `- ${n}`));
if (stoppedEarly) lines.push("", `Stopped early: ${stoppedEarly}; later rows were not measured.`);
console.log(lines.join("\n"));

if (jsonPath) {
  writeFileSync(
    jsonPath,
    `${JSON.stringify(
      {
        config: {
          url,
          model,
          modelFile,
          pairs,
          levels,
          tokens,
          rounds,
          warmup,
          promptWords,
          threads,
          maxContext,
          maxBatch,
          gapMs,
          timeoutS,
          clockTicks,
        },
        startedAt: new Date(Date.now() - (performance.now() - started)).toISOString(),
        seconds: (performance.now() - started) / 1000,
        stoppedEarly,
        results,
        rounds: allRounds,
      },
      null,
      2,
    )}\n`,
  );
  log(`wrote ${jsonPath}`);
}
// An odd short reply is noted and its round left out; a route that never
// gives full replies (num_predict or max_tokens not honoured) fails the run.
const problems = results.some(
  (r) =>
    r.ollama.failed ||
    r.openai.failed ||
    r.ollama.tokensPerSecond === undefined ||
    r.openai.tokensPerSecond === undefined,
);
process.exit(stoppedEarly || problems ? 1 : 0);
