// Coding agents against superfluid: runs real agent CLIs (opencode and
// qwen-code, both chat-completions clients) non-interactively, with their own
// default system prompt and tools, against `superfluid serve` on the built-in
// model, and reports what each one sent and got back.
//
//   bun bench/agents.ts [--only opencode|qwen-code] [--prompt "Say hello."] [--timeout 300]
//                       [--keep] [--json out.json] [--] [<extra serve args>]
//
// The CLIs are not a dependency of this repository: they are looked up in
// $SUPERFLUID_AGENTS_DIR (default /tmp/agents), an npm prefix made with
//   npm install --prefix /tmp/agents --ignore-scripts opencode-ai @qwen-code/qwen-code
// Without them the script says so and exits 0.
//
// Each agent runs in a fresh temporary HOME (and XDG folders) holding its
// config, with update checks, telemetry, model-list fetches and plugin installs
// off, in an empty temporary working directory, in its own process group, under
// a hang guard. Between the agents and the server sits a recording proxy, so
// every request is seen with its reply, errors included (the server's access
// log names only the generations it served). Exit status: 0 when every agent
// exited 0 and got no error reply, else 1.
import { spawn, type ChildProcess } from "node:child_process";
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sseEvents } from "./sse.ts";

// ------------------------------------------------------------------ options

// Our flags come first; `--` or the first argument that is not ours starts
// the serve arguments (Bun drops a `--` that comes right after the script, so
// `bun bench/agents.ts -- --max-context 65536` arrives without it).
const VALUED = new Set(["--only", "--prompt", "--timeout", "--json"]);
const opts = new Map<string, string>();
let serveExtra: string[] = [];
for (let i = 2; i < process.argv.length; i++) {
  const arg = process.argv[i]!;
  if (VALUED.has(arg) && i + 1 < process.argv.length) opts.set(arg, process.argv[++i]!);
  else if (arg === "--keep") opts.set(arg, "");
  else {
    serveExtra = process.argv.slice(arg === "--" ? i + 1 : i);
    break;
  }
}
const only = opts.get("--only");
const prompt = opts.get("--prompt") ?? "Say hello.";
const timeoutS = Number(opts.get("--timeout") ?? "300");
const keep = opts.has("--keep");
const jsonPath = opts.get("--json");
const agentsDir = process.env.SUPERFLUID_AGENTS_DIR ?? "/tmp/agents";
const AGENT_NAMES = ["opencode", "qwen-code"];
if (only !== undefined && !AGENT_NAMES.includes(only)) {
  console.error(`agents: --only takes one of ${AGENT_NAMES.join(", ")}`);
  process.exit(2);
}
if (!(timeoutS > 0)) {
  console.error("agents: --timeout takes a number of seconds");
  process.exit(2);
}
const MODEL = "tiny-chat";
const API_KEY = "sk-superfluid-unused";

// ------------------------------------------------------------------ the agents

interface Agent {
  name: string;
  version: string;
  /** The command line, the prompt last. */
  argv: (text: string) => string[];
  /** Writes the agent's config under `home` and returns its environment additions. */
  configure: (home: string, baseURL: string) => Record<string, string>;
}

function packageVersion(dir: string): string {
  try {
    return JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).version ?? "?";
  } catch {
    return "?";
  }
}

/**
 * opencode ships one native binary per platform in optional packages;
 * `opencode-ai`'s postinstall only copies it to its bin (and runs it once, in
 * the real HOME), so with --ignore-scripts the platform package is what runs.
 */
function opencodeBinary(): string | undefined {
  const nm = join(agentsDir, "node_modules");
  const os = process.platform === "win32" ? "windows" : process.platform;
  const base = `opencode-${os}-${process.arch}`;
  let avx2 = true;
  try {
    if (process.platform === "linux" && process.arch === "x64") avx2 = /\bavx2\b/.test(readFileSync("/proc/cpuinfo", "utf8"));
  } catch {}
  const variants = avx2 ? [base, `${base}-baseline`, `${base}-musl`, `${base}-baseline-musl`] : [`${base}-baseline`, base, `${base}-baseline-musl`, `${base}-musl`];
  const candidates = [...variants.map((p) => join(nm, p, "bin", "opencode")), join(nm, "opencode-ai", "bin", "opencode.exe")];
  // Without its postinstall, opencode-ai's own bin is a short script that only says so.
  return candidates.find((p) => existsSync(p) && statSync(p).size > 1_000_000);
}

