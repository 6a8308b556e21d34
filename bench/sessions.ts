// Sessions benchmark (issue #6): what the session log costs, and first-token
// times cold, warm (a conversation's second turn, served from the prefix
// cache) and after a restart (the server SIGKILLed and started again on the
// same sessions directory).
//
//   bun bench/sessions.ts [--model PATH] [--tokens 128] [--rounds 5] [--threads N]
//                         [--prompt-tokens 1500] [--restarts 3] [--no-sync]
//                         [--no-logging-cost] [--no-first-token] [--windows 0,2]
//
// Logging cost: one worker, N concurrent generations of a fixed length; each
// round runs once with every token journaled and fsynced before delivery and
// once with no journal, interleaved, medians reported. --no-sync journals
// without fsync (not durable; it separates the sync's cost from the rest).
// --windows compares group-commit windows (ms; src/session-log/wal.ts), one store
// each, in the same rounds (default: the shipped window alone).
// First-token times: a server process on the same model; each cycle sends a
// conversation's first turn (cold), its second turn (warm), then kills the
// server, restarts it and sends the second turn again.
// Without --model it generates the large-vocabulary fixture into the cache.
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { WorkerOptions } from "../src/daemon/worker-client.ts";
import { WorkerClient } from "../src/daemon/worker-client.ts";
import { GREEDY } from "../src/engine/sampling.ts";
import { physicalCores } from "../src/engine/threads.ts";
import { ensureFixture } from "../src/fixtures/index.ts";
import { COMMON_WORDS } from "../src/fixtures/words.ts";
import { timedChat } from "./sse.ts";
import { SessionJournal } from "../src/session-log/journal.ts";
import { SessionStore } from "../src/session-log/store.ts";
import { GROUP_WINDOW_MS } from "../src/session-log/wal.ts";
import { LlamaModel } from "../src/engine/model.ts";
import { flag } from "./support.ts";

const model = flag("model") ?? (await ensureFixture("large-vocab"));
const replyTokens = Number(flag("tokens", "128"));
const rounds = Number(flag("rounds", "5"));
const threads = Number(flag("threads", String(physicalCores())));
const promptTokens = Number(flag("prompt-tokens", "1500"));
const restarts = Number(flag("restarts", "3"));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

// ------------------------------------------------------------ logging cost

async function loggingCost(): Promise<void> {
  // One store per group-commit window compared (--windows 0,2: unpaced and the default 2 ms).
  const windows = (flag("windows") ?? String(GROUP_WINDOW_MS)).split(",").map(Number);
  const stores = await Promise.all(
    windows.map(async (windowMs) => {
      const dir = mkdtempSync(join(tmpdir(), "superfluid-bench-sessions-"));
      return {
        windowMs,
        dir,
        store: await SessionStore.open(dir, { fsync: !process.argv.includes("--no-sync"), pacing: { windowMs } }),
      };
    }),
  );
  const vocab = LlamaModel.load(model, { vocabOnly: true });
  const journals = stores.map((s) => new SessionJournal(s.store, "bench", vocab));
  const opts: WorkerOptions = { model, maxBatch: 8, maxContext: 1024, threads };
  const worker = await WorkerClient.start(opts);
  const rate = async (lanes: number, round: number) => {
    const prompts = Array.from({ length: lanes }, (_, i) => [1, 100 + round * 31 + i, 200 + i, 300 + round]);
    const t0 = performance.now();
    const results = await Promise.all(
      prompts.map((prompt) =>
        worker.generate({ prompt, sampling: GREEDY, maxTokens: replyTokens, ignoreEos: true }).result(),
      ),
    );
    return results.reduce((n, r) => n + r.completionTokens, 0) / ((performance.now() - t0) / 1000);
  };
  const range = (xs: number[]) => `${Math.min(...xs).toFixed(3)}-${Math.max(...xs).toFixed(3)}`;
  console.log(`logging cost: ${replyTokens}-token replies, ${rounds} interleaved rounds, ${threads} threads`);
  console.log(
    "| lanes | window ms | journaled tok/s | no journal tok/s | ratio of medians | per-round ratio, median (range) | fsyncs per round |",
  );
  console.log("|---:|---:|---:|---:|---:|---:|---:|");
  for (const lanes of [1, 8]) {
    const withLog: number[][] = stores.map(() => []);
    const without: number[] = [];
    const syncs = stores.map(() => 0);
    opts.journal = undefined;
    await rate(lanes, 99); // warm-up
    for (let r = 0; r < rounds; r++) {
      // Each round: every window's journaled run, then no journal; the order rotates across rounds.
      const order = [...stores.keys(), -1];
      for (let k = 0; k < r % order.length; k++) order.push(order.shift()!);
      for (const v of order) {
        opts.journal = v < 0 ? undefined : journals[v];
        const before = v < 0 ? 0 : stores[v]!.store.stats.syncs;
        const tps = await rate(lanes, r * 4 + v + 1);
        if (v < 0) without.push(tps);
        else {
          withLog[v]!.push(tps);
          syncs[v]! += stores[v]!.store.stats.syncs - before;
        }
      }
    }
    const b = median(without);
    stores.forEach((s, v) => {
      const a = median(withLog[v]!);
      const paired = withLog[v]!.map((x, r) => x / without[r]!);
      console.log(
        `| ${lanes} | ${s.windowMs} | ${a.toFixed(1)} | ${b.toFixed(1)} | ${(a / b).toFixed(3)} | ${median(paired).toFixed(3)} (${range(paired)}) | ${Math.round(syncs[v]! / rounds)} |`,
      );
    });
  }
  await worker.close();
  for (const s of stores) {
    await s.store.close();
    rmSync(s.dir, { recursive: true, force: true });
  }
  vocab.free();
}

