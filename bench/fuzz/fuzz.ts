// HTTP fuzz run: a bounded, seeded storm of valid, aborted and malformed
// requests on every route and family (OpenAI, Anthropic, Ollama, Responses,
// files, batches, embeddings, rerank, audio, models, LoRA, the server's own)
// against a superfluid server started here on the built-in tiny model beside
// an embedding and a rerank fixture, checking that the server never answers
// 5xx, never drops a connection without an answer, never hangs, keeps each
// family's error envelope and gives its memory back once idle (the daemon and
// each model worker). --auth runs it with API keys on (bench/fuzz/fuzz-auth.ts).
//
//   bun bench/fuzz/fuzz.ts [--requests 10000] [--parallel 16] [--seed 1] [--deadline 1200]
//                     [--timeout 60] [--hang 30] [--warmup 3000] [--json out.json] [--auth]
//                     [--serve-arg ARG]... [--skip CATEGORY]... [--only CATEGORY]... [--hold S]
//   bun bench/fuzz/fuzz.ts --show N [--seed 1]     print request N of a run (for a reproduction)
//
// Request N is drawn from its own PRNG stream (seed, N), so `--show N` prints
// exactly what the run sent. Progress goes to stderr, the table to stdout; the
// exit status is 1 when a must-be-zero count is not zero.
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
  appendFileSync,
  readdirSync,
  symlinkSync,
} from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { hashSeed, uniform } from "../../src/fixtures/prng.ts";
import { ensureFixture, ensureLoraFixture } from "../../src/fixtures/index.ts";
import {
  allOfFanout,
  bigEnum,
  chainGbnf,
  exponentialGbnf,
  hugeMinLength,
  manyOptional,
  propertyFanout,
  wideToolSchema,
} from "../../test/grammar/hostile.ts";
import { authExpect, authSupported, keyHeader, policyFile, scopeOfKey, withKey, KEYS } from "./fuzz-auth.ts";
import {
  anthropicAborted,
  anthropicBad,
  anthropicCount,
  anthropicRoutes,
  anthropicValid,
  ollamaAborted,
  ollamaBad,
  ollamaDiscovery,
  ollamaEmbed,
  ollamaPreload,
  ollamaValid,
} from "./fuzz-families.ts";
import {
  BOOL,
  CHAT,
  COMPLETIONS,
  MODEL,
  OBJ,
  SERVED,
  STR,
  between,
  bytes,
  chance,
  intRange,
  json,
  nest,
  numRange,
  pick,
  short,
  words,
  wrong,
  type Rng,
  type Spec,
} from "./fuzz-kit.ts";
import { ObjectPool } from "./fuzz-pool.ts";
import { checkBody, readStream } from "./fuzz-replies.ts";
import { LORA, audio, embeddings, embeddingsBad, lora, modelAdmin, models, rerank, rerankBad } from "./fuzz-routes.ts";
import {
  batchesBad,
  batchesCreate,
  batchesRead,
  filesBad,
  filesRead,
  filesUpload,
  filesUploadBad,
  makeObjects,
  responsesAborted,
  responsesBad,
  responsesCreate,
  responsesRead,
  responsesReadBad,
} from "./fuzz-stores.ts";

// ---------------------------------------------------------------- arguments

const USAGE = `usage: bun bench/fuzz/fuzz.ts [options]

  --requests N     requests in the measured run (default 10000)
  --parallel N     requests in flight at most (default 16)
  --seed N         PRNG seed of the request mix (default 1)
  --deadline S     no request is started after S seconds (default 1200)
  --timeout S      per-request client timeout (default 60)
  --hang S         a request slower than this is a hang (default 30)
  --warmup N       unmeasured requests (seed + 1) before the RSS baseline (default 3000)
  --json PATH      also write the summary and every finding as JSON
  --keep           keep the server's sessions folder and log
  --auth           serve with API keys (a key policy with a user and an admin key, and
                   --api-key); each request carries no key, a wrong one or one of them
  --serve-arg ARG  one more argument for \`serve\` (repeat it: --serve-arg --host-cache-mb
                   --serve-arg 0); the run's own flags come first, so a later one wins
  --skip CATEGORY  leave one category of the mix out (repeatable; e.g. --skip lora), to
                   find which requests move a process's RSS
  --only CATEGORY  send only these categories (repeatable)
  --hold S         keep the server up S seconds after the measurement (its pids on stderr),
                   to look inside a process that grew (gdb, /proc/PID/smaps)
  --show N         print request N of the run for --seed, send nothing`;

const argv = process.argv.slice(2);
if (argv.includes("--help") || argv.includes("-h")) {
  console.log(USAGE);
  process.exit(0);
}
const VALUED = new Set([
  "requests",
  "parallel",
  "seed",
  "deadline",
  "timeout",
  "hang",
  "warmup",
  "json",
  "show",
  "hold",
]);
const opts = new Map<string, string>();
/** --serve-arg and --skip may repeat, so they are kept apart from the single-valued options. */
const serveArgs: string[] = [];
const skipped = new Set<string>();
const only = new Set<string>();
for (let i = 0; i < argv.length; i++) {
  const name = argv[i]!.startsWith("--") ? argv[i]!.slice(2) : "";
  if (name === "keep" || name === "auth") opts.set(name, "1");
  else if (name === "serve-arg" && i + 1 < argv.length) serveArgs.push(argv[++i]!);
  else if (name === "skip" && i + 1 < argv.length) skipped.add(argv[++i]!);
  else if (name === "only" && i + 1 < argv.length) only.add(argv[++i]!);
  else if (VALUED.has(name) && i + 1 < argv.length) opts.set(name, argv[++i]!);
  else fail(`bad argument ${argv[i]}\n\n${USAGE}`);
}

function fail(message: string): never {
  console.error(message);
  process.exit(2);
}
function intOpt(name: string, fallback: number, min: number): number {
  const raw = opts.get(name);
  const v = raw === undefined ? fallback : Number(raw);
  if (!Number.isInteger(v) || v < min) fail(`--${name} must be an integer >= ${min}, got ${raw}`);
  return v;
}

const cfg = {
  requests: intOpt("requests", 10_000, 1),
  parallel: intOpt("parallel", 16, 1),
  seed: intOpt("seed", 1, 0),
  deadlineS: intOpt("deadline", 1200, 1),
  timeoutS: intOpt("timeout", 60, 1),
  hangS: intOpt("hang", 30, 1),
  // The baseline is the steady state: the first few thousand requests fill bounded
  // caches (compiled grammars, prefix metadata, allocator arenas) that stay filled.
  warmup: intOpt("warmup", 3000, 0),
  holdS: intOpt("hold", 0, 0),
};

// ---------------------------------------------------------------- requests

function messages(r: Rng): unknown[] {
  const out: unknown[] = [];
  if (chance(r, 0.3)) out.push({ role: pick(r, ["system", "developer"]), content: words(r, between(r, 2, 12)) });
  for (let turns = between(r, 0, 2); turns > 0; turns--) {
    out.push({ role: "user", content: words(r, between(r, 1, 10)) });
    out.push({ role: "assistant", content: words(r, between(r, 1, 10)) });
  }
  const text = words(r, between(r, 1, 20));
  out.push({ role: "user", content: chance(r, 0.2) ? [{ type: "text", text }] : text });
  return out;
}

/** Sampling and output options any generation may carry. */
function sampling(r: Rng, stream: boolean): Record<string, unknown> {
  const b: Record<string, unknown> = { max_tokens: between(r, 1, 24) };
  if (chance(r, 0.4)) b.temperature = pick(r, [0, 0.3, 0.8, 1.5]);
  if (chance(r, 0.2)) b.top_p = pick(r, [0.5, 0.9, 1]);
  if (chance(r, 0.2)) b.top_k = pick(r, [0, 1, 40]);
  if (chance(r, 0.15)) b.min_p = 0.05;
  if (chance(r, 0.3)) b.seed = between(r, 0, 1e6);
  if (chance(r, 0.1)) b.presence_penalty = 0.5;
  if (chance(r, 0.1)) b.frequency_penalty = -0.5;
  if (chance(r, 0.1)) b.repeat_penalty = 1.1;
  if (chance(r, 0.3))
    b.stop = chance(r, 0.5) ? pick(r, ["e", " the", "\n"]) : [" a", "o", "zz"].slice(0, between(r, 1, 3));
  if (chance(r, 0.2)) b.n = between(r, 2, 4);
  if (stream && chance(r, 0.6)) b.stream_options = { include_usage: true };
  if (chance(r, 0.05)) b.unknown_field = { ignored: true };
  return { ...b, stream };
}

const QOS = ["interactive", "completion", "agent", "background", "0", "3", "foreground"];
function genHeaders(r: Rng): Record<string, string> {
  return { "content-type": "application/json", ...(chance(r, 0.2) ? { "x-superfluid-qos": pick(r, QOS) } : {}) };
}

function validChat(r: Rng, stream: boolean): Spec {
  const body: Record<string, unknown> = { model: MODEL, messages: messages(r), ...sampling(r, stream) };
  if (chance(r, 0.25)) {
    body.logprobs = true;
    body.top_logprobs = between(r, 0, 5);
  }
  if (chance(r, 0.1)) {
    body.max_completion_tokens = body.max_tokens;
    delete body.max_tokens;
  }
  if (chance(r, 0.1)) body.logit_bias = { "10": -100, "20": 5 };
  if (chance(r, 0.2)) body.chat_template_kwargs = { enable_thinking: chance(r, 0.5) };
  const category = stream ? "chat-stream" : "chat";
  return { ...json(CHAT, body, { category, variant: category, expect: [200], stream }), headers: genHeaders(r) };
}

