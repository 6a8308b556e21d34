// What the multi-turn conversation benches share (anthropic-turns.ts,
// responses-turns.ts): their common flags, the servers each arm runs on
// (started fresh for every round, each in its own process group, on the same
// model, lanes, context and threads), the round loop that advances the arms'
// conversations turn by turn, a streamed request timed to its first content,
// the CPU time a server's processes spent, and the medians and summary table
// of the report. Each script keeps its own
// request shapes, per-turn table and usage text.
import type { ChildProcess } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { ensureFixture } from "../src/fixtures/index.ts";
import { uniform } from "../src/fixtures/prng.ts";
import { COMMON_WORDS } from "../src/fixtures/words.ts";
import { sseEvents } from "./sse.ts";
import { exited, fail, freePort, parseOptions, scratchFolder, spawnGroup, stopGroup } from "./support.ts";

// ---------------------------------------------------------------- options

/** The usage lines of the flags every turns bench takes (after its own first line). */
export const COMMON_USAGE = `  --model M          tiny-chat (default), large-vocab (the project's fixtures) or a GGUF path
  --rounds N         rounds; medians over them (default 3)
  --turns N          turns per conversation (default 20)
  --max-tokens N     the output cap of every turn (default 64)
  --system-words N   words of the system prompt / instructions (default 1500)
  --threads N        compute threads of each server (default 1; never more than the cores)
  --lanes N          superfluid --max-batch and llama-server -np (default 1)
  --ctx N            context per lane: superfluid --max-context, llama-server -c N*lanes (default 16384)
  --llama DIR        llama.cpp's llama-server folder (default ../shared/anchors/llama.cpp);
                     missing: superfluid runs alone
  --shipped-lib      superfluid on its own libllama (default: SUPERFLUID_LLAMA_LIB=DIR, the same build
                     as llama-server)
  --force-tools N    every Nth turn forces a tool call (default 0: always auto)
  --gap-ms N         pause before each request (default 50)
  --timeout S        per-request timeout in seconds (default 120)
  --json PATH        also write every turn's measurements`;

const VALUED = [
  "model",
  "rounds",
  "turns",
  "max-tokens",
  "system-words",
  "threads",
  "lanes",
  "ctx",
  "llama",
  "force-tools",
  "gap-ms",
  "timeout",
  "json",
];
const FLAGS = ["shipped-lib"];

export interface Setup {
  /** Prefix of the progress lines. */
  name: string;
  /** Every option given (the script's own ones too). */
  opts: Map<string, string>;
  modelPath: string;
  rounds: number;
  turns: number;
  maxTokens: number;
  systemWords: number;
  threads: number;
  lanes: number;
  ctx: number;
  forceTools: number;
  gapMs: number;
  timeoutS: number;
  jsonPath?: string;
  llamaDir: string;
  haveLlama: boolean;
  /** superfluid on llama-server's llama.cpp build (SUPERFLUID_LLAMA_LIB). */
  sameBuild: boolean;
  /** Scratch folder of the run (sessions); it goes, with every server, when the run ends. */
  tmp: string;
}

/**
 * Reads the common flags and the script's own (`valued`, `flags`), makes the fixture model if named, and the scratch
 * folder.
 */
