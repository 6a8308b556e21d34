// Agent turns over Anthropic's Messages API: one 20-turn agent conversation
// (a long cached system prompt and tools resent every turn, the cache
// breakpoint moving to the newest user block) streamed from superfluid and
// from llama.cpp's own llama-server on the same model, same machine, same
// lanes, context and threads; per-turn first-token times, medians of rounds.
//
//   bun bench/anthropic-turns.ts [--model tiny-chat|large-vocab|PATH] [--rounds 3] [--turns 20]
//                                [--max-tokens 64] [--system-words 1500] [--threads 1] [--lanes 1]
//                                [--ctx 16384] [--llama DIR] [--shipped-lib] [--force-tools N]
//                                [--no-cache-control] [--gap-ms 50] [--timeout 120] [--json out.json]
//
// Both servers are started fresh each round (and stopped after it), so every
// round is the same cold agent session: turn 1 finds nothing cached, turns
// 2..N find what the earlier turns left. A warm-up request first takes each
// process through the same code (a short system prompt with the same tools
// and breakpoints, so it shares only the template's first tokens with the
// conversation): turn 1 then times an uncached prompt, not a process's first
// request, which is reported apart (turn 0). Within a round the two conversations
// advance turn by turn, the servers alternating (which one goes first
// alternates by round), so load from elsewhere on the machine lands on both;
// --gap-ms between requests lets a server finish its after-reply work before
// the other is timed, as an agent's tool run would. Every request opens its
// own connection: Bun's pooled connections to llama-server are now and then
// reset on reuse (ECONNRESET), and a fresh loopback connection costs both the
// same.
//
// Progress goes to stderr, the Markdown tables to stdout. Exit status 1 when a
// turn failed.
import type { ChildProcess } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { ensureFixture } from "../src/fixtures/index.ts";
import { uniform } from "../src/fixtures/prng.ts";
import { COMMON_WORDS } from "../src/fixtures/words.ts";
import { sseEvents } from "./sse.ts";
import { exited, fail, freePort, parseOptions, scratchFolder, spawnGroup, stopGroup } from "./support.ts";

// ---------------------------------------------------------------- arguments

const USAGE = `usage: bun bench/anthropic-turns.ts [options]

  --model M          tiny-chat (default), large-vocab (the project's fixtures) or a GGUF path
  --rounds N         rounds; medians over them (default 3)
  --turns N          turns per conversation (default 20)
  --max-tokens N     max_tokens of every turn (default 64)
  --system-words N   words of the cached system prompt (default 1500)
  --threads N        compute threads of each server (default 1; never more than the cores)
  --lanes N          superfluid --max-batch and llama-server -np (default 1)
  --ctx N            context per lane: superfluid --max-context, llama-server -c N*lanes (default 16384)
  --llama DIR        llama.cpp's llama-server folder (default ../shared/anchors/llama.cpp);
                     missing: superfluid runs alone
  --shipped-lib      superfluid on its own libllama (default: SUPERFLUID_LLAMA_LIB=DIR, the same build
                     as llama-server)
  --force-tools N    every Nth turn sends tool_choice {type: any} (default 0: always auto)
  --no-cache-control the same conversation without cache_control breakpoints
  --gap-ms N         pause before each request (default 50)
  --timeout S        per-request timeout in seconds (default 120)
  --json PATH        also write every turn's measurements`;

const { opts, int } = parseOptions(
  USAGE,
  ["model", "rounds", "turns", "max-tokens", "system-words", "threads", "lanes", "ctx", "llama", "force-tools", "gap-ms", "timeout", "json"],
  ["shipped-lib", "no-cache-control"],
);
const rounds = int("rounds", 3, 1);
const turns = int("turns", 20, 1);
const maxTokens = int("max-tokens", 64, 1);
const systemWords = int("system-words", 1500, 1);
const threads = int("threads", 1, 1);
const lanes = int("lanes", 1, 1);
const ctx = int("ctx", 16384, 512);
const forceTools = int("force-tools", 0, 0);
const gapMs = int("gap-ms", 50, 0);
const timeoutS = int("timeout", 120, 1);
const jsonPath = opts.get("json");
const llamaDir = resolve(opts.get("llama") ?? join(import.meta.dir, "../../shared/anchors/llama.cpp"));
const cacheControl = !opts.has("no-cache-control");
const modelArg = opts.get("model") ?? "tiny-chat";
const modelPath =
  modelArg === "tiny-chat" || modelArg === "large-vocab" ? await ensureFixture(modelArg) : existsSync(modelArg) ? resolve(modelArg) : fail(`--model: no such file ${modelArg}`);
