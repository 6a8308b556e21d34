// Coding agents against superfluid: runs real agent CLIs (opencode and
// qwen-code, chat-completions clients; Claude Code, a Messages API client;
// Codex, a Responses API client) non-interactively, with their own default
// system prompt and tools, against `superfluid serve` on the built-in model,
// and reports what each one sent and got back.
//
//   bun bench/agents.ts [--only opencode|qwen-code|claude-code|codex] [--prompt "Say hello."]
//                       [--second-prompt "What does math.ts export?"] [--timeout 300]
//                       [--keep] [--json out.json] [--] [<extra serve args>]
//
// The CLIs are not a dependency of this repository: they are looked up in
// $SUPERFLUID_AGENTS_DIR (default /tmp/agents), an npm prefix made with
// npm install --prefix /tmp/agents --ignore-scripts opencode-ai@1.18.33 @qwen-code/qwen-code@0.15.10
// @anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0
// Without them the script says so and exits 0.
//
// Each agent runs in a fresh temporary HOME (and XDG folders) holding its
// config, with update checks, telemetry, model-list fetches and plugin installs
// off, in a temporary working directory, in its own process group, under a
// hang guard. Claude Code and Codex run twice in the same HOME and project
// (which holds two small files): the second prompt shares the first one's
// system prompt and tools, so it must be served mostly from the prefix cache.
// Between the agents and the server sits a recording proxy, so every request
// is seen with its headers, body fields and reply, errors included (the
// server's access log names only the generations it served). Exit status: 0
// when every run exited 0, got no error reply and passed its agent's own
// checks, else 1.
import type { ChildProcess } from "node:child_process";
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SCRIPTED_REPLY } from "../src/fixtures/scripted-chat.ts";
import { sseEvents } from "./sse.ts";
import { children, exited, killGroup, spawnGroup, stopGroup } from "./support.ts";

// ------------------------------------------------------------------ options

// Our flags come first; `--` or the first argument that is not ours starts
// the serve arguments (Bun drops a `--` that comes right after the script, so
// `bun bench/agents.ts -- --max-context 65536` arrives without it).
const VALUED = new Set(["--only", "--prompt", "--second-prompt", "--timeout", "--json"]);
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
const secondPrompt = opts.get("--second-prompt") ?? "What does math.ts export?";
const timeoutS = Number(opts.get("--timeout") ?? "300");
const keep = opts.has("--keep");
const jsonPath = opts.get("--json");
const agentsDir = process.env.SUPERFLUID_AGENTS_DIR ?? "/tmp/agents";
const AGENT_NAMES = ["opencode", "qwen-code", "claude-code", "codex"];
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
/** Claude Code asks for its own model names (claude-opus-..., claude-haiku-...); the server maps them to ours. */
const CLAUDE_ALIAS = `claude-*=${MODEL}`;
/** Claude Code's and Codex's second run must read at least this share of its prompt from the prefix cache. */
const CACHE_SHARE = 0.9;

// ------------------------------------------------------------------ the agents

interface Agent {
  name: string;
  version: string;
  /** The command line for one prompt. */
  argv: (text: string) => string[];
  /**
   * Writes the agent's config under `home` and returns its environment
   * additions; `root` is the server's root URL (no /v1), `window` the served
   * model's context window in tokens.
   */
  configure: (home: string, root: string, window: number) => Record<string, string>;
  /** The prompts it runs, one after the other, in the same HOME and working directory (default: the prompt once). */
  prompts?: string[];
  /** Files its working directory starts with (default: none). */
  project?: Record<string, string>;
  /** What `serve` needs for this agent beyond its defaults. */
  serveArgs?: string[];
  /** Its own account of a run, read from its stdout. */
  report?: (stdout: string) => AgentReport | undefined;
  /** This agent's pass criteria over its runs: the failures, if any. */
  check?: (runs: Outcome[]) => string[];
}

/** What an agent says about a run itself (Claude Code's `--output-format json`, Codex's `--json` events). */
interface AgentReport {
  isError: boolean;
  /** Its final reply, or what it said went wrong. */
  result: string;
  /** Its token counts, under its own names (printed as they are). */
  usage?: Record<string, number>;
  /** Of that usage, the whole prompt and the part read from the prefix cache (the names differ per API). */
  promptTokens?: number;
  cachedTokens?: number;
  /** The agent's own time to first token. */
  ttftMs?: number;
  /** Warnings it reported without failing the run. */
  notes?: string[];
}

/** The numeric fields of `usage` named in `names`, in that order. */
function pickUsage(usage: unknown, names: string[]): Record<string, number> | undefined {
  if (!usage || typeof usage !== "object") return undefined;
  const out: Record<string, number> = {};
  for (const n of names) {
    const v = (usage as Record<string, unknown>)[n];
    if (typeof v === "number") out[n] = v;
  }
  return out;
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
    if (process.platform === "linux" && process.arch === "x64")
      avx2 = /\bavx2\b/.test(readFileSync("/proc/cpuinfo", "utf8"));
  } catch {}
  const variants = avx2
    ? [base, `${base}-baseline`, `${base}-musl`, `${base}-baseline-musl`]
    : [`${base}-baseline`, base, `${base}-baseline-musl`, `${base}-musl`];
  const candidates = [
    ...variants.map((p) => join(nm, p, "bin", "opencode")),
    join(nm, "opencode-ai", "bin", "opencode.exe"),
  ];
  // Without its postinstall, opencode-ai's own bin is a short script that only says so.
  return candidates.find((p) => existsSync(p) && statSync(p).size > 1_000_000);
}

