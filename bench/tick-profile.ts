// Where one generated token's time goes, at 1 and 8 lanes, on this machine:
// llama_decode, sampling, the rest of the engine's tick, the worker's time
// between ticks (IPC send, event-loop turn), the daemon's handling of the tick
// (journal records), the journal sync's wait before delivery and the delivery
// itself, and the CPU each thread group spent (the daemon's HTTP and journal
// work, its sync thread pool, the prompt thread, the worker's compute threads).
// On a machine with as many decode threads as cores, every millisecond of CPU
// outside llama_decode is taken from a decode thread, so the CPU columns
// matter as much as the critical path.
//
//   bun bench/tick-profile.ts [--model PATH] [--lanes 1,8] [--tokens 64] [--rounds 5]
//                             [--threads 2] [--cpu-variant NAME] [--llama-lib DIR]
//                             [--temperature 0] [--extra JSON] [--sessions DIR] [--json PATH]
//
// The worker's and the daemon's figures come from /slots `tick_profile`
// (milliseconds summed since start; the difference over each round is
// used); CPU time from /proc/PID/task/TID/schedstat, so the CPU split needs
// Linux. Each round sends N concurrent streaming /v1/completions requests
// (distinct prompts, ignore_eos, --tokens each) to a server with N lanes.
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ChildProcess } from "node:child_process";
import { ensureFixture } from "../src/fixtures/index.ts";
import { machineLine } from "./machine.ts";
import { sseEvents } from "./sse.ts";
import { fail, median, parseOptions, scratchFolder, startSuperfluid, stopGroup } from "./support.ts";

const USAGE = `usage: bun bench/tick-profile.ts [options]

  --model PATH        GGUF to serve (default: the large-vocabulary fixture, 151k tokens)
  --lanes LIST        lane counts, each its own server and rounds (default 1,8)
  --tokens N          tokens per request (default 64)
  --rounds N          measured rounds per lane count; medians reported (default 5)
  --threads N         decode threads (default 2)
  --cpu-variant NAME  pin the ggml CPU variant (SUPERFLUID_CPU_VARIANT)
  --llama-lib DIR     open this libllama (SUPERFLUID_LLAMA_LIB)
  --temperature T     sampling temperature of every request (default 0: greedy)
  --extra JSON        extra fields merged into every request (e.g. '{"top_p":0.95}')
  --sessions DIR      the sessions folder (default: a scratch folder; put it on tmpfs to see the sync's cost)
  --json PATH         also write every round's figures as JSON`;

const { opts, int } = parseOptions(USAGE, [
  "model",
  "lanes",
  "tokens",
  "rounds",
  "threads",
  "cpu-variant",
  "llama-lib",
  "temperature",
  "extra",
  "sessions",
  "json",
]);
const laneCounts = (opts.get("lanes") ?? "1,8").split(",").map(Number);
if (laneCounts.some((n) => !Number.isInteger(n) || n < 1))
  fail(`--lanes must be positive integers, got ${opts.get("lanes")}`);
const tokens = int("tokens", 64, 2);
const rounds = int("rounds", 5, 1);
const threads = int("threads", 2, 1);
if (opts.has("cpu-variant")) process.env.SUPERFLUID_CPU_VARIANT = opts.get("cpu-variant")!;
if (opts.has("llama-lib")) process.env.SUPERFLUID_LLAMA_LIB = opts.get("llama-lib")!;
const temperature = Number(opts.get("temperature") ?? 0);
if (!Number.isFinite(temperature) || temperature < 0) fail(`--temperature must be a number >= 0`);
let extra: Record<string, unknown> = {};
try {
  extra = JSON.parse(opts.get("extra") ?? "{}");
} catch {
  fail(`--extra must be a JSON object, got ${opts.get("extra")}`);
}
const model = opts.get("model") ?? (await ensureFixture("large-vocab"));
const scratch = scratchFolder("sf-tick-profile-");

// ---------------------------------------------------------------- CPU per thread group

type Group =
  | "daemon main"
  | "daemon sync pool"
  | "prompt thread"
  | "daemon runtime"
  | "worker main"
  | "worker compute"
  | "worker runtime";