const TOOL_PARAMS = [
  { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  { type: "object", properties: { n: { type: "integer", minimum: 0, maximum: 9 }, unit: { enum: ["c", "f"] } } },
  { type: "object", properties: { items: { type: "array", items: { type: "string" }, maxItems: 3 } } },
];

function validTools(r: Rng): Spec {
  const tools = Array.from({ length: between(r, 1, 3) }, (_, i) => ({
    type: "function",
    function: { name: `tool_${i}`, description: words(r, 4), parameters: TOOL_PARAMS[i]! },
  }));
  const stream = chance(r, 0.4);
  const body: Record<string, unknown> = { model: MODEL, messages: messages(r), tools, ...sampling(r, stream) };
  body.max_tokens = between(r, 8, 32);
  const choice = pick(r, ["auto", "required", "none", "named", "absent"]);
  if (choice === "named") body.tool_choice = { type: "function", function: { name: pick(r, tools).function.name } };
  else if (choice !== "absent") body.tool_choice = choice;
  if (chance(r, 0.3)) body.parallel_tool_calls = chance(r, 0.5);
  if (chance(r, 0.2)) {
    const id = "call_1";
    (body.messages as unknown[]).push(
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id, type: "function", function: { name: "tool_0", arguments: '{"city":"Oslo"}' } }],
      },
      { role: "tool", tool_call_id: id, content: "12 degrees" },
    );
  }
  return json(CHAT, body, { category: "tools", variant: `tools.tool_choice=${choice}`, expect: [200], stream });
}

const SCHEMAS = [
  { type: "object", properties: { a: { type: "integer" }, b: { type: "string", maxLength: 8 } }, required: ["a"] },
  { type: "array", items: { enum: ["x", "y", 3] }, maxItems: 4 },
  {
    type: "object",
    properties: { ok: { type: "boolean" }, tag: { type: "string", pattern: "^[a-z]{1,4}$" } },
    additionalProperties: false,
  },
  { anyOf: [{ type: "number", minimum: 0, maximum: 5 }, { type: "null" }] },
  wideToolSchema(40),
];
const GOOD_GRAMMARS = [
  'root ::= "yes" | "no"',
  'root ::= [a-z]+ " " [0-9]{1,3}',
  'root ::= item ("," item)*\nitem ::= [a-c]',
];

function validStructured(r: Rng): Spec {
  const stream = chance(r, 0.3);
  const body: Record<string, unknown> = { model: MODEL, messages: messages(r), ...sampling(r, stream) };
  const kind = pick(r, ["json_schema", "json_schema", "json_object", "grammar", "text"]);
  if (kind === "grammar") body.grammar = pick(r, GOOD_GRAMMARS);
  else if (kind === "json_schema")
    body.response_format = {
      type: kind,
      json_schema: { name: "out", strict: chance(r, 0.8), schema: pick(r, SCHEMAS) },
    };
  else body.response_format = { type: kind };
  return json(CHAT, body, { category: "structured", variant: `structured.${kind}`, expect: [200], stream });
}

const tokenIds = (r: Rng, n: number) => Array.from({ length: n }, () => between(r, 5, 2000));

function validCompletion(r: Rng): Spec {
  const stream = chance(r, 0.35);
  const form = pick(r, ["string", "strings", "ids", "id-arrays"]);
  const prompt =
    form === "string"
      ? words(r, between(r, 1, 20))
      : form === "strings"
        ? [words(r, 3), words(r, 5)]
        : form === "ids"
          ? tokenIds(r, between(r, 1, 12))
          : [tokenIds(r, 3), tokenIds(r, 4)];
  const body: Record<string, unknown> = { model: MODEL, prompt, ...sampling(r, stream) };
  if (chance(r, 0.2)) body.echo = true;
  else if (chance(r, 0.25)) body.logprobs = between(r, 0, 5);
  if (chance(r, 0.1)) body.best_of = body.n ?? 1;
  if (chance(r, 0.1)) body.ignore_eos = true;
  return {
    ...json(COMPLETIONS, body, { category: "completions", variant: `completions.${form}`, expect: [200], stream }),
    headers: genHeaders(r),
  };
}

/** A long generation the client walks away from: mid-stream, or before a non-streamed reply. */
function aborted(r: Rng): Spec {
  const stream = chance(r, 0.75);
  const onChat = chance(r, 0.6);
  const big = { max_tokens: between(r, 256, 2048), ignore_eos: true, stream };
  const body = onChat ? { model: MODEL, messages: messages(r), ...big } : { model: MODEL, prompt: words(r, 8), ...big };
  const abortAfter = stream && chance(r, 0.7) ? { events: between(r, 1, 30) } : { ms: between(r, 0, 400) };
  return json(onChat ? CHAT : COMPLETIONS, body, {
    category: "aborted",
    variant: `aborted.${stream ? "stream" : "plain"}`,
    expect: [200],
    stream,
    abortAfter,
  });
}

// ------------------------------------------------------- wrong field types

const PENALTY = [...wrong("int", "frac"), 0, -1, 2.5];

const SAMPLING_WRONG: Record<string, unknown[]> = {
  temperature: numRange(0, 2),
  top_p: numRange(0, 1),
  top_k: intRange(0, 2 ** 31 - 1),
  min_p: numRange(0, 1),
  seed: [...wrong("int"), 2 ** 32, -(2 ** 31) - 1, "1"],
  presence_penalty: numRange(-2, 2),
  frequency_penalty: numRange(-2, 2),
  repeat_penalty: PENALTY,
  repetition_penalty: PENALTY,
  ignore_eos: BOOL,
};

const CHAT_WRONG: Record<string, unknown[]> = {
  model: [...STR, null],
  messages: [
    "x",
    {},
    [],
    [1],
    [{}],
    [null],
    [{ role: "wizard", content: "x" }],
    [{ role: 5, content: "x" }],
    [{ content: "x" }],
    [{ role: "user", content: 5 }],
    [{ role: "user", content: { text: "x" } }],
    [{ role: "user", content: [5] }],
    [{ role: "user", content: [{ type: "text" }] }],
    [{ role: "user", content: [{ type: "text", text: 5 }] }],
    [{ role: "user", content: [{ type: "video", url: "x" }] }],
    [{ role: "user", content: [{ text: "x" }] }],
    [{ role: "user", content: "x", name: 5 }],
    [{ role: "assistant", content: "x", tool_calls: "x" }],
    [{ role: "assistant", content: "x", tool_calls: [{ function: { name: 5, arguments: "{}" } }] }],
    [{ role: "assistant", content: "x", tool_calls: [{ function: { name: "f", arguments: 5 } }] }],
    [{ role: "assistant", content: "x", tool_calls: [{ id: 5, function: { name: "f", arguments: "{}" } }] }],
    [{ role: "assistant", tool_calls: [{}] }],
    [{ role: "tool", content: "x", tool_call_id: 5 }],
    [{ role: "assistant", content: "x", reasoning_content: 5 }],
    [{ role: "assistant", content: "x", reasoning: [] }],
  ],
  max_completion_tokens: intRange(1),
  max_tokens: [...intRange(1), 0, -5],
  stream: BOOL,
  stream_options: [...OBJ, { include_usage: "yes" }, { continuous_usage_stats: 1 }],
  n: [...intRange(1, 128), 0],
  stop: [5, true, { a: 1 }, [1], [["a"]], [null], Array.from({ length: 65 }, (_, i) => `s${i}`)],
  logprobs: BOOL,
  top_logprobs: intRange(0, 20),
  logit_bias: [
    ...OBJ,
    { "1": 101 },
    { "1": -101 },
    { "1": "x" },
    { "1": [1] },
    { "not-a-token": 1 },
    { "99999999": 1 },
    { "-1": 1 },
  ],
  chat_template_kwargs: OBJ,
  enable_thinking: BOOL,
  reasoning_effort: STR,
  tools: [
    "x",
    { a: 1 },
    [1],
    [{}],
    [{ type: 5 }],
    [{ type: "function", function: "x" }],
    [{ type: "function", function: { name: 5 } }],
    [{ type: "function", function: {} }],
    [{ type: "function", function: { name: "f", strict: "yes" } }],
    [{ type: "function", function: { name: "f", parameters: "x" } }],
    [{ type: "function", function: { name: "f", parameters: { type: "nonsense" } } }],
  ],
  tool_choice: [
    "sometimes",
    5,
    true,
    [],
    {},
    { type: "function" },
    { type: "function", function: { name: "undeclared" } },
    { function: { name: 5 } },
  ],
  parallel_tool_calls: BOOL,
  response_format: [
    ...OBJ,
    { type: 5 },
    { type: "xml" },
    { type: "json_schema" },
    { type: "json_schema", json_schema: "x" },
    { type: "json_schema", json_schema: { schema: 5 } },
    { type: "json_schema", json_schema: { name: "x", strict: "yes", schema: {} } },
    { type: "json_schema", json_schema: { schema: { type: "nonsense" } } },
    { type: "json_schema", json_schema: { schema: { $ref: "#/missing" } } },
  ],
  grammar: [...STR, ""],
  ...SAMPLING_WRONG,
};

const COMPLETION_WRONG: Record<string, unknown[]> = {
  model: [...STR, null],
  prompt: [5, true, { a: 1 }, [], [1, "a"], [[1], ["a"]], [-1], [1.5], [99_999_999], [null], [[1, [2]]], [{ a: 1 }]],
  suffix: STR,
  fim_mode: [...STR, "xyz"],
  stream: BOOL,
  stream_options: [...OBJ, { include_usage: 1 }],
  echo: BOOL,
  max_tokens: [...intRange(1), 0],
  logprobs: [...intRange(0, 20), true, false],
  n: [...intRange(1, 128), 0],
  stop: CHAT_WRONG.stop!,
  best_of: [...intRange(1), 3],
  ...SAMPLING_WRONG,
};