/**
 * Claude Code also ships one native binary per platform in optional packages;
 * with --ignore-scripts its own `bin/claude.exe` stays a short script saying
 * the postinstall did not run, so the platform package's binary is what runs.
 */
function claudeBinary(): string | undefined {
  const scope = join(agentsDir, "node_modules", "@anthropic-ai");
  const os = process.platform === "win32" ? "win32" : process.platform;
  const base = `claude-code-${os}-${process.arch}`;
  const exe = process.platform === "win32" ? "claude.exe" : "claude";
  const candidates = [
    join(scope, base, exe),
    join(scope, `${base}-musl`, exe),
    join(scope, "claude-code", "bin", "claude.exe"),
  ];
  return candidates.find((p) => existsSync(p) && statSync(p).size > 1_000_000);
}

/** Claude Code's `--output-format json` result, if stdout holds one. */
function claudeReport(stdout: string): AgentReport | undefined {
  try {
    const out = JSON.parse(stdout.trim());
    if (!out || typeof out !== "object") return undefined;
    const usage = pickUsage(out.usage, [
      "input_tokens",
      "cache_read_input_tokens",
      "cache_creation_input_tokens",
      "output_tokens",
    ]);
    return {
      isError: out.is_error === true,
      result: String(out.result ?? ""),
      usage,
      // Messages usage splits the prompt: uncached input, cache read and cache created add up to it.
      promptTokens: usage
        ? (usage.input_tokens ?? 0) + (usage.cache_read_input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0)
        : undefined,
      cachedTokens: usage?.cache_read_input_tokens,
      ttftMs: typeof out.ttft_ms === "number" ? out.ttft_ms : undefined,
    };
  } catch {
    return undefined;
  }
}

/** The second run read at least CACHE_SHARE of its prompt from the prefix cache, by the agent's own usage. */
function secondRunCached(runs: Outcome[], cachedName: string): string[] {
  const second = runs[1];
  if (!second) return ["the second prompt did not run"];
  const r = second.report;
  if (!r || r.isError) return []; // already reported
  if (r.promptTokens === undefined) return ["run 2: the result has no usage"];
  const read = r.cachedTokens ?? 0;
  return r.promptTokens > 0 && read >= CACHE_SHARE * r.promptTokens
    ? []
    : [`run 2: ${cachedName} ${read} of a ${r.promptTokens}-token prompt (want at least ${CACHE_SHARE * 100}%)`];
}

/**
 * Each run printed the built-in model's reply as its result, not as an
 * error, and the second run read most of its prompt from the prefix cache
 * (the system prompt and tools the first run left there).
 */
function claudeCheck(runs: Outcome[]): string[] {
  return [
    ...runs.flatMap((r) => replyCheck(r, "no JSON result on stdout")),
    ...secondRunCached(runs, "cache_read_input_tokens"),
  ];
}

/** The run's own report says it printed the built-in model's reply, not an error. */
function replyCheck(r: Outcome, noReport: string): string[] {
  if (!r.report) return [`run ${r.run}: ${noReport}`];
  if (r.report.isError)
    return [`run ${r.run}: the result is an error: ${JSON.stringify(r.report.result.slice(0, 200))}`];
  if (r.report.result !== SCRIPTED_REPLY)
    return [`run ${r.run}: the result ${JSON.stringify(r.report.result.slice(0, 200))} is not the built-in reply`];
  return [];
}

/**
 * Codex ships its native binary in a per-platform package (an npm alias of
 * `@openai/codex@<version>-<platform>`), which `@openai/codex`'s Node shim
 * finds and execs; it has no install script, so --ignore-scripts changes
 * nothing. The binary is run directly (no Node needed); it finds its bundled
 * helpers (rg, bwrap) beside itself.
 */
function codexBinary(): string | undefined {
  const scope = join(agentsDir, "node_modules", "@openai");
  const triples: Record<string, string> = {
    "linux-x64": "x86_64-unknown-linux-musl",
    "linux-arm64": "aarch64-unknown-linux-musl",
    "darwin-x64": "x86_64-apple-darwin",
    "darwin-arm64": "aarch64-apple-darwin",
    "win32-x64": "x86_64-pc-windows-msvc",
    "win32-arm64": "aarch64-pc-windows-msvc",
  };
  const platform = `${process.platform}-${process.arch}`;
  const triple = triples[platform];
  if (!triple) return undefined;
  const exe = process.platform === "win32" ? "codex.exe" : "codex";
  // The shim falls back to its own vendor folder when the platform package is missing.
  const candidates = [
    join(scope, `codex-${platform}`, "vendor", triple, "bin", exe),
    join(scope, "codex", "vendor", triple, "bin", exe),
  ];
  return candidates.find((p) => existsSync(p) && statSync(p).size > 1_000_000);
}

