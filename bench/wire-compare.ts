// Each tool-call family's wire, superfluid beside llama.cpp's llama-server:
// for every family template in ../shared/templates, a random-weight model
// over a real vocabulary with that template (src/fixtures/real-vocab.ts) is
// served by each server in turn, and asked for a forced call
// (`tool_choice: "required"`, a get_weather tool over `city` and `days`,
// temperature 0.8, seeds 1..N, `logprobs: true`). Per server it records the
// HTTP status (and the error), the finish reason, whether the call parses
// (name get_weather, arguments JSON with a string `city` and a number `days`),
// and the raw generated text (the logprobs' token bytes joined: the syntax
// the grammar let the model write). From llama-server's debug log (a first
// start at debug level, one uncounted request) it also takes the chat handler
// it picked for the template ("Using specialized template: NAME", or the
// differential autoparser with its patch and tool mode), the request's chat
// format (`peg-native`, ...), and the forced grammar, rendered to its
// shortest string: the call syntax llama-server forces even where a random
// model never reaches the call. From superfluid it takes `GET /props`
// `tool_call_wire` and `reasoning_markers`.
//
//   bun bench/wire-compare.ts [--only Qwen3.5,GLM-4.6] [--seeds 3] [--max-tokens 200] [--threads 1]
//                             [--shared ../shared] [--llama DIR] [--cache DIR] [--fresh-llama] [--no-llama]
//                             [--out /tmp/wire-compare.md] [--json PATH] [--timeout 180]
//
// The models are built once into --cache and kept; llama-server's answers are
// kept there too (keyed by its binary, the seeds and the request), so a rerun
// measures superfluid alone unless --fresh-llama. One server runs at a time,
// each stopped (process group and all) before the next starts and whatever
// way the run ends. Progress goes to stderr, the Markdown table to stdout and
// to --out. Needs ../shared/models/vocab and ../shared/templates.
import { existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { realVocabModel } from "../src/fixtures/real-vocab.ts";
import { writeGgufFile } from "../src/gguf/writer.ts";
import { fail, parseOptions, scratchFolder, stopGroup } from "./support.ts";
import { type Server, type Setup, startLlama, startSuperfluid } from "./turns.ts";

const USAGE = `bun bench/wire-compare.ts [options]
  --only A,B         families whose name or template contains one of these (case-insensitive)
  --seeds N          forced requests per server and family, seeds 1..N (default 3)
  --max-tokens N     max_tokens of each request (default 200)
  --threads N        compute threads of each server (default 1; one server runs at a time)
  --shared DIR       the shared folder with models/vocab and templates (default ../shared)
  --llama DIR        llama-server's folder (default ../shared/anchors/llama.cpp)
  --cache DIR        the models and llama-server's kept answers (default /tmp/superfluid-wire-compare)
  --fresh-llama      ask llama-server again even where its answers are kept
  --no-llama         superfluid alone
  --out PATH         the Markdown table (default /tmp/wire-compare.md)
  --json PATH        also every request's facts and llama-server's grammars
  --timeout S        per-request timeout in seconds (default 180)`;

const { opts, int } = parseOptions(
  USAGE,
  ["only", "seeds", "max-tokens", "threads", "shared", "llama", "cache", "out", "json", "timeout"],
  ["fresh-llama", "no-llama"],
);
const shared = resolve(opts.get("shared") ?? join(import.meta.dir, "../../shared"));
const llamaDir = resolve(opts.get("llama") ?? join(shared, "anchors/llama.cpp"));
const cacheDir = resolve(opts.get("cache") ?? "/tmp/superfluid-wire-compare");
const outPath = opts.get("out") ?? "/tmp/wire-compare.md";
const seeds = int("seeds", 3, 1);
const maxTokens = int("max-tokens", 200, 1);
const threads = int("threads", 1, 1);
const timeoutS = int("timeout", 180, 1);
const useLlama = !opts.has("no-llama");
if (!existsSync(join(shared, "models/vocab")) || !existsSync(join(shared, "templates")))
  fail(`needs ${shared}/models/vocab and ${shared}/templates (--shared DIR)`);
if (useLlama && !existsSync(join(llamaDir, "llama-server"))) fail(`no llama-server in ${llamaDir} (--llama DIR)`);
if (threads > navigator.hardwareConcurrency)
  console.error(`wire-compare: --threads ${threads} is more than the ${navigator.hardwareConcurrency} cores`);

// ---------------------------------------------------------------- families

interface Family {
  name: string;
  template: string;
  vocab: string;
}

const QWEN = "ggml-vocab-qwen2.gguf";
const LLAMA_BPE = "ggml-vocab-llama-bpe.gguf";
const LLAMA_SPM = "ggml-vocab-llama-spm.gguf";

// The vocabulary is the nearest of the four at hand, not the family's own:
// marker tokens a real model has (`<tool_call>`, `[TOOL_CALLS]`, ...) are
// often plain text here, spelled by several tokens.
const FAMILIES: Family[] = [
  { name: "Qwen3.5", template: "Qwen3.5-4B.jinja", vocab: QWEN },
  { name: "Qwen3-Coder", template: "Qwen3-Coder.jinja", vocab: QWEN },
  { name: "Nemotron 3 Nano", template: "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", vocab: QWEN },
  { name: "StepFun 3.5", template: "StepFun3.5-Flash.jinja", vocab: QWEN },
  { name: "Seed-OSS", template: "ByteDance-Seed-OSS.jinja", vocab: QWEN },
  { name: "GLM 4.6", template: "GLM-4.6.jinja", vocab: QWEN },
  { name: "GLM 4.7", template: "GLM-4.7-Flash.jinja", vocab: QWEN },
  { name: "MiniMax M2", template: "MiniMax-M2.jinja", vocab: QWEN },
  { name: "MiniMax M3", template: "MiniMax-M3.jinja", vocab: QWEN },
  { name: "Kimi K2", template: "Kimi-K2-Instruct.jinja", vocab: QWEN },
  { name: "DeepSeek V3.1", template: "deepseek-ai-DeepSeek-V3.1.jinja", vocab: QWEN },
  { name: "DeepSeek R1 (Qwen distill)", template: "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", vocab: QWEN },
  { name: "DeepSeek V3.2", template: "deepseek-ai-DeepSeek-V3.2.jinja", vocab: QWEN },
  { name: "Mistral Small 3.2", template: "Mistral-Small-3.2-24B-Instruct-2506.jinja", vocab: LLAMA_SPM },
  { name: "Mistral Nemo", template: "mistralai-Mistral-Nemo-Instruct-2407.jinja", vocab: LLAMA_SPM },
  { name: "Ministral 3 Reasoning", template: "mistralai-Ministral-3-14B-Reasoning-2512.jinja", vocab: LLAMA_SPM },
  { name: "Granite 3.3", template: "ibm-granite-granite-3.3-2B-Instruct.jinja", vocab: QWEN },
  { name: "Granite 4.0", template: "ibm-granite-granite-4.0.jinja", vocab: QWEN },
  { name: "LFM2.5", template: "LFM2.5-8B-A1B.jinja", vocab: QWEN },
  { name: "Command R7B", template: "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", vocab: QWEN },
  { name: "FireFunction v2", template: "fireworks-ai-llama-3-firefunction-v2.jinja", vocab: LLAMA_BPE },
  { name: "Functionary v3.1", template: "meetkai-functionary-medium-v3.1.jinja", vocab: LLAMA_BPE },
  { name: "Functionary v3.2", template: "meetkai-functionary-medium-v3.2.jinja", vocab: LLAMA_BPE },
  { name: "Apertus", template: "Apertus-8B-Instruct.jinja", vocab: QWEN },
  { name: "Gemma 4", template: "google-gemma-4-31B-it.jinja", vocab: QWEN },
  { name: "Llama 3.1", template: "meta-llama-Llama-3.1-8B-Instruct.jinja", vocab: LLAMA_BPE },
  { name: "Hermes 3", template: "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", vocab: LLAMA_BPE },
  { name: "Qwen3", template: "Qwen-Qwen3-0.6B.jinja", vocab: QWEN },
  { name: "gpt-oss", template: "openai-gpt-oss-120b.jinja", vocab: QWEN },
];

const only = opts
  .get("only")
  ?.split(",")
  .map((s) => s.trim().toLowerCase())
  .filter(Boolean);
const families = FAMILIES.filter(
  (f) => !only || only.some((o) => f.name.toLowerCase().includes(o) || f.template.toLowerCase().includes(o)),
);
if (families.length === 0) fail(`--only: no family matches (${FAMILIES.map((f) => f.name).join(", ")})`);

const stem = (f: Family) => `${f.template.replace(/\.jinja$/, "")}__${f.vocab.replace(/^ggml-vocab-|\.gguf$/g, "")}`;

/** The family's model in the cache, built on first use (to a temporary name, so a cut build is never kept). */
async function modelFor(f: Family): Promise<string> {
  const path = join(cacheDir, `${stem(f)}.gguf`);
  if (existsSync(path)) return path;
  const template = readFileSync(join(shared, "templates", f.template), "utf8");
  const tmp = `${path}.tmp-${process.pid}`;
  await writeGgufFile(
    realVocabModel({ vocabPath: join(shared, "models/vocab", f.vocab), chatTemplate: template }),
    tmp,
  );
  renameSync(tmp, path);
  return path;
}

// ---------------------------------------------------------------- requests

const TOOLS = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Weather forecast for a city",
      parameters: {
        type: "object",
        properties: { city: { type: "string" }, days: { type: "integer" } },
        required: ["city", "days"],
      },
    },
  },
];
const MESSAGES = [{ role: "user", content: "What will the weather be in Paris over the next 3 days?" }];
/** Changes when the request changes, so kept llama-server answers to another request are not reused. */
const REQUEST_KEY = JSON.stringify({ TOOLS, MESSAGES, maxTokens, t: 0.8, v: 2 });