function badField(r: Rng, onChat: boolean): Spec {
  const table = onChat ? CHAT_WRONG : COMPLETION_WRONG;
  const field = pick(r, Object.keys(table));
  const value = pick(r, table[field]!);
  const base: Record<string, unknown> = onChat
    ? { model: MODEL, messages: [{ role: "user", content: words(r, 3) }], max_tokens: 4 }
    : { model: MODEL, prompt: words(r, 3), max_tokens: 4 };
  base[field] = value;
  // tool_choice naming a function needs tools to be about; a lone one stays a bad request either way.
  if (field === "tool_choice" && chance(r, 0.5)) base.tools = [{ type: "function", function: { name: "f" } }];
  const category = onChat ? "bad-field-chat" : "bad-field-completions";
  // A tool schema the grammar cannot enforce is tolerated under tool_choice auto (docs/api/openai.md#tools).
  const tolerated = field === "tools" && JSON.stringify(value).includes('"nonsense"');
  return json(onChat ? CHAT : COMPLETIONS, base, {
    category,
    variant: `${onChat ? "chat" : "completions"}.${field}=${short(value)}`,
    expect: tolerated ? [200, 400] : [400],
  });
}

/** Requests whose fields are each fine alone but not together. */
function badCombination(r: Rng): Spec {
  const cases: [string, string, Record<string, unknown>][] = [
    ["top_logprobs-without-logprobs", CHAT, { messages: [{ role: "user", content: "x" }], top_logprobs: 2 }],
    ["echo+logprobs", COMPLETIONS, { prompt: "x", echo: true, logprobs: 2 }],
    ["best_of!=n", COMPLETIONS, { prompt: "x", n: 1, best_of: 2 }],
    ["suffix-without-fim", COMPLETIONS, { prompt: "x", suffix: "y" }],
    ["prompts*n>128", COMPLETIONS, { prompt: Array.from({ length: 40 }, () => "x"), n: 4 }],
    ["unknown-model", CHAT, { model: "no-such-model", messages: [{ role: "user", content: "x" }] }],
    ["missing-messages", CHAT, { messages: undefined }],
    ["missing-prompt", COMPLETIONS, {}],
  ];
  const [variant, path, fields] = pick(r, cases);
  const category = path === CHAT ? "bad-field-chat" : "bad-field-completions";
  return json(
    path,
    { model: MODEL, max_tokens: 4, ...fields },
    { category, variant, expect: variant === "unknown-model" ? [404] : [400] },
  );
}

// ------------------------------------------------------- malformed bodies

function badJson(r: Rng): Spec {
  const path = pick(r, [CHAT, CHAT, COMPLETIONS, "/v1/tokenize"]);
  const valid = JSON.stringify(
    path === CHAT
      ? { model: MODEL, messages: [{ role: "user", content: "héllo wörld" }], max_tokens: 4 }
      : path === COMPLETIONS
        ? { model: MODEL, prompt: "héllo", max_tokens: 4 }
        : { content: "héllo" },
  );
  const [head, tail] = valid.split("héllo") as [string, string];
  const cases: [string, string | Uint8Array, number[]][] = [
    ["truncated", valid.slice(0, between(r, 1, valid.length - 1)), [400]],
    ["empty", "", [400]],
    ["whitespace", "  \n\t ", [400]],
    [
      "garbage",
      pick(r, ["{model:", "undefined", "NaN", "{'a':1}", '{"a":1,}', "/* c */ {}", "{}}", "[]]", "\u0000"]),
      [400],
    ],
    ["not-an-object", pick(r, ["[]", "5", '"str"', "null", "true", "[{}]"]), [400]],
    ["invalid-utf8-outside-strings", bytes("{", [0xff, 0xfe], valid.slice(1)), [400]],
    // A lone 0xff, a broken 2-byte sequence, an encoded surrogate, a 5-byte lead, an overlong '/'.
    [
      "invalid-utf8-in-string",
      bytes(
        head,
        pick(r, [[0xff], [0xc3, 0x28], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0xc0, 0xaf]]),
        tail,
      ),
      [200, 400],
    ],
    ["lone-surrogate-escape", valid.replace("héllo", "\\ud800x\\udfff"), [200, 400]],
    ["nul-in-string", valid.replace("héllo", "a\\u0000b"), [200, 400]],
    ["bom", `\ufeff${valid}`, [200, 400]],
    ["duplicate-keys", valid.replace("{", `{"max_tokens":3,`), [200]],
  ];
  const [variant, body, expect] = pick(r, cases);
  return {
    category: "bad-json",
    variant: `bad-json.${variant}`,
    expect,
    method: "POST",
    path,
    headers: { "content-type": "application/json" },
    body,
  };
}

/** Raw JSON text with `slot` replaced by a literal that JSON.stringify cannot write (1e309, 2^70...). */
function withLiteral(body: Record<string, unknown>, field: string, literal: string): string {
  return JSON.stringify({ ...body, [field]: "@@LITERAL@@" }).replace('"@@LITERAL@@"', literal);
}

function hugeOrDeep(r: Rng): Spec {
  const base = { model: MODEL, messages: [{ role: "user", content: "x" }], max_tokens: 4 };
  const deep = between(r, 2000, 50_000);
  const cat = { category: "huge-deep", method: "POST", path: CHAT, headers: { "content-type": "application/json" } };
  const kind = pick(r, ["number", "number", "deep", "deep", "long", "many"]);
  if (kind === "number") {
    const field = pick(r, [
      "max_tokens",
      "n",
      "temperature",
      "seed",
      "top_k",
      "top_logprobs",
      "logit_bias",
      "prompt-id",
    ]);
    const literal = pick(r, [
      "1e309",
      "-1e309",
      "1e308",
      "9007199254740993",
      "123456789012345678901234567890",
      "-0",
      "1e-400",
      "0.0000000000000000000001",
    ]);
    // -0 and 1e-400 read as token 0.
    if (field === "prompt-id")
      return {
        ...cat,
        path: COMPLETIONS,
        variant: `huge.prompt[0]=${literal}`,
        expect: [200, 400],
        body: `{"model":"${MODEL}","max_tokens":2,"prompt":[${literal}]}`,
      };
    if (field === "logit_bias")
      return {
        ...cat,
        variant: `huge.logit_bias=${literal}`,
        expect: [200, 400],
        body: JSON.stringify(base).replace("{", `{"logit_bias":{"5":${literal}},`),
      };
    // 1e-400 and -0 read as 0, in range for temperature/seed/top_k: those may be served.
    return { ...cat, variant: `huge.${field}=${literal}`, expect: [200, 400], body: withLiteral(base, field, literal) };
  }
  if (kind === "deep") {
    const where = pick(r, [
      "body-array",
      "body-object",
      "chat_template_kwargs",
      "message-field",
      "tool-arguments",
      "content",
      "schema",
      "tool-parameters",
      "logit_bias",
      "grammar",
    ]);
    const inner = nest(deep, '{"a":', "1", "}");
    const body =
      where === "body-array"
        ? nest(deep, "[", "", "]")
        : where === "body-object"
          ? inner
          : where === "chat_template_kwargs"
            ? JSON.stringify(base).replace("{", `{"chat_template_kwargs":{"x":${inner}},`)
            : where === "message-field"
              ? JSON.stringify(base).replace('"content":"x"', `"content":"x","extra":${inner}`)
              : where === "tool-arguments"
                ? JSON.stringify(base).replace(
                    '"content":"x"}',
                    `"content":"x"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":${inner}}}]},{"role":"tool","tool_call_id":"c","content":"ok"}`,
                  )
                : where === "content"
                  ? JSON.stringify(base).replace('"content":"x"', `"content":${nest(deep, "[", "", "]")}`)
                  : where === "schema"
                    ? JSON.stringify(base).replace(
                        "{",
                        `{"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":${nest(Math.min(deep, 20_000), '{"type":"object","properties":{"a":', '{"type":"string"}', "}}")}}},`,
                      )
                    : where === "tool-parameters"
                      ? JSON.stringify(base).replace(
                          "{",
                          `{"tool_choice":"required","tools":[{"type":"function","function":{"name":"f","parameters":${nest(Math.min(deep, 20_000), '{"type":"array","items":', '{"type":"string"}', "}")}}}],`,
                        )
                      : where === "logit_bias"
                        ? JSON.stringify(base).replace("{", `{"logit_bias":${inner},`)
                        : JSON.stringify({
                            ...base,
                            grammar: `root ::= ${nest(Math.min(deep, 20_000), "(", '"a"', ")")}`,
                          });
    // Deep data the request may carry (template variables, extra fields, a nested grammar) may be served; the rest is a
    // 400.
    const servable = ["chat_template_kwargs", "message-field", "tool-arguments", "grammar"].includes(where);
    return { ...cat, variant: `deep.${where}`, expect: servable ? [200, 400] : [400], body };
  }
  if (kind === "long") {
    const size = between(r, 100_000, 900_000);
    const filler = "lorem ipsum ".repeat(size / 12);
    const field = pick(r, ["content", "model", "stop", "grammar", "tokenize", "prompt"]);
    // /v1/tokenize takes at most 131072 characters (text_too_long past that).
    if (field === "tokenize")
      return {
        ...cat,
        path: "/v1/tokenize",
        variant: "long.tokenize",
        expect: [200, 400],
        body: JSON.stringify({ content: filler }),
      };
    if (field === "prompt")
      return {
        ...cat,
        path: COMPLETIONS,
        variant: "long.prompt",
        expect: [400],
        body: JSON.stringify({ model: MODEL, prompt: filler, max_tokens: 2 }),
      };
    const body =
      field === "content"
        ? { ...base, messages: [{ role: "user", content: filler }] }
        : field === "model"
          ? { ...base, model: filler }
          : field === "stop"
            ? { ...base, stop: [filler] }
            : { ...base, grammar: `root ::= "${filler}"` };
    return {
      ...cat,
      variant: `long.${field}`,
      expect: field === "model" ? [404] : field === "content" ? [400] : [200, 400],
      body: JSON.stringify(body),
    };
  }
  const many = pick(r, ["messages", "tools", "logit_bias", "stop", "content-parts"]);
  const body =
    many === "messages"
      ? {
          ...base,
          messages: Array.from({ length: 6000 }, (_, i) => ({
            role: i % 2 ? "assistant" : "user",
            content: "hi there",
          })),
        }
      : many === "tools"
        ? {
            ...base,
            tools: Array.from({ length: 2000 }, (_, i) => ({
              type: "function",
              function: { name: `f${i}`, parameters: { type: "object" } },
            })),
          }
        : many === "logit_bias"
          ? { ...base, logit_bias: Object.fromEntries(Array.from({ length: 2110 }, (_, i) => [String(i), -1])) }
          : many === "stop"
            ? { ...base, stop: Array.from({ length: 64 }, () => "s".repeat(1000)) }
            : {
                ...base,
                messages: [
                  { role: "user", content: Array.from({ length: 20_000 }, () => ({ type: "text", text: "ab" })) },
                ],
              };
  return { ...cat, variant: `many.${many}`, expect: [200, 400], body: JSON.stringify(body) };
}

