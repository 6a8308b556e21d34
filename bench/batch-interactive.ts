// Batches beside interactive traffic (docs/api/batches.md#running): an
// interactive chat's time to first token on an idle server and while a
// 200-line batch runs on the same server, rounds alternating (idle first in
// even rounds, busy first in odd ones), medians reported with their ratio.
//
//   bun bench/batch-interactive.ts [--model large-vocab|tiny-chat|PATH] [--rounds 7] [--lines 200] [--batches 1]
//                                  [--line-tokens 256] [--prompt-words 150] [--tokens 8]
//                                  [--qos interactive] [--threads 1] [--max-batch 4] [--max-context 4096]
//                                  [--settle-ms 300] [--url URL] [--deadline 3600] [--json out.json]
//
// Each busy round uploads its own batch (distinct prompts, `ignore_eos` and
// --line-tokens per line, so a line is a steady background decode), or
// --batches of them (each runs one line at a time: --batches 4 on 4 lanes
// leaves the chat none free, so it must preempt a batch line), waits until
// their lines hold lanes in the background class and have decoded for
// --settle-ms, sends the chat, then cancels the batches and waits for
// `cancelled` before the next measurement. Every chat has its own prompt
// (no prefix-cache hits) and runs greedy to --tokens with `ignore_eos`; it is
// sent with `x-superfluid-qos: --qos`.
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ChildProcess } from "node:child_process";
import { ensureFixture } from "../src/fixtures/index.ts";
import { COMMON_WORDS } from "../src/fixtures/words.ts";
import { timedChat } from "./sse.ts";
import { fail, parseOptions, scratchFolder, startSuperfluid, stopGroup } from "./support.ts";

const USAGE = `usage: bun bench/batch-interactive.ts [options]

  --model M          large-vocab (default; generated once into the fixture cache), tiny-chat, or a GGUF path
  --rounds N         measured rounds, each one idle and one busy chat (default 7)
  --lines N          lines per batch (default 200)
  --batches N        batches running beside the busy chat (default 1; at most 4 run at once)
  --line-tokens N    max_tokens of each batch line, run with ignore_eos (default 256)
  --prompt-words N   words in each prompt, chats and lines alike (default 150)
  --tokens N         the interactive chat's reply tokens (default 8)
  --qos CLASS        the chat's x-superfluid-qos (default interactive)
  --threads N        the server's compute threads (default 1)
  --max-batch N      the server's lanes (default 4)
  --max-context N    the server's tokens per lane (default 4096)
  --settle-ms N      how long a batch line decodes before the chat is sent (default 300)
  --url URL          drive a running server instead of starting one
  --deadline S       the whole run stops after S seconds (default 3600)
  --json PATH        also write every round as JSON`;

const { opts, int } = parseOptions(USAGE, [
  "model",
  "rounds",
  "lines",
  "batches",
  "line-tokens",
  "prompt-words",
  "tokens",
  "qos",
  "threads",
  "max-batch",
  "max-context",
  "settle-ms",
  "url",
  "deadline",
  "json",
]);
const rounds = int("rounds", 7, 1);
const lines = int("lines", 200, 1);
const batches = int("batches", 1, 1);
if (batches > 4) fail("--batches: at most 4 batches run at once");
const lineTokens = int("line-tokens", 256, 1);
const promptWords = int("prompt-words", 150, 1);
const tokens = int("tokens", 8, 1);
const qos = opts.get("qos") ?? "interactive";
const threads = int("threads", 1, 1);
const maxBatch = int("max-batch", 4, 2);
const maxContext = int("max-context", 4096, 512);
const settleMs = int("settle-ms", 300, 0);
const deadlineS = int("deadline", 3600, 1);
const jsonPath = opts.get("json");
const givenUrl = opts.get("url");

setTimeout(() => {
  console.error(`batch-interactive: the run deadline of ${deadlineS} s passed`);
  process.exit(1);
}, deadlineS * 1000).unref();

const log = (s: string) => process.stderr.write(`${s}\n`);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

// ---------------------------------------------------------------- the server

const tmp = scratchFolder("batch-interactive-bench-");
const logPath = join(tmp, "server.log");
let server: ChildProcess | undefined;

async function modelPath(): Promise<string> {
  const m = opts.get("model") ?? "large-vocab";
  if (m === "large-vocab" || m === "tiny-chat") return ensureFixture(m);
  if (!existsSync(m)) fail(`--model: no such file ${m}`);
  return m;
}

/** Starts superfluid in its own process group (killed with the run), its output to a file; resolves on /health. */
async function startServer(): Promise<string> {
  const args = [
    await modelPath(),
    "--sessions",
    join(tmp, "sessions"),
    "--max-batch",
    String(maxBatch),
    "--max-context",
    String(maxContext),
    "--threads",
    String(threads),
  ];
  return startSuperfluid(args, logPath, (child) => (server = child));
}

// ---------------------------------------------------------------- requests

let seed = 0x2545f491;
/** Words no other prompt of the run starts with (a fresh seed each). */
function prompt(): string {
  let x = (seed = (Math.imul(seed, 0x9e3779b1) + 0x7f4a7c15) >>> 0);
  const out: string[] = [];
  for (let i = 0; i < promptWords; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out.push(COMMON_WORDS[(x >>> 8) % COMMON_WORDS.length]!);
  }
  return out.join(" ");
}

