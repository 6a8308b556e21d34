// Fuzz generators for the Anthropic (/v1/messages) and Ollama (/api/*)
// families (docs/api/anthropic.md, docs/api/ollama.md): valid requests,
// streams the client walks away from, wrong field values, the discovery and
// the model-store routes. bench/fuzz/fuzz.ts mixes them in.
import {
  BOOL,
  MODEL,
  RELOADING,
  SERVED,
  STR,
  between,
  brokenJson,
  chance,
  get,
  intRange,
  json,
  numRange,
  pick,
  short,
  words,
  wrongField,
  type Rng,
  type Spec,
} from "./fuzz-kit.ts";

const MESSAGES = "/v1/messages";
const COUNT = "/v1/messages/count_tokens";

const TOOLS = [
  {
    name: "get_weather",
    description: "weather",
    input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
  {
    name: "count",
    description: "count",
    input_schema: { type: "object", properties: { n: { type: "integer", minimum: 0, maximum: 9 } } },
  },
];

function anthropicTurns(r: Rng): unknown[] {
  const out: unknown[] = [];
  for (let turns = between(r, 0, 2); turns > 0; turns--) {
    out.push({ role: "user", content: words(r, between(r, 1, 8)) });
    out.push({ role: "assistant", content: chance(r, 0.5) ? words(r, 4) : [{ type: "text", text: words(r, 4) }] });
  }
  const text = words(r, between(r, 1, 16));
  out.push({
    role: "user",
    content: chance(r, 0.3)
      ? [{ type: "text", text, ...(chance(r, 0.3) ? { cache_control: { type: "ephemeral" } } : {}) }]
      : text,
  });
  return out;
}

function anthropicBody(r: Rng, stream: boolean): Record<string, unknown> {
  const b: Record<string, unknown> = {
    model: pick(r, [MODEL, MODEL, "claude-sonnet-4-5", "claude-3-5-haiku-latest"]),
    max_tokens: between(r, 1, 24),
    messages: anthropicTurns(r),
  };
  if (stream || chance(r, 0.1)) b.stream = stream;
  if (chance(r, 0.3))
    b.system = chance(r, 0.5)
      ? words(r, 6)
      : [
          { type: "text", text: "x-anthropic-billing-header: v1" },
          { type: "text", text: words(r, 6), cache_control: { type: "ephemeral", ttl: pick(r, ["5m", "1h"]) } },
        ];
  if (chance(r, 0.3)) b.temperature = pick(r, [0, 0.5, 1]);
  if (chance(r, 0.15)) b.top_p = 0.9;
  if (chance(r, 0.15)) b.top_k = pick(r, [0, 5]);
  if (chance(r, 0.2)) b.stop_sequences = ["e", "", " the"].slice(0, between(r, 1, 3));
  if (chance(r, 0.15)) b.thinking = chance(r, 0.7) ? { type: "enabled", budget_tokens: 1024 } : { type: "disabled" };
  if (chance(r, 0.1)) b.cache_control = { type: "ephemeral" };
  if (chance(r, 0.1)) b.metadata = { user_id: "fuzz" };
  if (chance(r, 0.25)) {
    b.tools = TOOLS.slice(0, between(r, 1, 2));
    const kind = pick(r, ["auto", "any", "tool", "none", "absent"]);
    if (kind === "tool") b.tool_choice = { type: "tool", name: "get_weather" };
    else if (kind !== "absent")
      b.tool_choice = { type: kind, ...(chance(r, 0.3) ? { disable_parallel_tool_use: true } : {}) };
    if (chance(r, 0.3)) {
      (b.messages as unknown[]).push(
        {
          role: "assistant",
          content: [{ type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Oslo" } }],
        },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "12 degrees" }] },
      );
    }
  } else if (chance(r, 0.1))
    b.output_config = {
      format: {
        type: "json_schema",
        schema: { type: "object", properties: { a: { type: "integer" } }, required: ["a"] },
      },
    };
  return b;
}

export function anthropicValid(r: Rng): Spec {
  const stream = chance(r, 0.45);
  const body = anthropicBody(r, stream);
  const variant = `messages.${stream ? "stream" : "plain"}${body.tools ? ".tools" : ""}`;
  return {
    ...json(MESSAGES, body, { category: "anthropic", variant, expect: [200], stream }),
    headers: {
      "content-type": "application/json",
      "anthropic-version": "2023-06-01",
      ...(chance(r, 0.2) ? { "x-superfluid-qos": pick(r, ["interactive", "agent", "background"]) } : {}),
    },
  };
}