const HOSTILE_SCHEMAS: [string, () => unknown][] = [
  ["minLength-1e308", () => hugeMinLength],
  ["maxItems-minItems-1e9", () => ({ type: "array", minItems: 1e9, items: { type: "string" } })],
  ["10k-optional-properties", () => manyOptional(10_000)],
  ["allOf-fanout-25", () => allOfFanout(25)],
  ["property-fanout-25", () => propertyFanout(25)],
  ["enum-50k", () => bigEnum(50_000)],
  ["catastrophic-pattern", () => ({ type: "string", pattern: "^(a+)+(b|c|d+)*$" })],
  ["self-ref", () => ({ $ref: "#" })],
  ["ref-cycle", () => ({ $defs: { a: { $ref: "#/$defs/b" }, b: { $ref: "#/$defs/a" } }, $ref: "#/$defs/a" })],
  ["remote-ref", () => ({ $ref: "http://127.0.0.1:1/schema.json" })],
  ["anyOf-2000", () => ({ anyOf: Array.from({ length: 2000 }, (_, i) => ({ const: `v${i}` })) })],
  ["repeat-1e6", () => ({ type: "string", minLength: 1_000_000, maxLength: 1_000_000 })],
  ["multipleOf-tiny", () => ({ type: "number", multipleOf: 1e-300 })],
  ["wide-400", () => wideToolSchema(400)],
];

function hostileSchema(r: Rng): Spec {
  const [name, make] = pick(r, HOSTILE_SCHEMAS);
  const asTool = chance(r, 0.4);
  const base = { model: MODEL, messages: [{ role: "user", content: words(r, 3) }], max_tokens: 8 };
  const body = asTool
    ? {
        ...base,
        tools: [{ type: "function", function: { name: "f", parameters: make() } }],
        tool_choice: pick(r, ["required", "auto"]),
      }
    : {
        ...base,
        response_format: { type: "json_schema", json_schema: { name: "x", strict: chance(r, 0.7), schema: make() } },
      };
  return json(CHAT, body, {
    category: "hostile-schema",
    variant: `hostile.${asTool ? "tool" : "format"}.${name}`,
    expect: [200, 400],
  });
}

const WRONG_GBNF = [
  "",
  "root ::= foo",
  'root ::= "unterminated',
  "root ::= [a-",
  'root ::= ("a"',
  '::= "x"',
  'root ::= "a"{5,2}',
  "root ::= root",
  'root ::= root "a"',
  'root ::= "\\q"',
  "root ::= [z-a]",
  'root = "a"',
  'rööt ::= "a"',
  'root ::= "a"\u0000',
  'other ::= "a"',
  'root ::= "a" )',
  "root ::= [^]*",
  'root ::= "a"{99999999}',
];
// Valid, if odd: an empty root matches the empty reply.
const AMBIGUOUS_GBNF = [
  "root ::=",
  'root ::= a | a\na ::= "x"',
  'root ::= ("a" | "a")*',
  'root ::= "a"* "a"*',
  'root ::= x x\nx ::= "a"?',
  'root ::= ("ab" | "a" "b")+',
  "root ::= [a-z]* [a-m]*",
];

function badGrammar(r: Rng): Spec {
  const kind = pick(r, ["wrong", "wrong", "ambiguous", "heavy"]);
  const heavy: [string, () => string][] = [
    ["exponential-30", () => exponentialGbnf(30)],
    ["chain-10k", () => chainGbnf(10_000)],
    ["alternatives-20k", () => `root ::= ${Array.from({ length: 20_000 }, (_, i) => `"w${i}"`).join(" | ")}`],
    ["sequence-100k", () => `root ::= ${'"a" '.repeat(100_000)}`],
  ];
  const [variant, grammar, expect] =
    kind === "wrong"
      ? (() => {
          const g = pick(r, WRONG_GBNF);
          return [short(g), g, [400]] as const;
        })()
      : kind === "ambiguous"
        ? (() => {
            const g = pick(r, AMBIGUOUS_GBNF);
            return [short(g), g, [200, 400]] as const;
          })()
        : (() => {
            const [n, make] = pick(r, heavy);
            return [n, make(), [200, 400]] as const;
          })();
  const body = {
    model: MODEL,
    messages: [{ role: "user", content: "x" }],
    max_tokens: 8,
    grammar,
    stream: chance(r, 0.3),
  };
  return json(CHAT, body, {
    category: "bad-grammar",
    variant: `grammar.${kind}.${variant}`,
    expect: [...expect],
    stream: body.stream,
  });
}

// ------------------------------------------------------- transport oddities

function contentTypes(r: Rng): Spec {
  const cases: [string, number][] = [
    ["text/plain", 415],
    ["text/plain;charset=UTF-8", 415],
    ["application/x-www-form-urlencoded", 415],
    ["multipart/form-data; boundary=x", 415],
    ["application/xml", 415],
    ["application/jsonx", 415],
    ["json", 415],
    ["application/json, text/plain", 415],
    ["", 415],
    ["application/json; charset=utf-8", 200],
    ["APPLICATION/JSON", 200],
    ["application/vnd.api+json", 200],
    ["application/json;;;", 200],
  ];
  const [type, status] = pick(r, cases);
  const path = pick(r, [CHAT, COMPLETIONS, "/v1/tokenize"]);
  const body =
    path === CHAT
      ? { model: MODEL, messages: [{ role: "user", content: "x" }], max_tokens: 2 }
      : path === COMPLETIONS
        ? { model: MODEL, prompt: "x", max_tokens: 2 }
        : { content: "x" };
  return {
    category: "content-type",
    variant: `content-type.${JSON.stringify(type)}`,
    expect: [status],
    method: "POST",
    path,
    headers: { "content-type": type },
    body: JSON.stringify(body),
  };
}

function methodsAndPaths(r: Rng): Spec {
  const cases: [string, string, number[]][] = [
    ...["GET", "PUT", "DELETE", "PATCH", "OPTIONS"].flatMap((m) =>
      [CHAT, COMPLETIONS, "/v1/tokenize"].map((p): [string, string, number[]] => [m, p, [405]]),
    ),
    ...["POST", "PUT", "DELETE", "PATCH"].flatMap((m) =>
      // DELETE /v1/models/{id} is the admin unload (the model-admin category sends it, on other models): not a wrong
      // method.
      ["/health", "/v1/models", "/slots", "/props", `/v1/models/${MODEL}`]
        .filter((p) => !(m === "DELETE" && p === `/v1/models/${MODEL}`))
        .map((p): [string, string, number[]] => [m, p, [405]]),
    ),
    ["HEAD", "/health", [200]],
    ["HEAD", "/v1/models", [200]],
    ["HEAD", CHAT, [405]],
    ["GET", "/", [200]],
    ["GET", "/v1", [404]],
    ["GET", "/v2/chat/completions", [404]],
    ["GET", "/v1/embeddings", [405]],
    ["POST", "/v1/chat/completions/extra", [404]],
    ["GET", "/%00", [404]],
    ["GET", "/..%2f..%2fetc%2fpasswd", [404]],
    ["GET", "/v1/models/%ZZ", [404]],
    ["GET", "/v1/models/no-such-model", [404]],
    ["GET", `/v1/models/${MODEL}?x=1`, [200]],
    ["GET", `/${"a".repeat(8000)}`, [404, 414, 431]],
    ["GET", `/health?${"q=1&".repeat(500)}`, [200]],
    ["POST", "/slots/0/save", [501]],
    ["POST", "/slots/x/restore", [501]],
    ["GET", "/slots/0/save", [405]],
    ["GET", "//health", [200, 404]],
    ["GET", "/HEALTH", [404]],
    ["GET", "/health/", [404, 200]],
  ];
  const [method, path, expect] = pick(r, cases);
  const hasBody = method !== "GET" && method !== "HEAD";
  return {
    category: "method-path",
    variant: `${method} ${path.length > 40 ? `${path.slice(0, 20)}...(${path.length})` : path}`,
    expect,
    method,
    path,
    ...(hasBody ? { headers: { "content-type": "application/json" }, body: "{}" } : {}),
  };
}