export async function readSetup(
  name: string,
  usage: string,
  valued: string[] = [],
  flags: string[] = [],
): Promise<Setup> {
  const { opts, int } = parseOptions(usage, [...VALUED, ...valued], [...FLAGS, ...flags]);
  const llamaDir = resolve(opts.get("llama") ?? join(import.meta.dir, "../../shared/anchors/llama.cpp"));
  const modelArg = opts.get("model") ?? "tiny-chat";
  const modelPath =
    modelArg === "tiny-chat" || modelArg === "large-vocab"
      ? await ensureFixture(modelArg)
      : existsSync(modelArg)
        ? resolve(modelArg)
        : fail(`--model: no such file ${modelArg}`);
  const haveLlama = existsSync(join(llamaDir, "llama-server"));
  if (!haveLlama) console.error(`${name}: no llama-server in ${llamaDir}; superfluid runs alone`);
  const threads = int("threads", 1, 1);
  if (threads > navigator.hardwareConcurrency)
    console.error(`${name}: --threads ${threads} is more than the ${navigator.hardwareConcurrency} cores`);
  return {
    name,
    opts,
    modelPath,
    rounds: int("rounds", 3, 1),
    turns: int("turns", 20, 1),
    maxTokens: int("max-tokens", 64, 1),
    systemWords: int("system-words", 1500, 1),
    threads,
    lanes: int("lanes", 1, 1),
    ctx: int("ctx", 16384, 512),
    forceTools: int("force-tools", 0, 0),
    gapMs: int("gap-ms", 50, 0),
    timeoutS: int("timeout", 120, 1),
    jsonPath: opts.get("json"),
    llamaDir,
    haveLlama,
    // Without llama-server there is no build to share: superfluid takes its own.
    sameBuild: haveLlama && !opts.has("shipped-lib"),
    // Sessions; whatever way the run ends, no server outlives it.
    tmp: scratchFolder(`${name}-`),
  };
}

/** The libllama superfluid runs on, for the report. */
export const libraryNote = (s: Setup) => (s.sameBuild ? `SUPERFLUID_LLAMA_LIB=${s.llamaDir}` : "its shipped libllama");

// ---------------------------------------------------------------- servers

export interface Server {
  label: string;
  url: string;
  model: string;
  child: ChildProcess;
  log: string[];
}

/** Starts a server in its own process group; resolves once /health answers 200 and /v1/models names the model. */
async function startProcess(
  label: string,
  cmd: string,
  args: string[],
  env: Record<string, string>,
  port?: number,
): Promise<Server> {
  const child = spawnGroup(cmd, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
  const log: string[] = [];
  let found!: (port: number) => void;
  const announced = new Promise<number>((done) => (found = done));
  for (const stream of [child.stdout!, child.stderr!]) {
    stream.setEncoding("utf8");
    stream.on("data", (text: string) => {
      log.push(text);
      if (log.length > 400) log.splice(0, 200);
      // superfluid on --port 0 says where it listens.
      const m = /serving \S+ at http:\/\/127\.0\.0\.1:(\d+)/.exec(text);
      if (m) found(Number(m[1]));
    });
  }
  const unhealthy = () => new Error(`${label} did not become healthy:\n${log.join("").slice(-2000)}`);
  const p = port ?? (await Promise.race([announced, exited(child).then(() => 0), Bun.sleep(120_000).then(() => 0)]));
  if (!p) throw unhealthy();
  const url = `http://127.0.0.1:${p}`;
  for (let i = 0; i < 1200; i++) {
    if (child.exitCode !== null) throw unhealthy();
    if (
      await fetch(`${url}/health`).then(
        (r) => r.status === 200,
        () => false,
      )
    ) {
      const body = (await (await fetch(`${url}/v1/models`)).json()) as { data?: { id: string }[] };
      return { label, url, model: body.data?.[0]?.id ?? "model", child, log };
    }
    await Bun.sleep(100);
  }
  throw unhealthy();
}

/** superfluid on the setup's model, lanes, context and threads, with its own sessions folder; `extra` flags after those. */
export function startSuperfluid(s: Setup, label: string, sessions: string, extra: string[] = []): Promise<Server> {
  const args = [
    join(import.meta.dir, "../src/main.ts"),
    "serve",
    s.modelPath,
    "--port",
    "0",
    "--sessions",
    join(s.tmp, sessions),
  ];
  args.push("--max-batch", String(s.lanes), "--max-context", String(s.ctx), "--threads", String(s.threads), ...extra);
  return startProcess(label, process.execPath, args, {
    ...(s.sameBuild ? { SUPERFLUID_LLAMA_LIB: s.llamaDir } : {}),
    SUPERFLUID_QUIET: "1",
  });
}

/** llama.cpp's llama-server on the same model, lanes, context and threads; `extra` flags after those. */
export async function startLlama(s: Setup, label = "llama-server", extra: string[] = []): Promise<Server> {
  const port = await freePort();
  // --reasoning off: superfluid's templates run with thinking off unless a
  // request asks; llama-server's default turns it on where the template
  // supports it, which changes both the prompt and the reply.
  const args = [
    "-m",
    s.modelPath,
    "-c",
    String(s.ctx * s.lanes),
    "-np",
    String(s.lanes),
    "-t",
    String(s.threads),
    "--jinja",
    "--reasoning",
    "off",
  ];
  args.push("--host", "127.0.0.1", "--port", String(port), ...extra);
  return startProcess(label, join(s.llamaDir, "llama-server"), args, { LD_LIBRARY_PATH: s.llamaDir }, port);
}

/**
 * CPU time (ms) of every thread of every process in the server's process
 * group so far, from /proc/PID/task/TID/schedstat (ns on CPU): superfluid's
 * daemon, its prompt thread and its worker; llama-server. Unlike wall times
 * it does not move with the machine's other load. Threads that ended are not
 * counted, so only differences between reads while the server runs mean
 * anything. Undefined off Linux.
 */
export function groupCpuMs(server: Server): number | undefined {
  const group = server.child.pid;
  if (group === undefined || !existsSync("/proc/self/schedstat")) return undefined;
  let ns = 0;
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      // Fields after the command name (which may hold spaces): state, ppid, pgrp.
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]) !== group) continue;
      for (const tid of readdirSync(`/proc/${pid}/task`))
        ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
    } catch {} // the process or thread ended while read
  }
  return ns / 1e6;
}