interface Reply {
  seed: number;
  status: number;
  error?: string;
  finish?: string;
  calls: { name: string; arguments: string }[];
  /** Every call is get_weather with JSON arguments: a string city and a number days. */
  parsed: boolean;
  content?: string;
  reasoning?: string;
  /** The generated tokens' bytes joined (logprobs), or undefined where the reply carried none. */
  raw?: string;
}

function callOk(c: { name: string; arguments: string }): boolean {
  if (c.name !== "get_weather") return false;
  try {
    const a = JSON.parse(c.arguments);
    return typeof a === "object" && a !== null && typeof a.city === "string" && typeof a.days === "number";
  } catch {
    return false;
  }
}

async function forced(server: Server, seed: number): Promise<Reply> {
  const body = {
    model: server.model,
    messages: MESSAGES,
    tools: TOOLS,
    tool_choice: "required",
    temperature: 0.8,
    seed,
    max_tokens: maxTokens,
    logprobs: true,
  };
  let res: Response;
  try {
    res = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutS * 1000),
    });
  } catch (err) {
    return { seed, status: 0, error: (err as Error).message, calls: [], parsed: false };
  }
  const text = await res.text();
  let json: Record<string, any>;
  try {
    json = JSON.parse(text);
  } catch {
    return { seed, status: res.status, error: text.slice(0, 300), calls: [], parsed: false };
  }
  if (res.status !== 200)
    return {
      seed,
      status: res.status,
      error: String(json.error?.message ?? text).slice(0, 300),
      calls: [],
      parsed: false,
    };
  const choice = json.choices?.[0] ?? {};
  const calls = ((choice.message?.tool_calls ?? []) as { function?: { name?: string; arguments?: string } }[]).map(
    (c) => ({ name: c.function?.name ?? "", arguments: c.function?.arguments ?? "" }),
  );
  const tokens = choice.logprobs?.content as { token?: string; bytes?: number[] | null }[] | undefined;
  return {
    seed,
    status: res.status,
    finish: choice.finish_reason,
    calls,
    parsed: calls.length > 0 && calls.every(callOk),
    content: choice.message?.content ?? undefined,
    reasoning: choice.message?.reasoning_content ?? undefined,
    raw: tokens ? rawText(tokens) : undefined,
  };
}