function oddHeaders(r: Rng): Spec {
  const onChat = chance(r, 0.5);
  const body = onChat
    ? JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "x" }], max_tokens: 2 })
    : undefined;
  const cases: [string, Record<string, string>, number[]][] = [
    ["origin-foreign", { origin: "http://evil.example" }, [403]],
    ["origin-null", { origin: "null" }, [403]],
    ["origin-lookalike", { origin: "http://127.0.0.1.evil.example" }, [403]],
    ["origin-file", { origin: "file://" }, [403]],
    ["origin-local", { origin: "http://localhost:3000" }, [200]],
    ["host-foreign", { host: "evil.example" }, [403]],
    ["host-rebind", { host: "127.0.0.1.nip.io" }, [403]],
    ["host-empty", { host: "" }, [200, 400, 403]],
    ["host-localhost", { host: "localhost:99" }, [200]],
    ["host-v6", { host: "[::1]:8453" }, [200]],
    ["host-userinfo", { host: "user@127.0.0.1" }, [403]],
    ["qos-unknown", { "x-superfluid-qos": "urgent" }, onChat ? [400] : [200]],
    ["qos-number", { "x-superfluid-qos": "7" }, onChat ? [400] : [200]],
    ["batch-invariant", { "x-superfluid-batch-invariant": "true" }, onChat ? [403] : [200]],
    ["batch-invariant-off", { "x-superfluid-batch-invariant": "no" }, [200]],
    ["huge-header", { "x-big": "a".repeat(20_000) }, [431]],
    ["many-headers", Object.fromEntries(Array.from({ length: 150 }, (_, i) => [`x-h${i}`, "v"])), [200, 431]],
    ["authorization-junk", { authorization: "Bearer \u00ff junk" }, [200]],
    ["forwarded-for", { "x-forwarded-for": "8.8.8.8", forwarded: "for=8.8.8.8" }, [200]],
  ];
  const [variant, headers, expect] = pick(r, cases);
  return {
    category: "headers",
    variant: `headers.${variant}.${onChat ? "chat" : "health"}`,
    expect,
    method: onChat ? "POST" : "GET",
    path: onChat ? CHAT : "/health",
    headers: { ...(onChat ? { "content-type": "application/json" } : {}), ...headers },
    ...(body ? { body } : {}),
  };
}

