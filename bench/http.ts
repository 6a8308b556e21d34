// HTTP benchmark: any OpenAI-compatible server, or two of them side by side.
//
//   bun bench/http.ts --serve MODEL.gguf [--llama-server DIR] [--lanes 8] [--context 1024]
//                     [--threads 2] [--cpu-variant haswell] [--llama-lib DIR] [options below]
//   bun bench/http.ts --url http://127.0.0.1:8453 [--label superfluid] [--model NAME]
//                     [--url2 http://127.0.0.1:18611 --label2 llama-server --model2 NAME]
//                     [--concurrency 1,2,4,8] [--tokens 128] [--rounds 5] [--prompt-words 32]
//                     [--warmup 1] [--sampling greedy,sampled] [--temperature T] [--extra '{"key":1}'] [--timeout 300]
//                     [--deadline 3600] [--wait 0] [--json out.json] [--passage FILE]
//
// Method: N concurrent streaming `POST /v1/completions` requests with distinct
// prompts and a fixed reply length (`max_tokens` + `ignore_eos: true`), each
// level run greedy (temperature 0) and sampled as clients send it
// (temperature 0.8, top_p 0.95) unless --sampling or --temperature says otherwise;
// throughput is the completion tokens of a round over the round's wall time,
// each figure is the median of --rounds rounds, and when two systems are
// compared their rounds are interleaved (A, B, A, B, ...) so drift hits both.
// Every request has a timeout (--timeout seconds) and the whole run stops by
// itself after --deadline seconds, printing what it measured so far. With
// --serve it starts the servers itself (superfluid from this checkout, and
// llama-server from --llama-server DIR with the same lanes, context per lane
// and threads) and stops them at the end; --cpu-variant pins both to one ggml
// CPU variant, to compare kernels on one machine. The report names the CPU
// and each side's variant.
import { readFileSync, writeFileSync } from "node:fs";
import { uniform } from "../src/fixtures/prng.ts";
import { LEAD_WORDS, NUMBER_WORDS } from "./prompt-words.ts";
import { sseEvents } from "./sse.ts";
import { fail, parseOptions, scratchFolder } from "./support.ts";
import { machineLine } from "./machine.ts";
import { startPair } from "./pair.ts";

// ---------------------------------------------------------------- arguments

const USAGE = `usage: bun bench/http.ts --url URL [options]
       bun bench/http.ts --serve MODEL [--llama-server DIR] [options]

  --serve MODEL         start superfluid on MODEL as system A (instead of --url)
  --llama-server DIR    with --serve: start DIR/llama-server on the same model as system B
  --lanes N             with --serve: lanes on both (default: the highest --concurrency)
  --context N           with --serve: context per lane on both (default 1024)
  --threads N           with --serve: compute threads on both (default 2)
  --cpu-variant NAME    with --serve: both decode on this ggml CPU variant (haswell, zen4, ...)
  --llama-lib DIR       with --serve: superfluid opens this libllama (SUPERFLUID_LLAMA_LIB),
                        e.g. llama-server's own build, to take the compiler out
  --url URL             system A (base URL, e.g. http://127.0.0.1:8453)
  --label NAME          name of system A in the table (default: A, or its host:port)
  --model NAME          model id sent to A (default: first id of A's GET /v1/models)
  --url2 URL            system B, compared round by round with A
  --label2 NAME         name of system B
  --model2 NAME         model id sent to B (default: B's first /v1/models id, else --model)
  --concurrency LIST    concurrent requests per level (default 1,2,4,8)
  --tokens N            completion tokens per request, forced with ignore_eos (default 128)
  --rounds N            measured rounds per level and system; the median is reported (default 5)
  --prompt-words N      words per prompt (default 32)
  --warmup N            unmeasured rounds per level and system before measuring (default 1)
  --sampling LIST       the sampling rows, from greedy (temperature 0) and sampled (temperature 0.8,
                        top_p 0.95, as clients send it); default greedy,sampled
  --temperature T       one row at this temperature instead of --sampling
  --extra JSON          extra fields merged into every request body (e.g. '{"top_k":1}')
  --timeout S           per-request timeout in seconds (default 300)
  --deadline S          the whole run stops after S seconds (default 3600)
  --wait S              wait up to S seconds for each server to answer GET /v1/models (default 0)
  --json PATH           also write every request's measurements as JSON
  --passage FILE        repetition-heavy prompts (speculative decoding): each is two distinct
                        lead words, the file's text, a blank line and the text's first 12 words
                        again, so a reply that goes on copying the text is predictable`;

