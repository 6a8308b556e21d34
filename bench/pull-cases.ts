// What a user sees, case by case, when `superfluid pull REF` meets the Hub
// (docs/cli.md#pulling-models): each case runs the CLI as a user does, in its
// own process, against the project's Hub stand-in on loopback
// (test/support/hub-standin.ts), and the table gives its exit code, the
// last line it printed, the requests it made and what the cache holds after.
// Also: the time to a served /health 200 for a cached reference against the
// same file by path, and the download rate with parallel ranged parts
// against one connection through a rate-limited CDN stand-in.
//
//   bun bench/pull-cases.ts [--runs 5]
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fakeGguf, HubStandin } from "../test/support/hub-standin.ts";
import { fixturePath } from "../test/support/models.ts";
import { machineLine } from "./machine.ts";
import { freePort, parseOptions } from "./support.ts";

const { int } = parseOptions("usage: bun bench/pull-cases.ts [--runs 5]", ["runs"]);
const runs = int("runs", 5, 1);
const MAIN = join(import.meta.dir, "../src/main.ts");
const hub = await new HubStandin().start();
const scratch = mkdtempSync(join(tmpdir(), "sf-pull-cases-"));
process.on("exit", () => rmSync(scratch, { recursive: true, force: true }));

/** Every file under the cache, relative, with `->` for links. */
function cacheFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    let entries: string[];
    try {
      entries = readdirSync(d);
    } catch {
      return;
    }
    for (const e of entries.sort()) {
      const p = join(d, e);
      const st = statSync(p, { throwIfNoEntry: false });
      if (st?.isDirectory()) walk(p);
      else out.push(relative(dir, p).replace(/\b[0-9a-f]{64}\b/g, (h) => `${h.slice(0, 8)}…`));
    }
  };
  walk(dir);
  return out;
}

async function cli(args: string[], env: Record<string, string>): Promise<{ code: number; last: string }> {
  const child = Bun.spawn([process.execPath, MAIN, ...args], {
    env: { ...process.env, SUPERFLUID_QUIET: "1", ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text()]);
  const code = await child.exited;
  const lines = `${err}\n${out}`
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("superfluid: pulling") && !/\d+%/.test(l));
  return { code, last: lines.at(-1) ?? "" };
}

const model = fakeGguf(3 << 20);
hub.addRepo("org/demo-GGUF", { "demo-Q4_K_M.gguf": model, "demo-Q8_0.gguf": fakeGguf(1 << 20) });
hub.addRepo("org/gated-GGUF", { "g-Q4_K_M.gguf": fakeGguf(1 << 20) }, { gated: true });
hub.addRepo("org/bad-GGUF", { "b-Q4_K_M.gguf": fakeGguf(1 << 20) });
hub.addRepo("org/cut-GGUF", { "c-Q4_K_M.gguf": fakeGguf(2 << 20) });
const closedPort = await freePort();

interface Case {
  what: string;
  args: string[];
  env?: Record<string, string>;
  /** Reuse the cache of the case before. */
  sameCache?: boolean;
  before?: () => void;
}
const cases: Case[] = [
  { what: "a new reference (no tag: Q4_K_M)", args: ["pull", "org/demo-GGUF"] },
  { what: "the same reference again (cached)", args: ["pull", "org/demo-GGUF"], sameCache: true },
  { what: "offline, cached", args: ["pull", "--offline", "org/demo-GGUF"], sameCache: true },
  { what: "offline, not cached", args: ["pull", "org/demo-GGUF:Q8_0"], env: { HF_HUB_OFFLINE: "1" }, sameCache: true },
  { what: "unknown repo", args: ["pull", "org/nothing-GGUF"] },
  { what: "no file for the tag", args: ["pull", "org/demo-GGUF:Q5_K_S"] },
  { what: "gated repo, no token", args: ["pull", "org/gated-GGUF"] },
  {
    what: "no network (nothing listens)",
    args: ["pull", "org/demo-GGUF"],
    env: { HF_ENDPOINT: `http://127.0.0.1:${closedPort}` },
  },
  {
    what: "a corrupt download",
    args: ["pull", "org/bad-GGUF"],
    before: () => hub.faults.corrupt.add(hub.sha("org/bad-GGUF", "b-Q4_K_M.gguf")),
  },
  {
    what: "a connection cut twice mid-file",
    args: ["pull", "org/cut-GGUF"],
    before: () => {
      hub.faults.corrupt.clear();
      hub.faults.cut = { afterBytes: 300_000, times: 2 };
    },
  },
];