/** Bytes fetch will not send: broken request lines, framing, unknown methods. */
function rawHttp(r: Rng): Spec {
  const chat = JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "x" }], max_tokens: 2 });
  const post = (extra: string, body: string) =>
    `POST ${CHAT} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\n${extra}\r\n${body}`;
  const chunked = (body: string) => `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
  const cases: [string, string | Uint8Array, number[], boolean?][] = [
    ["garbage-line", "GARBAGE\r\n\r\n", [400]],
    ["http-9.9", "GET /health HTTP/9.9\r\nHost: localhost\r\n\r\n", [400, 505]],
    ["unknown-method", "BREW /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", [405]],
    ["unknown-method-unknown-path", "BREW /pot HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", [404, 405]],
    ["connect", "CONNECT 127.0.0.1:80 HTTP/1.1\r\nHost: 127.0.0.1:80\r\n\r\n", [405]],
    [
      "absolute-target",
      "GET http://127.0.0.1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
      [200, 400],
    ],
    ["asterisk-target", "OPTIONS * HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", [400, 405]],
    ["http-1.0-no-host", "GET /health HTTP/1.0\r\n\r\n", [200]],
    ["http-1.1-no-host", "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n", [200, 400]],
    [
      "control-char-header",
      "GET /health HTTP/1.1\r\nHost: localhost\r\nX-A: a\u0001b\r\nConnection: close\r\n\r\n",
      [400],
    ],
    ["header-no-colon", "GET /health HTTP/1.1\r\nHost: localhost\r\nNoColonHere\r\nConnection: close\r\n\r\n", [400]],
    ["nul-in-path", "GET /he\u0000alth HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", [400]],
    ["lf-only", "GET /health HTTP/1.1\nHost: localhost\nConnection: close\n\n", [200, 400]],
    ["chunked", post("Transfer-Encoding: chunked\r\n", chunked(chat)), [200]],
    ["chunked-bad-size", post("Transfer-Encoding: chunked\r\n", `zz\r\n${chat}\r\n0\r\n\r\n`), [400]],
    ["cl-and-te", post(`Content-Length: ${chat.length}\r\nTransfer-Encoding: chunked\r\n`, chunked(chat)), [400]],
    ["cl-negative", post("Content-Length: -1\r\n", chat), [400]],
    ["cl-text", post("Content-Length: abc\r\n", chat), [400]],
    ["cl-huge", post("Content-Length: 99999999999999999999\r\n", chat), [400, 413]],
    ["cl-over-limit", post(`Content-Length: ${200 * 2 ** 20}\r\n`, chat), [413]],
    ["cl-short", post(`Content-Length: ${Math.floor(chat.length / 2)}\r\n`, chat), [400]],
    ["cl-long-then-fin", post(`Content-Length: ${chat.length + 100}\r\n`, chat), [400], true],
    ["no-body", post("Content-Length: 0\r\n", ""), [400]],
    [
      "no-content-type",
      `POST ${CHAT} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: ${chat.length}\r\n\r\n${chat}`,
      [200],
    ],
    [
      "pipelined-3",
      "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: localhost\r\n\r\nGET /props HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
      [200],
    ],
    [
      "pipelined-after-chat",
      `POST ${CHAT} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${chat.length}\r\n\r\n${chat}GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`,
      [200],
    ],
    [
      "long-request-line",
      `GET /health?${"a".repeat(70_000)} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`,
      [200, 400, 414, 431],
    ],
    ["binary-noise", new Uint8Array(Array.from({ length: 512 }, () => between(r, 0, 255))), [400]],
  ];
  const [variant, raw, expect, halfClose] = pick(r, cases);
  return {
    category: "raw-http",
    variant: `raw.${variant}`,
    expect,
    raw: typeof raw === "string" ? Buffer.from(raw, "latin1") : raw,
    ...(halfClose ? { halfClose } : {}),
    ...(variant === "http-1.1-no-host" ? { bareErrorOk: true } : {}),
  };
}

function admin(r: Rng): Spec {
  const get = (path: string, expect: number[]): Spec => ({
    category: "admin",
    variant: `GET ${path}`,
    expect,
    method: "GET",
    path,
  });
  const tok = (body: unknown, expect: number[], variant: string): Spec =>
    json("/v1/tokenize", body, { category: "admin", variant: `tokenize.${variant}`, expect });
  return pick(r, [
    () => get("/v1/models", [200]),
    () => get(`/v1/models/${MODEL}`, [200]),
    () => get("/health", [200]),
    () => get("/health", [200]),
    () => get("/slots", [200]),
    () => get("/props", [200]),
    () => get(`/props?model=${MODEL}`, [200]),
    () => get("/props?model=nope", [404]),
    () => tok({ content: words(r, 10) }, [200], "content"),
    () => tok({ text: words(r, 5), with_pieces: true }, [200], "with_pieces"),
    () => tok({ input: "<|im_start|>x", add_special: true }, [200], "special"),
    () => tok({ model: MODEL, content: "x" }, [200], "model"),
    () => tok({ content: 5 }, [400], "content=5"),
    () => tok({}, [400], "empty"),
    () => tok({ content: "x", with_pieces: "yes" }, [400], "with_pieces=str"),
    () => tok({ model: "nope", content: "x" }, [404], "unknown-model"),
    () => tok([], [400], "array"),
  ])();
}

const MIX: [string, number, (r: Rng) => Spec][] = [
  ["chat", 10, (r) => validChat(r, false)],
  ["chat-stream", 9, (r) => validChat(r, true)],
  ["tools", 8, validTools],
  ["structured", 7, validStructured],
  ["completions", 8, validCompletion],
  ["aborted", 6, aborted],
  ["bad-field-chat", 9, (r) => (chance(r, 0.1) ? badCombination(r) : badField(r, true))],
  ["bad-field-completions", 6, (r) => (chance(r, 0.1) ? badCombination(r) : badField(r, false))],
  ["bad-json", 6, badJson],
  ["huge-deep", 4, hugeOrDeep],
  ["hostile-schema", 3, hostileSchema],
  ["bad-grammar", 4, badGrammar],
  ["content-type", 3, contentTypes],
  ["method-path", 4, methodsAndPaths],
  ["headers", 4, oddHeaders],
  ["raw-http", 4, rawHttp],
  ["admin", 5, admin],
  // Anthropic's Messages API.
  ["anthropic", 10, (r) => (chance(r, 0.2) ? anthropicCount(r) : anthropicValid(r))],
  ["anthropic-aborted", 2, anthropicAborted],
  ["anthropic-bad", 7, anthropicBad],
  ["anthropic-routes", 2, anthropicRoutes],
  // Ollama's API.
  ["ollama", 8, ollamaValid],
  ["ollama-aborted", 2, ollamaAborted],
  ["ollama-preload", 1, ollamaPreload],
  ["ollama-bad", 7, ollamaBad],
  ["ollama-embed", 4, ollamaEmbed],
  ["ollama-discovery", 4, ollamaDiscovery],
  // Responses, files and batches: objects made, read, listed, deleted, cancelled.
  ["responses", 7, responsesCreate],
  ["responses-aborted", 2, responsesAborted],
  ["responses-bad", 5, responsesBad],
  ["responses-read", 4, responsesRead],
  ["responses-read-bad", 2, responsesReadBad],
  ["files-upload", 4, filesUpload],
  ["files-read", 4, filesRead],
  ["files-upload-bad", 4, filesUploadBad],
  ["files-bad", 2, filesBad],
  ["batches-create", 3, batchesCreate],
  ["batches-read", 3, batchesRead],
  ["batches-bad", 3, batchesBad],
  // Embeddings, rerank, audio, models and their admin routes, LoRA.
  ["embeddings", 4, embeddings],
  ["embeddings-bad", 2, embeddingsBad],
  ["rerank", 3, rerank],
  ["rerank-bad", 2, rerankBad],
  ["audio", 2, audio],
  ["models", 4, models],
  ["model-admin", 2, modelAdmin],
  ["lora", 3, lora],
];
for (const name of [...skipped, ...only])
  if (!MIX.some(([c]) => c === name)) fail(`no category ${name} (${MIX.map(([c]) => c).join(", ")})`);
// The mix drawn from: a left-out category's weight is gone, so request N differs from a full run's (--show needs the
// same --skip/--only).
const DRAWN = MIX.filter(([name]) => !skipped.has(name) && (only.size === 0 || only.has(name)));
if (DRAWN.length === 0) fail("--skip/--only left no category to send");
const TOTAL_WEIGHT = DRAWN.reduce((s, [, w]) => s + w, 0);

const AUTH = opts.has("auth");

/** GET or HEAD /health: open without a key. */
const isOpen = (spec: Spec) =>
  (spec.method === "GET" || spec.method === "HEAD") && /^\/health(\?|$)/.test(spec.path ?? "");

/**
 * Request `index` of the run seeded `seed`: its own PRNG stream, so it can be
 * shown alone. Under --auth its key comes from a stream of its own, so the
 * requests themselves are those of a run without keys.
 */
function specAt(seed: number, index: number): Spec {
  const r = uniform(hashSeed(seed, `fuzz-request-${index}`));
  let x = r() * TOTAL_WEIGHT;
  let spec = DRAWN[0]![2];
  for (const [, w, gen] of DRAWN) {
    if ((x -= w) < 0) {
      spec = gen;
      break;
    }
  }
  const drawn = spec(r);
  const open = isOpen(drawn) ? { open: true } : {};
  return AUTH ? withKey(uniform(hashSeed(seed, `fuzz-key-${index}`)), { ...drawn, ...open }) : { ...drawn, ...open };
}

if (opts.has("show")) {
  const s = specAt(cfg.seed, intOpt("show", 0, 0));
  const body = s.raw ?? s.body;
  // The request's description on stderr, its exact body (or raw bytes) on stdout: `--show N > body.json`.
  // `@@kind@@` names an object the run made at setup, `@@kind~@@` one it made (and may have deleted) during the run.
  console.error(JSON.stringify({ ...s, expect: authExpect(s, s.expect), body: undefined, raw: undefined }, null, 2));
  if (body !== undefined) await Bun.write(Bun.stdout, body);
  process.exit(0);
}

// ---------------------------------------------------------------- sending

interface Outcome {
  /** HTTP status; 0 when no answer came. Raw requests may carry several (pipelined). */
  statuses: number[];
  ms: number;
  /** The client aborted on purpose (an aborted request or a half-closed raw one). */
  clientAborted: boolean;
  /** The connection failed before an answer, or mid-answer. */
  dropped?: string;
  timedOut: boolean;
  /**
   * A reply that breaks the API: no error envelope, an error frame in a 200 stream, a stream without its end, a
   * non-JSON 200.
   */
  problem?: string;
  snippet: string;
  /** A whole 200 JSON reply, parsed (for the ids of objects it made). */
  value?: any;
}

async function sendFetch(base: string, spec: Spec): Promise<Outcome> {
  const abort = new AbortController();
  const t0 = performance.now();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    abort.abort("timeout");
  }, cfg.timeoutS * 1000);
  const msAbort =
    spec.abortAfter?.ms !== undefined ? setTimeout(() => abort.abort("client abort"), spec.abortAfter.ms) : undefined;
  const out = (o: Partial<Outcome>): Outcome => ({
    statuses: [],
    ms: performance.now() - t0,
    clientAborted: abort.signal.aborted && !timedOut,
    timedOut,
    snippet: "",
    ...o,
  });
  try {
    let res: Response;
    try {
      res = await fetch(base + spec.path, {
        method: spec.method,
        headers: spec.headers,
        body: spec.body,
        signal: abort.signal,
        keepalive: false,
        redirect: "manual",
      });
    } catch (err) {
      return out({ dropped: abort.signal.aborted ? undefined : `no answer: ${(err as Error).message}` });
    }
    try {
      const ctype = res.headers.get("content-type") ?? "";
      // A stream is read by what the reply is (SSE or NDJSON), whatever the request asked for.
      if (res.status === 200 && res.body && (ctype.includes("event-stream") || ctype.includes("ndjson"))) {
        const r = await readStream(spec, res.body, ctype, abort);
        return out({ statuses: [res.status], ...r, clientAborted: abort.signal.aborted && !timedOut });
      }
      const text = await res.text();
      const { problem, value } = checkBody(spec, res.status, text, ctype);
      return out({ statuses: [res.status], problem, value, snippet: text.slice(0, 300) });
    } catch (err) {
      return out({
        statuses: [res.status],
        dropped: abort.signal.aborted ? undefined : `reply cut: ${(err as Error).message}`,
      });
    }
  } finally {
    clearTimeout(timer);
    clearTimeout(msAbort);
  }
}

function sendRaw(port: number, spec: Spec): Promise<Outcome> {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const chunks: Buffer[] = [];
    let error: string | undefined;
    let timedOut = false;
    const socket = connect({ host: "127.0.0.1", port });
    const timer = setTimeout(() => {
      timedOut = true;
      socket.destroy();
    }, cfg.timeoutS * 1000);
    socket.on("connect", () => {
      socket.write(spec.raw!);
      if (spec.halfClose) socket.end();
    });
    socket.on("data", (d: Buffer) => chunks.push(d));
    socket.on("error", (e: Error & { code?: string }) => (error = e.code ?? e.message));
    socket.on("close", () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString("latin1");
      const statuses = [...text.matchAll(/(?:^|\r\n)HTTP\/1\.[01] (\d{3}) /g)].map((m) => Number(m[1]));
      const bodyStart = text.indexOf("\r\n\r\n");
      const firstBody = bodyStart >= 0 ? text.slice(bodyStart + 4) : "";
      const first = statuses[0];
      let problem: string | undefined;
      // A chunked empty body is "0\r\n\r\n": no bytes of content.
      const bare = firstBody === "" || /^0\r\n\r\n$/.test(firstBody);
      if (
        first !== undefined &&
        first >= 400 &&
        !firstBody.includes('{"error":{"message":') &&
        !(spec.bareErrorOk && bare)
      )
        problem = "error reply not in the envelope";
      resolve({
        statuses,
        ms: performance.now() - t0,
        clientAborted: !!spec.halfClose && statuses.length === 0,
        timedOut,
        dropped:
          statuses.length === 0 && !spec.halfClose && !timedOut
            ? `closed without an answer${error ? ` (${error})` : ""}`
            : undefined,
        problem,
        snippet: text.slice(0, 300),
      });
    });
  });
}

// ---------------------------------------------------------------- recording

interface Sample {
  index: number;
  variant: string;
  issue: string;
  request: string;
  response: string;
}

interface CategoryStats {
  statuses: Map<string, number>;
  latencies: number[];
  fivexx: number;
  dropped: number;
  hangs: number;
  problems: number;
  unexpected: number;
  clientAborted: number;
}

class Recorder {
  readonly categories = new Map<string, CategoryStats>();
  readonly samples: Sample[] = [];
  private readonly seen = new Map<string, number>();
  sent = 0;

  record(index: number, spec: Spec, o: Outcome): void {
    this.sent++;
    let c = this.categories.get(spec.category);
    if (!c)
      this.categories.set(
        spec.category,
        (c = {
          statuses: new Map(),
          latencies: [],
          fivexx: 0,
          dropped: 0,
          hangs: 0,
          problems: 0,
          unexpected: 0,
          clientAborted: 0,
        }),
      );
    const key =
      o.clientAborted && o.statuses.length === 0
        ? "aborted"
        : o.statuses.length
          ? o.statuses.join("+")
          : o.timedOut
            ? "timeout"
            : "none";
    c.statuses.set(key, (c.statuses.get(key) ?? 0) + 1);
    c.latencies.push(o.ms);
    if (o.clientAborted) c.clientAborted++;
    const issues: string[] = [];
    const flag = (counter: "fivexx" | "dropped" | "hangs" | "problems" | "unexpected", issue: string) => {
      c[counter]++;
      issues.push(issue);
    };
    // A 5xx counts unless it is the answer asked for (501 on the retired slot routes).
    const fivexx = o.statuses.some((s) => s >= 500 && !spec.expect.includes(s));
    if (fivexx) flag("fivexx", `5xx (${o.statuses.join("+")})`);
    if (o.dropped) flag("dropped", o.dropped);
    if (o.timedOut || (!o.clientAborted && o.ms > cfg.hangS * 1000))
      flag("hangs", `hang (${(o.ms / 1000).toFixed(1)} s${o.timedOut ? ", timed out" : ""})`);
    if (o.problem) flag("problems", o.problem);
    if (o.statuses.length && !fivexx && !o.statuses.every((s) => spec.expect.includes(s)))
      flag("unexpected", `unexpected ${o.statuses.join("+")}, expected ${spec.expect.join("/")}`);
    for (const issue of issues) this.sample(index, spec, issue, o);
  }

  /** The first three reproductions of each (variant, issue). */
  private sample(index: number, spec: Spec, issue: string, o: Outcome): void {
    const key = `${spec.variant}|${issue.replace(/[\d.]+ s/, "")}`;
    const n = this.seen.get(key) ?? 0;
    this.seen.set(key, n + 1);
    if (n >= 3) return;
    this.samples.push({ index, variant: spec.variant, issue, request: describe(spec), response: o.snippet });
  }

  totals() {
    const all = [...this.categories.values()];
    const sum = (f: (c: CategoryStats) => number) => all.reduce((s, c) => s + f(c), 0);
    return {
      fivexx: sum((c) => c.fivexx),
      dropped: sum((c) => c.dropped),
      hangs: sum((c) => c.hangs),
      problems: sum((c) => c.problems),
      unexpected: sum((c) => c.unexpected),
      clientAborted: sum((c) => c.clientAborted),
    };
  }
}

function describe(spec: Spec): string {
  if (spec.raw) return `raw ${JSON.stringify(Buffer.from(spec.raw).toString("latin1").slice(0, 400))}`;
  const body =
    spec.body === undefined
      ? ""
      : typeof spec.body === "string"
        ? spec.body
        : Buffer.from(spec.body).toString("latin1");
  const headers = Object.entries(spec.headers ?? {}).map(
    ([k, v]) => `${k}: ${v.length > 60 ? `${v.slice(0, 60)}...(${v.length})` : v}`,
  );
  const path = spec.path ?? "";
  return `${spec.method} ${path.length > 80 ? `${path.slice(0, 80)}...` : path} [${headers.join("; ")}] ${body.length > 400 ? `${body.slice(0, 400)}...(${body.length} bytes)` : body}`;
}

const quantile = (xs: number[], q: number) => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};

// ---------------------------------------------------------------- the server

const dir = mkdtempSync(join(tmpdir(), "superfluid-fuzz-"));
const logPath = join(dir, "server.log");

/**
 * The key the harness's own requests (/slots, /v1/models, setup) carry under --auth: the global one, admin and
 * unlimited.
 */
const HARNESS: Record<string, string> = AUTH ? keyHeader("global") : {};

/**
 * The server: the built-in chat model, an embedding and a rerank fixture
 * (linked under the names fuzz-kit.ts's SERVED gives, so ids do not depend
 * on fixture versions), `claude-*` mapped to the chat model; under --auth a
 * key policy and --api-key.
 */
async function startServer() {
  const modelDir = join(dir, "models");
  mkdirSync(modelDir);
  const link = async (kind: "tiny-chat" | "tiny-embed" | "tiny-rerank", id: string) => {
    const path = join(modelDir, `${id}.gguf`);
    symlinkSync(await ensureFixture(kind), path);
    return path;
  };
  const chat = await link("tiny-chat", SERVED.chat);
  const embed = await link("tiny-embed", SERVED.embed);
  const rerankModel = await link("tiny-rerank", SERVED.rerank);
  LORA.path = await ensureLoraFixture();
  const authArgs: string[] = [];
  if (AUTH) {
    const policy = join(dir, "keys.json");
    writeFileSync(policy, policyFile(), { mode: 0o600 });
    authArgs.push("--api-key", KEYS.global, "--key-policy", policy);
  }
  const proc = Bun.spawn(
    [
      process.execPath,
      join(import.meta.dir, "../../src/main.ts"),
      "serve",
      chat,
      "--model",
      embed,
      "--model",
      rerankModel,
      "--alias",
      `claude-*=${SERVED.chat}`,
      "--port",
      "0",
      "--sessions",
      join(dir, "sessions"),
      "--max-batch",
      "4",
      "--threads",
      "1",
      ...authArgs,
      ...serveArgs,
    ],
    { stdout: "pipe", stderr: "pipe" },
  );
  let port = 0;
  let found!: (p: number) => void;
  const portFound = new Promise<number>((resolve) => (found = resolve));
  // Both streams go to the log; the line naming the URL gives the port (--port 0: the kernel picks one).
  const pump = async (stream: ReadableStream<Uint8Array>) => {
    const decoder = new TextDecoder();
    for await (const chunk of stream) {
      const text = decoder.decode(chunk, { stream: true });
      appendFileSync(logPath, text);
      const m = /serving .+? at http:\/\/127\.0\.0\.1:(\d+)/.exec(text);
      if (m) found(Number(m[1]));
    }
  };
  void pump(proc.stdout);
  void pump(proc.stderr);
  port = await Promise.race([portFound, proc.exited.then(() => 0), Bun.sleep(120_000).then(() => 0)]);
  if (!port) {
    proc.kill("SIGKILL");
    throw new Error(`the server did not start; its log: ${logPath}`);
  }
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    if (
      await fetch(`${base}/health`).then(
        (r) => r.status === 200,
        () => false,
      )
    )
      return { proc, port, base };
    await Bun.sleep(100);
  }
  proc.kill("SIGKILL");
  throw new Error(`/health never answered 200; the server's log: ${logPath}`);
}

