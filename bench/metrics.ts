// The cost of /metrics: generation throughput on one server with /metrics
// scraped every --scrape-ms (100) against no scraping, rounds alternating
// (none, scraped, none, ...) so drift in machine load falls on both sides.
//
//   bun bench/metrics.ts [--model large-vocab|tiny-chat|PATH] [--concurrency 4] [--tokens 128]
//                        [--rounds 6] [--warmup 1] [--scrape-ms 100] [--threads 1]
//                        [--max-context 2048] [--deadline 1800]
//
// Each round runs --concurrency streamed chat completions with ignore_eos, so
// every reply is exactly --tokens tokens; throughput is the round's generated
// tokens over its wall time. Reported: each side's median and their ratio
// (scraped / none; 1.0 = no cost), the median of each scraped round against
// the mean of the unscraped rounds either side of it (robust to load that
// drifts during the run), and the daemon's CPU time per scrape (its
// utime+stime over the scraped rounds less the unscraped ones). A scrape asks
// every model's worker for a snapshot (one IPC round trip between ticks) and
// formats ~30 families.
import { spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { ensureFixture } from "../src/fixtures/index.ts";
import { fail, parseOptions, scratchFolder, startSuperfluid, stopGroup } from "./support.ts";

const USAGE = `usage: bun bench/metrics.ts [options]

  --model M          large-vocab (default; generated once into the fixture cache), tiny-chat, or a GGUF path
  --concurrency N    streamed requests per round (default 4)
  --tokens N         reply tokens per request, ignore_eos (default 128)
  --rounds N         measured rounds per side (default 6)
  --warmup N         unmeasured rounds first (default 1)
  --scrape-ms N      the scraped side's period (default 100)
  --threads N        the server's compute threads (default 1)
  --max-context N    the server's tokens per lane (default 2048)
  --deadline S       the whole run stops after S seconds (default 1800)`;

const { opts, int } = parseOptions(USAGE, [
  "model",
  "concurrency",
  "tokens",
  "rounds",
  "warmup",
  "scrape-ms",
  "threads",
  "max-context",
  "deadline",
]);
const concurrency = int("concurrency", 4, 1);
const tokens = int("tokens", 128, 1);
const rounds = int("rounds", 6, 1);
const warmup = int("warmup", 1, 0);
const scrapeMs = int("scrape-ms", 100, 1);
const threads = int("threads", 1, 1);
const maxContext = int("max-context", 2048, 512);
const deadlineS = int("deadline", 1800, 1);

const log = (s: string) => process.stderr.write(`${s}\n`);
const tmp = scratchFolder("metrics-bench-");
const logPath = join(tmp, "server.log");
let server: ChildProcess | undefined;

function startServer(model: string): Promise<string> {
  const args = [
    ...(model === "tiny-chat" ? [] : [model]),
    "--sessions",
    join(tmp, "sessions"),
    "--max-batch",
    String(concurrency),
    "--max-context",
    String(maxContext),
    "--threads",
    String(threads),
  ];
  return startSuperfluid(args, logPath, (child) => (server = child));
}

/** One streamed request read to its end; resolves with the tokens its usage reports. */
async function oneRequest(url: string, modelId: string, i: number): Promise<number> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: modelId,
      messages: [{ role: "user", content: `Request ${i}: tell me about the number ${i * 7919}.` }],
      max_tokens: tokens,
      ignore_eos: true,
      temperature: 0,
      stream: true,
    }),
  });
  if (res.status !== 200) throw new Error(`request failed: ${res.status} ${await res.text()}`);
  const text = await res.text();
  const usage = text
    .split("\n")
    .filter((l) => l.startsWith("data: {"))
    .map((l) => JSON.parse(l.slice(6)))
    .find((e) => e.usage)?.usage;
  return usage?.completion_tokens ?? 0;
}

let requestCounter = 0;

const clockTicks = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout?.trim()) || 100;

/** The daemon's user + system CPU time in ms (its worker is a separate process). */
function daemonCpuMs(): number {
  const stat = readFileSync(`/proc/${server!.pid}/stat`, "utf8");
  const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(rest[11]) + Number(rest[12])) * 1000) / clockTicks;
}