/**
 * The generated text from the logprobs' tokens: their bytes where given (a
 * character split over two tokens comes out whole), else their texts.
 */
function rawText(tokens: { token?: string; bytes?: number[] | null }[]): string {
  if (!tokens.every((t) => Array.isArray(t.bytes))) return tokens.map((t) => t.token ?? "").join("");
  return new TextDecoder().decode(Uint8Array.from(tokens.flatMap((t) => t.bytes!)));
}

// ---------------------------------------------------------------- servers

/** The turns benches' Setup, as far as startLlama and startSuperfluid read it. */
function setupFor(modelPath: string, tmp: string): Setup {
  return { modelPath, ctx: 4096, lanes: 1, threads, llamaDir, sameBuild: false, tmp } as Setup;
}

const scratch = scratchFolder("wire-compare-");

/** Starts a server, runs `body` on it, and stops it whatever happens; a failed start is an error for the caller. */
async function withServer<T>(start: () => Promise<Server>, body: (s: Server) => Promise<T>): Promise<T> {
  const server = await start();
  try {
    return await body(server);
  } finally {
    await stopGroup(server.child, 5_000);
  }
}

// ---------------------------------------------------------------- llama-server

interface LlamaResult {
  key: string;
  /** The handler llama.cpp picked for the template, from its debug log. */
  handler?: string;
  /** The differential autoparser's findings: its tool mode and reasoning markers. */
  toolMode?: string;
  reasoning?: [string, string];
  /** `chat format: NAME` of the forced requests. */
  chatFormat?: string;
  /** The forced grammar as logged, and the generation prompt it starts with. */
  grammar?: string;
  generationPrompt?: string;
  startError?: string;
  replies: Reply[];
}