const { opts, int, num } = parseOptions(USAGE, [
  "url",
  "label",
  "model",
  "url2",
  "label2",
  "model2",
  "concurrency",
  "tokens",
  "rounds",
  "prompt-words",
  "warmup",
  "sampling",
  "temperature",
  "extra",
  "timeout",
  "deadline",
  "wait",
  "json",
  "passage",
  "serve",
  "llama-server",
  "lanes",
  "context",
  "threads",
  "cpu-variant",
  "llama-lib",
]);

if (opts.has("serve") === opts.has("url")) fail(`give --url or --serve (one of them)\n\n${USAGE}`);
const tokens = int("tokens", 128, 1);
const rounds = int("rounds", 5, 1);
const promptWords = int("prompt-words", 32, 1);
const warmup = int("warmup", 1, 0);
/** One row of the report: a name and the sampling fields every request of it carries. */
interface SamplingSetting {
  name: string;
  fields: Record<string, unknown>;
}
const SAMPLING: Record<string, SamplingSetting> = {
  greedy: { name: "greedy", fields: { temperature: 0 } },
  sampled: { name: "t0.8 p0.95", fields: { temperature: 0.8, top_p: 0.95 } },
};
let settings: SamplingSetting[];
if (opts.has("temperature")) {
  const t = num("temperature", 0, 0);
  settings = [{ name: `t${t}`, fields: { temperature: t } }];
} else {
  settings = (opts.get("sampling") ?? "greedy,sampled").split(",").map((name) => {
    const setting = SAMPLING[name.trim()];
    if (!setting) fail(`--sampling takes greedy and sampled, got ${name}`);
    return setting!;
  });
}
const timeoutS = num("timeout", 300, 1);
const deadlineS = num("deadline", 3600, 1);
let waitS = num("wait", 0, 0);
const jsonPath = opts.get("json");
const passage = opts.has("passage") ? readFileSync(opts.get("passage")!, "utf8").trim() : undefined;
const levels = (opts.get("concurrency") ?? "1,2,4,8").split(",").map((s) => Number(s.trim()));
if (levels.some((c) => !Number.isInteger(c) || c < 1))
  fail(`--concurrency must be positive integers, got ${opts.get("concurrency")}`);
const lanes = int("lanes", Math.max(...levels), 1);
const contextPerLane = int("context", 1024, 64);
const threads = int("threads", 2, 1);
let extra: Record<string, unknown> = {};
if (opts.has("extra")) {
  try {
    extra = JSON.parse(opts.get("extra")!);
  } catch (e) {
    fail(`--extra is not JSON: ${(e as Error).message}`);
  }
}

// The whole run's deadline: aborts every request in flight when it passes.
const deadline = new AbortController();
const deadlineTimer = setTimeout(
  () => deadline.abort(new Error(`run deadline of ${deadlineS} s passed`)),
  deadlineS * 1000,
);
// Ctrl-C stops the run and prints what was measured; a second one exits at once.
process.on("SIGINT", () => {
  if (deadline.signal.aborted) process.exit(130);
  deadline.abort(new Error("interrupted"));
});

// ---------------------------------------------------------------- systems

interface System {
  label: string;
  url: string; // base, without a trailing slash or /v1
  model: string;
}