function findAgents(): { found: Agent[]; missing: string[] } {
  const found: Agent[] = [];
  const missing: string[] = [];

  const opencode = opencodeBinary();
  if (opencode) {
    found.push({
      name: "opencode",
      version: packageVersion(join(agentsDir, "node_modules", "opencode-ai")),
      argv: (text) => [opencode, "run", text],
      configure: (home, baseURL) => {
        // The global config file (~/.config/opencode/opencode.json): one
        // OpenAI-compatible provider with our model, used for the title too.
        const dir = join(home, ".config", "opencode");
        mkdirSync(dir, { recursive: true });
        const config = {
          provider: {
            superfluid: {
              npm: "@ai-sdk/openai-compatible",
              name: "superfluid",
              options: { baseURL, apiKey: API_KEY },
              models: { [MODEL]: { name: MODEL } },
            },
          },
          model: `superfluid/${MODEL}`,
          small_model: `superfluid/${MODEL}`,
          autoupdate: false,
          share: "disabled",
        };
        writeFileSync(join(dir, "opencode.json"), JSON.stringify(config, null, 2));
        return {
          OPENCODE_DISABLE_AUTOUPDATE: "1",
          OPENCODE_DISABLE_MODELS_FETCH: "1", // models.dev
          OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
          OPENCODE_DISABLE_DEFAULT_PLUGINS: "1", // they are installed from npm
          OPENCODE_DISABLE_SHARE: "1",
          // opencode installs @opencode-ai/plugin into its config folder in the
          // background through its built-in npm; offline, that fails at once
          // with a logged warning instead of reaching the registry.
          npm_config_offline: "true",
        };
      },
    });
  } else missing.push("opencode");

  const qwenDir = join(agentsDir, "node_modules", "@qwen-code", "qwen-code");
  const node = Bun.which("node");
  if (existsSync(join(qwenDir, "cli.js")) && node) {
    found.push({
      name: "qwen-code",
      version: packageVersion(qwenDir),
      argv: (text) => [node, join(qwenDir, "cli.js"), text],
      configure: (home, baseURL) => {
        // ~/.qwen/settings.json chooses the OpenAI-compatible auth and turns
        // off usage statistics, telemetry and the update check; the endpoint
        // comes from the environment.
        const dir = join(home, ".qwen");
        mkdirSync(dir, { recursive: true });
        const settings = {
          security: { auth: { selectedType: "openai" } },
          model: { name: MODEL },
          privacy: { usageStatisticsEnabled: false },
          telemetry: { enabled: false },
          general: { enableAutoUpdate: false },
        };
        writeFileSync(join(dir, "settings.json"), JSON.stringify(settings, null, 2));
        return { OPENAI_BASE_URL: baseURL, OPENAI_API_KEY: API_KEY, OPENAI_MODEL: MODEL };
      },
    });
  } else missing.push(node ? "qwen-code" : "qwen-code (needs `node` >= 20 on PATH)");

  return { found: only ? found.filter((a) => a.name === only) : found, missing };
}

// ------------------------------------------------------------------ bookkeeping

interface Seen {
  agent: string;
  index: number;
  method: string;
  path: string;
  status: number;
  stream: boolean;
  messages?: number;
  tools?: number;
  maxTokens?: number;
  /** From the reply's usage, or from a context_length_exceeded message. */
  promptTokens?: number;
  completionTokens?: number;
  finish?: string;
  error?: string;
  ms: number;
}

const seen: Seen[] = [];
let currentAgent = "-";
/** Requests the current agent has made so far (its requests are numbered from 1). */
let agentCount = 0;

/** Progress on stderr: every request up to 20 per agent, then one line in 50 (a looping agent makes hundreds). */
function progress(r: Seen): void {
  if (r.index <= 20 || r.index % 50 === 0) console.error(`[${r.agent}] ${describe(r)}`);
}