function llamaKey(f: Family): string {
  const bin = statSync(join(llamaDir, "llama-server"));
  return JSON.stringify({ stem: stem(f), bin: [bin.size, bin.mtimeMs], seeds, REQUEST_KEY });
}

async function measureLlama(f: Family, model: string): Promise<LlamaResult> {
  const key = llamaKey(f);
  const keptPath = join(cacheDir, `${stem(f)}.llama-server.json`);
  if (!opts.has("fresh-llama") && existsSync(keptPath)) {
    const kept = JSON.parse(readFileSync(keptPath, "utf8")) as LlamaResult;
    if (kept.key === key) return kept;
  }
  const result: LlamaResult = { key, replies: [] };
  try {
    // First at debug verbosity, one request: the handler, the chat format
    // and the grammar are logged at that level only (startLlama passes this
    // process's environment on). Its reply is not counted: at that level a
    // reply cut inside a UTF-8 character fails with 500 (the debug dump of
    // the parsed message throws), which it does not at the default level.
    process.env.LLAMA_ARG_LOG_VERBOSITY = "5";
    try {
      await withServer(
        () => startLlama(setupFor(model, scratch)),
        async (server) => {
          let log = server.log.join("");
          for (const stream of [server.child.stdout!, server.child.stderr!])
            stream.on("data", (text: string) => (log += text));
          await forced(server, 1);
          await Bun.sleep(200); // the request's last log lines
          const part = log.replace(/\x1b\[[0-9;]*m/g, "");
          result.handler = handlerIn(part);
          result.toolMode = /tool_mode: (\S+)/.exec(part)?.[1];
          const open = /reasoning_start: '([^'\n]*)'/.exec(part)?.[1];
          const close = /reasoning_end: '([^'\n]*)'/.exec(part)?.[1];
          if (open) result.reasoning = [open, close ?? ""];
          result.chatFormat = /chat format: (\S+)/.exec(part)?.[1];
          result.grammar = grammarIn(part);
          if (result.grammar) result.generationPrompt = /generation_prompt='([\s\S]*?)', start=/.exec(part)?.[1];
        },
      );
    } finally {
      delete process.env.LLAMA_ARG_LOG_VERBOSITY;
    }
    // Then the counted requests, at the default log level.
    await withServer(
      () => startLlama(setupFor(model, scratch)),
      async (server) => {
        for (let seed = 1; seed <= seeds; seed++) result.replies.push(await forced(server, seed));
      },
    );
  } catch (err) {
    result.startError = (err as Error).message.slice(-600);
  }
  writeFileSync(keptPath, JSON.stringify(result, null, 1));
  return result;
}

/**
 * How much of a grammar's string is the generation prompt (llama.cpp's
 * grammars start with it): the common prefix, backed off to the end of its
 * last line or tag, so a shared "<" of two different tags stays.
 */