function baseUrl(raw: string): string {
  let u = raw.replace(/\/+$/, "");
  if (u.endsWith("/v1")) u = u.slice(0, -3);
  if (!/^https?:\/\//.test(u)) fail(`not an http(s) URL: ${raw}`);
  return u;
}

async function modelIds(url: string): Promise<string[]> {
  const until = Date.now() + waitS * 1000;
  for (;;) {
    try {
      const res = await fetch(`${url}/v1/models`, {
        signal: AbortSignal.any([AbortSignal.timeout(10_000), deadline.signal]),
      });
      if (res.ok) {
        const body = (await res.json()) as { data?: { id?: string }[] };
        return (body.data ?? []).map((m) => m.id).filter((id): id is string => typeof id === "string");
      }
      // A server still loading its model (llama-server answers 503) is waited for.
      if (res.status !== 503 || Date.now() >= until) throw new Error(`GET ${url}/v1/models: HTTP ${res.status}`);
    } catch (e) {
      if (Date.now() >= until || deadline.signal.aborted)
        throw new Error(`${url} does not answer: ${(e as Error).message}`);
    }
    await Bun.sleep(250);
  }
}

async function resolveSystem(
  raw: string,
  label: string | undefined,
  model: string | undefined,
  fallbackModel?: string,
): Promise<System> {
  const url = baseUrl(raw);
  const ids = await modelIds(url);
  const chosen = model ?? ids[0] ?? fallbackModel;
  if (!chosen) fail(`${url} lists no model; pass --model`);
  return { label: label ?? new URL(url).host, url, model: chosen };
}

// ---------------------------------------------------------------- prompts

// Each prompt is its own seeded sequence of number words behind a lead word.
// Consecutive prompts get lead words with different first letters (so they
// differ from their first token even under a byte-level tokenizer) and
// different second words, so neither a prefix cache nor a lane copying another
// lane's prefix can flatter a system: within a round, and against the
// sequences the last rounds left behind, prompts share at most BOS.
let promptCounter = 0;
function makePrompts(n: number): string[] {
  return Array.from({ length: n }, () => {
    const id = promptCounter++;
    const rand = uniform(0x9e3779b9 ^ Math.imul(id + 1, 0x85ebca6b));
    const words = [
      LEAD_WORDS[id % LEAD_WORDS.length]!,
      NUMBER_WORDS[Math.floor(id / LEAD_WORDS.length) % NUMBER_WORDS.length]!,
    ];
    if (passage !== undefined)
      return `${words.join(" ")}\n${passage}\n\n${passage.split(/\s+/).slice(0, 12).join(" ")}`;
    while (words.length < promptWords) words.push(NUMBER_WORDS[Math.floor(rand() * NUMBER_WORDS.length)]!);
    return words.slice(0, promptWords).join(" ");
  });
}

// ---------------------------------------------------------------- one request

interface RequestResult {
  ok: boolean;
  error?: string;
  ttftMs?: number; // request sent -> first chunk with text or tokens
  totalMs: number; // request sent -> end of stream
  lastTokenMs?: number; // request sent -> last chunk with text or tokens
  chunks: number; // chunks that carried text or tokens
  usageTokens?: number; // usage.completion_tokens from the final chunk
  promptTokens?: number;
  completionTokens: number; // usage if given, else the chunk count
  itlMs?: number; // (last token - first token) / (completion tokens - 1)
}

async function runRequest(sys: System, prompt: string, setting: SamplingSetting): Promise<RequestResult> {
  const body = {
    ...setting.fields,
    ...extra,
    model: sys.model,
    prompt,
    max_tokens: tokens,
    ignore_eos: true,
    stream: true,
    stream_options: { include_usage: true },
  };
  const t0 = performance.now();
  const r: RequestResult = { ok: false, totalMs: 0, chunks: 0, completionTokens: 0 };
  const signal = AbortSignal.any([AbortSignal.timeout(timeoutS * 1000), deadline.signal]);
  try {
    const res = await fetch(`${sys.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream" },
      body: JSON.stringify(body),
      signal,
    });
    if (!res.ok || !res.body) {
      const text = await res.text().catch(() => "");
      throw new Error(`HTTP ${res.status}: ${text.slice(0, 300)}`);
    }
    let sawDone = false;
    for await (const ev of sseEvents(res.body)) {
      if (ev.error !== undefined) throw new Error(`stream error: ${ev.error.slice(0, 300)}`);
      const data = ev.data!.trim();
      if (data === "[DONE]") {
        sawDone = true;
        break;
      }
      let chunk: any;
      try {
        chunk = JSON.parse(data);
      } catch {
        throw new Error(`not JSON in stream: ${data.slice(0, 200)}`);
      }
      if (chunk?.error) throw new Error(`stream error: ${JSON.stringify(chunk.error).slice(0, 300)}`);
      const now = performance.now() - t0;
      const choice = Array.isArray(chunk?.choices) ? chunk.choices[0] : undefined;
      const hasText = typeof choice?.text === "string" && choice.text.length > 0;
      const hasTokens = Array.isArray(choice?.tokens)
        ? choice.tokens.length > 0
        : Array.isArray(chunk?.tokens) && chunk.tokens.length > 0;
      if (hasText || hasTokens) {
        r.chunks++;
        r.ttftMs ??= now;
        r.lastTokenMs = now;
      }
      const usage = chunk?.usage;
      if (usage && typeof usage.completion_tokens === "number") {
        r.usageTokens = usage.completion_tokens;
        if (typeof usage.prompt_tokens === "number") r.promptTokens = usage.prompt_tokens;
      }
    }
    if (!sawDone && r.usageTokens === undefined) throw new Error("stream ended without [DONE] or usage");
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
  r.completionTokens = r.usageTokens ?? r.chunks;
  if (r.ttftMs !== undefined && r.lastTokenMs !== undefined && r.completionTokens > 1) {
    r.itlMs = (r.lastTokenMs - r.ttftMs) / (r.completionTokens - 1);
  }
  return r;
}

// ---------------------------------------------------------------- rounds

interface Round {
  system: string;
  sampling: string;
  concurrency: number;
  round: number; // -1.. for warm-up rounds
  wallMs: number;
  tokens: number; // completion tokens of the requests that finished
  tokensPerSecond: number;
  requests: RequestResult[];
}

async function runRound(
  sys: System,
  prompts: string[],
  concurrency: number,
  round: number,
  setting: SamplingSetting,
): Promise<Round> {
  const t0 = performance.now();
  const requests = await Promise.all(prompts.map((p) => runRequest(sys, p, setting)));
  const wallMs = performance.now() - t0;
  const done = requests.filter((q) => q.ok);
  const total = done.reduce((n, q) => n + q.completionTokens, 0);
  return {
    system: sys.label,
    sampling: setting.name,
    concurrency,
    round,
    wallMs,
    tokens: total,
    tokensPerSecond: total / (wallMs / 1000),
    requests,
  };
}

const median = (xs: number[]): number | undefined => {
  if (!xs.length) return undefined;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

interface Summary {
  system: string;
  sampling: string;
  concurrency: number;
  rounds: number;
  tokensPerSecond?: number; // median over rounds
  tokensPerSecondMin?: number;
  tokensPerSecondMax?: number;
  ttftMs?: number; // median over every request of every measured round
  itlMs?: number;
  promptTokens?: number;
  requests: number;
  failed: number;
  wrongLength: number; // finished requests whose completion tokens != --tokens
  withoutUsage: number; // finished requests counted from chunks (no usage in the stream)
  multiChunk: number; // finished requests with fewer text chunks than usage tokens
  notes: string[];
}

function summarize(sys: System, setting: SamplingSetting, concurrency: number, measured: Round[]): Summary {
  const reqs = measured.flatMap((r) => r.requests);
  const done = reqs.filter((q) => q.ok);
  // A round with a failed request is not a fair throughput sample.
  const clean = measured.filter((r) => r.requests.every((q) => q.ok));
  const rates = clean.map((r) => r.tokensPerSecond);
  const notes: string[] = [];
  const failed = reqs.length - done.length;
  if (failed) {
    const errs = [...new Set(reqs.filter((q) => !q.ok).map((q) => q.error))];
    notes.push(`${failed}/${reqs.length} requests failed (${errs.slice(0, 3).join("; ")})`);
  }
  const wrong = done.filter((q) => q.completionTokens !== tokens);
  if (wrong.length) {
    const got = [...new Set(wrong.map((q) => q.completionTokens))].sort((a, b) => a - b);
    notes.push(
      `${wrong.length}/${done.length} requests returned ${got.join(",")} completion tokens instead of ${tokens}` +
        (got.every((g) => g < tokens) ? " (is ignore_eos / max_tokens honoured?)" : ""),
    );
  }
  const noUsage = done.filter((q) => q.usageTokens === undefined);
  if (noUsage.length)
    notes.push(`${noUsage.length}/${done.length} streams had no usage; tokens counted from chunks (a lower bound)`);
  const multiChunk = done.filter((q) => q.usageTokens !== undefined && q.chunks < q.usageTokens).length;
  if (rates.length < measured.length)
    notes.push(`throughput from ${rates.length}/${measured.length} rounds without failures`);
  return {
    system: sys.label,
    sampling: setting.name,
    concurrency,
    rounds: measured.length,
    tokensPerSecond: median(rates),
    tokensPerSecondMin: rates.length ? Math.min(...rates) : undefined,
    tokensPerSecondMax: rates.length ? Math.max(...rates) : undefined,
    ttftMs: median(done.flatMap((q) => (q.ttftMs === undefined ? [] : [q.ttftMs]))),
    itlMs: median(done.flatMap((q) => (q.itlMs === undefined ? [] : [q.itlMs]))),
    promptTokens: median(done.flatMap((q) => (q.promptTokens === undefined ? [] : [q.promptTokens]))),
    requests: reqs.length,
    failed,
    wrongLength: wrong.length,
    withoutUsage: noUsage.length,
    multiChunk,
    notes,
  };
}

// ---------------------------------------------------------------- run

/** The servers --serve starts: their URLs, and the CPU variant llama-server decodes on. */
async function startServers(): Promise<{ urlA: string; urlB?: string; variantB?: string | null }> {
  const pair = await startPair({
    model: opts.get("serve")!,
    llamaDir: opts.get("llama-server"),
    lanes,
    contextPerLane,
    threads,
    cpuVariant: opts.get("cpu-variant"),
    llamaLib: opts.get("llama-lib"),
    scratch: scratchFolder("sf-bench-http-"),
  });
  return { urlA: pair.superfluid, urlB: pair.llamaServer, variantB: pair.llamaVariant };
}

const servers = opts.has("serve") ? await startServers() : { urlA: opts.get("url")!, urlB: opts.get("url2") };
const urlA = servers.urlA;
const urlB = servers.urlB;
if (opts.has("serve")) waitS = Math.max(waitS, 120);

/** The ggml CPU variant a superfluid reports in /v1/models (runtime.cpu); undefined from other servers. */
async function reportedVariant(url: string): Promise<string | null | undefined> {
  try {
    const body = (await (await fetch(`${url}/v1/models`)).json()) as {
      data?: { runtime?: { cpu?: { variant?: string | null } } }[];
    };
    return body.data?.[0]?.runtime?.cpu?.variant;
  } catch {
    return undefined;
  }
}

const systems: System[] = [];
try {
  systems.push(
    await resolveSystem(urlA, opts.get("label") ?? (opts.has("serve") ? "superfluid" : undefined), opts.get("model")),
  );
  if (urlB)
    systems.push(
      await resolveSystem(
        urlB,
        opts.get("label2") ?? (opts.has("llama-server") ? "llama-server" : undefined),
        opts.get("model2"),
        opts.get("model") ?? systems[0]!.model,
      ),
    );
} catch (e) {
  clearTimeout(deadlineTimer);
  fail((e as Error).message);
}
const variants = await Promise.all(
  systems.map(async (sys, i) =>
    i === 1 && servers.variantB !== undefined ? servers.variantB : reportedVariant(sys.url),
  ),
);
const machine = `${machineLine()}; ggml CPU variant: ${systems.map((sys, i) => `${sys.label} ${variants[i] === undefined ? "not reported" : (variants[i] ?? "one CPU backend")}`).join(", ")}`;
if (systems.length === 2 && systems[0]!.label === systems[1]!.label) systems[1]!.label += " (2)";
// Two systems get the same prompts in a round (same work), unless they are the
// same server, where B would find A's prompts in its cache.
const samePrompts = systems.length === 2 && systems[0]!.url !== systems[1]!.url;

const log = (s: string) => process.stderr.write(`${s}\n`);
log(
  `${machine}\n${systems.map((s) => `${s.label}: ${s.url} model ${s.model}`).join("\n")}\n` +
    `concurrency ${levels.join(",")}, ${tokens} tokens per request, ${promptWords} prompt words, ` +
    `${warmup} warm-up + ${rounds} measured rounds, sampling ${settings.map((x) => `${x.name} ${JSON.stringify(x.fields)}`).join(", ")}`,
);

const allRounds: Round[] = [];
const summaries: Summary[][] = []; // [level][system]
/** Per level, A's throughput over B's in each measured round (rounds alternate, so drift hits both). */
const roundRatios: number[][] = [];
let stoppedEarly: string | undefined;
const started = performance.now();

const fmtRound = (r: Round) => {
  const bad = r.requests.filter((q) => !q.ok).length;
  return `${r.tokensPerSecond.toFixed(1)} tok/s in ${(r.wallMs / 1000).toFixed(2)} s${bad ? `, ${bad} failed` : ""}`;
};

const levelRuns = settings.flatMap((setting) => levels.map((c) => ({ setting, c })));
outer: for (const { setting, c } of levelRuns) {
  const measured: Round[][] = systems.map(() => []);
  for (let r = -warmup; r < rounds; r++) {
    const shared = samePrompts ? makePrompts(c) : undefined;
    for (let s = 0; s < systems.length; s++) {
      if (deadline.signal.aborted) {
        stoppedEarly = `${String(deadline.signal.reason?.message ?? "stopped")} during c=${c} ${setting.name}`;
        if (measured.some((m) => m.length))
          summaries.push(systems.map((sys, i) => summarize(sys, setting, c, measured[i]!)));
        break outer;
      }
      const round = await runRound(systems[s]!, shared ?? makePrompts(c), c, r, setting);
      allRounds.push(round);
      log(
        `  ${setting.name} c=${c} ${systems[s]!.label} ${r < 0 ? "warm-up" : `round ${r + 1}/${rounds}`}: ${fmtRound(round)}`,
      );
      if (r >= 0) measured[s]!.push(round);
    }
  }
  summaries.push(systems.map((sys, i) => summarize(sys, setting, c, measured[i]!)));
  if (systems.length === 2)
    roundRatios.push(
      measured[0]!.map((a, i) => a.tokensPerSecond / (measured[1]![i]?.tokensPerSecond ?? NaN)).filter(Number.isFinite),
    );
}
clearTimeout(deadlineTimer);
if (deadline.signal.aborted && !stoppedEarly)
  stoppedEarly = `${String(deadline.signal.reason?.message ?? "stopped")} during the last round`;

// ---------------------------------------------------------------- report

const f = (v: number | undefined, digits = 1) => (v === undefined ? "n/a" : v.toFixed(digits));
const ratio = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined || b === 0 ? "n/a" : (a / b).toFixed(2);
const check = (s: Summary) =>
  s.failed || s.wrongLength ? `${s.requests - s.failed - s.wrongLength}/${s.requests}` : "ok";

const lines: string[] = [];
lines.push(
  machine,
  "",
  `${tokens} completion tokens per request (ignore_eos), ${promptWords}-word prompts, median of ${rounds} rounds` +
    (systems.length === 2 ? `, rounds interleaved ${systems[0]!.label} / ${systems[1]!.label}` : ""),
  "",
);
if (systems.length === 1) {
  const [a] = systems;
  lines.push(
    `| sampling | concurrency | ${a!.label} tok/s | rounds min-max | per request tok/s | TTFT ms | ITL ms | prompt tokens | tokens check |`,
  );
  lines.push("|---|---:|---:|---:|---:|---:|---:|---:|---|");
  for (const [s] of summaries) {
    lines.push(
      `| ${s!.sampling} | ${s!.concurrency} | ${f(s!.tokensPerSecond)} | ${s!.tokensPerSecondMin === undefined ? "n/a" : `${f(s!.tokensPerSecondMin, 0)}-${f(s!.tokensPerSecondMax, 0)}`} | ${f(s!.tokensPerSecond === undefined ? undefined : s!.tokensPerSecond / s!.concurrency)} | ` +
        `${f(s!.ttftMs)} | ${f(s!.itlMs, 2)} | ${f(s!.promptTokens, 0)} | ${check(s!)} |`,
    );
  }
} else {
  const [a, b] = systems.map((s) => s.label);
  lines.push(
    `| sampling | concurrency | ${a} tok/s | ${b} tok/s | tok/s ${a}/${b} | per-round ${a}/${b}, median (range) | ${a} TTFT ms | ${b} TTFT ms | TTFT ${a}/${b} | ${a} ITL ms | ${b} ITL ms | tokens check |`,
  );
  lines.push("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
  for (const [level, [sa, sb]] of summaries.entries()) {
    const per = roundRatios[level] ?? [];
    const perRound = per.length
      ? `${median(per)!.toFixed(2)} (${Math.min(...per).toFixed(2)}-${Math.max(...per).toFixed(2)})`
      : "n/a";
    lines.push(
      `| ${sa!.sampling} | ${sa!.concurrency} | ${f(sa!.tokensPerSecond)} | ${f(sb!.tokensPerSecond)} | ${ratio(sa!.tokensPerSecond, sb!.tokensPerSecond)} | ${perRound} | ` +
        `${f(sa!.ttftMs)} | ${f(sb!.ttftMs)} | ${ratio(sa!.ttftMs, sb!.ttftMs)} | ${f(sa!.itlMs, 2)} | ${f(sb!.itlMs, 2)} | ` +
        `${check(sa!) === "ok" && check(sb!) === "ok" ? "ok" : `${check(sa!)} / ${check(sb!)}`} |`,
    );
  }
}
lines.push("");
lines.push(
  "tok/s: completion tokens of all requests over the round's wall time (median round). TTFT: request sent to first streamed " +
    "token (median request). ITL: (last token - first token) / (tokens - 1) per request (median request). " +
    "Sampling: greedy is temperature 0; t0.8 p0.95 is temperature 0.8, top_p 0.95, as clients send it." +
    (systems.length === 2 ? " Throughput ratio > 1 and TTFT ratio < 1 favour the first system." : ""),
);
const notes = summaries
  .flat()
  .flatMap((s) => s.notes.map((n) => `- ${s.sampling} c=${s.concurrency} ${s.system}: ${n}`));
for (const sys of systems) {
  const mine = summaries.flat().filter((s) => s.system === sys.label);
  const multi = mine.reduce((n, s) => n + s.multiChunk, 0);
  const finished = mine.reduce((n, s) => n + s.requests - s.failed, 0);
  if (multi) {
    notes.push(
      `- ${sys.label}: ${multi}/${finished} streams had fewer text chunks than usage tokens ` +
        "(a chunk carried several tokens, or a token had no text); tokens taken from usage",
    );
  }
}
if (notes.length) lines.push("", "Notes:", ...notes);
if (stoppedEarly)
  lines.push("", `Stopped early: ${stoppedEarly}; that level is partial and later levels were not measured.`);
console.log(lines.join("\n"));

if (jsonPath) {
  writeFileSync(
    jsonPath,
    `${JSON.stringify(
      {
        config: {
          systems,
          levels,
          tokens,
          rounds,
          promptWords,
          warmup,
          settings,
          extra,
          timeoutS,
          deadlineS,
          machine,
        },
        roundRatios,
        startedAt: new Date(Date.now() - (performance.now() - started)).toISOString(),
        seconds: (performance.now() - started) / 1000,
        stoppedEarly,
        summaries: summaries.flat(),
        rounds: allRounds,
      },
      null,
      2,
    )}\n`,
  );
  log(`wrote ${jsonPath}`);
}
const problems = summaries.flat().some((s) => s.failed || s.wrongLength || s.tokensPerSecond === undefined);
process.exitCode = stoppedEarly || problems ? 1 : 0;
// The servers --serve started go with the run (scratchFolder's exit handler stops them).
if (opts.has("serve")) process.exit();