/** CPU nanoseconds per thread group of the server (the daemon and its worker processes). */
function groupCpu(daemonPid: number): Map<Group, number> {
  const out = new Map<Group, number>();
  if (!existsSync("/proc/self/schedstat")) return out;
  const add = (g: Group, ns: number) => out.set(g, (out.get(g) ?? 0) + ns);
  const workers = readdirSync("/proc")
    .filter((p) => /^\d+$/.test(p) && ppid(Number(p)) === daemonPid)
    .map(Number);
  for (const [pid, isWorker] of [[daemonPid, false], ...workers.map((w) => [w, true])] as [number, boolean][]) {
    let tids: string[];
    try {
      tids = readdirSync(`/proc/${pid}/task`);
    } catch {
      continue;
    }
    for (const tid of tids) {
      try {
        const ns = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
        const comm = readFileSync(`/proc/${pid}/task/${tid}/comm`, "utf8").trim();
        if (Number(tid) === pid) add(isWorker ? "worker main" : "daemon main", ns);
        else if (!isWorker && comm.startsWith("Bun Pool")) add("daemon sync pool", ns);
        else if (!isWorker && comm === "Worker") add("prompt thread", ns);
        // ggml's compute threads carry the program's name (or OpenMP's); Bun's own have theirs.
        else if (isWorker && (comm === "bun.exe" || comm === "bun" || comm.startsWith("superfluid")))
          add("worker compute", ns);
        else add(isWorker ? "worker runtime" : "daemon runtime", ns);
      } catch {} // the thread ended while read
    }
  }
  return out;
}

function ppid(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------- one round

interface TickProfile {
  worker: { ticks: number; tick_ms: number; decode_ms: number; sample_ms: number; between_ticks_ms: number };
  daemon: { ticks: number; on_tick_ms: number; durable_wait_ms: number; deliver_ms: number };
}

async function profileOf(url: string): Promise<TickProfile> {
  const slots = (await (await fetch(`${url}/slots`)).json()) as { tick_profile: TickProfile }[];
  return slots[0]!.tick_profile;
}

let promptId = 0;
async function request(url: string, modelId: string): Promise<{ itl: number; completion: number }> {
  const id = promptId++;
  const res = await fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: modelId,
      prompt: `profile ${id}: ${Array.from({ length: 24 }, (_, i) => `w${(id * 7919 + i * 104729) % 9973}`).join(" ")}`,
      max_tokens: tokens,
      ignore_eos: true,
      temperature,
      ...extra,
      stream: true,
      stream_options: { include_usage: true },
    }),
    signal: AbortSignal.timeout(300_000),
  });
  if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  let first: number | undefined;
  let last = 0;
  let completion = 0;
  for await (const ev of sseEvents(res.body)) {
    if (ev.error !== undefined) throw new Error(ev.error);
    if (ev.data!.trim() === "[DONE]") break;
    const chunk = JSON.parse(ev.data!);
    if (chunk.usage) completion = chunk.usage.completion_tokens;
    if (chunk.choices?.[0]?.text) {
      last = performance.now();
      first ??= last;
    }
  }
  return { itl: (last - first!) / Math.max(1, completion - 1), completion };
}

interface RoundFigures {
  lanes: number;
  ticks: number;
  tokens: number;
  itlMs: number;
  /** Per tick, milliseconds. */
  tick: number;
  decode: number;
  sample: number;
  engineOther: number;
  between: number;
  onTick: number;
  durableWait: number;
  deliver: number;
  /** CPU milliseconds per tick by thread group. */
  cpu: Record<string, number>;
}

async function round(url: string, modelId: string, pid: number, lanes: number): Promise<RoundFigures> {
  const p0 = await profileOf(url);
  const c0 = groupCpu(pid);
  const results = await Promise.all(Array.from({ length: lanes }, () => request(url, modelId)));
  const p1 = await profileOf(url);
  const c1 = groupCpu(pid);
  const ticks = p1.worker.ticks - p0.worker.ticks;
  const per = (a: number, b: number) => (a - b) / ticks;
  const cpu: Record<string, number> = {};
  for (const [g, ns] of c1) cpu[g] = (ns - (c0.get(g) ?? 0)) / 1e6 / ticks;
  const tick = per(p1.worker.tick_ms, p0.worker.tick_ms);
  const decode = per(p1.worker.decode_ms, p0.worker.decode_ms);
  const sample = per(p1.worker.sample_ms, p0.worker.sample_ms);
  return {
    lanes,
    ticks,
    tokens: results.reduce((n, r) => n + r.completion, 0),
    itlMs: median(results.map((r) => r.itl)),
    tick,
    decode,
    sample,
    engineOther: tick - decode - sample,
    between: per(p1.worker.between_ticks_ms, p0.worker.between_ticks_ms),
    onTick: (p1.daemon.on_tick_ms - p0.daemon.on_tick_ms) / ticks,
    durableWait: (p1.daemon.durable_wait_ms - p0.daemon.durable_wait_ms) / ticks,
    deliver: (p1.daemon.deliver_ms - p0.daemon.deliver_ms) / ticks,
    cpu,
  };
}