// ---------------------------------------------------------------- the conversation

/**
 * A deterministic system prompt of numbered rules in ordinary words (the
 * fixtures' vocabularies split them into word-sized tokens), the same every
 * round and for every server.
 */
export function systemText(words: number): string {
  const rand = uniform(0x5eed1234);
  const out: string[] = ["You are a coding agent working in a software repository on behalf of a user."];
  let n = 0;
  for (let rule = 1; n < words; rule++) {
    const len = 8 + Math.floor(rand() * 14);
    const ws = Array.from({ length: len }, () => COMMON_WORDS[Math.floor(rand() * COMMON_WORDS.length)]!);
    out.push(`Rule ${rule}: ${ws.join(" ")}.`);
    n += len + 2;
  }
  return out.join("\n");
}

/** An agent's tools, as name, description and JSON schema; each API wraps them in its own shape. */
export const AGENT_TOOLS = [
  {
    name: "read_file",
    description: "Read a file of the repository, optionally a range of lines.",
    schema: {
      type: "object",
      properties: {
        path: { type: "string" },
        offset: { type: "integer", minimum: 0 },
        limit: { type: "integer", minimum: 1 },
      },
      required: ["path"],
    },
  },
  {
    name: "edit_file",
    description: "Replace one exact occurrence of old_string with new_string in a file.",
    schema: {
      type: "object",
      properties: { path: { type: "string" }, old_string: { type: "string" }, new_string: { type: "string" } },
      required: ["path", "old_string", "new_string"],
    },
  },
  {
    name: "run",
    description: "Run a shell command in the repository and return its output.",
    schema: {
      type: "object",
      properties: { command: { type: "string" }, timeout: { type: "integer", minimum: 1, maximum: 600 } },
      required: ["command"],
    },
  },
  {
    name: "search",
    description: "Search the repository for a regular expression.",
    schema: {
      type: "object",
      properties: { pattern: { type: "string" }, glob: { type: "string" } },
      required: ["pattern"],
    },
  },
];

/** The user message of turn `n`. */
export const stepText = (n: number) =>
  `Step ${n}: open src/module${n}.ts, check how it handles errors from the parser, and report what you find.`;

/** One measured request: the warm-up (turn 0) or a turn of a conversation. */
export interface TimedTurn {
  /** The arm's label. */
  system: string;
  round: number;
  turn: number;
  ok: boolean;
  error?: string;
  /** Request start to the first content delta. */
  ttftMs?: number;
  totalMs: number;
}

