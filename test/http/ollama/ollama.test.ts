// Ollama's /api/chat and /api/generate (docs/api/ollama.md) driven through the
// official `ollama` npm client against the built-in model: streamed records
// and whole replies that agree, think, format with a schema that validates,
// tools in the history, options, logprobs, raw and templated generate, FIM on
// the FIM fixture, preloads, a repeated conversation served from the cache,
// and errors in Ollama's shape.
import Ajv from "ajv";
import { describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { Ollama, type ChatResponse, type GenerateResponse, type Message } from "ollama";
import { SCRIPTED_REASONING, SCRIPTED_REPLY } from "../../../src/fixtures/index.ts";
import { post, postJson, slots, startTestServer, useServer } from "../support.ts";

const s = useServer({ fixture: "tiny-chat", maxBatch: 2 });
const client = () => new Ollama({ host: s.url });
const hi: Message[] = [{ role: "user", content: "Hi there, who are you?" }];

/** A raw POST, for what the client cannot send: status and parsed body. */
const raw = (path: string, body: unknown) => postJson(s, path, body);

function expectTerminal(r: ChatResponse | GenerateResponse) {
  expect(r.done).toBe(true);
  expect(r.done_reason).toBe("stop");
  expect(r.eval_count).toBeGreaterThan(0);
  expect(r.prompt_eval_count).toBeGreaterThan(0);
  for (const key of ["total_duration", "prompt_eval_duration", "eval_duration"] as const) {
    expect(Number.isInteger(r[key])).toBe(true);
    expect(r[key]).toBeGreaterThan(0);
  }
  expect(r.total_duration).toBeGreaterThanOrEqual(r.prompt_eval_duration + r.eval_duration);
  expect(r.load_duration).toBe(0);
  expect(typeof (r as any).prompt_eval_cached_count).toBe("number");
}

describe("chat", () => {
  test("stream: false: the terminal record with the whole reply, counts and timings", async () => {
    const r = await client().chat({ model: s.model, messages: hi, stream: false });
    expect(r.model).toBe(s.model);
    expect(r.message).toEqual({ role: "assistant", content: SCRIPTED_REPLY });
    expectTerminal(r);
  });

  test("streamed by default: records that add up to the same reply, then the terminal record", async () => {
    const parts: ChatResponse[] = [];
    for await (const part of await client().chat({ model: `${s.model}:latest`, messages: hi, stream: true }))
      parts.push(part);
    const last = parts.at(-1)!;
    expect(parts.slice(0, -1).every((p) => !p.done)).toBe(true);
    expect(
      parts
        .slice(0, -1)
        .map((p) => p.message.content)
        .join(""),
    ).toBe(SCRIPTED_REPLY);
    expect(last.message.content).toBe("");
    expectTerminal(last);
    // A raw request without `stream` streams NDJSON too.
    const res = await post(s, "/api/chat", { model: s.model, messages: hi });
    expect(res.headers.get("content-type")).toContain("application/x-ndjson");
    const lines = (await res.text())
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.at(-1).done).toBe(true);
  });

  test("think: the reasoning apart in message.thinking, whole and streamed; think false: none", async () => {
    const r = await client().chat({ model: s.model, messages: hi, think: true, stream: false });
    expect(r.message.thinking).toBe(SCRIPTED_REASONING);
    expect(r.message.content).toBe(SCRIPTED_REPLY);
    let thinking = "";
    let content = "";
    for await (const part of await client().chat({ model: s.model, messages: hi, think: true, stream: true })) {
      thinking += part.message.thinking ?? "";
      content += part.message.content;
    }
    expect([thinking, content]).toEqual([SCRIPTED_REASONING, SCRIPTED_REPLY]);
    const off = await client().chat({ model: s.model, messages: hi, think: false, stream: false });
    expect(off.message.thinking).toBeUndefined();
    expect(off.message.content).toBe(SCRIPTED_REPLY);
  });

  test("format: a JSON schema the reply validates against; format json: a JSON object", async () => {
    const schema = {
      type: "object",
      properties: { city: { type: "string" }, days: { type: "integer", minimum: 1, maximum: 7 } },
      required: ["city", "days"],
      additionalProperties: false,
    };
    const r = await client().chat({ model: s.model, messages: hi, format: schema, stream: false });
    expect(new Ajv().compile(schema)(JSON.parse(r.message.content))).toBe(true);
    const j = await client().chat({ model: s.model, messages: hi, format: "json", stream: false });
    expect(typeof JSON.parse(j.message.content)).toBe("object");
  });

  test("tools and a history with tool calls and results: rendered, answered", async () => {
    const tools = [
      {
        type: "function",
        function: {
          name: "get_weather",
          description: "Weather",
          parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
        },
      },
    ];
    const messages: Message[] = [
      { role: "system", content: "You can check the weather." },
      ...hi,
      {
        role: "assistant",
        content: "",
        tool_calls: [{ function: { name: "get_weather", arguments: { city: "Oslo" } } }],
      },
      { role: "tool", content: "12 degrees", tool_name: "get_weather" },
    ];
    const r = await client().chat({ model: s.model, messages, tools, stream: false });
    expect(r.message.content).toBe(SCRIPTED_REPLY);
  });

  test("options: num_predict caps the reply (done_reason length), stop cuts it", async () => {
    const capped = await client().chat({
      model: s.model,
      messages: hi,
      stream: false,
      options: { num_predict: 3, temperature: 0, seed: 42 },
    });
    expect(capped.done_reason).toBe("length");
    expect(capped.eval_count).toBe(3);
    const stopped = await client().chat({
      model: s.model,
      messages: hi,
      stream: false,
      options: { stop: ["built-in"] },
    });
    expect(stopped.message.content).toBe(SCRIPTED_REPLY.slice(0, SCRIPTED_REPLY.indexOf("built-in")));
    const filled = await client().chat({
      model: s.model,
      messages: hi,
      stream: false,
      options: { num_predict: -1, num_ctx: s.server.registry.default!.contextWindow },
    });
    expect(filled.message.content).toBe(SCRIPTED_REPLY);
  });

  test("logprobs: one entry per generated token, with the top alternatives asked for", async () => {
    const r = (await client().chat({
      model: s.model,
      messages: hi,
      stream: false,
      logprobs: true,
      top_logprobs: 2,
    })) as ChatResponse;
    expect(r.logprobs).toHaveLength(r.eval_count);
    for (const lp of r.logprobs!) {
      expect(typeof lp.token).toBe("string");
      expect(lp.logprob).toBeLessThanOrEqual(0);
      expect(lp.top_logprobs).toHaveLength(2);
    }
  });

  test("a conversation sent twice: the second time its prompt is served from the cache", async () => {
    const messages: Message[] = [{ role: "system", content: `Notes ${crypto.randomUUID()} `.repeat(40) }, ...hi];
    const first = await client().chat({ model: s.model, messages, stream: false });
    const second = await client().chat({ model: s.model, messages, stream: false });
    expect((first as any).prompt_eval_cached_count).toBeLessThan(16);
    expect((second as any).prompt_eval_cached_count).toBe(second.prompt_eval_count - 1);
  });

  test("empty messages preload: one load record, no generation", async () => {
    const before = (await slots(s)).totals.ticks;
    const r = await client().chat({ model: s.model, messages: [], stream: false });
    expect(r).toMatchObject({
      model: s.model,
      done: true,
      done_reason: "load",
      message: { role: "assistant", content: "" },
    });
    const streamed: ChatResponse[] = [];
    for await (const part of await client().chat({ model: s.model, messages: [], stream: true })) streamed.push(part);
    expect(streamed.map((p) => p.done_reason)).toEqual(["load"]);
    expect((await slots(s)).totals.ticks).toBe(before);
  });
});