async function json(res: Response): Promise<any> {
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${res.url} answered ${res.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text);
}

async function slotsEntry(url: string): Promise<any> {
  return ((await json(await fetch(`${url}/slots`))) as any[])[0];
}

async function waitIdle(url: string): Promise<void> {
  for (;;) {
    const e = await slotsEntry(url);
    if (e.lanes.active === 0 && e.lanes.queued === 0) return;
    await Bun.sleep(20);
  }
}

async function chat(url: string, model: string): Promise<number> {
  const r = await timedChat(
    url,
    { model, messages: [{ role: "user", content: prompt() }], temperature: 0, max_tokens: tokens, ignore_eos: true },
    { "x-superfluid-qos": qos },
  );
  if (r.status !== 200 || r.completionTokens !== tokens)
    throw new Error(`the chat answered ${r.status} with ${r.completionTokens} tokens`);
  return r.firstMs;
}

/** Uploads a batch of `lines` distinct long lines and creates it; returns its id. */
async function startBatch(url: string, model: string): Promise<string> {
  const text = Array.from({ length: lines }, (_, i) =>
    JSON.stringify({
      custom_id: `l${i}`,
      method: "POST",
      url: "/v1/chat/completions",
      body: {
        model,
        messages: [{ role: "user", content: prompt() }],
        temperature: 0,
        max_tokens: lineTokens,
        ignore_eos: true,
      },
    }),
  ).join("\n");
  const form = new FormData();
  form.append("purpose", "batch");
  form.append("file", new Blob([text]), "lines.jsonl");
  const file = await json(await fetch(`${url}/v1/files`, { method: "POST", body: form }));
  const batch = await json(
    await fetch(`${url}/v1/batches`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" }),
    }),
  );
  return batch.id;
}

/** Waits until each batch has a line on a background lane, decoding, then `settleMs` more. */
async function waitBatchDecoding(url: string): Promise<void> {
  for (;;) {
    const e = await slotsEntry(url);
    if (e.lanes.per_class.background >= batches && e.lanes.decoding >= batches) break;
    await Bun.sleep(10);
  }
  await Bun.sleep(settleMs);
}

async function cancelBatch(url: string, id: string): Promise<number> {
  await json(await fetch(`${url}/v1/batches/${id}/cancel`, { method: "POST" }));
  for (;;) {
    const b = await json(await fetch(`${url}/v1/batches/${id}`));
    if (b.status === "cancelled") return b.request_counts.completed;
    await Bun.sleep(20);
  }
}

// ---------------------------------------------------------------- the run

const url = givenUrl ?? (await startServer());
const model = ((await json(await fetch(`${url}/v1/models`))) as { data: { id: string }[] }).data[0]!.id;
log(
  `batch-interactive: ${model} at ${url}; ${rounds} rounds, ${batches} batch(es) of ${lines} lines x ${lineTokens} tokens, chats of ${promptWords} words -> ${tokens} tokens in the ${qos} class`,
);
await chat(url, model); // warm-up: the first request's one-time costs

const idle: number[] = [];
const busy: number[] = [];
const record: { round: number; idleMs: number; busyMs: number; linesDone: number }[] = [];
for (let r = 0; r < rounds; r++) {
  let idleMs = NaN;
  let busyMs = NaN;
  let linesDone = 0;
  const measureIdle = async () => {
    await waitIdle(url);
    idleMs = await chat(url, model);
  };
  const measureBusy = async () => {
    await waitIdle(url);
    const ids: string[] = [];
    for (let b = 0; b < batches; b++) ids.push(await startBatch(url, model));
    await waitBatchDecoding(url);
    busyMs = await chat(url, model);
    for (const id of ids) linesDone += await cancelBatch(url, id);
  };
  if (r % 2 === 0) {
    await measureIdle();
    await measureBusy();
  } else {
    await measureBusy();
    await measureIdle();
  }
  idle.push(idleMs);
  busy.push(busyMs);
  record.push({ round: r, idleMs, busyMs, linesDone });
  log(
    `round ${r + 1}: idle ${idleMs.toFixed(1)} ms, beside batches ${busyMs.toFixed(1)} ms (${linesDone} lines had finished when they were cancelled)`,
  );
}

const idleMed = median(idle);
const busyMed = median(busy);
const ratio = busyMed / idleMed;
console.log(
  `\nTime to first token of a chat in the ${qos} class (${promptWords}-word prompt, ${maxBatch} lanes), median of ${rounds} rounds, rounds alternating:\n`,
);
console.log("| server state | TTFT ms (median) | min-max |");
console.log("|---|---:|---:|");
console.log(`| idle | ${idleMed.toFixed(1)} | ${Math.min(...idle).toFixed(1)}-${Math.max(...idle).toFixed(1)} |`);
console.log(
  `| ${batches} x ${lines}-line batch running | ${busyMed.toFixed(1)} | ${Math.min(...busy).toFixed(1)}-${Math.max(...busy).toFixed(1)} |`,
);
console.log(`\nbusy / idle: ${ratio.toFixed(2)}x (${ratio <= 2 ? "within" : "NOT within"} 2x)`);
if (jsonPath)
  writeFileSync(
    jsonPath,
    JSON.stringify({ model, rounds: record, idleMedianMs: idleMed, busyMedianMs: busyMed, ratio }, null, 2),
  );
if (server) await stopGroup(server);
process.exit(0);
