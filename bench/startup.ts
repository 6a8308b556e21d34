// Start time (bench/README.md#start-time): N starts of `superfluid serve` on
// the built-in model, each timed from exec to the first /health 200 and to the
// first streamed chat token, with a fresh --sessions folder each start.
//
//   bun bench/startup.ts [--runs 10] [--cold] [--root DIR] [--binary PATH] [--threads 1]
//
// By default it starts `bun <root>/src/main.ts serve` (from source); --binary
// starts a compiled executable instead (from an empty folder, as a user runs
// it). The model cache (SUPERFLUID_CACHE_DIR) is one folder that a first,
// untimed start fills; --cold gives every start an empty one, so each pays
// the first run ever (model generation, and for a binary the library
// extraction). Prints medians and spread, and the load average the machine
// had, since other work shares it.
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { freePort } from "./support.ts";

interface Args {
  runs: number;
  cold: boolean;
  root: string;
  binary?: string;
  threads: number;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { runs: 10, cold: false, root: resolve(import.meta.dir, ".."), threads: 1 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const next = () => argv[++i] ?? "";
    if (a === "--runs") args.runs = Number(next());
    else if (a === "--cold") args.cold = true;
    else if (a === "--root") args.root = resolve(next());
    else if (a === "--binary") args.binary = resolve(next());
    else if (a === "--threads") args.threads = Number(next());
    else throw new Error(`unknown flag ${a}`);
  }
  return args;
}

interface Sample {
  /** The first answer of any status (503 `loading` while the models load): the listener is up. */
  listening: number;
  health: number;
  token: number;
}

/** Polls /health until 200; a refused connection (no listener yet) is retried at once. */
async function untilHealthy(
  url: string,
  t0: number,
  exited: () => boolean,
): Promise<{ listening: number; health: number }> {
  let listening: number | undefined;
  for (;;) {
    if (exited()) throw new Error("the server exited before /health answered 200");
    try {
      const r = await fetch(`${url}/health`);
      await r.arrayBuffer();
      const at = performance.now() - t0;
      listening ??= at;
      if (r.status === 200) return { listening, health: at };
    } catch {
      // not listening yet
    }
    await Bun.sleep(2);
  }
}

/** Sends one streamed chat turn and returns the time of its first content delta. */
async function firstToken(url: string, t0: number): Promise<number> {
  const r = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "tiny-chat",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
      max_tokens: 16,
    }),
  });
  if (r.status !== 200) throw new Error(`chat: ${r.status} ${await r.text()}`);
  const reader = r.body!.getReader();
  const decoder = new TextDecoder();
  let seen = "";
  let at: number | undefined;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    seen += decoder.decode(value, { stream: true });
    if (at === undefined && /"content":"[^"]/.test(seen)) at = performance.now() - t0;
  }
  if (at === undefined) throw new Error(`no token in the stream:\n${seen}`);
  return at;
}

async function oneStart(args: Args, cache: string): Promise<Sample> {
  const work = mkdtempSync(join(tmpdir(), "sf-start-"));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const serve = [
    "serve",
    "--http",
    `127.0.0.1:${port}`,
    "--sessions",
    join(work, "sessions"),
    "--threads",
    String(args.threads),
    "--no-tui",
  ];
  const cmd = args.binary ? [args.binary, ...serve] : [process.execPath, join(args.root, "src", "main.ts"), ...serve];
  // A compiled binary runs from an empty folder with no Bun on PATH, as a user runs it.
  const env = { ...process.env, SUPERFLUID_CACHE_DIR: cache, ...(args.binary ? { PATH: "/usr/bin:/bin" } : {}) };
  const t0 = performance.now();
  const proc = Bun.spawn(cmd, { cwd: args.binary ? work : args.root, env, stdout: "ignore", stderr: "pipe" });
  let exited = false;
  void proc.exited.then(() => (exited = true));
  const stderr = new Response(proc.stderr).text();
  try {
    const { listening, health } = await untilHealthy(url, t0, () => exited);
    const token = await firstToken(url, t0);
    return { listening, health, token };
  } catch (err) {
    proc.kill("SIGKILL");
    throw new Error(`${(err as Error).message}\n${await stderr}`);
  } finally {
    proc.kill("SIGTERM");
    await proc.exited;
    rmSync(work, { recursive: true, force: true });
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function row(name: string, xs: number[]): string {
  const s = [...xs].sort((a, b) => a - b);
  return `| ${name} | ${median(xs).toFixed(0)} | ${s[0]!.toFixed(0)} | ${s[s.length - 1]!.toFixed(0)} |`;
}

const args = parseArgs(process.argv.slice(2));
const caches: string[] = [];
const newCache = () => {
  const dir = mkdtempSync(join(tmpdir(), "sf-start-cache-"));
  caches.push(dir);
  return dir;
};
try {
  const warm = args.cold ? undefined : newCache();
  // One untimed start fills the shared cache (model, shim, libraries) and the page cache.
  if (warm) await oneStart(args, warm);
  const load = [loadavg()[0]!];
  const samples: Sample[] = [];
  for (let i = 0; i < args.runs; i++) {
    samples.push(await oneStart(args, warm ?? newCache()));
    load.push(loadavg()[0]!);
  }
  const what = `${args.binary ? `binary ${args.binary}` : `source ${args.root}`}, ${args.cold ? "cold (empty cache each start)" : "cache present"}`;
  console.log(
    `${what}: ${args.runs} starts, load average ${Math.min(...load).toFixed(2)}-${Math.max(...load).toFixed(2)}`,
  );
  console.log("| ms from exec | median | min | max |");
  console.log("|---|---|---|---|");
  console.log(
    row(
      "first /health answer",
      samples.map((s) => s.listening),
    ),
  );
  console.log(
    row(
      "/health 200",
      samples.map((s) => s.health),
    ),
  );
  console.log(
    row(
      "first chat token",
      samples.map((s) => s.token),
    ),
  );
} finally {
  for (const dir of caches) rmSync(dir, { recursive: true, force: true });
}