const rows: string[] = [];
let cache = "";
for (const c of cases) {
  if (!c.sameCache) cache = mkdtempSync(join(scratch, "hub-"));
  c.before?.();
  hub.resetCounters();
  const r = await cli(c.args, { HF_ENDPOINT: hub.hubUrl, HF_HUB_CACHE: cache, ...(c.env ?? {}) });
  const files = cacheFiles(cache).filter((f) => !f.startsWith(".locks"));
  rows.push(
    `| ${c.what} | \`superfluid ${c.args.join(" ")}\` | ${r.code} | ${r.last.replaceAll("|", "\\|")} | ${hub.requests.length} | ${files.length ? files.map((f) => `\`${f}\``).join("<br>") : "(empty)"} |`,
  );
}

// Time to /health 200: a cached reference against the same file by path.
const chatPath = await fixturePath("tiny-chat");
hub.addRepo("org/tiny-GGUF", { "tiny-Q8_0.gguf": new Uint8Array(await Bun.file(chatPath).arrayBuffer()) });
const startCache = mkdtempSync(join(scratch, "start-"));
await cli(["pull", "org/tiny-GGUF"], { HF_ENDPOINT: hub.hubUrl, HF_HUB_CACHE: startCache });
async function startMs(model: string): Promise<number> {
  const port = await freePort();
  const sessions = mkdtempSync(join(scratch, "s-"));
  const t0 = performance.now();
  const child = Bun.spawn(
    [process.execPath, MAIN, "serve", model, "--port", String(port), "--sessions", sessions, "--offline"],
    {
      env: { ...process.env, SUPERFLUID_QUIET: "1", HF_ENDPOINT: hub.hubUrl, HF_HUB_CACHE: startCache },
      stdout: "ignore",
      stderr: "ignore",
    },
  );
  try {
    for (let i = 0; i < 600; i++) {
      const ok = await fetch(`http://127.0.0.1:${port}/health`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) return performance.now() - t0;
      await Bun.sleep(5);
    }
    throw new Error(`serve ${model} did not become healthy`);
  } finally {
    child.kill();
    await child.exited;
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const byRef: number[] = [];
const byPath: number[] = [];
hub.resetCounters();
for (let i = 0; i < runs; i++) {
  byRef.push(await startMs("org/tiny-GGUF"));
  byPath.push(await startMs(chatPath));
}
const startRequests = hub.requests.length;

// Parallel parts against one connection, 4 MiB/s a connection.
const big = fakeGguf(16 << 20);
hub.addRepo("org/big-GGUF", { "big-Q4_K_M.gguf": big });
hub.faults.rate = 4 << 20;
const { pull } = await import("../src/hub/pull.ts");
const { hubSettings } = await import("../src/hub/settings.ts");
const rates: string[] = [];
for (const parts of [1, 4, 8]) {
  const dir = mkdtempSync(join(scratch, "rate-"));
  const t0 = performance.now();
  await pull("org/big-GGUF", {
    settings: hubSettings({ HF_ENDPOINT: hub.hubUrl, HF_HUB_CACHE: dir }),
    tuning: { connections: parts, minPartBytes: 1 << 20 },
  });
  const s = (performance.now() - t0) / 1000;
  rates.push(`| ${parts} | ${s.toFixed(2)} s | ${(big.length / (1 << 20) / s).toFixed(1)} MiB/s |`);
}
hub.faults.rate = 0;
await hub.stop();

console.log(
  [
    machineLine(),
    "",
    "| case | command | exit | last line printed | requests | cache after |",
    "|---|---|---:|---|---:|---|",
    ...rows,
    "",
    `Time to /health 200 (median of ${runs}, --offline): cached reference ${median(byRef).toFixed(0)} ms, ` +
      `the same file by path ${median(byPath).toFixed(0)} ms; requests to the Hub during those starts: ${startRequests}.`,
    "",
    "16 MiB through a CDN stand-in limited to 4 MiB/s a connection:",
    "",
    "| connections | time | rate |",
    "|---:|---:|---:|",
    ...rates,
  ].join("\n"),
);
process.exit(0);