export function anthropicAborted(r: Rng): Spec {
  const body = { ...anthropicBody(r, true), max_tokens: between(r, 64, 512) };
  const abortAfter = chance(r, 0.6) ? { events: between(r, 1, 6) } : { ms: between(r, 0, 200) };
  return json(MESSAGES, body, {
    category: "anthropic-aborted",
    variant: "messages.aborted",
    expect: [200],
    stream: true,
    abortAfter,
  });
}

const ANTHROPIC_WRONG: Record<string, unknown[]> = {
  model: [...STR, null, ""],
  max_tokens: [...intRange(1), 0, null],
  messages: [
    "x",
    [],
    [{}],
    [null],
    [{ role: "wizard", content: "x" }],
    [{ role: "user", content: 5 }],
    [{ role: "user" }],
    [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "AAAA" } }] }],
    [{ role: "user", content: [{ type: "document", source: { type: "text", media_type: "text/plain", data: "x" } }] }],
    [{ role: "user", content: [{ type: "text" }] }],
    [{ role: "user", content: [{ type: "text", text: 5 }] }],
    [{ role: "user", content: [5] }],
    [{ role: "user", content: [{ type: "tool_result" }] }],
    [{ role: "assistant", content: [{ type: "tool_use", id: "t", name: 5, input: {} }] }],
    [{ role: "user", content: [{ type: "text", text: "x", cache_control: { type: "forever" } }] }],
  ],
  system: [5, { a: 1 }, [5], [{ type: "text" }], [{ type: "text", text: 5 }]],
  stop_sequences: [5, "x", [5], [null], Array.from({ length: 65 }, (_, i) => `s${i}`)],
  temperature: numRange(0, 2),
  top_p: numRange(0, 1),
  top_k: intRange(0),
  stream: BOOL,
  tools: [
    "x",
    [{}],
    [{ name: 5 }],
    [{ name: "f", input_schema: "x" }],
    Array.from({ length: 1025 }, (_, i) => ({ name: `f${i}`, input_schema: { type: "object" } })),
  ],
  tool_choice: [5, "x", {}, { type: "wizard" }, { type: "tool" }, { type: "tool", name: "undeclared" }],
  thinking: ["x", 5, { type: "wizard" }],
  cache_control: ["x", { type: "persistent" }],
  output_config: [
    "x",
    { format: "x" },
    { format: { type: "xml" } },
    { format: { type: "json_schema" } },
    { format: { type: "json_schema", schema: { type: "nonsense" } } },
  ],
};

export function anthropicBad(r: Rng): Spec {
  const base = { model: MODEL, max_tokens: 4, messages: [{ role: "user", content: words(r, 3) }] };
  const onCount = chance(r, 0.25);
  if (chance(r, 0.15)) {
    const { variant, body } = brokenJson(r, JSON.stringify(base));
    return {
      category: "anthropic-bad",
      variant: `messages.json-${variant}`,
      expect: [400],
      method: "POST",
      path: onCount ? COUNT : MESSAGES,
      headers: { "content-type": "application/json" },
      body,
    };
  }
  if (chance(r, 0.1)) {
    const type = pick(r, ["text/plain", "application/x-www-form-urlencoded", ""]);
    return {
      category: "anthropic-bad",
      variant: `messages.content-type=${JSON.stringify(type)}`,
      expect: [415],
      method: "POST",
      path: MESSAGES,
      headers: { "content-type": type },
      body: JSON.stringify(base),
    };
  }
  const { body, field, value } = wrongField(r, ANTHROPIC_WRONG, base);
  // A tool_choice naming a tool needs tools about; a lone one stays a bad request either way.
  if (field === "tool_choice" && chance(r, 0.5)) body.tools = TOOLS;
  // An empty model names no served model (404 or 400); thinking's unknown types are not read (Claude Code sends its
  // own).
  const expect =
    field === "model" && typeof value === "string"
      ? value === ""
        ? [400, 404]
        : [404]
      : field === "stream" && typeof value === "boolean"
        ? [200]
        : field === "thinking" && typeof value === "object"
          ? [200, 400]
          : [400];
  // count_tokens reads only the prompt's fields; the others are ignored there.
  const promptField = ["model", "messages", "system", "tools", "tool_choice", "thinking"].includes(field);
  if (onCount)
    return json(COUNT, body, {
      category: "anthropic-bad",
      variant: `count_tokens.${field}=${short(value)}`,
      expect: promptField ? expect : [200, 400],
    });
  return json(MESSAGES, body, { category: "anthropic-bad", variant: `messages.${field}=${short(value)}`, expect });
}