function rssKb(pid: number): number {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? NaN);
  } catch {
    return NaN;
  }
}

/** The server's child processes (its model workers), by their parent pid in /proc/PID/stat. */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read after the last ')'.
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === pid) out.push(Number(name));
    } catch {}
  }
  return out;
}

/** The model a worker serves: its --model file's stem. */
function workerModel(pid: number): string {
  try {
    const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    const at = args.indexOf("--model");
    return at >= 0 ? basename(args[at + 1] ?? "?").replace(/\.gguf$/, "") : `pid ${pid}`;
  } catch {
    return `pid ${pid}`;
  }
}

interface Rss {
  server: number;
  /** Each worker's RSS by the model it serves (a model unloaded and loaded again has a new worker). */
  workers: Map<string, number>;
}
function rssOf(pid: number): Rss {
  const workers = new Map<string, number>();
  for (const child of childrenOf(pid)) {
    const kb = rssKb(child);
    if (Number.isFinite(kb)) workers.set(workerModel(child), kb);
  }
  return { server: rssKb(pid), workers };
}

/** The share by which the daemon's, and each model's worker's, RSS is above `before`. */
function growthOf(before: Rss, after: Rss): { name: string; growth: number }[] {
  const out = [{ name: "server", growth: (after.server - before.server) / before.server }];
  for (const [model, kb] of before.workers) {
    const now = after.workers.get(model);
    if (now !== undefined) out.push({ name: `worker ${model}`, growth: (now - kb) / kb });
  }
  return out;
}