// ---------------------------------------------------------------- run

const all: RoundFigures[] = [];
const sampling =
  temperature === 0 && Object.keys(extra).length === 0
    ? "greedy (temperature 0)"
    : `temperature ${temperature}${Object.keys(extra).length > 0 ? `, ${JSON.stringify(extra)}` : ""}`;
const lines: string[] = [machineLine(), `sampling: ${sampling}`, ""];
for (const lanes of laneCounts) {
  let server: ChildProcess | undefined;
  const sessions = opts.get("sessions") ?? join(scratch, `sessions-${lanes}`);
  const url = await startSuperfluid(
    [
      model,
      "--max-batch",
      String(lanes),
      "--max-context",
      "1024",
      "--threads",
      String(threads),
      "--sessions",
      sessions,
    ],
    join(scratch, `superfluid-${lanes}.log`),
    (child) => (server = child),
  );
  const listed = (await (await fetch(`${url}/v1/models`)).json()) as {
    data: { id: string; runtime?: { cpu?: { variant: string | null } } }[];
  };
  const modelId = listed.data[0]!.id;
  if (lanes === laneCounts[0])
    lines[0] += `; ggml CPU variant ${listed.data[0]!.runtime?.cpu?.variant ?? "none (one CPU backend)"}; ${threads} decode threads`;
  await round(url, modelId, server!.pid!, lanes); // warm-up
  const mine: RoundFigures[] = [];
  for (let r = 0; r < rounds; r++) {
    const f = await round(url, modelId, server!.pid!, lanes);
    process.stderr.write(
      `  ${lanes} lanes round ${r + 1}/${rounds}: ${f.ticks} ticks, ITL ${f.itlMs.toFixed(2)} ms, decode ${f.decode.toFixed(3)} ms a tick\n`,
    );
    mine.push(f);
  }
  all.push(...mine);
  await stopGroup(server!);
  const m = (pick: (f: RoundFigures) => number) => median(mine.map(pick));
  const period = m((f) => f.tick + f.between);
  const outside = m((f) => f.tick - f.decode + f.between);
  lines.push(
    `### ${lanes} lane${lanes > 1 ? "s" : ""}: ${tokens} tokens a request, median of ${rounds} rounds, milliseconds per tick (${lanes} token${lanes > 1 ? "s" : ""} a tick)`,
    "",
    "| part | ms a tick | share of the tick period |",
    "|---|---:|---:|",
  );
  const row = (name: string, v: number) =>
    lines.push(`| ${name} | ${v.toFixed(3)} | ${((100 * v) / period).toFixed(1)}% |`);
  row(
    "worker: llama_decode",
    m((f) => f.decode),
  );
  row(
    "worker: sampling",
    m((f) => f.sample),
  );
  row(
    "worker: rest of the tick (admission, staging, bookkeeping)",
    m((f) => f.engineOther),
  );
  row(
    "worker: between ticks (IPC send, event-loop turn)",
    m((f) => f.between),
  );
  row("**worker: outside llama_decode, on the decode path**", outside);
  row(
    "daemon: reading the tick and journaling it",
    m((f) => f.onTick),
  );
  row(
    "daemon: delivering to the streams",
    m((f) => f.deliver),
  );
  row(
    "daemon: waiting for the journal sync (overlaps the next decode)",
    m((f) => f.durableWait),
  );
  lines.push("", `Tick period ${period.toFixed(3)} ms; client ITL ${m((f) => f.itlMs).toFixed(3)} ms.`, "");
  const groups = [...new Set(mine.flatMap((f) => Object.keys(f.cpu)))].sort();
  if (groups.length) {
    lines.push("| thread group | CPU ms a tick |", "|---|---:|");
    for (const g of groups) lines.push(`| ${g} | ${m((f) => f.cpu[g] ?? 0).toFixed(3)} |`);
    lines.push("");
  }
}
console.log(lines.join("\n"));
if (opts.has("json"))
  writeFileSync(
    opts.get("json")!,
    `${JSON.stringify({ machine: lines[0], tokens, rounds, threads, rounds_: all }, null, 2)}\n`,
  );
process.exit(0);