function errorText(e: unknown): string {
  if (e && typeof e === "object") {
    const err = e as { code?: unknown; type?: unknown; message?: unknown };
    return [err.code ?? err.type, err.message].filter(Boolean).map(String).join(": ");
  }
  return String(e);
}

/** The token count a context_length_exceeded message gives, when it gives one. */
function promptTokensFromError(message: string): number | undefined {
  const m = /request has (\d+) prompt tokens/.exec(message) ?? /at least (\d+) tokens long/.exec(message);
  return m ? Number(m[1]) : undefined;
}

/** Reads a reply the agent is also reading (a tee), filling in `rec`. */
async function inspectReply(rec: Seen, body: ReadableStream<Uint8Array>, contentType: string): Promise<void> {
  const take = (obj: Record<string, any>) => {
    if (obj.error) {
      rec.error ??= errorText(obj.error);
      rec.promptTokens ??= promptTokensFromError(String(obj.error.message ?? ""));
    }
    if (obj.usage) {
      rec.promptTokens = obj.usage.prompt_tokens ?? rec.promptTokens;
      rec.completionTokens = obj.usage.completion_tokens ?? rec.completionTokens;
    }
    const finish = obj.choices?.find((c: any) => c?.finish_reason)?.finish_reason;
    if (finish) rec.finish = finish;
  };
  try {
    if (contentType.includes("text/event-stream")) {
      for await (const event of sseEvents(body)) {
        if (event.error) rec.error ??= event.error;
        if (!event.data?.startsWith("{")) continue;
        try {
          take(JSON.parse(event.data));
        } catch {
          rec.error ??= `unparsable stream chunk: ${event.data.slice(0, 120)}`;
        }
      }
    } else {
      const text = await new Response(body).text();
      try {
        const obj = JSON.parse(text);
        if (obj && typeof obj === "object") take(obj);
      } catch {
        if (rec.status >= 400) rec.error ??= text.slice(0, 200);
      }
    }
  } catch (err) {
    rec.error ??= `reply cut: ${(err as Error).message}`;
  }
  if (rec.status >= 400) rec.error ??= `HTTP ${rec.status}`;
}

function describe(r: Seen): string {
  const parts = [`#${r.index}`, r.method, r.path, String(r.status)];
  if (r.path.endsWith("/completions")) {
    parts.push(r.stream ? "stream" : "whole", `messages=${r.messages ?? "?"}`, `tools=${r.tools ?? 0}`);
    if (r.maxTokens !== undefined) parts.push(`max_tokens=${r.maxTokens}`);
    parts.push(`prompt=${r.promptTokens ?? "?"}`, `completion=${r.completionTokens ?? "?"}`, `finish=${r.finish ?? "-"}`);
  }
  parts.push(`${(r.ms / 1000).toFixed(1)}s`);
  if (r.error) parts.push(`ERROR ${r.error.slice(0, 200)}`);
  return parts.join(" ");
}

// ------------------------------------------------------------------ proxy