/**
 * POSTs `body` as JSON on a fresh connection (Bun's pooled connections to
 * llama-server are now and then reset on reuse, ECONNRESET; a fresh loopback
 * connect costs every server the same) and hands each SSE event's parsed JSON
 * to `onEvent` with the milliseconds since sending; `onEnd` checks the stream
 * was whole. Either may throw to fail the turn. Sets `turn.ok`, `turn.error`
 * and `turn.totalMs`; returns the reply (its headers) when one came.
 */
export async function timedSse(
  url: string,
  headers: Record<string, string>,
  body: unknown,
  turn: TimedTurn,
  timeoutS: number,
  onEvent: (event: any, ms: number) => void,
  onEnd: () => void,
): Promise<Response | undefined> {
  const t0 = performance.now();
  let res: Response | undefined;
  try {
    res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream", ...headers },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutS * 1000),
      keepalive: false,
    });
    if (!res.ok || !res.body)
      throw new Error(`HTTP ${res.status}: ${(await res.text().catch(() => "")).slice(0, 300)}`);
    for await (const ev of sseEvents(res.body)) {
      if (ev.error !== undefined) throw new Error(`stream error: ${ev.error.slice(0, 300)}`);
      onEvent(JSON.parse(ev.data!), performance.now() - t0);
    }
    onEnd();
    turn.ok = true;
  } catch (err) {
    const e = err as Error;
    turn.error = e.name === "TimeoutError" ? `timed out after ${timeoutS} s` : e.message;
  }
  turn.totalMs = performance.now() - t0;
  return res;
}

// ---------------------------------------------------------------- the run

/** One side of the comparison: a server and how a conversation runs on it. */
export interface Arm<T extends TimedTurn> {
  label: string;
  start(round: number): Promise<Server>;
  /**
   * A request that takes a fresh process through the same code, sharing only the template's first tokens with the
   * conversation.
   */
  warmUp(server: Server, round: number): Promise<T>;
  /** A new conversation on the server; its history grows with what that server returns. */
  conversation(server: Server, round: number): { turn(n: number): Promise<T> };
}

/**
 * Every round: starts each arm's server afresh (one after the other, so none
 * loads while another does), warms each up, then advances the conversations
 * turn by turn, the arms alternating (the arm that goes first rotates by
 * round) so load from elsewhere on the machine lands on all; --gap-ms before
 * each request lets a server finish its after-reply work before the next is
 * timed. Only one request is in flight at a time. Stops the servers after the
 * round, whatever happened. `describe` gives a turn's progress line.
 */
export async function runRounds<T extends TimedTurn>(
  s: Setup,
  arms: Arm<T>[],
  describe: (t: T) => string,
): Promise<T[]> {
  const results: T[] = [];
  for (let round = 0; round < s.rounds; round++) {
    const servers: Server[] = [];
    try {
      for (const arm of arms) servers.push(await arm.start(round));
      for (const [i, arm] of arms.entries()) {
        await Bun.sleep(s.gapMs);
        const warm = await arm.warmUp(servers[i]!, round);
        if (!warm.ok) throw new Error(`${arm.label} warm-up failed: ${warm.error}`);
        results.push(warm);
      }
      const shift = round % arms.length;
      const order = [...arms.keys()].map((i) => (i + shift) % arms.length);
      const convs = order.map((i) => ({ arm: arms[i]!, conv: arms[i]!.conversation(servers[i]!, round) }));
      for (let n = 1; n <= s.turns; n++) {
        for (const { arm, conv } of convs) {
          await Bun.sleep(s.gapMs);
          const t = await conv.turn(n);
          results.push(t);
          console.error(`round ${round + 1} turn ${n} ${arm.label}: ${t.ok ? describe(t) : `FAILED ${t.error}`}`);
        }
      }
    } finally {
      await Promise.all(servers.map((sv) => stopGroup(sv.child)));
    }
  }
  return results;
}

// ---------------------------------------------------------------- report