const llamaServer = join(llamaDir, "llama-server");
const haveLlama = existsSync(llamaServer);
if (!haveLlama) console.error(`turns: no llama-server in ${llamaDir}; superfluid runs alone`);
// Without llama-server there is no build to share: superfluid takes its own.
const sameBuild = haveLlama && !opts.has("shipped-lib");
if (threads > navigator.hardwareConcurrency) console.error(`turns: --threads ${threads} is more than the ${navigator.hardwareConcurrency} cores`);

// ---------------------------------------------------------------- processes

// Sessions; whatever way the run ends, no server outlives it.
const tmp = scratchFolder("anthropic-turns-");

interface Server {
  label: string;
  url: string;
  model: string;
  child: ChildProcess;
  log: string[];
}

/** Starts a server in its own process group; resolves once /health answers 200 and /v1/models names the model. */
async function startProcess(label: string, cmd: string, args: string[], env: Record<string, string>, port?: number): Promise<Server> {
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
  const fail = () => new Error(`${label} did not become healthy:\n${log.join("").slice(-2000)}`);
  const p = port ?? (await Promise.race([announced, exited(child).then(() => 0), Bun.sleep(120_000).then(() => 0)]));
  if (!p) throw fail();
  const url = `http://127.0.0.1:${p}`;
  for (let i = 0; i < 1200; i++) {
    if (child.exitCode !== null) throw fail();
    if (await fetch(`${url}/health`).then((r) => r.status === 200, () => false)) {
      const body = (await (await fetch(`${url}/v1/models`)).json()) as { data?: { id: string }[] };
      return { label, url, model: body.data?.[0]?.id ?? "model", child, log };
    }
    await Bun.sleep(100);
  }
  throw fail();
}

function startSuperfluid(round: number): Promise<Server> {
  const args = [join(import.meta.dir, "../src/main.ts"), "serve", modelPath, "--port", "0", "--sessions", join(tmp, `sessions-${round}`)];
  args.push("--max-batch", String(lanes), "--max-context", String(ctx), "--threads", String(threads));
  return startProcess("superfluid", process.execPath, args, { ...(sameBuild ? { SUPERFLUID_LLAMA_LIB: llamaDir } : {}), SUPERFLUID_QUIET: "1" });
}

async function startLlama(): Promise<Server> {
  const port = await freePort();
  // --reasoning off: superfluid's templates run with thinking off unless a
  // request asks; llama-server's default turns it on where the template
  // supports it, which changes both the prompt and the reply.
  const args = ["-m", modelPath, "-c", String(ctx * lanes), "-np", String(lanes), "-t", String(threads), "--jinja", "--reasoning", "off"];
  args.push("--host", "127.0.0.1", "--port", String(port));
  return startProcess("llama-server", llamaServer, args, { LD_LIBRARY_PATH: llamaDir }, port);
}

// ---------------------------------------------------------------- the conversation