// ------------------------------------------------------------ first-token times

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

async function startServer(sessions: string, port: number) {
  const proc = Bun.spawn(
    [
      process.execPath,
      join(import.meta.dir, "../src/main.ts"),
      "serve",
      model,
      "--port",
      String(port),
      "--sessions",
      sessions,
      "--threads",
      String(threads),
      "--max-batch",
      "2",
      "--max-context",
      "4096",
    ],
    { stdout: "ignore", stderr: "ignore", env: { ...process.env, SUPERFLUID_QUIET: "1" } },
  );
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    if (
      await fetch(`${url}/health`).then(
        (r) => r.ok,
        () => false,
      )
    ) {
      const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[] };
      return { proc, url, model: models.data[0]!.id };
    }
    await Bun.sleep(100);
  }
  proc.kill("SIGKILL");
  throw new Error("server did not start");
}

/** A greedy 8-token streamed chat: ms to its first text, the reply and the cached prompt tokens. */
async function firstToken(server: { url: string; model: string }, messages: { role: string; content: string }[]) {
  const r = await timedChat(server.url, {
    model: server.model,
    messages,
    temperature: 0,
    max_tokens: 8,
    ignore_eos: true,
  });
  return { ms: r.firstMs, content: r.content, cached: r.cachedTokens };
}

/** A first turn of about `tokens` tokens: distinct words from a seed. */
function conversation(seed: number, words: number): { role: string; content: string }[] {
  let x = seed;
  const out: string[] = [];
  for (let i = 0; i < words; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out.push(COMMON_WORDS[x % COMMON_WORDS.length]!);
  }
  return [{ role: "user", content: out.join(" ") }];
}

async function firstTokenTimes(): Promise<void> {
  const sessions = mkdtempSync(join(tmpdir(), "superfluid-bench-restart-"));
  const port = await freePort();
  let server = await startServer(sessions, port);
  // Size the turn in tokens.
  let words = Math.round(promptTokens / 1.3);
  const tok = async (w: number) =>
    (
      (await (
        await fetch(`${server.url}/v1/tokenize`, {
          method: "POST",
          body: JSON.stringify({ content: conversation(1, w)[0]!.content }),
        })
      ).json()) as { tokens: number[] }
    ).tokens.length;
  for (let i = 0; i < 4; i++) words = Math.max(1, Math.round((words * promptTokens) / (await tok(words))));
  await firstToken(server, conversation(999, 50)); // warm-up: the worker's first request
  const cold: number[] = [];
  const warm: number[] = [];
  const restarted: number[] = [];
  const rows: string[] = [];
  try {
    for (let c = 0; c < restarts; c++) {
      const turn1 = conversation(100 + c, words);
      const a = await firstToken(server, turn1);
      const turn2 = [...turn1, { role: "assistant", content: a.content }, { role: "user", content: "and then?" }];
      const b = await firstToken(server, turn2);
      server.proc.kill("SIGKILL");
      await server.proc.exited;
      server = await startServer(sessions, port);
      const r = await firstToken(server, turn2);
      cold.push(a.ms);
      warm.push(b.ms);
      restarted.push(r.ms);
      rows.push(
        `cycle ${c}: cold ${a.ms.toFixed(1)} ms (cached ${a.cached}), warm ${b.ms.toFixed(1)} ms (cached ${b.cached}), after restart ${r.ms.toFixed(1)} ms (cached ${r.cached}); same reply after restart: ${r.content === b.content}`,
      );
    }
  } finally {
    server.proc.kill("SIGKILL");
    await server.proc.exited;
    rmSync(sessions, { recursive: true, force: true });
  }
  console.log(`\nfirst-token times, ~${promptTokens}-token first turn, ${restarts} cycles`);
  rows.forEach((r) => console.log(r));
  console.log(
    `median: cold ${median(cold).toFixed(1)} ms, warm ${median(warm).toFixed(1)} ms, after restart ${median(restarted).toFixed(1)} ms`,
  );
}

if (!process.argv.includes("--no-logging-cost")) await loggingCost();
if (!process.argv.includes("--no-first-token")) await firstTokenTimes();