/**
 * Codex's config.toml: our server as a Responses provider, everything that is not the turn off, its default tools kept.
 */
function codexConfig(baseUrl: string, window: number): string {
  const q = JSON.stringify; // a JSON string is a TOML basic string
  return [
    `model = ${q(MODEL)}`,
    `model_provider = "superfluid"`,
    // Codex compacts the conversation by this window; for a model it does not know it would assume 272k.
    `model_context_window = ${window}`,
    `approval_policy = "never"`,
    `sandbox_mode = "read-only"`,
    `check_for_update_on_startup = false`,
    // web_search is left at its default on purpose: Codex then sends a
    // {"type": "web_search"} tool in every request, which the server must leave out.
    ``,
    `[model_providers.superfluid]`,
    `name = "superfluid"`,
    `base_url = ${q(baseUrl)}`, // Codex appends /responses
    `wire_api = "responses"`,
    `env_key = "SUPERFLUID_API_KEY"`, // sent as Authorization: Bearer
    // An error reply fails the run at once instead of being retried (up to 30 times).
    `request_max_retries = 0`,
    `stream_max_retries = 0`,
    ``,
    `[analytics]`,
    `enabled = false`,
    ``,
    `[feedback]`,
    `enabled = false`,
    ``,
    `[otel]`,
    `exporter = "none"`,
    ``,
    // The curated plugin sync is the one network fetch `codex exec` makes
    // (git ls-remote and api.github.com, then chatgpt.com).
    `[features]`,
    `plugins = false`,
    ``,
  ].join("\n");
}

/** Codex's `--json` events: the last agent message, the turn's usage, failures and warnings. */
function codexReport(stdout: string): AgentReport | undefined {
  let events = 0;
  let result: string | undefined;
  let usage: Record<string, number> | undefined;
  let failure: string | undefined;
  const notes: string[] = [];
  for (const line of stdout.split("\n")) {
    if (!line.startsWith("{")) continue;
    let ev: any;
    try {
      ev = JSON.parse(line);
    } catch {
      continue;
    }
    events++;
    if (ev.type === "item.completed" && ev.item?.type === "agent_message") result = String(ev.item.text ?? "");
    // An `error` item is a warning the run goes on after (unknown model metadata).
    else if (ev.type === "item.completed" && ev.item?.type === "error") notes.push(String(ev.item.message ?? ""));
    else if (ev.type === "turn.completed")
      usage = pickUsage(ev.usage, [
        "input_tokens",
        "cached_input_tokens",
        "cache_write_input_tokens",
        "output_tokens",
        "reasoning_output_tokens",
      ]);
    else if (ev.type === "turn.failed") failure ??= String(ev.error?.message ?? "turn failed");
    else if (ev.type === "error") failure ??= String(ev.message ?? "error");
  }
  if (!events) return undefined;
  return {
    isError: failure !== undefined || result === undefined,
    result: failure ?? result ?? "(no agent message)",
    usage,
    // Summed over the turn's requests; input_tokens covers the whole prompt, cached included.
    promptTokens: usage?.input_tokens,
    cachedTokens: usage?.cached_input_tokens,
    notes,
  };
}

/**
 * Each run printed the built-in model's reply as its last agent message;
 * every request was a Responses request answered 200 with a stream that
 * closed each item (`response.output_item.done`, the only place Codex takes
 * items from) and ended in `response.completed` with `usage.total_tokens`
 * (Codex fails the turn without them); the first request carried Codex's
 * default namespace and web_search tools, and the server said it left
 * web_search out; the second run, a new thread with the same instructions
 * and tools, read most of its prompt from the prefix cache.
 */
function codexCheck(runs: Outcome[]): string[] {
  const failures: string[] = [];
  for (const r of runs) {
    failures.push(...replyCheck(r, "no JSON events on stdout"));
    const mine = seen.filter((s) => s.agent === r.agent && s.run === r.run);
    if (!mine.length) failures.push(`run ${r.run}: no request reached the server`);
    for (const s of mine) {
      const at = `run ${r.run} request #${s.index}`;
      if (s.method !== "POST" || s.path !== "/v1/responses" || s.status !== 200)
        failures.push(`${at}: ${s.method} ${s.route} answered ${s.status}`);
      else if (!s.events?.includes("response.output_item.done"))
        failures.push(`${at}: the stream has no response.output_item.done`);
      else if (!s.events.includes("response.completed"))
        failures.push(`${at}: the stream has no response.completed (events: ${s.events.join(", ")})`);
      else if (s.totalTokens === undefined) failures.push(`${at}: response.completed has no usage.total_tokens`);
    }
  }
  const first = seen.find((s) => s.agent === runs[0]?.agent);
  if (first) {
    const types = first.toolTypes ?? [];
    for (const t of ["namespace", "web_search"])
      if (!types.includes(t))
        failures.push(`run 1 request #1: no ${t} tool among its tools (${toolSummary(types) || "none"})`);
    const ignored = (first.ignoredTools ?? "").split(",").map((t) => t.trim());
    if (!ignored.includes("web_search"))
      failures.push(
        `run 1 request #1: x-superfluid-ignored-tools is ${JSON.stringify(first.ignoredTools ?? null)}, not naming web_search`,
      );
  }
  return [...failures, ...secondRunCached(runs, "cached_input_tokens")];
}