export function anthropicCount(r: Rng): Spec {
  const body: Record<string, unknown> = { model: pick(r, [MODEL, "claude-opus-4"]), messages: anthropicTurns(r) };
  if (chance(r, 0.4)) body.system = words(r, 5);
  if (chance(r, 0.3)) body.tools = TOOLS;
  if (chance(r, 0.2)) body.thinking = { type: "enabled", budget_tokens: 2048 };
  return json(COUNT, body, { category: "anthropic", variant: "count_tokens", expect: [200] });
}

/** Other methods and paths under /v1/messages. */
export function anthropicRoutes(r: Rng): Spec {
  const cases: [string, string, number[]][] = [
    ["GET", MESSAGES, [405]],
    ["PUT", MESSAGES, [405]],
    ["DELETE", COUNT, [405]],
    ["GET", `${MESSAGES}/batches`, [404]],
    ["POST", `${MESSAGES}/batches`, [404]],
    ["POST", `${MESSAGES}/x/y`, [404]],
    ["POST", `${MESSAGES}?beta=true`, [200]],
  ];
  const [method, path, expect] = pick(r, cases);
  const body = JSON.stringify({ model: MODEL, max_tokens: 4, messages: [{ role: "user", content: "x" }] });
  return {
    category: "anthropic-routes",
    variant: `${method} ${path}`,
    expect,
    method,
    path,
    ...(method === "GET" ? {} : { headers: { "content-type": "application/json" }, body }),
  };
}

// ---------------------------------------------------------------- Ollama

const OLLAMA_TOOLS = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "weather",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  },
];

function ollamaOptions(r: Rng): Record<string, unknown> {
  const o: Record<string, unknown> = { num_predict: between(r, 1, 24) };
  if (chance(r, 0.4)) o.temperature = pick(r, [0, 0.7, 1.3]);
  if (chance(r, 0.2)) o.top_k = pick(r, [0, 20]);
  if (chance(r, 0.2)) o.top_p = 0.9;
  if (chance(r, 0.2)) o.seed = pick(r, [-1, 0, 42]);
  if (chance(r, 0.15)) o.stop = ["e", ""];
  if (chance(r, 0.15)) o.num_ctx = pick(r, [2048, 8192]);
  // Load-time options are ignored; samplers at their off values are accepted.
  if (chance(r, 0.15))
    Object.assign(o, {
      num_thread: 2,
      num_gpu: 0,
      use_mmap: true,
      mirostat: 0,
      tfs_z: 1,
      typical_p: 1,
      repeat_last_n: 64,
    });
  return o;
}

function ollamaCommon(r: Rng, b: Record<string, unknown>): { stream: boolean } {
  const s = pick(r, ["absent", "true", "false"]);
  if (s !== "absent") b.stream = s === "true";
  if (chance(r, 0.85)) b.options = ollamaOptions(r);
  else b.max_tokens = between(r, 1, 16);
  if (chance(r, 0.15)) b.think = pick(r, [true, false, "low", "high"]);
  if (chance(r, 0.15))
    b.format = pick(r, ["json", "", { type: "object", properties: { a: { type: "integer" } }, required: ["a"] }]);
  if (chance(r, 0.1)) b.temperature = 0.2;
  return { stream: s !== "false" };
}