function promptPrefix(s: string, prompt: string): number {
  let n = 0;
  while (n < s.length && n < prompt.length && s[n] === prompt[n]) n++;
  if (n === prompt.length) return n;
  const cut = Math.max(s.lastIndexOf("\n", n - 1), s.lastIndexOf(">", n - 1));
  return cut + 1;
}

function handlerIn(log: string): string | undefined {
  const named = /Using specialized template: ([^\n]+)/.exec(log)?.[1]?.trim();
  if (named) return named;
  if (!/using differential autoparser/.test(log)) return undefined;
  const patches = [...new Set([...log.matchAll(/\[Patch: ([^\]\n]+)\]/g)].map((m) => m[1]!))];
  return patches.length ? `autoparser (patch ${patches.join(", ")})` : "autoparser";
}

/** The grammar llama-server logged for a request: from `Grammar (...): ` to the next log line or blank line. */
function grammarIn(log: string): string | undefined {
  const at = log.search(/Grammar \([^)]*\): /);
  if (at < 0) return undefined;
  const start = log.indexOf(": ", at) + 2;
  const lines: string[] = [];
  for (const line of log.slice(start).split("\n")) {
    if (lines.length > 0 && (line.trim() === "" || /^\d+\.\d+\.\d+\.\d+ [A-Z] /.test(line))) break;
    lines.push(line);
  }
  return lines.join("\n");
}

// ---------------------------------------------------------------- the grammar's shortest string

// llama.cpp's GBNF, enough to render a grammar's shortest string: literals,
// character classes, rule references, groups, alternatives, the ? * + {m,n}
// repetitions, and token references (<|name|>, <[id]>).
type Node =
  | { k: "lit"; s: string }
  | { k: "any"; s: string }
  | { k: "ref"; name: string }
  | { k: "alt"; seqs: Node[][] }
  | { k: "rep"; node: Node; min: number };

function parseGrammar(text: string): Map<string, Node> {
  const rules = new Map<string, Node>();
  const bodies = new Map<string, string>();
  let current: string | undefined;
  for (const line of text.split("\n")) {
    const m = /^([A-Za-z0-9_-]+)\s*::=(.*)$/.exec(line);
    if (m) {
      current = m[1]!;
      bodies.set(current, m[2]!);
    } else if (current && line.trim() && !line.trimStart().startsWith("#")) {
      bodies.set(current, `${bodies.get(current)}\n${line}`);
    }
  }
  for (const [name, body] of bodies) rules.set(name, parseBody(body));
  return rules;
}

function parseBody(src: string): Node {
  let i = 0;
  const ws = () => {
    for (;;) {
      while (i < src.length && /\s/.test(src[i]!)) i++;
      if (src[i] === "#") while (i < src.length && src[i] !== "\n") i++;
      else return;
    }
  };
  const escaped = (): string => {
    const c = src[i++]!;
    if (c !== "\\") return c;
    const e = src[i++]!;
    if (e === "n") return "\n";
    if (e === "t") return "\t";
    if (e === "r") return "\r";
    const hex = e === "x" ? 2 : e === "u" ? 4 : e === "U" ? 8 : 0;
    if (hex) {
      const code = parseInt(src.slice(i, i + hex), 16);
      i += hex;
      return String.fromCodePoint(code);
    }
    return e;
  };
  const alts = (): Node => {
    const seqs: Node[][] = [seq()];
    while (src[i] === "|") {
      i++;
      seqs.push(seq());
    }
    return { k: "alt", seqs };
  };
  const seq = (): Node[] => {
    const out: Node[] = [];
    for (;;) {
      ws();
      const c = src[i];
      if (c === undefined || c === "|" || c === ")") return out;
      let node: Node;
      if (c === '"') {
        i++;
        let s = "";
        while (i < src.length && src[i] !== '"') s += escaped();
        i++;
        node = { k: "lit", s };
      } else if (c === "[") {
        i++;
        const neg = src[i] === "^";
        if (neg) i++;
        const first = src[i] === "]" ? "" : escaped();
        while (i < src.length && src[i] !== "]") escaped();
        i++;
        node = { k: "any", s: neg ? "…" : first };
      } else if (c === "(") {
        i++;
        node = alts();
        ws();
        if (src[i++] !== ")") throw new Error("unclosed group");
      } else if (c === "!" || c === "<") {
        const neg = c === "!";
        if (neg) i++;
        const end = src.indexOf(">", i);
        if (src[i] !== "<" || end < 0) throw new Error(`bad token at ${i}`);
        const inner = src.slice(i + 1, end);
        i = end + 1;
        node = neg ? { k: "any", s: "…" } : { k: "lit", s: inner.startsWith("[") ? `<${inner}>` : `<${inner}>` };
      } else if (c === ".") {
        i++;
        node = { k: "any", s: "…" };
      } else {
        const m = /^[A-Za-z0-9_-]+/.exec(src.slice(i));
        if (!m) throw new Error(`unexpected ${JSON.stringify(c)} at ${i}`);
        i += m[0].length;
        node = { k: "ref", name: m[0] };
      }
      // Repetitions: the shortest string takes each the fewest times it allows.
      for (;;) {
        const q = src[i];
        if (q === "?" || q === "*") {
          i++;
          node = { k: "rep", node, min: 0 };
        } else if (q === "+") {
          i++;
          node = { k: "rep", node, min: 1 };
        } else if (q === "{") {
          const end = src.indexOf("}", i);
          const min = parseInt(src.slice(i + 1, end), 10);
          i = end + 1;
          node = { k: "rep", node, min: Number.isFinite(min) ? min : 0 };
        } else break;
      }
      out.push(node);
    }
  };
  const node = alts();
  ws();
  if (i < src.length) throw new Error(`unparsed ${JSON.stringify(src.slice(i, i + 20))}`);
  return node;
}