export const median = (xs: number[]): number | undefined => {
  if (!xs.length) return undefined;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
export const f1 = (x: number | undefined) => (x === undefined ? "-" : x.toFixed(1));
export const f2 = (x: number | undefined) => (x === undefined ? "-" : x.toFixed(2));
export const ratio = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined || b === 0 ? undefined : a / b;

/** Per-turn lookups over the successful turns of the results. */
export function byTurn<T extends TimedTurn>(results: T[]) {
  const of = (label: string, n: number) => results.filter((t) => t.system === label && t.turn === n && t.ok);
  return {
    of,
    /** The median over rounds of a measurement. */
    med: (label: string, n: number, pick: (t: T) => number | undefined) =>
      median(
        of(label, n)
          .map(pick)
          .filter((x): x is number => x !== undefined),
      ),
    /** Counts per round, joined when the rounds disagree. */
    counts: (label: string, n: number, pick: (t: T) => number | string | undefined) => {
      const vals = [...new Set(of(label, n).map((t) => pick(t) ?? "-"))];
      return vals.length ? vals.join("/") : "-";
    },
  };
}

/** A Markdown table's head: the first column left-aligned, the rest right-aligned. */
export function tableHead(columns: string[]): string {
  return `| ${columns.join(" | ")} |\n|${columns.map((_, i) => (i === 0 ? "---" : "---:")).join("|")}|`;
}

/**
 * The warm-up (a process's first request), turn 1 (nothing cached) and turns
 * 2..N (the earlier turns cached) apart: the median of the per-turn median
 * TTFTs, so each turn weighs the same, with the ratios `[name, a, b]` (a / b).
 * Prints the table; returns the numbers by span and label.
 */
export function printSpans(results: TimedTurn[], labels: string[], turns: number, ratios: [string, string, string][]) {
  const { med } = byTurn(results);
  console.log("");
  console.log(
    `| turns | ${labels.map((l) => `${l} TTFT ms`).join(" | ")}${ratios.map(([name]) => ` | ${name}`).join("")} |`,
  );
  console.log(`|---|${labels.map(() => "---:").join("|")}${ratios.map(() => "|---:").join("")}|`);
  const spans: [string, number[]][] = [
    ["0 (warm-up, a fresh process)", [0]],
    ["1", [1]],
  ];
  if (turns > 1) spans.push([`2-${turns}`, Array.from({ length: turns - 1 }, (_, i) => i + 2)]);
  const summary: Record<string, Record<string, number | undefined>> = {};
  for (const [name, ns] of spans) {
    const ms = labels.map((l) =>
      median(ns.map((n) => med(l, n, (t) => t.ttftMs)).filter((x): x is number => x !== undefined)),
    );
    const row = Object.fromEntries(labels.map((l, i) => [l, ms[i]]));
    summary[name] = row;
    console.log(
      `| ${name} | ${ms.map(f1).join(" | ")}${ratios.map(([, a, b]) => ` | ${f2(ratio(row[a], row[b]))}`).join("")} |`,
    );
  }
  return summary;
}

/** Names the failed turns, writes --json, and ends the run: status 1 when a turn failed. */
export function finish(s: Setup, results: TimedTurn[], summary: unknown, config: Record<string, unknown>): never {
  const failed = results.filter((t) => !t.ok);
  if (failed.length) {
    console.log(
      `\n${failed.length} turns failed, e.g. ${failed
        .slice(0, 3)
        .map((t) => `${t.system} round ${t.round + 1} turn ${t.turn}: ${t.error}`)
        .join("; ")}`,
    );
  }
  if (s.jsonPath) {
    const common = {
      model: s.modelPath,
      rounds: s.rounds,
      turns: s.turns,
      maxTokens: s.maxTokens,
      systemWords: s.systemWords,
      threads: s.threads,
      lanes: s.lanes,
    };
    const more = { ctx: s.ctx, llamaDir: s.llamaDir, sameBuild: s.sameBuild, forceTools: s.forceTools, gapMs: s.gapMs };
    writeFileSync(
      s.jsonPath,
      JSON.stringify({ config: { ...common, ...more, ...config }, summary, turns: results }, null, 2),
    );
  }
  process.exit(failed.length ? 1 : 0);
}