// A deterministic system prompt of numbered rules in ordinary words (the
// fixtures' vocabularies split them into word-sized tokens), the same every
// round and for both servers.
function systemText(words: number): string {
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

const SYSTEM = [{ type: "text", text: systemText(systemWords), ...(cacheControl ? { cache_control: { type: "ephemeral" } } : {}) }];
const TOOLS = [
  {
    name: "read_file",
    description: "Read a file of the repository, optionally a range of lines.",
    input_schema: { type: "object", properties: { path: { type: "string" }, offset: { type: "integer", minimum: 0 }, limit: { type: "integer", minimum: 1 } }, required: ["path"] },
  },
  {
    name: "edit_file",
    description: "Replace one exact occurrence of old_string with new_string in a file.",
    input_schema: {
      type: "object",
      properties: { path: { type: "string" }, old_string: { type: "string" }, new_string: { type: "string" } },
      required: ["path", "old_string", "new_string"],
    },
  },
  {
    name: "run",
    description: "Run a shell command in the repository and return its output.",
    input_schema: { type: "object", properties: { command: { type: "string" }, timeout: { type: "integer", minimum: 1, maximum: 600 } }, required: ["command"] },
  },
  {
    name: "search",
    description: "Search the repository for a regular expression.",
    input_schema: { type: "object", properties: { pattern: { type: "string" }, glob: { type: "string" } }, required: ["pattern"] },
  },
];

type Block = Record<string, unknown> & { type: string };
interface Message {
  role: "user" | "assistant";
  content: string | Block[];
}

interface Turn {
  system: string;
  round: number;
  turn: number;
  ok: boolean;
  error?: string;
  /** Request start to the first content_block_delta. */
  ttftMs?: number;
  totalMs: number;
  stopReason?: string;
  blocks: string[];
  /** Usage as the server gave it: message_start's, overridden by message_delta's where present. */
  inputTokens?: number;
  cacheRead?: number;
  cacheCreation?: number;
  outputTokens?: number;
}

interface Streamed {
  turn: Turn;
  content: Block[];
}

/** Streams one Messages request, timing it to its first content delta. */
async function stream(sys: Server, body: Record<string, unknown>, turn: Turn): Promise<Streamed> {
  const content: Block[] = [];
  const partial = new Map<number, string>(); // tool_use input JSON by block index
  const t0 = performance.now();
  try {
    const res = await fetch(`${sys.url}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "anthropic-version": "2023-06-01", "x-api-key": "unused", accept: "text/event-stream" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutS * 1000),
      keepalive: false,
    });
    if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}: ${(await res.text().catch(() => "")).slice(0, 300)}`);
    let stopped = false;
    for await (const ev of sseEvents(res.body)) {
      if (ev.error !== undefined) throw new Error(`stream error: ${ev.error.slice(0, 300)}`);
      const e = JSON.parse(ev.data!) as any;
      const usage = e.type === "message_start" ? e.message?.usage : e.type === "message_delta" ? e.usage : undefined;
      if (usage) {
        turn.inputTokens = usage.input_tokens ?? turn.inputTokens;
        turn.cacheRead = usage.cache_read_input_tokens ?? turn.cacheRead;
        turn.cacheCreation = usage.cache_creation_input_tokens ?? turn.cacheCreation;
        turn.outputTokens = usage.output_tokens ?? turn.outputTokens;
      }
      if (e.type === "content_block_start") content[e.index] = { ...e.content_block };
      else if (e.type === "content_block_delta") {
        turn.ttftMs ??= performance.now() - t0;
        const b = content[e.index]!;
        const d = e.delta;
        if (d.type === "text_delta") b.text = `${b.text ?? ""}${d.text}`;
        else if (d.type === "thinking_delta") b.thinking = `${b.thinking ?? ""}${d.thinking}`;
        else if (d.type === "signature_delta") b.signature = `${b.signature ?? ""}${d.signature}`;
        else if (d.type === "input_json_delta") partial.set(e.index, (partial.get(e.index) ?? "") + d.partial_json);
      } else if (e.type === "message_delta") turn.stopReason = e.delta?.stop_reason;
      else if (e.type === "message_stop") stopped = true;
      else if (e.type === "error") throw new Error(`error event: ${JSON.stringify(e.error).slice(0, 300)}`);
    }
    if (!stopped) throw new Error("stream ended without message_stop");
    for (const [i, json] of partial) content[i]!.input = json ? JSON.parse(json) : {};
    turn.ok = true;
  } catch (err) {
    const e = err as Error;
    turn.error = e.name === "TimeoutError" ? `timed out after ${timeoutS} s` : e.message;
  }
  turn.totalMs = performance.now() - t0;
  turn.blocks = content.filter(Boolean).map((b) => b.type);
  return { turn, content: content.filter(Boolean) };
}

/** One system's conversation: its history grows with what that system returns. */
class Conversation {
  messages: Message[] = [];
  constructor(readonly sys: Server, readonly round: number) {}

  async turn(n: number): Promise<Turn> {
    // The breakpoint moves to the newest user block, as agents move it.
    for (const m of this.messages) if (Array.isArray(m.content)) for (const b of m.content) delete b.cache_control;
    const text = `Step ${n}: open src/module${n}.ts, check how it handles errors from the parser, and report what you find.`;
    this.messages.push({ role: "user", content: [{ type: "text", text, ...(cacheControl ? { cache_control: { type: "ephemeral" } } : {}) }] });
    const body = {
      model: this.sys.model,
      max_tokens: maxTokens,
      temperature: 0,
      stream: true,
      system: SYSTEM,
      tools: TOOLS,
      tool_choice: forceTools && n % forceTools === 0 ? { type: "any" } : { type: "auto" },
      messages: this.messages,
    };
    const turn: Turn = { system: this.sys.label, round: this.round, turn: n, ok: false, totalMs: 0, blocks: [] };
    const { content } = await stream(this.sys, body, turn);
    // The assistant content as returned (an empty reply would be refused as history).
    this.messages.push({ role: "assistant", content: content.length ? content : [{ type: "text", text: "(no reply)" }] });
    const calls = content.filter((b) => b.type === "tool_use");
    if (calls.length) {
      this.messages.push({ role: "user", content: calls.map((c) => ({ type: "tool_result", tool_use_id: c.id, content: `output of ${c.name} at step ${n}` })) });
      this.messages.push({ role: "assistant", content: "Noted." });
    }
    return turn;
  }
}

// ---------------------------------------------------------------- the run

const results: Turn[] = [];
const startedAt = new Date().toISOString();
const lib = (sameBuild ? `SUPERFLUID_LLAMA_LIB=${llamaDir}` : "its shipped libllama") + (cacheControl ? "" : "; no cache_control");
console.error(`turns: ${modelPath}, ${rounds} rounds x ${turns} turns, max_tokens ${maxTokens}, ${lanes} lane(s) x ${ctx} tokens, ${threads} thread(s); superfluid on ${lib}`);

for (let round = 0; round < rounds; round++) {
  const servers: Server[] = [];
  try {
    // One after the other, so neither loads while the other does.
    servers.push(await startSuperfluid(round));
    if (haveLlama) servers.push(await startLlama());
    for (const s of servers) {
      await Bun.sleep(gapMs);
      const system = [{ ...SYSTEM[0], text: "Warm-up request." }];
      const body = { model: s.model, max_tokens: 8, temperature: 0, stream: true, system, tools: TOOLS, messages: [{ role: "user", content: "Warm up." }] };
      const warm = await stream(s, body, { system: s.label, round, turn: 0, ok: false, totalMs: 0, blocks: [] });
      if (!warm.turn.ok) throw new Error(`${s.label} warm-up failed: ${warm.turn.error}`);
      results.push(warm.turn);
    }
    const order = round % 2 === 0 ? servers : [...servers].reverse();
    const convs = order.map((s) => new Conversation(s, round));
    for (let n = 1; n <= turns; n++) {
      for (const c of convs) {
        await Bun.sleep(gapMs);
        const t = await c.turn(n);
        results.push(t);
        const use = `in ${t.inputTokens ?? "-"} read ${t.cacheRead ?? "-"} created ${t.cacheCreation ?? "-"} out ${t.outputTokens ?? "-"}`;
        console.error(
          `round ${round + 1} turn ${n} ${c.sys.label}: ` +
            (t.ok ? `ttft ${t.ttftMs?.toFixed(1)} ms, total ${t.totalMs.toFixed(1)} ms, ${t.stopReason} [${t.blocks.join(",")}], ${use}` : `FAILED ${t.error}`),
        );
      }
    }
  } finally {
    await Promise.all(servers.map((s) => stopGroup(s.child)));
  }
}

// ---------------------------------------------------------------- report

const median = (xs: number[]): number | undefined => {
  if (!xs.length) return undefined;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const f1 = (x: number | undefined) => (x === undefined ? "-" : x.toFixed(1));
const f2 = (x: number | undefined) => (x === undefined ? "-" : x.toFixed(2));
const ratio = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined || b === 0 ? undefined : a / b);
const labels = haveLlama ? ["superfluid", "llama-server"] : ["superfluid"];
const of = (label: string, n: number) => results.filter((t) => t.system === label && t.turn === n && t.ok);
const med = (label: string, n: number, pick: (t: Turn) => number | undefined) =>
  median(of(label, n).map(pick).filter((x): x is number => x !== undefined));
/** Usage counts per round, joined when the rounds disagree. */
const counts = (label: string, n: number, pick: (t: Turn) => number | undefined) => {
  const vals = [...new Set(of(label, n).map((t) => pick(t) ?? "-"))];
  return vals.length ? vals.join("/") : "-";
};
const prompt = (t: Turn) => (t.inputTokens ?? 0) + (t.cacheRead ?? 0) + (t.cacheCreation ?? 0);

console.log(
  `${modelPath.split("/").at(-1)}, ${rounds} rounds (servers fresh each round), ${turns} turns, max_tokens ${maxTokens}, temperature 0, ` +
    `${lanes} lane(s) x ${ctx} tokens, ${threads} thread(s); superfluid on ${lib}. TTFT: request start to the first content_block_delta, median of rounds.\n`,
);
const head = haveLlama
  ? "| turn | superfluid TTFT ms | llama-server TTFT ms | ratio sf/llama | superfluid total ms | llama-server total ms | superfluid prompt / cache_read / created | llama-server prompt / cache_read | output tokens sf / llama |"
  : "| turn | superfluid TTFT ms | superfluid total ms | superfluid prompt / cache_read / created | output tokens |";
console.log(head);
console.log(`|${head.split("|").slice(1, -1).map((_, i) => (i === 0 ? "---" : "---:")).join("|")}|`);
for (let n = 1; n <= turns; n++) {
  const [sf, ls] = labels.map((l) => med(l, n, (t) => t.ttftMs));
  const sfUse = `${counts("superfluid", n, prompt)} / ${counts("superfluid", n, (t) => t.cacheRead)} / ${counts("superfluid", n, (t) => t.cacheCreation)}`;
  if (haveLlama) {
    const lsUse = `${counts("llama-server", n, prompt)} / ${counts("llama-server", n, (t) => t.cacheRead)}`;
    const out = `${counts("superfluid", n, (t) => t.outputTokens)} / ${counts("llama-server", n, (t) => t.outputTokens)}`;
    const totals = labels.map((l) => f1(med(l, n, (t) => t.totalMs)));
    console.log(`| ${n} | ${f1(sf)} | ${f1(ls)} | ${f2(ratio(sf, ls))} | ${totals.join(" | ")} | ${sfUse} | ${lsUse} | ${out} |`);
  } else console.log(`| ${n} | ${f1(sf)} | ${f1(med("superfluid", n, (t) => t.totalMs))} | ${sfUse} | ${counts("superfluid", n, (t) => t.outputTokens)} |`);
}

// The warm-up (a process's first request), turn 1 (nothing cached) and turns 2..N (the earlier turns cached) apart:
// the median of the per-turn medians, so each turn weighs the same.
console.log("");
console.log(`| turns | ${labels.map((l) => `${l} TTFT ms`).join(" | ")}${haveLlama ? " | ratio sf/llama" : ""} |`);
console.log(`|---|${labels.map(() => "---:").join("|")}${haveLlama ? "|---:" : ""}|`);
const spans: [string, number[]][] = [["0 (warm-up, a fresh process)", [0]], ["1", [1]]];
if (turns > 1) spans.push([`2-${turns}`, Array.from({ length: turns - 1 }, (_, i) => i + 2)]);
const summary: Record<string, Record<string, number | undefined>> = {};
for (const [name, ns] of spans) {
  const ms = labels.map((l) => median(ns.map((n) => med(l, n, (t) => t.ttftMs)).filter((x): x is number => x !== undefined)));
  summary[name] = Object.fromEntries(labels.map((l, i) => [l, ms[i]]));
  console.log(`| ${name} | ${ms.map(f1).join(" | ")}${haveLlama ? ` | ${f2(ratio(ms[0], ms[1]))}` : ""} |`);
}

const failed = results.filter((t) => !t.ok);
if (failed.length) {
  console.log(`\n${failed.length} turns failed, e.g. ${failed.slice(0, 3).map((t) => `${t.system} round ${t.round + 1} turn ${t.turn}: ${t.error}`).join("; ")}`);
}
if (jsonPath) {
  const config = { model: modelPath, rounds, turns, maxTokens, systemWords, threads, lanes, ctx, llamaDir, sameBuild, cacheControl, forceTools, gapMs, startedAt };
  writeFileSync(jsonPath, JSON.stringify({ config, summary, turns: results }, null, 2));
}
process.exit(failed.length ? 1 : 0);