/** The grammar's shortest string from `root` (each alternative chosen for the fewest characters). */
function shortest(text: string): string {
  const rules = parseGrammar(text);
  if (!rules.has("root")) throw new Error("no root rule");
  const len = new Map<string, number>([...rules.keys()].map((k) => [k, Infinity]));
  const lengthOf = (n: Node): number => {
    switch (n.k) {
      case "lit":
        return n.s.length;
      case "any":
        return 1;
      case "ref":
        return len.get(n.name) ?? Infinity;
      case "rep":
        return n.min === 0 ? 0 : n.min * lengthOf(n.node);
      case "alt":
        return Math.min(...n.seqs.map((s) => s.reduce((a, x) => a + lengthOf(x), 0)));
    }
  };
  for (let changed = true, rounds = 0; changed && rounds < 1000; rounds++) {
    changed = false;
    for (const [name, node] of rules) {
      const l = lengthOf(node);
      if (l < len.get(name)!) {
        len.set(name, l);
        changed = true;
      }
    }
  }
  const render = (n: Node, depth: number): string => {
    if (depth > 200) throw new Error("too deep");
    switch (n.k) {
      case "lit":
      case "any":
        return n.s;
      case "ref": {
        const r = rules.get(n.name);
        if (!r) throw new Error(`no rule ${n.name}`);
        return render(r, depth + 1);
      }
      case "rep":
        return render(n.node, depth + 1).repeat(n.min);
      case "alt": {
        let best = n.seqs[0]!;
        let bestLen = Infinity;
        for (const s of n.seqs) {
          const l = s.reduce((a, x) => a + lengthOf(x), 0);
          if (l < bestLen) [best, bestLen] = [s, l];
        }
        return best.map((x) => render(x, depth + 1)).join("");
      }
    }
  };
  return render(rules.get("root")!, 0);
}

/**
 * Whether the grammar lets free text (reasoning or content: a rule with a
 * negated class or `.`) come before the call's name, on some path from root.
 */