describe("what other clients send", () => {
  const tools = [
    {
      type: "function",
      function: {
        name: "get_weather",
        description: "Weather",
        parameters: {
          type: "object",
          properties: { city: { type: "string", minLength: 2 }, days: { type: "integer", minimum: 1, maximum: 7 } },
          required: ["city", "days"],
        },
      },
    },
  ];
  const validate = new Ajv().compile(tools[0]!.function.parameters);

  test("tool_choice required: a call whose arguments are an object that validates, whole on one record before the terminal one", async () => {
    const whole = await raw("/api/chat", {
      model: s.model,
      messages: hi,
      tools,
      tool_choice: "required",
      stream: false,
    });
    expect(whole.status).toBe(200);
    const calls = whole.json.message.tool_calls;
    expect(calls).toHaveLength(1);
    expect(calls[0].function.name).toBe("get_weather");
    expect(validate(calls[0].function.arguments)).toBe(true);
    const res = await post(s, "/api/chat", {
      model: s.model,
      messages: hi,
      tools,
      tool_choice: { type: "function", function: { name: "get_weather" } },
    });
    const lines = (await res.text())
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    const withCalls = lines.filter((l) => l.message.tool_calls);
    expect(withCalls).toHaveLength(1);
    expect(lines.indexOf(withCalls[0])).toBe(lines.length - 2);
    expect(validate(withCalls[0].message.tool_calls[0].function.arguments)).toBe(true);
    expect(lines.at(-1).done).toBe(true);
  });

  test("sampling fields at the top level are read as options (options win); unknown fields are ignored", async () => {
    const capped = await raw("/api/chat", {
      model: s.model,
      messages: hi,
      stream: false,
      max_output_tokens: 3,
      temperature: 0,
      user: "u",
      echo: false,
    });
    expect(capped.status).toBe(200);
    expect(capped.json.eval_count).toBe(3);
    const optionsWin = await raw("/api/chat", {
      model: s.model,
      messages: hi,
      stream: false,
      max_tokens: 3,
      options: { num_predict: 5 },
    });
    expect(optionsWin.json.eval_count).toBe(5);
    const stopped = await raw("/api/generate", { model: s.model, prompt: "Hi", stream: false, stop: ["built-in"] });
    expect(stopped.json.response).toBe(SCRIPTED_REPLY.slice(0, SCRIPTED_REPLY.indexOf("built-in")));
  });

  test("num_ctx below the window holds the request to it; server knobs (num_gpu, num_thread) change nothing", async () => {
    const prompt = (await raw("/api/chat", { model: s.model, messages: hi, stream: false })).json.prompt_eval_count;
    const held = await raw("/api/chat", {
      model: s.model,
      messages: hi,
      stream: false,
      options: { num_ctx: prompt + 4, num_gpu: 99, num_thread: 4 },
    });
    expect(held.status).toBe(200);
    expect(held.json.eval_count).toBe(4);
    expect(held.json.done_reason).toBe("length");
  });

  test("generate's records carry an empty context (the AI SDK's Ollama provider requires it on every record)", async () => {
    const r = await raw("/api/generate", { model: s.model, prompt: "Hi", stream: false });
    expect(r.json.context).toEqual([]);
    const res = await post(s, "/api/generate", { model: s.model, prompt: "Hi" });
    const lines = (await res.text())
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.every((l) => Array.isArray(l.context))).toBe(true);
  });

  test("samplers this server lacks, at their off values, are accepted", async () => {
    const r = await raw("/api/chat", {
      model: s.model,
      messages: hi,
      stream: false,
      options: { mirostat: 0, tfs_z: 1, typical_p: 1, repeat_last_n: 64, penalize_newline: false },
    });
    expect(r.status).toBe(200);
    expect(
      (await raw("/api/chat", { model: s.model, messages: hi, stream: false, options: { mirostat: 2 } })).status,
    ).toBe(400);
  });

  test("Ollama's own `curl -d` examples (a form content type, no Origin) are read as JSON; a page's (with Origin) is refused", async () => {
    const body = JSON.stringify({ model: s.model, prompt: "Hi", stream: false });
    const curl = await fetch(`${s.url}/api/generate`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body,
    });
    expect(curl.status).toBe(200);
    expect(((await curl.json()) as any).response).toBe(SCRIPTED_REPLY);
    const page = await fetch(`${s.url}/api/generate`, {
      method: "POST",
      headers: { "content-type": "text/plain", origin: s.url },
      body,
    });
    expect(page.status).toBe(415);
    // The other families keep their JSON-only rule.
    const openai = await fetch(`${s.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body,
    });
    expect(openai.status).toBe(415);
  });
});

describe("generate", () => {
  test("templated: the prompt as the user turn; whole and streamed agree", async () => {
    const r = await client().generate({ model: s.model, prompt: "Hi there", system: "Be brief.", stream: false });
    expect(r.response).toBe(SCRIPTED_REPLY);
    expectTerminal(r);
    let text = "";
    let last: GenerateResponse | undefined;
    for await (const part of await client().generate({ model: s.model, prompt: "Hi there", stream: true })) {
      text += part.response;
      last = part;
    }
    expect(text).toBe(SCRIPTED_REPLY);
    expectTerminal(last!);
  });

  test("think on generate: reasoning in `thinking`", async () => {
    const r = await client().generate({ model: s.model, prompt: "Hi", think: true, stream: false });
    expect(r.thinking).toBe(SCRIPTED_REASONING);
    expect(r.response).toBe(SCRIPTED_REPLY);
  });

  test("raw: the prompt as given, no template (the built-in model answers a prompt ending in a blank line)", async () => {
    const r = await client().generate({ model: s.model, prompt: "Say hello.\n\n", raw: true, stream: false });
    expect(r.response).toBe(SCRIPTED_REPLY);
    const refused = await raw("/api/generate", { model: s.model, prompt: "x", raw: true, system: "no", stream: false });
    expect(refused.status).toBe(400);
    expect(refused.json.error).toContain("system");
  });

  test("an empty prompt preloads", async () => {
    const r = await client().generate({ model: s.model, prompt: "", stream: false });
    expect(r).toMatchObject({ done: true, done_reason: "load", response: "" });
  });

  test("suffix on a model without FIM tokens: 400", async () => {
    const r = await raw("/api/generate", { model: s.model, prompt: "def f(", suffix: ")", stream: false });
    expect(r.status).toBe(400);
    expect(r.json.error).toContain("fill-in-the-middle");
  });
});

describe("errors in Ollama's shape", () => {
  test("an unknown model: 404 through the client", async () => {
    const err = await client()
      .chat({ model: "llama3:8b", messages: hi, stream: false })
      .catch((e) => e);
    expect(err.status_code).toBe(404);
    expect(err.error).toContain("llama3:8b");
    const res = await raw("/api/generate", { model: "nope", prompt: "x" });
    expect(res).toMatchObject({ status: 404, json: { error: "model 'nope' not found" } });
  });

  const refusals: [string, string, Record<string, unknown>, string][] = [
    ["an unsupported option", "/api/chat", { options: { tfs_z: 0.9 } }, "unsupported option: tfs_z"],
    ["num_ctx above the window", "/api/chat", { options: { num_ctx: 10_000_000 } }, "num_ctx"],
    ["num_ctx the prompt does not fit", "/api/chat", { options: { num_ctx: 4 } }, "num_ctx"],
    ["an option out of range", "/api/chat", { options: { temperature: -1 } }, "options.temperature"],
    ["five stop strings", "/api/chat", { options: { stop: ["a", "b", "c", "d", "e"] } }, "at most 4"],
    ["images", "/api/chat", { messages: [{ role: "user", content: "x", images: ["aGVsbG8="] }] }, "images"],
    ["images on generate", "/api/generate", { prompt: "x", images: ["aGVsbG8="] }, "images"],
    ["keep_alive", "/api/chat", { keep_alive: "5m" }, "keep_alive"],
    [
      "an option this server cannot sample with",
      "/api/chat",
      { options: { mirostat: 1 } },
      "unsupported option: mirostat",
    ],
    [
      "a tool_choice naming an undeclared tool",
      "/api/chat",
      { tool_choice: { type: "function", function: { name: "nope" } } },
      "nope",
    ],
    ["a template", "/api/generate", { prompt: "x", template: "{{ .Prompt }}" }, "template"],
    ["a bad role", "/api/chat", { messages: [{ role: "robot", content: "x" }] }, "role"],
    ["a bad format", "/api/chat", { format: "yaml" }, "format"],
  ];
  for (const [name, path, extra, message] of refusals) {
    test(`${name}: 400 {"error"}`, async () => {
      const base =
        path === "/api/chat" ? { model: s.model, messages: hi, stream: false } : { model: s.model, stream: false };
      const r = await raw(path, { ...base, ...extra });
      expect(r.status).toBe(400);
      expect(Object.keys(r.json)).toEqual(["error"]);
      expect(r.json.error).toContain(message);
    });
  }

  test('malformed JSON and a missing model: 400 {"error"}', async () => {
    for (const body of ["{nope", { messages: hi }]) {
      const r = await raw("/api/chat", body);
      expect(r.status).toBe(400);
      expect(typeof r.json.error).toBe("string");
    }
  });

  test("the client's error class carries the message", async () => {
    const err = await client()
      .chat({ model: s.model, messages: hi, stream: false, options: { mirostat: 2 } })
      .catch((e) => e);
    expect(err.name).toBe("ResponseError");
    expect(err.status_code).toBe(400);
    expect(err.error).toBe("unsupported option: mirostat");
  });
});

describe("fill-in-the-middle on the FIM fixture", () => {
  test("generate with suffix: the middle, kept out of the session log, in the completion class", async () => {
    const fim = await startTestServer({ fixture: "tiny-fim", maxContext: 4096, maxBatch: 2 });
    try {
      const c = new Ollama({ host: fim.url });
      const r = await c.generate({
        model: fim.model,
        prompt: "def add(a, b):\n    ",
        suffix: "\n\nprint(add(1, 2))",
        stream: false,
        options: { num_predict: 8, temperature: 0 },
      });
      expect(r.done).toBe(true);
      expect(r.eval_count).toBeGreaterThan(0);
      expect(r.eval_count).toBeLessThanOrEqual(8);
      const streamed: GenerateResponse[] = [];
      for await (const part of await c.generate({
        model: fim.model,
        prompt: "def add(a, b):\n    ",
        suffix: "\n\nprint(add(1, 2))",
        stream: true,
        options: { num_predict: 8, temperature: 0 },
      }))
        streamed.push(part);
      expect(streamed.map((p) => p.response).join("")).toBe(r.response!);
      const refused = await post(fim, "/api/generate", {
        model: fim.model,
        prompt: "x",
        suffix: "y",
        format: "json",
        stream: false,
      });
      expect(refused.status).toBe(400);
    } finally {
      await fim.server.close();
      rmSync(fim.sessions, { recursive: true, force: true });
    }
  });
});