async function slotsState(base: string): Promise<{ active: number; queued: number; respawns: number } | undefined> {
  try {
    const s = (await (await fetch(`${base}/slots`, { headers: HARNESS })).json()) as {
      lanes: { active: number };
      queue: { depth: number };
      respawns: number;
    }[];
    return { active: s[0]!.lanes.active, queued: s[0]!.queue.depth, respawns: s[0]!.respawns };
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------- the run

/** The objects the run made and names (fuzz-pool.ts). */
const pool = new ObjectPool();

/** The spec as sent: ids filled in, and the statuses its key and the objects it names allow. */
function prepared(seed: number, index: number): Spec {
  const drawn = specAt(seed, index);
  const { spec, hidden } = pool.fill(drawn, uniform(hashSeed(seed, `fuzz-pool-${index}`)), scopeOfKey(drawn.key));
  return { ...spec, expect: authExpect(drawn, hidden ? (drawn.expectHidden ?? [404]) : drawn.expect) };
}

/** What a 200 made or deleted joins or leaves the pool. */
function track(spec: Spec, o: Outcome): void {
  if (o.statuses[0] !== 200 || typeof o.value?.id !== "string") return;
  if (spec.capture && spec.method === "POST") pool.add(spec.capture, o.value.id, scopeOfKey(spec.key));
  if (spec.method === "DELETE") pool.forget(o.value.id);
}

async function runMix(
  server: { base: string; port: number },
  seed: number,
  count: number,
  rec: Recorder,
  stopAt: number,
  progress: boolean,
): Promise<void> {
  let next = 0;
  let lastReport = performance.now();
  const lane = async () => {
    for (;;) {
      if (next >= count || Date.now() > stopAt || interrupted) return;
      const index = next++;
      const spec = prepared(seed, index);
      const o = spec.raw ? await sendRaw(server.port, spec) : await sendFetch(server.base, spec);
      track(spec, o);
      rec.record(index, spec, o);
      if (progress && performance.now() - lastReport > 10_000) {
        lastReport = performance.now();
        const t = rec.totals();
        console.error(
          `fuzz: ${rec.sent}/${count} sent; 5xx ${t.fivexx}, dropped ${t.dropped}, hangs ${t.hangs}, broken replies ${t.problems}, unexpected statuses ${t.unexpected}`,
        );
      }
    }
  };
  await Promise.all(Array.from({ length: cfg.parallel }, lane));
}

let interrupted = false;
process.on("SIGINT", () => {
  if (interrupted) process.exit(130);
  interrupted = true;
  console.error("fuzz: interrupted; finishing the requests in flight");
});

const mib = (kb: number) => (kb / 1024).toFixed(1);

async function main(): Promise<number> {
  if (AUTH && !authSupported()) {
    rmSync(dir, { recursive: true, force: true });
    fail(
      "fuzz: --auth needs `superfluid serve --key-policy` and `--api-key`, and `bun src/main.ts serve --help` lists neither yet in this checkout; run without --auth until the flags land",
    );
  }
  // One deadline for the whole run, warm-up included.
  const stopAt = Date.now() + cfg.deadlineS * 1000;
  console.error(`fuzz: starting a server (log: ${logPath})`);
  const server = await startServer().catch((err) => {
    if (!opts.has("keep")) rmSync(dir, { recursive: true, force: true });
    throw err;
  });
  const pid = server.proc.pid;
  try {
    // The objects the run starts with: one set per key under --auth (each key sees only its own).
    for (const key of AUTH ? (["user", "admin", "global"] as const) : [undefined]) {
      const made = await makeObjects(server.base, key ? keyHeader(key) : {});
      for (const [kind, id] of Object.entries(made)) pool.keep(kind as keyof typeof made, id, scopeOfKey(key));
    }
    const warm = new Recorder();
    console.error(`fuzz: ${cfg.warmup} warm-up requests (seed ${cfg.seed + 1})`);
    await runMix(server, cfg.seed + 1, cfg.warmup, warm, stopAt, false);
    await waitIdle(server.base, 60_000);
    await loadAll(server.base);
    await Bun.sleep(2000);
    const before = rssOf(pid);
    const peak: Rss = { server: before.server, workers: new Map(before.workers) };
    const sampler = setInterval(() => {
      const now = rssOf(pid);
      peak.server = Math.max(peak.server, now.server || 0);
      for (const [model, kb] of now.workers) peak.workers.set(model, Math.max(peak.workers.get(model) ?? 0, kb));
    }, 200);

    const rec = new Recorder();
    const t0 = performance.now();
    console.error(`fuzz: ${cfg.requests} requests, ${cfg.parallel} in flight, seed ${cfg.seed}`);
    await runMix(server, cfg.seed, cfg.requests, rec, stopAt, true);
    const wallS = (performance.now() - t0) / 1000;
    clearInterval(sampler);

    const idle = await waitIdle(server.base, 60_000);
    // Afterwards the server must still answer: /health, and a plain chat turn.
    const healthy = await fetch(`${server.base}/health`).then(
      (r) => r.status === 200,
      () => false,
    );
    const chatOk = await fetch(`${server.base}${CHAT}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...HARNESS },
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "hello" }], max_tokens: 8 }),
    }).then(
      async (r) => r.status === 200 && Array.isArray(((await r.json()) as { choices?: unknown[] }).choices),
      () => false,
    );
    // Models the run unloaded are loaded again, so each model's worker is compared with its own baseline.
    await loadAll(server.base);
    const after = await settledRss(pid, before);
    const state = await slotsState(server.base);
    const alive = server.proc.exitCode === null;
    const log = readFileSync(logPath, "utf8").split("\n");
    const logged5xx = log.filter((l) => /^<-- 5\d\d /.test(l) || /^superfluid: [A-Z]+ \/\S*: /.test(l));

    const t = rec.totals();
    const w = warm.totals();
    const growths = growthOf(before, after);
    const grown = growths.filter((g) => g.growth > 0.1);
    const must: [string, number][] = [
      ["5xx answers", t.fivexx + w.fivexx],
      ["connections dropped without an answer (not client-aborted)", t.dropped + w.dropped],
      [`hangs > ${cfg.hangS} s`, t.hangs + w.hangs],
      ["broken replies (no envelope, stream error frame, no end of stream, wrong 200 shape)", t.problems + w.problems],
      ["5xx / internal errors in the server's log", logged5xx.length],
      ["worker respawns", state?.respawns ?? 1],
      ["lanes or queue still busy 60 s after the run", idle ? 0 : 1],
      ["server exited", alive ? 0 : 1],
      ["/health or a plain chat failing after the run", (healthy ? 0 : 1) + (chatOk ? 0 : 1)],
      [
        `RSS after the run more than 10% above before (server, each model's worker)${grown.length ? `: ${grown.map((g) => g.name).join(", ")}` : ""}`,
        grown.length,
      ],
    ];

    const rows = [...rec.categories.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([name, c]) => ({
        category: name,
        requests: c.latencies.length,
        statuses: Object.fromEntries([...c.statuses.entries()].sort()),
        fivexx: c.fivexx,
        dropped: c.dropped,
        hangs: c.hangs,
        broken: c.problems,
        unexpected: c.unexpected,
        clientAborted: c.clientAborted,
        p50ms: quantile(c.latencies, 0.5),
        p99ms: quantile(c.latencies, 0.99),
      }));

    const variant = [
      ...(serveArgs.length ? [`serve ${serveArgs.join(" ")}`] : []),
      ...[...skipped].map((c) => `--skip ${c}`),
      ...[...only].map((c) => `--only ${c}`),
    ];
    console.log(
      `\n${rec.sent} requests in ${wallS.toFixed(1)} s (seed ${cfg.seed}, ${cfg.parallel} in flight; plus ${warm.sent} warm-up${variant.length ? `; ${variant.join(", ")}` : ""})\n`,
    );
    console.log(
      "| category | requests | statuses | 5xx | dropped | hangs | broken | unexpected | client-aborted | p50 ms | p99 ms |",
    );
    console.log("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (const r of rows) {
      const st = Object.entries(r.statuses)
        .map(([k, v]) => `${k}:${v}`)
        .join(" ");
      console.log(
        `| ${r.category} | ${r.requests} | ${st} | ${r.fivexx} | ${r.dropped} | ${r.hangs} | ${r.broken} | ${r.unexpected} | ${r.clientAborted} | ${r.p50ms.toFixed(1)} | ${r.p99ms.toFixed(1)} |`,
      );
    }
    console.log(
      `| **all** | ${rec.sent} | | ${t.fivexx} | ${t.dropped} | ${t.hangs} | ${t.problems} | ${t.unexpected} | ${t.clientAborted} | | |`,
    );
    console.log(`\n| RSS (MiB) | before (after warm-up) | peak | after (idle) | change |`);
    console.log("|---|---:|---:|---:|---:|");
    for (const g of growths) {
      const model = g.name.replace(/^worker /, "");
      const [b, p, a] =
        g.name === "server"
          ? [before.server, peak.server, after.server]
          : [before.workers.get(model)!, peak.workers.get(model) ?? NaN, after.workers.get(model)!];
      console.log(`| ${g.name} | ${mib(b)} | ${mib(p)} | ${mib(a)} | ${(g.growth * 100).toFixed(1)}% |`);
    }
    console.log(`\nMust be zero:`);
    for (const [name, n] of must) console.log(`  ${n === 0 ? "ok  " : "FAIL"} ${name}: ${n}`);
    if (logged5xx.length)
      console.log(`\nServer log (first 5 of ${logged5xx.length}):\n${logged5xx.slice(0, 5).join("\n")}`);
    const shown = [...warm.samples.map((s) => ({ ...s, warmup: true })), ...rec.samples];
    if (shown.length) {
      console.log(
        `\nFindings (first 3 of each variant and issue; \`--show INDEX --seed ${cfg.seed}\` reprints a request, warm-up ones with --seed ${cfg.seed + 1}):`,
      );
      for (const s of shown.slice(0, 60))
        console.log(
          `- #${s.index}${"warmup" in s ? " (warm-up)" : ""} ${s.variant}: ${s.issue}\n    ${s.request.slice(0, 300)}\n    -> ${s.response.slice(0, 200).replace(/\r?\n/g, "\\n")}`,
        );
      if (shown.length > 60) console.log(`... ${shown.length - 60} more in --json`);
    }

    if (cfg.holdS > 0) {
      console.error(
        `fuzz: holding the server for ${cfg.holdS} s: pid ${pid}; workers ${childrenOf(pid)
          .map((c) => `${workerModel(c)} ${c}`)
          .join(", ")}`,
      );
      await Bun.sleep(cfg.holdS * 1000);
    }
    const failed = must.some(([, n]) => n !== 0);
    const jsonPath = opts.get("json");
    if (jsonPath) {
      writeFileSync(
        jsonPath,
        JSON.stringify(
          {
            config: { ...cfg, serveArgs, skipped: [...skipped], only: [...only] },
            wallS,
            sent: rec.sent,
            warmupSent: warm.sent,
            rows,
            totals: t,
            warmupTotals: w,
            rssKb: { before: rssJson(before), peak: rssJson(peak), after: rssJson(after) },
            mustBeZero: Object.fromEntries(must),
            serverLog5xx: logged5xx,
            findings: shown,
            failed,
          },
          null,
          2,
        ),
      );
    }
    return failed ? 1 : 0;
  } finally {
    server.proc.kill("SIGTERM");
    await Promise.race([server.proc.exited, Bun.sleep(10_000)]);
    if (server.proc.exitCode === null) server.proc.kill("SIGKILL");
    if (opts.has("keep")) console.error(`fuzz: kept ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

const rssJson = (r: Rss) => ({ server: r.server, workers: Object.fromEntries(r.workers) });

/** Loads every served model the run may have unloaded (/props?autoload=1 waits for the load). */
async function loadAll(base: string): Promise<void> {
  for (const model of [SERVED.embed, SERVED.rerank]) {
    await fetch(`${base}/props?model=${model}&autoload=1`, { headers: HARNESS }).then(
      (r) => r.text(),
      () => "",
    );
  }
}

async function waitIdle(base: string, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const s = await slotsState(base);
    if (s && s.active === 0 && s.queued === 0) return true;
    await Bun.sleep(250);
  }
  return false;
}

/** RSS once idle: read after 5 s, then up to 25 s more while some process is still above the 10% line. */
async function settledRss(pid: number, before: Rss): Promise<Rss> {
  await Bun.sleep(5000);
  let now = rssOf(pid);
  for (let i = 0; i < 25 && growthOf(before, now).some((g) => g.growth > 0.1); i++) {
    await Bun.sleep(1000);
    now = rssOf(pid);
  }
  return now;
}

process.exit(await main());