function textBeforeCall(text: string): boolean {
  const rules = parseGrammar(text);
  const memo = (f: (n: Node) => boolean) => {
    const seen = new Map<string, boolean>();
    const go = (n: Node): boolean => {
      switch (n.k) {
        case "lit":
        case "any":
          return f(n);
        case "rep":
          return go(n.node);
        case "alt":
          return n.seqs.some((s) => s.some(go));
        case "ref": {
          if (!seen.has(n.name)) {
            seen.set(n.name, false); // a cycle adds nothing
            const r = rules.get(n.name);
            seen.set(n.name, r ? go(r) : false);
          }
          return seen.get(n.name)!;
        }
      }
    };
    return go;
  };
  const hasCall = memo((n) => n.k === "lit" && n.s.includes("get_weather"));
  const free = memo((n) => n.k === "any" && n.s === "…");
  const visiting = new Set<string>();
  // Along a sequence: free text in an item before the one that holds the call, or inside that one before it.
  const beforeIn = (seq: Node[]): boolean => {
    for (const item of seq) {
      if (hasCall(item)) return before(item);
      if (free(item)) return true;
    }
    return false;
  };
  const before = (n: Node): boolean => {
    switch (n.k) {
      case "lit":
      case "any":
        return false;
      case "rep":
        return before(n.node);
      case "alt":
        return n.seqs.some((seq) => seq.some(hasCall) && beforeIn(seq));
      case "ref": {
        if (visiting.has(n.name)) return false;
        visiting.add(n.name);
        const r = rules.get(n.name);
        const out = r ? before(r) : false;
        visiting.delete(n.name);
        return out;
      }
    }
  };
  return before(rules.get("root") ?? { k: "lit", s: "" });
}

// ---------------------------------------------------------------- superfluid

interface OursResult {
  wire?: string | null;
  reasoningMarkers?: unknown;
  startError?: string;
  replies: Reply[];
}

async function measureOurs(model: string): Promise<OursResult> {
  const result: OursResult = { replies: [] };
  try {
    await withServer(
      () => startSuperfluid(setupFor(model, scratch), "superfluid", `sessions-${Date.now()}`),
      async (server) => {
        const props = (await (await fetch(`${server.url}/props`)).json()) as Record<string, unknown>;
        result.wire = (props.tool_call_wire as string | null | undefined) ?? null;
        result.reasoningMarkers = props.reasoning_markers;
        for (let seed = 1; seed <= seeds; seed++) result.replies.push(await forced(server, seed));
      },
    );
  } catch (err) {
    result.startError = (err as Error).message.slice(-600);
  }
  return result;
}

// ---------------------------------------------------------------- the table