/** One round: tokens per second, and the scrapes made during it. */
async function round(
  url: string,
  modelId: string,
  scraped: boolean,
): Promise<{ tps: number; scrapes: number; short: boolean; cpuMs: number }> {
  let scrapes = 0;
  let stop = false;
  const scraper = (async () => {
    while (scraped && !stop) {
      const started = performance.now();
      const res = await fetch(`${url}/metrics`);
      await res.text();
      scrapes++;
      await Bun.sleep(Math.max(0, scrapeMs - (performance.now() - started)));
    }
  })();
  const cpu0 = daemonCpuMs();
  const t0 = performance.now();
  const counts = await Promise.all(
    Array.from({ length: concurrency }, () => oneRequest(url, modelId, ++requestCounter)),
  );
  const seconds = (performance.now() - t0) / 1000;
  stop = true;
  await scraper;
  const total = counts.reduce((a, b) => a + b, 0);
  return { tps: total / seconds, scrapes, short: counts.some((c) => c !== tokens), cpuMs: daemonCpuMs() - cpu0 };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

const deadline = setTimeout(() => {
  log(`metrics: the run deadline of ${deadlineS} s passed`);
  void stopGroup(server!).finally(() => process.exit(1));
}, deadlineS * 1000);

try {
  const m = opts.get("model") ?? "large-vocab";
  const model =
    m === "large-vocab"
      ? await ensureFixture("large-vocab")
      : m === "tiny-chat"
        ? m
        : existsSync(m)
          ? resolve(m)
          : fail(`--model: no such file ${m}`);
  const url = await startServer(model);
  const modelId = ((await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[] }).data[0]!.id;
  log(
    `metrics: ${modelId}, ${concurrency} streams x ${tokens} tokens a round, ${rounds} rounds a side, scraping every ${scrapeMs} ms`,
  );
  for (let i = 0; i < warmup; i++) await round(url, modelId, i % 2 === 1);
  // none, scraped, none, ..., none: every scraped round has an unscraped one either side.
  const results: Awaited<ReturnType<typeof round>>[] = [];
  for (let i = 0; i < rounds * 2 + 1; i++) {
    const scraped = i % 2 === 1;
    const r = await round(url, modelId, scraped);
    results.push(r);
    log(
      `  round ${i + 1} ${scraped ? "scraped" : "none   "} ${r.tps.toFixed(1)} tok/s, daemon ${r.cpuMs.toFixed(0)} ms CPU${scraped ? ` (${r.scrapes} scrapes)` : ""}${r.short ? " (a short reply: left out)" : ""}`,
    );
  }
  const kept = (scraped: boolean) => results.filter((r, i) => i % 2 === (scraped ? 1 : 0) && !r.short);
  const none = median(kept(false).map((r) => r.tps));
  const withScrapes = median(kept(true).map((r) => r.tps));
  const paired = results.flatMap((r, i) =>
    i % 2 === 1 && !r.short && !results[i - 1]!.short && !results[i + 1]!.short
      ? [r.tps / ((results[i - 1]!.tps + results[i + 1]!.tps) / 2)]
      : [],
  );
  const sum = (rs: typeof results, f: (r: (typeof results)[number]) => number) => rs.reduce((n, r) => n + f(r), 0);
  const scrapedRounds = results.filter((_, i) => i % 2 === 1);
  const noneRounds = results.filter((_, i) => i % 2 === 0);
  const scrapes = sum(scrapedRounds, (r) => r.scrapes);
  // CPU per round on each side, the difference spread over the scrapes of a round.
  const cpuPerScrape =
    (sum(scrapedRounds, (r) => r.cpuMs) / scrapedRounds.length - sum(noneRounds, (r) => r.cpuMs) / noneRounds.length) /
    (scrapes / scrapedRounds.length);
  console.log(
    JSON.stringify({
      model: modelId,
      concurrency,
      tokens,
      scrapeMs,
      rounds,
      scrapes,
      noneTps: +none.toFixed(2),
      scrapedTps: +withScrapes.toFixed(2),
      ratio: +(withScrapes / none).toFixed(4),
      pairedRatio: +median(paired).toFixed(4),
      daemonCpuMsPerScrape: +cpuPerScrape.toFixed(2),
    }),
  );
} finally {
  clearTimeout(deadline);
  if (server) await stopGroup(server);
}