/** Forwards everything to the server, recording each request and its reply. */
function startProxy(upstream: string) {
  const pending = new Set<Promise<void>>();
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0, // a long prefill sends nothing for a while
    async fetch(req) {
      const url = new URL(req.url);
      const started = performance.now();
      const body = req.method === "GET" || req.method === "HEAD" ? undefined : await req.arrayBuffer();
      const rec: Seen = { agent: currentAgent, index: ++agentCount, method: req.method, path: url.pathname, status: 0, stream: false, ms: 0 };
      seen.push(rec);
      if (body && body.byteLength) {
        try {
          const json = JSON.parse(new TextDecoder().decode(body));
          rec.stream = json.stream === true;
          rec.messages = Array.isArray(json.messages) ? json.messages.length : undefined;
          rec.tools = Array.isArray(json.tools) ? json.tools.length : undefined;
          rec.maxTokens = json.max_completion_tokens ?? json.max_tokens;
        } catch {}
      }
      const headers = new Headers(req.headers);
      headers.delete("host");
      headers.delete("content-length");
      let res: Response;
      try {
        const init = {
          method: req.method,
          headers,
          body,
          signal: req.signal, // the agent hanging up cancels the generation
          redirect: "manual",
          timeout: false, // Bun's fetch: no client-side timeout (the hang guard is the agent's)
        };
        res = await fetch(upstream + url.pathname + url.search, init as RequestInit);
      } catch (err) {
        rec.status = 502;
        rec.error = `proxy: ${(err as Error).message}`;
        rec.ms = performance.now() - started;
        progress(rec);
        return new Response(JSON.stringify({ error: { message: rec.error, type: "proxy_error" } }), { status: 502 });
      }
      rec.status = res.status;
      const out = new Headers(res.headers);
      // fetch has already decoded the body; the length may no longer hold.
      out.delete("content-encoding");
      out.delete("content-length");
      if (!res.body) {
        rec.ms = performance.now() - started;
        progress(rec);
        return new Response(null, { status: res.status, headers: out });
      }
      const [toAgent, toUs] = res.body.tee();
      const done = inspectReply(rec, toUs, res.headers.get("content-type") ?? "").then(() => {
        rec.ms = performance.now() - started;
        progress(rec);
      });
      pending.add(done);
      void done.finally(() => pending.delete(done));
      return new Response(toAgent, { status: res.status, headers: out });
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}`,
    /** Waits (bounded) for the replies still being read. */
    settle: () => Promise.race([Promise.allSettled([...pending]), Bun.sleep(10_000)]),
    stop: () => server.stop(true),
  };
}

// ------------------------------------------------------------------ processes

// The run's temporary folder (server log, sessions, each agent's HOME and
// working directory), made once there is something to run.
let dir = "";
let serverLog = "";
const children = new Set<ChildProcess>();

/** Signals a child's whole process group (each child leads its own). */
function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {} // already gone
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once("exit", () => resolve()));
}

/** SIGTERM to the group, SIGKILL after `graceMs`, then SIGKILL again for stragglers. */
async function stopGroup(child: ChildProcess, graceMs: number): Promise<void> {
  killGroup(child, "SIGTERM");
  await Promise.race([exited(child), Bun.sleep(graceMs)]);
  killGroup(child, "SIGKILL");
  await Promise.race([exited(child), Bun.sleep(5_000)]);
  children.delete(child);
}

/** Access-log lines (`<-- 200 POST ...`) the server printed, in order. */
const accessLines: string[] = [];

async function startServer(): Promise<{ child: ChildProcess; base: string }> {
  const args = [join(import.meta.dir, "../src/main.ts"), "serve", "--port", "0", "--sessions", join(dir, "sessions"), "--threads", "1", ...serveExtra];
  console.error(`agents: bun src/main.ts ${args.slice(1).join(" ")} (log: ${serverLog})`);
  const child = spawn(process.execPath, args, { detached: true, stdio: ["ignore", "pipe", "pipe"] });
  children.add(child);
  let found!: (port: number) => void;
  const portFound = new Promise<number>((resolve) => (found = resolve));
  for (const stream of [child.stdout!, child.stderr!]) {
    let partial = "";
    stream.setEncoding("utf8");
    stream.on("data", (text: string) => {
      appendFileSync(serverLog, text);
      const lines = (partial + text).split("\n");
      partial = lines.pop()!;
      for (const line of lines) {
        if (line.startsWith("<-- ")) accessLines.push(line);
        const m = /serving \S+ at http:\/\/127\.0\.0\.1:(\d+)/.exec(line);
        if (m) found(Number(m[1]));
      }
    });
  }
  const port = await Promise.race([portFound, exited(child).then(() => 0), Bun.sleep(180_000).then(() => 0)]);
  const base = `http://127.0.0.1:${port}`;
  if (port) {
    for (let i = 0; i < 600; i++) {
      if (await fetch(`${base}/health`).then((r) => r.status === 200, () => false)) return { child, base };
      if (child.exitCode !== null) break;
      await Bun.sleep(100);
    }
  }
  throw new Error(`the server did not become healthy; its log: ${serverLog}\n${readLog().slice(-2000)}`);
}

function readLog(): string {
  try {
    return readFileSync(serverLog, "utf8");
  } catch {
    return "";
  }
}