export function ollamaValid(r: Rng): Spec {
  const model = pick(r, [MODEL, `${MODEL}:latest`]);
  const headers = { "content-type": chance(r, 0.2) ? "application/x-www-form-urlencoded" : "application/json" };
  if (chance(r, 0.55)) {
    const messages: unknown[] = [];
    if (chance(r, 0.3)) messages.push({ role: "system", content: words(r, 5) });
    if (chance(r, 0.3))
      messages.push(
        { role: "user", content: words(r, 3) },
        { role: "assistant", content: words(r, 3), ...(chance(r, 0.3) ? { thinking: "hmm" } : {}) },
      );
    messages.push({ role: "user", content: words(r, between(r, 1, 12)) });
    const body: Record<string, unknown> = { model, messages };
    if (chance(r, 0.2)) {
      body.tools = OLLAMA_TOOLS;
      if (chance(r, 0.5))
        body.tool_choice = pick(r, ["auto", "required", "none", { function: { name: "get_weather" } }]);
      if (chance(r, 0.4))
        messages.push(
          {
            role: "assistant",
            content: "",
            tool_calls: [{ function: { name: "get_weather", arguments: { city: "Oslo" } } }],
          },
          { role: "tool", content: "12 degrees", tool_name: "get_weather" },
        );
    }
    if (chance(r, 0.15)) Object.assign(body, { logprobs: true, top_logprobs: between(r, 0, 5) });
    const { stream } = ollamaCommon(r, body);
    return {
      ...json("/api/chat", body, {
        category: "ollama",
        variant: `api-chat.${stream ? "stream" : "plain"}`,
        expect: [200],
        stream,
      }),
      headers,
    };
  }
  const mode = pick(r, ["templated", "templated", "raw", "system", "fim"]);
  const body: Record<string, unknown> = {
    model,
    prompt: mode === "raw" ? `${words(r, 4)}${pick(r, ["\n\n", "\n", ""])}` : words(r, between(r, 1, 12)),
  };
  if (mode === "raw") body.raw = true;
  if (mode === "system") Object.assign(body, { system: words(r, 4), template: "" });
  if (mode === "fim") body.suffix = words(r, 3);
  const { stream } = ollamaCommon(r, body);
  // Raw refuses what only a template carries (stop strings, think, format); the built-in model has no FIM tokens (and
  // no --fim-model is set).
  const opts = body.options as Record<string, unknown> | undefined;
  const untemplated =
    opts?.stop !== undefined || body.think !== undefined || (body.format !== undefined && body.format !== "");
  const refused = mode === "fim" || (mode === "raw" && untemplated);
  return {
    ...json("/api/generate", body, {
      category: "ollama",
      variant: `api-generate.${mode}`,
      expect: refused ? [400] : [200],
      stream,
    }),
    headers,
  };
}

export function ollamaAborted(r: Rng): Spec {
  const onChat = chance(r, 0.5);
  const body = onChat
    ? { model: MODEL, messages: [{ role: "user", content: words(r, 5) }], options: { num_predict: 512 } }
    : { model: MODEL, prompt: words(r, 5), options: { num_predict: 512 } };
  const abortAfter = chance(r, 0.6) ? { events: between(r, 1, 5) } : { ms: between(r, 0, 200) };
  return json(onChat ? "/api/chat" : "/api/generate", body, {
    category: "ollama-aborted",
    variant: `${onChat ? "api-chat" : "api-generate"}.aborted`,
    expect: [200],
    stream: true,
    abortAfter,
  });
}

export function ollamaPreload(r: Rng): Spec {
  const onChat = chance(r, 0.5);
  const body = onChat ? { model: MODEL, ...(chance(r, 0.5) ? { messages: [] } : {}) } : { model: MODEL, prompt: "" };
  return json(
    onChat ? "/api/chat" : "/api/generate",
    { ...body, ...(chance(r, 0.5) ? { stream: false } : {}) },
    { category: "ollama", variant: `preload.${onChat ? "chat" : "generate"}`, expect: [200] },
  );
}

const OLLAMA_WRONG: Record<string, unknown[]> = {
  model: [...STR, "", "nope:latest"],
  messages: [
    "x",
    { a: 1 },
    [5],
    [{ role: "wizard", content: "x" }],
    [{ role: "user", content: 5 }],
    [{ role: "user", content: "x", images: ["AAAA"] }],
    [{ role: "assistant", content: "", tool_calls: [{ function: { name: "f", arguments: "{}" } }] }],
    [{ role: "assistant", content: "", tool_calls: "x" }],
  ],
  stream: BOOL,
  think: [5, { a: 1 }, "extreme"],
  format: [5, "xml", [1], { type: "nonsense" }],
  options: [
    "x",
    [1],
    { mirostat: 2 },
    { mirostat_eta: 0.1 },
    { temperature: -1 },
    { num_ctx: 10_000_000 },
    { num_ctx: 0 },
    { top_k: 1.5 },
    { top_p: 2 },
    { stop: ["a", "b", "c", "d", "e"] },
    { num_predict: 0 },
    { seed: "x" },
    { repeat_penalty: 0 },
    { wizardry: 1 },
  ],
  keep_alive: ["5m", 0, -1],
  tools: [
    "x",
    [5],
    [{ type: 5, function: { name: "f" } }],
    [{ type: "function", function: { name: "f", parameters: "x" } }],
  ],
  tool_choice: [{ function: {} }, { name: "undeclared" }, "required", 5],
  top_logprobs: [3, 21, "x"],
  temperature: ["hot", -1],
  max_tokens: [0, "x", 1.5],
  stop: [5, [5], Array.from({ length: 5 }, (_, i) => `s${i}`)],
};