/** Text for a table cell: JSON-escaped (newlines as \n), cut, pipes and backticks made harmless. */
function cell(text: string, max = 80): string {
  const cut = text.length > max ? `${text.slice(0, max)}…` : text;
  return JSON.stringify(cut).slice(1, -1).replace(/\|/g, "\\|").replace(/`/g, "ˋ");
}
const code = (text: string, max = 80) => (text === "" ? "(empty)" : `\`${cell(text, max)}\``);

/** Statuses, parsed calls, finish reasons, errors, and the raw text of the most telling reply. */
function repliesCell(replies: Reply[]): string {
  if (replies.length === 0) return "no replies";
  const statuses = [...new Set(replies.map((r) => r.status))].join("/");
  const ok = replies.filter((r) => r.parsed).length;
  const finishes = new Map<string, number>();
  for (const r of replies) if (r.finish) finishes.set(r.finish, (finishes.get(r.finish) ?? 0) + 1);
  const parts = [`HTTP ${statuses}`, `calls ok ${ok}/${replies.length}`];
  if (finishes.size) parts.push([...finishes].map(([k, n]) => `${k}×${n}`).join(" "));
  const err = replies.find((r) => r.error);
  if (err) parts.push(`error: ${code(err.error!, 160)}`);
  const shown = replies.find((r) => r.parsed) ?? replies.find((r) => r.calls.length) ?? replies.find((r) => r.raw);
  if (shown?.raw !== undefined) parts.push(`raw: ${code(shown.raw)}`);
  else if (shown?.calls.length) parts.push(`call: ${code(JSON.stringify(shown.calls[0]))}`);
  if (shown?.parsed && shown.calls[0]) parts.push(`args: ${code(shown.calls[0].arguments, 60)}`);
  return parts.join("; ");
}

/** Reasoning markers, from superfluid's `/props` `reasoning_markers` ({open, close}) or llama.cpp's autoparser. */
function markersCell(m: unknown): string {
  if (m === null || m === undefined) return "";
  const o = m as Record<string, unknown>;
  if (typeof o.open === "string") return `; reasoning ${code(`${o.open}…${o.close ?? ""}`, 40)}`;
  return `; reasoning ${code(JSON.stringify(m), 40)}`;
}

/** The grammar's shortest string, less the generation prompt it starts with. */
function grammarCell(grammar: string, prompt: string): string {
  try {
    const s = shortest(grammar);
    const before = textBeforeCall(grammar) ? "free text allowed before the call; " : "the call at once; ";
    return before + code(s.slice(promptPrefix(s, prompt)), 120);
  } catch (err) {
    return `not rendered (${cell((err as Error).message, 60)})`;
  }
}

interface Row {
  family: Family;
  llama?: LlamaResult;
  ours: OursResult;
}

function table(rows: Row[]): string {
  const head = useLlama
    ? [
        "family (template)",
        "llama-server handler / chat format",
        "llama-server forced grammar (shortest string)",
        "llama-server forced (`required`)",
        "ours: wire",
        "ours forced (`required`)",
      ]
    : ["family (template)", "ours: wire", "ours forced (`required`)"];
  const lines = [`| ${head.join(" | ")} |`, `|${head.map(() => "---").join("|")}|`];
  for (const r of rows) {
    const fam = `${r.family.name} (${cell(r.family.template, 60)}, ${r.family.vocab.replace(/^ggml-vocab-|\.gguf$/g, "")})`;
    const ours = r.ours.startError
      ? [`—`, `start failed: ${code(r.ours.startError, 120)}`]
      : [`${r.ours.wire ?? "null"}${markersCell(r.ours.reasoningMarkers)}`, repliesCell(r.ours.replies)];
    if (!r.llama) {
      lines.push(`| ${[fam, ...ours].join(" | ")} |`);
      continue;
    }
    const l = r.llama;
    const llama = l.startError
      ? [`—`, `—`, `start failed: ${code(l.startError, 120)}`]
      : [
          [
            `${l.handler ?? "(not logged)"} / ${l.chatFormat ?? "?"}`,
            ...(l.toolMode ? [`tool_mode ${l.toolMode}`] : []),
          ].join("; ") + (l.reasoning ? markersCell({ open: l.reasoning[0], close: l.reasoning[1] }) : ""),
          l.grammar !== undefined
            ? grammarCell(l.grammar, l.generationPrompt ?? "")
            : "no grammar logged: the request is not constrained",
          repliesCell(l.replies),
        ];
    lines.push(`| ${[fam, ...llama, ...ours].join(" | ")} |`);
  }
  return lines.join("\n");
}

// ---------------------------------------------------------------- main

mkdirSync(cacheDir, { recursive: true });
const rows: Row[] = [];
for (const f of families) {
  const started = Date.now();
  const model = await modelFor(f);
  const llama = useLlama ? await measureLlama(f, model) : undefined;
  const ours = await measureOurs(model);
  rows.push({ family: f, llama, ours });
  const okL = llama ? `llama-server ${llama.replies.filter((r) => r.parsed).length}/${llama.replies.length}, ` : "";
  console.error(
    `wire-compare: ${f.name}: ${okL}superfluid ${ours.replies.filter((r) => r.parsed).length}/${ours.replies.length} ` +
      `(wire ${ours.wire ?? "null"}), ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
}

const llamaNote = useLlama
  ? ` llama-server: ${llamaDir}, \`--jinja --reasoning off\` (as bench/turns.ts starts it), debug log for the handler, chat format and grammar.`
  : "";
const md = [
  `Forced tool calls (\`tool_choice: "required"\`, get_weather(city: string, days: integer), temperature 0.8, seeds 1..${seeds}, max_tokens ${maxTokens}) on random-weight models with each family's template, ${new Date().toISOString()}.${llamaNote} "calls ok": every call is get_weather with JSON arguments, \`city\` a string and \`days\` a number. "raw": the generated tokens' bytes joined (\`logprobs\`), of a reply with a parsed call where there is one.`,
  "",
  table(rows),
  "",
].join("\n");
console.log(md);
writeFileSync(outPath, md);
console.error(`wire-compare: table written to ${outPath}`);
if (opts.has("json")) writeFileSync(opts.get("json")!, JSON.stringify(rows, null, 1));
// Every server is stopped; exit rather than wait out the start helpers' timers.
process.exit(0);