interface Outcome {
  agent: string;
  version: string;
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  seconds: number;
  requests: number;
  generations: number;
  largestPrompt?: number;
  errors: number;
  firstError?: string;
  accessLog: number;
  output: string;
  stderrTail: string;
}

const stripAnsi = (s: string) => s.replace(/\x1b\[[0-9;?]*[ -\/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)/g, "");

async function runAgent(agent: Agent, proxyUrl: string, settle: () => Promise<unknown>): Promise<Outcome> {
  const root = join(dir, agent.name);
  const home = join(root, "home");
  const work = join(root, "work");
  mkdirSync(home, { recursive: true });
  mkdirSync(work, { recursive: true });
  mkdirSync(join(root, "tmp"), { recursive: true });
  // A clean environment: nothing of the caller's keys, config or home leaks in.
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    LANG: process.env.LANG ?? "C.UTF-8",
    TERM: "dumb",
    NO_COLOR: "1",
    HOME: home,
    XDG_CONFIG_HOME: join(home, ".config"),
    XDG_DATA_HOME: join(home, ".local", "share"),
    XDG_CACHE_HOME: join(home, ".cache"),
    XDG_STATE_HOME: join(home, ".local", "state"),
    TMPDIR: join(root, "tmp"),
    ...agent.configure(home, `${proxyUrl}/v1`),
  };
  currentAgent = agent.name;
  agentCount = 0;
  const firstSeen = seen.length;
  const firstAccess = accessLines.length;
  console.error(`\nagents: ${agent.name} ${agent.version} in ${work}: ${JSON.stringify(prompt)} (hang guard ${timeoutS} s)`);
  const t0 = performance.now();
  const child = spawn(agent.argv(prompt)[0]!, agent.argv(prompt).slice(1), { cwd: work, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  children.add(child);
  let stdout = "";
  let stderr = "";
  child.stdout!.setEncoding("utf8").on("data", (s: string) => (stdout += s));
  child.stderr!.setEncoding("utf8").on("data", (s: string) => (stderr += s));
  const spawnError = new Promise<Error>((resolve) => child.once("error", resolve));
  let timedOut = false;
  const guard = setTimeout(() => {
    timedOut = true;
    console.error(`agents: ${agent.name} still running after ${timeoutS} s; stopping it`);
    void stopGroup(child, 5_000);
  }, timeoutS * 1000);
  const failed = await Promise.race([exited(child).then(() => undefined), spawnError]);
  clearTimeout(guard);
  const seconds = (performance.now() - t0) / 1000;
  // Whatever it left behind in its group (a language server, a shell) goes too.
  killGroup(child, "SIGKILL");
  children.delete(child);
  await settle();
  await Bun.sleep(250); // the server's last access-log lines may still be in its stderr pipe
  currentAgent = "-";
  writeFileSync(join(root, "stdout.txt"), stdout);
  writeFileSync(join(root, "stderr.txt"), stderr);

  const mine = seen.slice(firstSeen);
  const gens = mine.filter((r) => r.path.endsWith("/completions"));
  const prompts = gens.map((r) => r.promptTokens).filter((n): n is number => n !== undefined);
  const errs = mine.filter((r) => r.error);
  return {
    agent: agent.name,
    version: agent.version,
    exitCode: failed ? null : child.exitCode,
    signal: failed ? `spawn failed: ${failed.message}` : child.signalCode,
    timedOut,
    seconds,
    requests: mine.length,
    generations: gens.length,
    largestPrompt: prompts.length ? Math.max(...prompts) : undefined,
    errors: errs.length,
    firstError: errs[0]?.error,
    accessLog: accessLines.length - firstAccess,
    output: stripAnsi(stdout).trim(),
    stderrTail: stripAnsi(stderr).trim().slice(-600),
  };
}

// ------------------------------------------------------------------ main

let stopping = false;
async function cleanup(): Promise<void> {
  await Promise.all([...children].map((c) => stopGroup(c, 10_000)));
  if (!dir) return;
  if (keep) console.error(`agents: kept ${dir}`);
  else rmSync(dir, { recursive: true, force: true });
}
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.on(sig, () => {
    if (stopping) return;
    stopping = true;
    console.error(`agents: ${sig}; stopping the agent and the server`);
    void cleanup().finally(() => process.exit(130));
  });
}

async function main(): Promise<number> {
  const { found, missing } = findAgents();
  if (found.length === 0) {
    console.log(
      `No agent CLI found in ${agentsDir} (missing: ${missing.join(", ")}${only ? `; --only ${only}` : ""}). Install them with\n\n` +
        `  npm install --prefix ${agentsDir} --ignore-scripts opencode-ai @qwen-code/qwen-code\n\n` +
        `or point SUPERFLUID_AGENTS_DIR at the npm prefix that holds them (see bench/README.md, "Coding agents").`,
    );
    return 0;
  }
  if (missing.length && !only) console.error(`agents: skipping ${missing.join(", ")}: not found in ${agentsDir}`);
  dir = mkdtempSync(join(tmpdir(), "superfluid-agents-"));
  serverLog = join(dir, "server.log");

  const server = await startServer();
  const proxy = startProxy(server.base);
  const outcomes: Outcome[] = [];
  try {
    const models = await fetch(`${server.base}/v1/models`).then((r) => r.json() as Promise<{ data: { id: string; meta?: { n_ctx?: number } }[] }>);
    const served = models.data.find((m) => m.id === MODEL);
    if (!served) throw new Error(`the server does not serve ${MODEL} (it serves ${models.data.map((m) => m.id).join(", ")}): name no model, the agents are configured for the built-in one`);
    console.error(`agents: server ${server.base}, ${MODEL} with a ${served.meta?.n_ctx ?? "?"}-token window; agents talk to the proxy ${proxy.url}`);
    for (const agent of found) {
      if (stopping) break;
      outcomes.push(await runAgent(agent, proxy.url, proxy.settle));
    }
  } finally {
    proxy.stop();
    if (!stopping) {
      stopping = true;
      await cleanup();
    }
  }

  const window = serveExtra.length ? `serve ${serveExtra.join(" ")}` : "serve (defaults)";
  console.log(`\n${MODEL} on \`${window}\`, prompt ${JSON.stringify(prompt)}, hang guard ${timeoutS} s\n`);
  console.log("| agent | version | exit | seconds | requests | served (server access log) | error replies | largest prompt tokens |");
  console.log("|---|---|---|---:|---:|---:|---:|---:|");
  for (const o of outcomes) {
    const exit = o.timedOut ? "timed out" : o.exitCode !== null ? String(o.exitCode) : (o.signal ?? "?");
    console.log(`| ${o.agent} | ${o.version} | ${exit} | ${o.seconds.toFixed(1)} | ${o.requests} | ${o.accessLog} | ${o.errors} | ${o.largestPrompt ?? "-"} |`);
  }
  for (const o of outcomes) {
    console.log(`\n${o.agent}: output ${JSON.stringify(o.output.slice(0, 200))}`);
    if (o.firstError) console.log(`${o.agent}: first error reply: ${o.firstError}`);
    if (o.exitCode !== 0 || o.timedOut) console.log(`${o.agent}: stderr ends ${JSON.stringify(o.stderrTail.slice(-300))}`);
    // The first requests and the last few: a looping agent makes hundreds.
    const mine = seen.filter((s) => s.agent === o.agent);
    const shown = mine.length <= 16 ? mine : [...mine.slice(0, 12), undefined, ...mine.slice(-4)];
    for (const r of shown) console.log(r ? `  ${describe(r)}` : `  ... ${mine.length - 16} more`);
  }
  if (jsonPath) writeFileSync(jsonPath, JSON.stringify({ prompt, timeoutS, serveExtra, outcomes, requests: seen }, null, 2));
  const ok = outcomes.length > 0 && outcomes.every((o) => o.exitCode === 0 && !o.timedOut && o.errors === 0 && o.generations > 0);
  return ok ? 0 : 1;
}

try {
  process.exitCode = await main();
} catch (err) {
  console.error(`agents: ${(err as Error).message}`);
  if (!stopping) {
    stopping = true;
    await cleanup();
  }
  process.exitCode = 1;
}