const GENERATE_WRONG: Record<string, unknown[]> = {
  prompt: [5, ["x"], { a: 1 }],
  template: ["{{ .Prompt }}", 5],
  images: [["AAAA"]],
  raw: BOOL,
  suffix: [5],
  system: [5],
};

export function ollamaBad(r: Rng): Spec {
  const onChat = chance(r, 0.55);
  const path = onChat ? "/api/chat" : "/api/generate";
  const base: Record<string, unknown> = onChat
    ? { model: MODEL, messages: [{ role: "user", content: "x" }], stream: false, options: { num_predict: 4 } }
    : { model: MODEL, prompt: "x", stream: false, options: { num_predict: 4 } };
  if (chance(r, 0.12)) {
    const { variant, body } = brokenJson(r, JSON.stringify(base));
    return {
      category: "ollama-bad",
      variant: `${path}.json-${variant}`,
      expect: [400],
      method: "POST",
      path,
      headers: { "content-type": "application/json" },
      body,
    };
  }
  if (chance(r, 0.06)) {
    // Ollama's curl-style bodies are read as JSON only without an Origin (a browser's form post is refused).
    return {
      category: "ollama-bad",
      variant: `${path}.form-from-browser`,
      expect: [415],
      method: "POST",
      path,
      headers: { "content-type": "text/plain", origin: "http://localhost:3000" },
      body: JSON.stringify(base),
    };
  }
  const table = onChat ? OLLAMA_WRONG : { ...OLLAMA_WRONG, ...GENERATE_WRONG, messages: ["x"] };
  const { body, field, value } = wrongField(r, table, base);
  if (field === "tool_choice" && chance(r, 0.5) && onChat) body.tools = OLLAMA_TOOLS;
  let expect = [400];
  if (field === "model" && value === "nope:latest") expect = [404];
  // Fields chat ignores on generate, and stream's own booleans.
  if (!onChat && (field === "messages" || field === "tools" || field === "tool_choice" || field === "top_logprobs"))
    expect = [200, 400];
  if (field === "stream" && typeof value === "boolean") expect = [200];
  if (field === "raw" && typeof value === "boolean") expect = [200];
  // A fractional cap is read as a whole number by some clients' servers: a judgement call.
  if (field === "max_tokens" && value === 1.5) expect = [200, 400];
  // Ollama's own cap is options.num_predict (set here); a top-level 0 next to it is a judgement call too.
  if (field === "max_tokens" && value === 0) expect = [200, 400];
  return json(path, body, {
    category: "ollama-bad",
    variant: `${path}.${field}=${short(value)}`,
    expect,
    stream: field === "stream" && value === true,
  });
}