/** The working directory the two-prompt agents start in: what the second prompt asks about. */
const CALC_PROJECT: Record<string, string> = {
  "README.md": "# calc\n\nA tiny arithmetic library. `math.ts` holds the functions.\n",
  "math.ts":
    "export function add(a: number, b: number): number {\n  return a + b;\n}\n\nexport function mul(a: number, b: number): number {\n  return a * b;\n}\n",
};

function findAgents(): { found: Agent[]; missing: string[] } {
  const found: Agent[] = [];
  const missing: string[] = [];

  const opencode = opencodeBinary();
  if (opencode) {
    found.push({
      name: "opencode",
      version: packageVersion(join(agentsDir, "node_modules", "opencode-ai")),
      argv: (text) => [opencode, "run", text],
      configure: (home, root) => {
        const baseURL = `${root}/v1`;
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
      configure: (home, root) => {
        const baseURL = `${root}/v1`;
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

  const claude = claudeBinary();
  if (claude) {
    found.push({
      name: "claude-code",
      version: packageVersion(join(agentsDir, "node_modules", "@anthropic-ai", "claude-code")),
      // Print mode with its default system prompt and tools; the JSON result
      // carries the reply text and the usage the server reported.
      argv: (text) => [claude, "-p", text, "--output-format", "json"],
      prompts: [prompt, secondPrompt],
      project: CALC_PROJECT,
      serveArgs: ["--alias", CLAUDE_ALIAS],
      // Print mode needs no config file: the endpoint and key come from the
      // environment; CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC is the switch
      // that stops every request that is not the turn itself (update checks,
      // telemetry, error reports, feature flags); the others say the same
      // thing one by one.
      configure: (_home, root) => ({
        ANTHROPIC_BASE_URL: root,
        ANTHROPIC_API_KEY: API_KEY,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
        DISABLE_TELEMETRY: "1",
        DISABLE_AUTOUPDATER: "1",
        DISABLE_ERROR_REPORTING: "1",
        DISABLE_BUG_COMMAND: "1",
      }),
      report: claudeReport,
      check: claudeCheck,
    });
  } else missing.push("claude-code");

  const codex = codexBinary();
  if (codex) {
    found.push({
      name: "codex",
      version: packageVersion(join(agentsDir, "node_modules", "@openai", "codex")),
      // Non-interactive mode outside a git repository, writing no session
      // files; --json prints its events (the final message, the turn's
      // usage) one JSON object a line. `--` keeps a prompt starting with a
      // dash a prompt.
      argv: (text) => [codex, "exec", "--skip-git-repo-check", "--ephemeral", "--color", "never", "--json", "--", text],
      prompts: [prompt, secondPrompt],
      project: CALC_PROJECT,
      // Its own home folder, fresh per agent: only the config below.
      configure: (home, root, window) => {
        const codexHome = join(home, ".codex");
        mkdirSync(codexHome, { recursive: true });
        writeFileSync(join(codexHome, "config.toml"), codexConfig(`${root}/v1`, window));
        return { CODEX_HOME: codexHome, SUPERFLUID_API_KEY: API_KEY };
      },
      report: codexReport,
      check: codexCheck,
    });
  } else missing.push("codex");

  return { found: only ? found.filter((a) => a.name === only) : found, missing };
}

// ------------------------------------------------------------------ bookkeeping

interface Seen {
  agent: string;
  /** Which of the agent's runs (prompts) sent it, from 1. */
  run: number;
  index: number;
  method: string;
  path: string;
  /** The path with its query string, as sent. */
  route: string;
  status: number;
  /** The headers that say which API and client this is. */
  headers: { auth: string; anthropicVersion?: string; anthropicBeta?: string; userAgent?: string };
  /** The body's top-level fields, in the order sent. */
  fields?: string[];
  model?: string;
  stream: boolean;
  /** Messages, or Responses input items. */
  messages?: number;
  /**
   * The messages' roles in order, runs of one role folded (`user,system`); an input item without a role counts as its
   * type.
   */
  roles?: string;
  tools?: number;
  /** Each tool's `type`, in order (Responses: function, namespace, web_search, ...). */
  toolTypes?: string[];
  /** The reply's x-superfluid-ignored-tools: the built-in tools the server left out of the prompt. */
  ignoredTools?: string;
  maxTokens?: number;
  /** `thinking.type` (Messages) or `reasoning_effort` (chat completions), when sent. */
  thinking?: string;
  /** From the reply's usage, or from a context_length_exceeded message. */
  promptTokens?: number;
  /** Of the prompt, read from the prefix cache (cache_read_input_tokens, prompt_tokens_details.cached_tokens). */
  cachedTokens?: number;
  /** Messages API: what the request's cache breakpoints pinned beyond the cache hit. */
  cacheCreation?: number;
  completionTokens?: number;
  /** usage.total_tokens, where the reply gives it. */
  totalTokens?: number;
  /** A stream's event types (each JSON event's `type`), in the order first seen. */
  events?: string[];
  finish?: string;
  error?: string;
  /**
   * Milliseconds from the request's arrival to the first reply text, thinking or call the proxy passed on (streams
   * only).
   */
  firstMs?: number;
  ms: number;
}

const seen: Seen[] = [];
let currentAgent = "-";
let currentRun = 0;
/** Requests the current agent has made so far (its requests are numbered from 1). */
let agentCount = 0;

/** The routes that generate: chat completions, completions, Messages, Responses. */
const isGeneration = (path: string) =>
  path.endsWith("/completions") || path.endsWith("/v1/messages") || path.endsWith("/v1/responses");

/** Which credential a request carries (never its value). */
function authKind(h: Headers): string {
  const kinds: string[] = [];
  if (h.has("x-api-key")) kinds.push("x-api-key");
  const auth = h.get("authorization");
  if (auth) kinds.push(/^bearer /i.test(auth) ? "bearer" : "authorization");
  return kinds.join("+") || "none";
}

/** Fills in what the request body says: fields, model, messages, tools, caps. */
function readBody(rec: Seen, json: Record<string, any>): void {
  rec.fields = Object.keys(json);
  rec.model = typeof json.model === "string" ? json.model : undefined;
  rec.stream = json.stream === true;
  // Responses: `input` is a string (one user turn) or a list of items.
  const turns = Array.isArray(json.messages)
    ? json.messages
    : Array.isArray(json.input)
      ? json.input
      : typeof json.input === "string"
        ? [{ role: "user" }]
        : undefined;
  if (turns) {
    rec.messages = turns.length;
    rec.roles = turns
      .map((m: any) => String(m?.role ?? m?.type))
      .filter((r: string, i: number, all: string[]) => i === 0 || r !== all[i - 1])
      .join(",");
  }
  rec.tools = Array.isArray(json.tools) ? json.tools.length : undefined;
  // A Messages client tool has no `type`: it is a function like the others.
  rec.toolTypes = Array.isArray(json.tools) ? json.tools.map((t: any) => String(t?.type ?? "function")) : undefined;
  rec.maxTokens = json.max_completion_tokens ?? json.max_tokens ?? json.max_output_tokens;
  rec.thinking = json.thinking?.type ?? json.reasoning_effort ?? json.reasoning?.effort;
}

/** Tool types counted, in order first seen: `function×8,namespace,web_search`. */
function toolSummary(types: string[]): string {
  const counts = new Map<string, number>();
  for (const t of types) counts.set(t, (counts.get(t) ?? 0) + 1);
  return [...counts].map(([t, n]) => (n > 1 ? `${t}×${n}` : t)).join(",");
}

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
async function inspectReply(
  rec: Seen,
  body: ReadableStream<Uint8Array>,
  contentType: string,
  started: number,
): Promise<void> {
  const take = (obj: Record<string, any>) => {
    if (typeof obj.type === "string" && !rec.events?.includes(obj.type)) (rec.events ??= []).push(obj.type);
    // Responses: the response object is the reply, or rides in its stream
    // events (response.created ... response.completed / failed).
    const response =
      obj.object === "response" ? obj : obj.response && typeof obj.response === "object" ? obj.response : undefined;
    // Responses' `error` event carries its code and message at the top level.
    const error = obj.error ?? response?.error ?? (obj.type === "error" ? obj : undefined);
    if (error) {
      rec.error ??= errorText(error);
      rec.promptTokens ??= promptTokensFromError(String(error.message ?? ""));
    }
    // Chat completions: usage on the last chunk or the reply. Messages: on
    // message_start (the prompt), message_delta (the output) or the reply.
    // Responses: on the final response.
    const usage = obj.usage ?? obj.message?.usage ?? response?.usage;
    if (usage) {
      rec.totalTokens = usage.total_tokens ?? rec.totalTokens;
      if (response) {
        // Its input_tokens is the whole prompt, cached included.
        rec.promptTokens = usage.input_tokens;
        rec.cachedTokens = usage.input_tokens_details?.cached_tokens ?? 0;
      } else if (usage.input_tokens !== undefined) {
        rec.cachedTokens = usage.cache_read_input_tokens ?? 0;
        rec.cacheCreation = usage.cache_creation_input_tokens ?? 0;
        rec.promptTokens = usage.input_tokens + rec.cachedTokens + rec.cacheCreation;
      }
      rec.promptTokens = usage.prompt_tokens ?? rec.promptTokens;
      rec.cachedTokens = usage.prompt_tokens_details?.cached_tokens ?? rec.cachedTokens;
      rec.completionTokens = usage.completion_tokens ?? usage.output_tokens ?? rec.completionTokens;
    }
    const settled =
      response && response.status !== "in_progress" && response.status !== "queued"
        ? (response.incomplete_details?.reason ?? response.status)
        : undefined;
    const finish =
      obj.choices?.find((c: any) => c?.finish_reason)?.finish_reason ??
      obj.stop_reason ??
      obj.delta?.stop_reason ??
      settled;
    if (finish) rec.finish = finish;
  };
  /** A stream event carrying reply text, thinking or a call: the first one times the first token. */
  const carries = (obj: Record<string, any>) =>
    obj.type === "content_block_delta" ||
    /^response\.(output_text|reasoning_text|function_call_arguments)\.delta$/.test(obj.type) ||
    obj.choices?.some((c: any) => c?.delta?.content || c?.delta?.reasoning_content || c?.delta?.tool_calls?.length);
  // Once the stream's last event is read, the agent may hang up before the
  // proxy reads the end of the body (Codex exits on response.completed):
  // that aborts our copy too, and cuts nothing.
  let ended = false;
  const last = (obj: Record<string, any>) =>
    obj.type === "message_stop" || /^response\.(completed|incomplete|failed)$/.test(obj.type);
  try {
    if (contentType.includes("text/event-stream")) {
      for await (const event of sseEvents(body)) {
        if (event.error) rec.error ??= event.error;
        if (event.data === "[DONE]") ended = true;
        if (!event.data?.startsWith("{")) continue;
        try {
          const obj = JSON.parse(event.data);
          if (rec.firstMs === undefined && carries(obj)) rec.firstMs = performance.now() - started;
          if (last(obj)) ended = true;
          take(obj);
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
    if (!ended) rec.error ??= `reply cut: ${(err as Error).message}`;
  }
  if (rec.status >= 400) rec.error ??= `HTTP ${rec.status}`;
}

function describe(r: Seen): string {
  const parts = [`#${r.index}`, r.method, r.route, String(r.status)];
  if (isGeneration(r.path)) {
    parts.push(
      r.stream ? "stream" : "whole",
      `model=${r.model ?? "?"}`,
      `messages=${r.messages ?? "?"}`,
      `tools=${r.tools ?? 0}`,
    );
    if (r.ignoredTools) parts.push(`ignored_tools=${r.ignoredTools}`);
    if (r.maxTokens !== undefined) parts.push(`max_tokens=${r.maxTokens}`);
    if (r.thinking !== undefined) parts.push(`thinking=${r.thinking}`);
    parts.push(`prompt=${r.promptTokens ?? "?"}`);
    if (r.cachedTokens !== undefined) parts.push(`cached=${r.cachedTokens}`);
    if (r.cacheCreation !== undefined) parts.push(`cache_creation=${r.cacheCreation}`);
    parts.push(`completion=${r.completionTokens ?? "?"}`, `finish=${r.finish ?? "-"}`);
    if (r.firstMs !== undefined) parts.push(`first=${(r.firstMs / 1000).toFixed(1)}s`);
  }
  parts.push(`${(r.ms / 1000).toFixed(1)}s`);
  if (r.error) parts.push(`ERROR ${r.error.slice(0, 200)}`);
  return parts.join(" ");
}

/** What a request said about its client: credential kind, API headers, body fields, roles. */
function describeSent(r: Seen): string {
  const parts = [`auth=${r.headers.auth}`];
  if (r.headers.anthropicVersion) parts.push(`anthropic-version=${r.headers.anthropicVersion}`);
  if (r.headers.anthropicBeta) parts.push(`anthropic-beta=${r.headers.anthropicBeta}`);
  if (r.headers.userAgent) parts.push(`user-agent=${JSON.stringify(r.headers.userAgent)}`);
  if (r.fields) parts.push(`fields=${r.fields.join(",")}`);
  // Shown when some tool is not a plain function (Responses namespaces and built-in tools).
  if (r.toolTypes?.some((t) => t !== "function")) parts.push(`tool_types=${toolSummary(r.toolTypes)}`);
  if (r.roles) parts.push(`roles=${r.roles}`);
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
      const rec: Seen = {
        agent: currentAgent,
        run: currentRun,
        index: ++agentCount,
        method: req.method,
        path: url.pathname,
        route: url.pathname + url.search,
        headers: {
          auth: authKind(req.headers),
          anthropicVersion: req.headers.get("anthropic-version") ?? undefined,
          anthropicBeta: req.headers.get("anthropic-beta") ?? undefined,
          userAgent: req.headers.get("user-agent") ?? undefined,
        },
        status: 0,
        stream: false,
        ms: 0,
      };
      seen.push(rec);
      if (body?.byteLength) {
        try {
          const json = JSON.parse(new TextDecoder().decode(body));
          if (json && typeof json === "object" && !Array.isArray(json)) readBody(rec, json);
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
      rec.ignoredTools = res.headers.get("x-superfluid-ignored-tools") ?? undefined;
      const out = new Headers(res.headers);
      // fetch has already decoded the body; the length may no longer hold.
      out.delete("content-encoding");
      out.delete("content-length");
      if (!res.body) {
        rec.ms = performance.now() - started;
        progress(rec);
        return new Response(null, { status: res.status, headers: out });
      }
      // The agent's branch is passed on as it comes (no buffering: stream
      // events reach the agent when the server sends them); ours is read
      // alongside it.
      const [toAgent, toUs] = res.body.tee();
      const done = inspectReply(rec, toUs, res.headers.get("content-type") ?? "", started).then(() => {
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
/** Access-log lines (`<-- 200 POST ...`) the server printed, in order. */
const accessLines: string[] = [];

async function startServer(serveArgs: string[]): Promise<{ child: ChildProcess; base: string }> {
  const args = [
    join(import.meta.dir, "../src/main.ts"),
    "serve",
    "--port",
    "0",
    "--sessions",
    join(dir, "sessions"),
    "--threads",
    "1",
    ...serveArgs,
  ];
  console.error(`agents: bun src/main.ts ${args.slice(1).join(" ")} (log: ${serverLog})`);
  const child = spawnGroup(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] });
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
      if (
        await fetch(`${base}/health`).then(
          (r) => r.status === 200,
          () => false,
        )
      )
        return { child, base };
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

/** One run: an agent with one prompt. */
interface Outcome {
  agent: string;
  version: string;
  /** Which of the agent's prompts, from 1. */
  run: number;
  prompt: string;
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  seconds: number;
  requests: number;
  generations: number;
  largestPrompt?: number;
  /** Of the largest prompt, read from the prefix cache. */
  largestCached?: number;
  /** The largest prompt's time to first token at the proxy, in seconds. */
  largestFirstS?: number;
  errors: number;
  firstError?: string;
  accessLog: number;
  output: string;
  stderrTail: string;
  /** The agent's own account of the run, where it prints one. */
  report?: AgentReport;
}

const stripAnsi = (s: string) => s.replace(/\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)/g, "");

/** Runs each of the agent's prompts in turn, all in one HOME and one working directory. */
async function runAgent(
  agent: Agent,
  proxyUrl: string,
  window: number,
  settle: () => Promise<unknown>,
): Promise<Outcome[]> {
  const root = join(dir, agent.name);
  const home = join(root, "home");
  const work = join(root, "work");
  mkdirSync(home, { recursive: true });
  mkdirSync(work, { recursive: true });
  mkdirSync(join(root, "tmp"), { recursive: true });
  for (const [name, text] of Object.entries(agent.project ?? {})) writeFileSync(join(work, name), text);
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
    ...agent.configure(home, proxyUrl, window),
  };
  currentAgent = agent.name;
  agentCount = 0;
  const outcomes: Outcome[] = [];
  const prompts = agent.prompts ?? [prompt];
  for (const [i, text] of prompts.entries()) {
    if (stopping) break;
    outcomes.push(await runOnce(agent, i + 1, text, { root, work, env }, settle));
  }
  currentAgent = "-";
  return outcomes;
}

async function runOnce(
  agent: Agent,
  run: number,
  text: string,
  at: { root: string; work: string; env: Record<string, string> },
  settle: () => Promise<unknown>,
): Promise<Outcome> {
  currentRun = run;
  const firstSeen = seen.length;
  const firstAccess = accessLines.length;
  console.error(
    `\nagents: ${agent.name} ${agent.version} run ${run} in ${at.work}: ${JSON.stringify(text)} (hang guard ${timeoutS} s)`,
  );
  const t0 = performance.now();
  const argv = agent.argv(text);
  const child = spawnGroup(argv[0]!, argv.slice(1), { cwd: at.work, env: at.env, stdio: ["ignore", "pipe", "pipe"] });
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
  const suffix = (agent.prompts?.length ?? 1) > 1 ? `-${run}` : "";
  writeFileSync(join(at.root, `stdout${suffix}.txt`), stdout);
  writeFileSync(join(at.root, `stderr${suffix}.txt`), stderr);

  const mine = seen.slice(firstSeen);
  const gens = mine.filter((r) => isGeneration(r.path));
  const largest = gens
    .filter((r) => r.promptTokens !== undefined)
    .reduce<Seen | undefined>((a, r) => (a && a.promptTokens! >= r.promptTokens! ? a : r), undefined);
  const errs = mine.filter((r) => r.error);
  return {
    agent: agent.name,
    version: agent.version,
    run,
    prompt: text,
    exitCode: failed ? null : child.exitCode,
    signal: failed ? `spawn failed: ${failed.message}` : child.signalCode,
    timedOut,
    seconds,
    requests: mine.length,
    generations: gens.length,
    largestPrompt: largest?.promptTokens,
    largestCached: largest?.cachedTokens,
    largestFirstS: largest?.firstMs === undefined ? undefined : largest.firstMs / 1000,
    errors: errs.length,
    firstError: errs[0]?.error,
    accessLog: accessLines.length - firstAccess,
    output: stripAnsi(stdout).trim(),
    stderrTail: stripAnsi(stderr).trim().slice(-600),
    report: agent.report?.(stdout),
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

const fmt = (n: number | undefined, digits = 0) => (n === undefined ? "-" : n.toFixed(digits));

async function main(): Promise<number> {
  const { found, missing } = findAgents();
  if (found.length === 0) {
    console.log(
      `No agent CLI found in ${agentsDir} (missing: ${missing.join(", ")}${only ? `; --only ${only}` : ""}). Install them with\n\n` +
        `  npm install --prefix ${agentsDir} --ignore-scripts opencode-ai@1.18.33 @qwen-code/qwen-code@0.15.10 @anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0\n\n` +
        `or point SUPERFLUID_AGENTS_DIR at the npm prefix that holds them (see bench/README.md, "Coding agents").`,
    );
    return 0;
  }
  if (missing.length && !only) console.error(`agents: skipping ${missing.join(", ")}: not found in ${agentsDir}`);
  dir = mkdtempSync(join(tmpdir(), "superfluid-agents-"));
  serverLog = join(dir, "server.log");

  // What the agents that run need from the server (Claude Code: its model
  // names as aliases) comes before the caller's own arguments.
  const serveArgs = [...found.flatMap((a) => a.serveArgs ?? []), ...serveExtra];
  const server = await startServer(serveArgs);
  const proxy = startProxy(server.base);
  const outcomes: Outcome[] = [];
  const failures = new Map<string, string[]>();
  try {
    // The agents' key: a server started with `-- --api-key sk-superfluid-unused` checks it on every request.
    const models = await fetch(`${server.base}/v1/models`, { headers: { authorization: `Bearer ${API_KEY}` } }).then(
      (r) => r.json() as Promise<{ data: { id: string; meta?: { n_ctx?: number } }[] }>,
    );
    const served = models.data.find((m) => m.id === MODEL);
    if (!served)
      throw new Error(
        `the server does not serve ${MODEL} (it serves ${models.data.map((m) => m.id).join(", ")}): name no model, the agents are configured for the built-in one`,
      );
    console.error(
      `agents: server ${server.base}, ${MODEL} with a ${served.meta?.n_ctx ?? "?"}-token window; agents talk to the proxy ${proxy.url}`,
    );
    for (const agent of found) {
      if (stopping) break;
      const runs = await runAgent(agent, proxy.url, served.meta?.n_ctx ?? 131072, proxy.settle);
      outcomes.push(...runs);
      const failed = agent.check?.(runs) ?? [];
      if (failed.length) failures.set(agent.name, failed);
    }
  } finally {
    proxy.stop();
    if (!stopping) {
      stopping = true;
      await cleanup();
    }
  }

  const window = serveArgs.length ? `serve ${serveArgs.join(" ")}` : "serve (defaults)";
  console.log(`\n${MODEL} on \`${window}\`, hang guard ${timeoutS} s\n`);
  console.log(
    "| agent | version | run | exit | seconds | requests | served (server access log) | error replies | largest prompt tokens | of them cached | first token s |",
  );
  console.log("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|");
  for (const o of outcomes) {
    const exit = o.timedOut ? "timed out" : o.exitCode !== null ? String(o.exitCode) : (o.signal ?? "?");
    console.log(
      `| ${o.agent} | ${o.version} | ${o.run} | ${exit} | ${o.seconds.toFixed(1)} | ${o.requests} | ${o.accessLog} | ${o.errors} | ${fmt(o.largestPrompt)} | ${fmt(o.largestCached)} | ${fmt(o.largestFirstS, 1)} |`,
    );
  }
  for (const o of outcomes) {
    console.log(`\n${o.agent} run ${o.run} ${JSON.stringify(o.prompt)}:`);
    if (o.report) {
      const r = o.report;
      console.log(`  result ${JSON.stringify(r.result.slice(0, 200))}${r.isError ? " (is_error)" : ""}`);
      if (r.usage) {
        const fields = Object.entries(r.usage)
          .map(([k, v]) => `${k}=${v}`)
          .join(" ");
        console.log(`  its usage ${fields} (prompt ${fmt(r.promptTokens)}, cached ${fmt(r.cachedTokens)})`);
      }
      if (r.ttftMs !== undefined) console.log(`  its own first-token time ${(r.ttftMs / 1000).toFixed(1)} s`);
      for (const note of r.notes ?? []) console.log(`  its warning: ${note.slice(0, 200)}`);
    } else console.log(`  output ${JSON.stringify(o.output.slice(0, 200))}`);
    if (o.firstError) console.log(`  first error reply: ${o.firstError}`);
    if (o.exitCode !== 0 || o.timedOut) console.log(`  stderr ends ${JSON.stringify(o.stderrTail.slice(-300))}`);
    // The first requests and the last few: a looping agent makes hundreds.
    const mine = seen.filter((s) => s.agent === o.agent && s.run === o.run);
    const shown = mine.length <= 16 ? mine : [...mine.slice(0, 12), undefined, ...mine.slice(-4)];
    for (const r of shown)
      console.log(r ? `  ${describe(r)}\n      ${describeSent(r)}` : `  ... ${mine.length - 16} more`);
  }
  for (const [agent, failed] of failures) for (const f of failed) console.log(`\n${agent}: FAILED ${f}`);
  if (jsonPath)
    writeFileSync(
      jsonPath,
      JSON.stringify(
        { prompt, secondPrompt, timeoutS, serveArgs, outcomes, failures: Object.fromEntries(failures), requests: seen },
        null,
        2,
      ),
    );
  const ok =
    outcomes.length > 0 &&
    failures.size === 0 &&
    outcomes.every((o) => o.exitCode === 0 && !o.timedOut && o.errors === 0 && o.generations > 0);
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
// Pending timers (the server start's hang guard) would keep the process alive for minutes after the report.
process.exit();