export function ollamaEmbed(r: Rng): Spec {
  const onEmbed = chance(r, 0.8);
  const model = onEmbed ? pick(r, [SERVED.embed, `${SERVED.embed}:latest`]) : pick(r, [MODEL, SERVED.rerank]);
  const expect = onEmbed ? [200, ...RELOADING] : [400, ...RELOADING];
  if (chance(r, 0.3)) {
    const prompt = chance(r, 0.9) ? words(r, between(r, 0, 12)) : 5;
    return json(
      "/api/embeddings",
      { model, prompt },
      {
        category: "ollama-embed",
        variant: `api-embeddings.${onEmbed ? "embed" : "other"}${typeof prompt === "number" ? ".prompt=5" : ""}`,
        expect: typeof prompt === "number" ? [400, ...RELOADING] : expect,
      },
    );
  }
  const form = pick(r, ["string", "strings", "empty", "bad", "long"]);
  const input =
    form === "string"
      ? words(r, 6)
      : form === "strings"
        ? Array.from({ length: between(r, 1, 12) }, () => words(r, 5))
        : form === "empty"
          ? ""
          : form === "bad"
            ? pick(r, [5, [1, 2], { a: 1 }, [null], []])
            : "lorem ipsum ".repeat(between(r, 500, 5000));
  const body: Record<string, unknown> = { model, input };
  if (chance(r, 0.3)) body.truncate = form === "long" ? chance(r, 0.5) : true;
  if (chance(r, 0.2)) body.dimensions = pick(r, [8, 64, 65, 0, "x"]);
  if (chance(r, 0.1)) Object.assign(body, { keep_alive: "5m", options: { temperature: 1 } });
  // An empty list is no input, as Ollama reads it: no vectors, a 200.
  const emptyList = Array.isArray(input) && input.length === 0;
  const ok =
    onEmbed &&
    (form !== "bad" || emptyList) &&
    !(form === "long" && body.truncate === false) &&
    (body.dimensions === undefined || body.dimensions === 8 || body.dimensions === 64);
  return json("/api/embed", body, {
    category: "ollama-embed",
    variant: `api-embed.${onEmbed ? "embed" : "other"}.${form}${body.dimensions !== undefined ? `.dimensions=${short(body.dimensions)}` : ""}`,
    expect: ok ? expect : form === "bad" && !onEmbed ? [400, ...RELOADING] : onEmbed ? [400, ...RELOADING] : expect,
  });
}

export function ollamaDiscovery(r: Rng): Spec {
  const cases: (() => Spec)[] = [
    () => get("/", { category: "ollama-discovery", variant: "GET /", expect: [200] }),
    () => ({ ...get("/", { category: "ollama-discovery", variant: "HEAD /", expect: [200] }), method: "HEAD" }),
    () => get("/api/version", { category: "ollama-discovery", variant: "GET /api/version", expect: [200] }),
    () => get("/api/tags", { category: "ollama-discovery", variant: "GET /api/tags", expect: [200] }),
    () => get("/api/ps", { category: "ollama-discovery", variant: "GET /api/ps", expect: [200] }),
    () =>
      json(
        "/api/show",
        { model: pick(r, [MODEL, `${MODEL}:latest`, SERVED.embed, SERVED.rerank]) },
        { category: "ollama-discovery", variant: "show", expect: [200] },
      ),
    () =>
      json("/api/show", { model: "nope" }, { category: "ollama-discovery", variant: "show.unknown", expect: [404] }),
    () =>
      json("/api/show", pick(r, [{}, { model: 5 }, [], { model: "" }]), {
        category: "ollama-discovery",
        variant: "show.bad",
        expect: [400],
      }),
    () =>
      json(
        "/api/show",
        { name: MODEL, verbose: true },
        { category: "ollama-discovery", variant: "show.name", expect: [200, 400] },
      ),
    () => {
      const [method, path] = pick(r, [
        ["POST", "/api/pull"],
        ["POST", "/api/push"],
        ["POST", "/api/create"],
        ["POST", "/api/copy"],
        ["DELETE", "/api/delete"],
        ["POST", "/api/blobs/sha256:00"],
        ["GET", "/api/blobs/sha256:00"],
        ["HEAD", "/api/blobs/sha256:00"],
      ] as const);
      return {
        category: "ollama-discovery",
        variant: `${method} ${path}`,
        expect: [501],
        method,
        path,
        ...(method === "POST" || method === "DELETE"
          ? { headers: { "content-type": "application/json" }, body: JSON.stringify({ model: MODEL, name: MODEL }) }
          : {}),
      };
    },
    () => {
      const [method, path, expect] = pick(r, [
        ["GET", "/api/chat", [405]],
        ["GET", "/api/generate", [405]],
        ["POST", "/api/tags", [405]],
        ["DELETE", "/api/pull", [405]],
        ["POST", "/", [405]],
        ["GET", "/api/nothing", [404]],
        ["POST", "/api/nothing", [404]],
        ["GET", "/api", [404]],
        ["GET", "/api/", [404]],
      ] as const);
      return {
        category: "ollama-discovery",
        variant: `${method} ${path}`,
        expect: [...expect],
        method,
        path,
        ...(method === "POST" ? { headers: { "content-type": "application/json" }, body: "{}" } : {}),
      };
    },
  ];
  return pick(r, cases)();
}
