// The Anthropic Messages API (docs/api/anthropic.md) driven through the
// official @anthropic-ai/sdk against the built-in model: whole and streamed
// replies that agree, system blocks, stop sequences, tool_use / tool_result
// round trips held to the tools' schemas, the thinking switch, count_tokens,
// cache_control checks, aliases, and errors in Anthropic's envelope through
// the SDK's error classes.
import Anthropic from "@anthropic-ai/sdk";
import Ajv from "ajv";
import { describe, expect, test } from "bun:test";
import { basename } from "node:path";
import { SCRIPTED_REASONING, SCRIPTED_REPLY } from "../../../src/fixtures/index.ts";
import { fixturePath } from "../../support/models.ts";
import { getJson, post, useServer } from "../support.ts";

const MODEL_ID = basename(await fixturePath("tiny-chat"), ".gguf");
const s = useServer({
  fixture: "tiny-chat",
  maxBatch: 2,
  extraArgs: ["--alias", `claude-*=${MODEL_ID}`, "--alias", `my-model=${MODEL_ID}`],
});
const client = () => new Anthropic({ baseURL: s.url, apiKey: "sk-local", maxRetries: 0, timeout: 120_000 });
const ajv = new Ajv({ strict: false });

const hi: Anthropic.MessageParam[] = [{ role: "user", content: "Hi there, who are you?" }];
const weatherTool: Anthropic.Tool = {
  name: "get_weather",
  description: "Current weather for a city",
  input_schema: {
    type: "object",
    properties: { city: { type: "string", minLength: 2 }, days: { type: "integer", minimum: 1, maximum: 7 } },
    required: ["city", "days"],
    additionalProperties: false,
  },
};
const timeTool: Anthropic.Tool = {
  name: "get_time",
  description: "The time in a zone",
  input_schema: { type: "object", properties: { zone: { type: "string" } }, required: ["zone"] },
};

/** Anthropic's SSE: named events. */
function parseEvents(raw: string): { event: string; data: any }[] {
  const out: { event: string; data: any }[] = [];
  for (const block of raw.split("\n\n")) {
    if (block.trim() === "") continue;
    let event = "";
    let data: any;
    for (const line of block.split("\n")) {
      if (line.startsWith("event: ")) event = line.slice(7);
      else if (line.startsWith("data: ")) data = JSON.parse(line.slice(6));
      else if (!line.startsWith(":")) throw new Error(`unexpected SSE line ${JSON.stringify(line)}`);
    }
    out.push({ event, data });
  }
  return out;
}

const promptTokens = (u: Anthropic.Usage) =>
  u.input_tokens + (u.cache_read_input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0);

describe("messages.create and messages.stream", () => {
  test("a plain turn: the fixed reply, end_turn, Anthropic's message shape", async () => {
    const m = await client().messages.create({ model: s.model, max_tokens: 64, messages: hi });
    expect(m.id).toMatch(/^msg_superfluid_\d+$/);
    expect(m.type).toBe("message");
    expect(m.role).toBe("assistant");
    expect(m.model).toBe(s.model);
    expect(m.content).toEqual([{ type: "text", text: SCRIPTED_REPLY } as any]);
    expect(m.stop_reason).toBe("end_turn");
    expect(m.stop_sequence).toBeNull();
    expect(m.usage.output_tokens).toBeGreaterThan(0);
    expect(m.usage.input_tokens).toBeGreaterThan(0);
  });

  test("the stream's accumulated finalMessage equals the whole reply at temperature 0", async () => {
    const params = { model: s.model, max_tokens: 64, temperature: 0, system: "Answer briefly.", messages: hi } as const;
    const whole = await client().messages.create(params);
    const final = await client().messages.stream(params).finalMessage();
    expect(final.content as unknown).toEqual(whole.content);
    expect(final.stop_reason).toBe(whole.stop_reason);
    expect(final.stop_sequence).toBe(whole.stop_sequence);
    expect(final.usage.output_tokens).toBe(whole.usage.output_tokens);
    expect(promptTokens(final.usage)).toBe(promptTokens(whole.usage));
  });

  test("the raw stream: message_start, ping, blocks opened, grown and closed, message_delta, message_stop", async () => {
    const res = await post(s, "/v1/messages?beta=true", { model: s.model, max_tokens: 64, messages: hi, stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const events = parseEvents(await res.text());
    const names = events.map((e) => e.event);
    expect(names[0]).toBe("message_start");
    expect(names[1]).toBe("ping");
    expect(names.at(-2)).toBe("message_delta");
    expect(names.at(-1)).toBe("message_stop");
    for (const e of events) expect(e.data.type).toBe(e.event);
    expect(events[0]!.data.message).toMatchObject({
      type: "message",
      role: "assistant",
      content: [],
      stop_reason: null,
    });
    const start = events.find((e) => e.event === "content_block_start")!;
    expect(start.data).toEqual({ type: "content_block_start", index: 0, content_block: { type: "text", text: "" } });
    const text = events
      .filter((e) => e.event === "content_block_delta")
      .map((e) => e.data.delta.text)
      .join("");
    expect(text).toBe(SCRIPTED_REPLY);
    expect(events.filter((e) => e.event === "content_block_stop")).toHaveLength(1);
    const delta = events.at(-2)!.data;
    expect(delta.delta).toEqual({ stop_reason: "end_turn", stop_sequence: null });
    expect(delta.usage.output_tokens).toBeGreaterThan(0);
  });

  test("anthropic-version, anthropic-beta and a bearer key are accepted, none required", async () => {
    const variants: Record<string, string>[] = [
      {},
      { "anthropic-version": "2023-06-01", "anthropic-beta": "prompt-caching-2024-07-31" },
      { authorization: "Bearer sk-local" },
      { "x-api-key": "anything" },
    ];
    for (const headers of variants) {
      const res = await post(
        s,
        "/v1/messages",
        { model: s.model, max_tokens: 16, messages: hi },
        { headers: { "content-type": "application/json", ...headers } },
      );
      expect(res.status).toBe(200);
      expect(((await res.json()) as any).type).toBe("message");
    }
  });
});

describe("system, stop sequences, thinking", () => {
  test("system as a string and as text blocks: the same prompt", async () => {
    const a = await client().messages.countTokens({ model: s.model, system: "You are terse.\nAlways.", messages: hi });
    const b = await client().messages.countTokens({
      model: s.model,
      system: [
        { type: "text", text: "You are terse." },
        { type: "text", text: "Always." },
      ],
      messages: hi,
    });
    expect(b.input_tokens).toBe(a.input_tokens);
    const none = await client().messages.countTokens({ model: s.model, messages: hi });
    expect(a.input_tokens).toBeGreaterThan(none.input_tokens);
  });

  test("Claude Code's billing header block is left out of the prompt; a leading system message joins the system text", async () => {
    const plain = await client().messages.countTokens({
      model: s.model,
      system: [{ type: "text", text: "You are an agent." }],
      messages: hi,
    });
    for (const version of ["2.1.0.abc", "2.1.1.def"]) {
      const billed = await client().messages.countTokens({
        model: s.model,
        system: [
          { type: "text", text: `x-anthropic-billing-header: cc_version=${version}; cc_entrypoint=sdk-cli;` },
          { type: "text", text: "You are an agent." },
        ],
        messages: hi,
      });
      expect(billed.input_tokens).toBe(plain.input_tokens);
    }
    const asMessage = await post(s, "/v1/messages/count_tokens", {
      model: s.model,
      messages: [{ role: "system", content: "You are an agent." }, ...hi],
    });
    expect(((await asMessage.json()) as any).input_tokens).toBe(plain.input_tokens);
  });

  test("stop_sequences: the reply stops before the match, stop_reason stop_sequence names it, whole and streamed", async () => {
    const params = { model: s.model, max_tokens: 64, messages: hi, stop_sequences: ["never-appears", "built-in"] };
    const m = await client().messages.create(params);
    expect(m.stop_reason).toBe("stop_sequence");
    expect(m.stop_sequence).toBe("built-in");
    const text = (m.content[0] as Anthropic.TextBlock).text;
    expect(SCRIPTED_REPLY.startsWith(text)).toBe(true);
    expect(text).not.toContain("built-in");
    const final = await client().messages.stream(params).finalMessage();
    expect(final.stop_reason).toBe("stop_sequence");
    expect(final.stop_sequence).toBe("built-in");
    expect(final.content as unknown).toEqual(m.content);
  });

  test("max_tokens cuts the reply: stop_reason max_tokens", async () => {
    const m = await client().messages.create({ model: s.model, max_tokens: 3, messages: hi });
    expect(m.stop_reason).toBe("max_tokens");
    expect(m.usage.output_tokens).toBe(3);
  });

  test("thinking enabled: a thinking block with an empty signature, then the text; disabled or unset: text only", async () => {
    const on = await client().messages.create({
      model: s.model,
      max_tokens: 2048,
      thinking: { type: "enabled", budget_tokens: 1024 },
      messages: hi,
    });
    expect(on.content).toEqual([
      { type: "thinking", thinking: SCRIPTED_REASONING, signature: "" } as any,
      { type: "text", text: SCRIPTED_REPLY } as any,
    ]);
    const streamed = await client()
      .messages.stream({
        model: s.model,
        max_tokens: 2048,
        temperature: 0,
        thinking: { type: "enabled", budget_tokens: 1024 },
        messages: hi,
      })
      .finalMessage();
    expect(streamed.content as unknown).toEqual(on.content);
    for (const thinking of [{ type: "disabled" as const }, undefined, { type: "adaptive" }]) {
      const off = await client().messages.create({
        model: s.model,
        max_tokens: 64,
        messages: hi,
        ...(thinking ? { thinking: thinking as any } : {}),
      });
      expect(off.content).toEqual([{ type: "text", text: SCRIPTED_REPLY } as any]);
    }
  });

  test("earlier thinking blocks are history; redacted_thinking and unknown blocks are skipped", async () => {
    const m = await client().messages.create({
      model: s.model,
      max_tokens: 64,
      messages: [
        ...hi,
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "earlier", signature: "" },
            { type: "redacted_thinking", data: "opaque" },
            { type: "text", text: "Hello." },
          ],
        },
        {
          role: "user",
          content: [
            { type: "text", text: "Again?" },
            { type: "search_result", source: "x", title: "t", content: [{ type: "text", text: "r" }] } as any,
          ],
        },
      ],
    });
    expect(m.stop_reason).toBe("end_turn");
  });
});

describe("tools", () => {
  const validate = ajv.compile(weatherTool.input_schema);

  test("tool_choice any: a tool_use whose input validates; the tool_result round trip ends the turn", async () => {
    const messages: Anthropic.MessageParam[] = [{ role: "user", content: "What is the weather in Oslo for 3 days?" }];
    const m = await client().messages.create({
      model: s.model,
      max_tokens: 256,
      tools: [weatherTool, timeTool],
      tool_choice: { type: "any" },
      messages,
    });
    expect(m.stop_reason).toBe("tool_use");
    const calls = m.content.filter((b): b is Anthropic.ToolUseBlock => b.type === "tool_use");
    expect(calls.length).toBeGreaterThanOrEqual(1);
    for (const call of calls) {
      expect(call.id).toMatch(/^toolu_\d+$/);
      expect(["get_weather", "get_time"]).toContain(call.name);
      if (call.name === "get_weather") expect(validate(call.input)).toBe(true);
      else expect(typeof (call.input as any).zone).toBe("string");
    }
    messages.push({ role: "assistant", content: m.content });
    messages.push({
      role: "user",
      content: calls.map((c, i) => ({
        type: "tool_result" as const,
        tool_use_id: c.id,
        content: i === 0 ? "12 degrees, cloudy" : [{ type: "text" as const, text: "noon" }],
        is_error: false,
      })),
    });
    const next = await client().messages.create({
      model: s.model,
      max_tokens: 64,
      tools: [weatherTool, timeTool],
      messages,
    });
    expect(next.stop_reason).toBe("end_turn");
    expect(next.content).toEqual([{ type: "text", text: SCRIPTED_REPLY } as any]);
  });

  test("tool_choice tool: a call to that tool; streamed, input_json_delta fragments build the same input", async () => {
    const params = {
      model: s.model,
      max_tokens: 256,
      temperature: 0,
      tools: [weatherTool, timeTool],
      tool_choice: { type: "tool" as const, name: "get_weather" },
      messages: hi,
    };
    const m = await client().messages.create(params);
    expect(m.stop_reason).toBe("tool_use");
    const call = m.content.find((b) => b.type === "tool_use") as Anthropic.ToolUseBlock;
    expect(call.name).toBe("get_weather");
    expect(validate(call.input)).toBe(true);
    const res = await post(s, "/v1/messages", { ...params, stream: true });
    const events = parseEvents(await res.text());
    const start = events.find((e) => e.event === "content_block_start" && e.data.content_block.type === "tool_use")!;
    expect(start.data.content_block).toMatchObject({ type: "tool_use", name: "get_weather", input: {} });
    const fragments = events
      .filter((e) => e.data.delta?.type === "input_json_delta")
      .map((e) => e.data.delta.partial_json);
    expect(fragments.length).toBeGreaterThan(1);
    expect(JSON.parse(fragments.join(""))).toEqual(call.input as any);
    const final = await client().messages.stream(params).finalMessage();
    expect(final.content as unknown).toEqual(
      m.content.map((b) => (b.type === "tool_use" ? { ...b, id: expect.any(String) } : b)) as any,
    );
  });

  test("disable_parallel_tool_use: exactly one call", async () => {
    const m = await client().messages.create({
      model: s.model,
      max_tokens: 256,
      tools: [weatherTool, timeTool],
      tool_choice: { type: "any", disable_parallel_tool_use: true },
      messages: hi,
    });
    expect(m.content.filter((b) => b.type === "tool_use")).toHaveLength(1);
  });

  test("tool_choice none and auto: the model answers in text", async () => {
    for (const tool_choice of [{ type: "none" as const }, { type: "auto" as const }]) {
      const m = await client().messages.create({
        model: s.model,
        max_tokens: 64,
        tools: [weatherTool],
        tool_choice,
        messages: hi,
      });
      expect(m.stop_reason).toBe("end_turn");
      expect(m.content).toEqual([{ type: "text", text: SCRIPTED_REPLY } as any]);
    }
  });

  test("a tool_choice naming an undeclared tool is a 400", async () => {
    const err = await client()
      .messages.create({
        model: s.model,
        max_tokens: 64,
        tools: [weatherTool],
        tool_choice: { type: "tool", name: "nope" },
        messages: hi,
      })
      .catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect(err.error.error.message).toContain("nope");
  });
});

describe("count_tokens", () => {
  test("equals the prompt tokens of a real request with the same system, tools and messages", async () => {
    const body = {
      model: s.model,
      system: "Be brief.",
      tools: [weatherTool],
      messages: [
        ...hi,
        { role: "assistant" as const, content: "Hello." },
        { role: "user" as const, content: "Weather?" },
      ],
    };
    const counted = await client().messages.countTokens(body);
    const m = await client().messages.create({ ...body, max_tokens: 16 });
    expect(counted.input_tokens).toBe(promptTokens(m.usage));
    const thinking = await client().messages.countTokens({
      ...body,
      thinking: { type: "enabled", budget_tokens: 1024 },
    });
    const mt = await client().messages.create({
      ...body,
      max_tokens: 2048,
      thinking: { type: "enabled", budget_tokens: 1024 },
    });
    expect(thinking.input_tokens).toBe(promptTokens(mt.usage));
  });
});

describe("cache_control", () => {
  const user = (text: string, cache_control?: Anthropic.CacheControlEphemeral): Anthropic.MessageParam => ({
    role: "user",
    content: [{ type: "text", text, ...(cache_control ? { cache_control } : {}) }],
  });

  test("breakpoints pin the prefix: creation counts what they pin beyond the cache, and the usage adds up", async () => {
    const system: Anthropic.TextBlockParam[] = [
      {
        type: "text",
        text: `Project notes ${crypto.randomUUID()}. `.repeat(20),
        cache_control: { type: "ephemeral", ttl: "1h" },
      },
    ];
    const first = await client().messages.create({
      model: s.model,
      max_tokens: 16,
      system,
      messages: [user("first question", { type: "ephemeral" })],
    });
    // Nothing of this system prompt was seen before (at most the prompt's first tokens).
    expect(first.usage.cache_read_input_tokens!).toBeLessThan(16);
    expect(first.usage.cache_creation_input_tokens).toBeGreaterThan(100);
    const count = await client().messages.countTokens({ model: s.model, system, messages: [user("first question")] });
    expect(promptTokens(first.usage)).toBe(count.input_tokens);
    const second = await client().messages.create({
      model: s.model,
      max_tokens: 16,
      system,
      messages: [user("another question", { type: "ephemeral" })],
    });
    // The system prompt is read from the cache now.
    expect(second.usage.cache_read_input_tokens!).toBeGreaterThanOrEqual(first.usage.cache_creation_input_tokens! - 16);
    const without = await client().messages.create({
      model: s.model,
      max_tokens: 16,
      messages: [user(`no breakpoints ${crypto.randomUUID()}`)],
    });
    expect(without.usage.cache_creation_input_tokens).toBe(0);
  });

  test("the pins show in /slots", async () => {
    const body = await getJson(s, "/slots");
    expect(body.json[0].prefix_cache.pins.count).toBeGreaterThan(0);
    expect(body.json[0].prefix_cache.pins.tokens).toBeGreaterThan(0);
  });

  const refusals: [string, Partial<Anthropic.MessageCreateParamsNonStreaming>, string][] = [
    [
      "five breakpoints",
      {
        messages: [1, 2, 3, 4, 5]
          .map((i) => user(`q${i}`, { type: "ephemeral" }))
          .flatMap((m) => [m, { role: "assistant" as const, content: "ok" }])
          .slice(0, -1),
      },
      "maximum of 4",
    ],
    [
      "a 1h breakpoint after a 5m one",
      {
        system: [{ type: "text", text: "a", cache_control: { type: "ephemeral" } }],
        messages: [user("q", { type: "ephemeral", ttl: "1h" })],
      },
      '"1h"',
    ],
    ["a ttl that is not 5m or 1h", { messages: [user("q", { type: "ephemeral", ttl: "10m" } as any)] }, "ttl"],
    ["a type that is not ephemeral", { messages: [user("q", { type: "persistent" } as any)] }, "ephemeral"],
    ["an empty text block", { messages: [user("", { type: "ephemeral" })] }, "empty text"],
    [
      "a thinking block",
      {
        messages: [
          ...hi,
          {
            role: "assistant",
            content: [
              { type: "thinking", thinking: "t", signature: "", cache_control: { type: "ephemeral" } } as any,
              { type: "text", text: "x" },
            ],
          },
          user("q"),
        ],
      },
      "thinking",
    ],
  ];
  for (const [name, params, message] of refusals) {
    test(`${name}: 400 invalid_request_error`, async () => {
      const err = await client()
        .messages.create({
          model: s.model,
          max_tokens: 16,
          messages: hi,
          ...params,
        } as Anthropic.MessageCreateParamsNonStreaming)
        .catch((e) => e);
      expect(err).toBeInstanceOf(Anthropic.BadRequestError);
      expect(err.status).toBe(400);
      expect(err.error).toMatchObject({ type: "error", error: { type: "invalid_request_error" } });
      expect(err.error.error.message).toContain(message);
    });
  }
});

describe("model names", () => {
  test("--alias: a wildcard and an exact name reach the served model; /v1/models lists them", async () => {
    for (const model of ["claude-sonnet-4-5-20250929", "claude-haiku-4-5", "my-model"]) {
      const m = await client().messages.create({ model, max_tokens: 16, messages: hi });
      expect(m.model).toBe(s.model);
    }
    const models = await getJson(s, "/v1/models");
    expect(models.json.data[0].aliases).toEqual([`claude-*`, "my-model"]);
  });

  test("an unmapped name: 404 not_found_error naming the served models and the flag", async () => {
    const err = await client()
      .messages.create({ model: "gpt-4o", max_tokens: 16, messages: hi })
      .catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.NotFoundError);
    expect(err.error).toMatchObject({ type: "error", error: { type: "not_found_error" } });
    expect(err.error.error.message).toContain(s.model);
    expect(err.error.error.message).toContain("--alias");
  });
});

describe("errors in Anthropic's envelope", () => {
  const envelope = async (res: Response, status: number, type: string) => {
    expect(res.status).toBe(status);
    const body = (await res.json()) as any;
    expect(body).toEqual({ type: "error", error: { type, message: expect.any(String) } });
    return body.error.message as string;
  };

  test("missing max_tokens, model or messages: 400 naming the field (BadRequestError)", async () => {
    for (const field of ["max_tokens", "model", "messages"]) {
      const body: Record<string, unknown> = { model: s.model, max_tokens: 16, messages: hi };
      delete body[field];
      expect(await envelope(await post(s, "/v1/messages", body), 400, "invalid_request_error")).toContain(field);
    }
    const err = await client()
      .messages.create({ model: s.model, messages: hi } as any)
      .catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
  });

  test("malformed JSON, wrong types and bad blocks: 400, never a crash", async () => {
    await envelope(await post(s, "/v1/messages", "{not json"), 400, "invalid_request_error");
    await envelope(
      await post(s, "/v1/messages", { model: s.model, max_tokens: 0, messages: hi }),
      400,
      "invalid_request_error",
    );
    await envelope(
      await post(s, "/v1/messages", { model: s.model, max_tokens: 16, messages: "hi" }),
      400,
      "invalid_request_error",
    );
    await envelope(
      await post(s, "/v1/messages", { model: s.model, max_tokens: 16, messages: [{ role: "tool", content: "x" }] }),
      400,
      "invalid_request_error",
    );
    await envelope(
      await post(s, "/v1/messages", {
        model: s.model,
        max_tokens: 16,
        messages: [{ role: "user", content: [{ type: "text" }] }],
      }),
      400,
      "invalid_request_error",
    );
    await envelope(
      await post(s, "/v1/messages", {
        model: s.model,
        max_tokens: 16,
        messages: [{ role: "user", content: [{ type: "tool_result", content: "x" }] }],
      }),
      400,
      "invalid_request_error",
    );
    await envelope(
      await post(s, "/v1/messages", { model: s.model, max_tokens: 16, temperature: 3, messages: hi }),
      400,
      "invalid_request_error",
    );
  });

  test("an image block: 400 unsupported_input; a document block: 400 that says what to send instead", async () => {
    const image = { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } };
    expect(
      await envelope(
        await post(s, "/v1/messages", {
          model: s.model,
          max_tokens: 16,
          messages: [{ role: "user", content: [image] }],
        }),
        400,
        "invalid_request_error",
      ),
    ).toContain("images");
    const doc = { type: "document", source: { type: "text", media_type: "text/plain", data: "x" } };
    expect(
      await envelope(
        await post(s, "/v1/messages", { model: s.model, max_tokens: 16, messages: [{ role: "user", content: [doc] }] }),
        400,
        "invalid_request_error",
      ),
    ).toContain("text block");
  });

  test("unknown fields Claude Code sends are accepted", async () => {
    const res = await post(s, "/v1/messages?beta=true", {
      model: "claude-opus-4-1",
      max_tokens: 32,
      messages: hi,
      metadata: { user_id: "u" },
      context_management: { edits: [{ type: "clear_thinking_20251015", keep: "all" }] },
      output_config: { effort: "high" },
      thinking: { type: "adaptive" },
      service_tier: "auto",
      tools: [{ type: "web_search_20250305", name: "web_search" }, weatherTool],
    });
    expect(res.status).toBe(200);
  });

  test("a foreign Origin: 403 permission_error (PermissionDeniedError)", async () => {
    const foreign = new Anthropic({
      baseURL: s.url,
      apiKey: "x",
      maxRetries: 0,
      defaultHeaders: { origin: "https://evil.example" },
    });
    const err = await foreign.messages.create({ model: s.model, max_tokens: 16, messages: hi }).catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.PermissionDeniedError);
    expect(err.error).toMatchObject({ type: "error", error: { type: "permission_error" } });
  });

  test("wrong method and unknown sub-route: Anthropic's envelope", async () => {
    await envelope(await fetch(`${s.url}/v1/messages`), 405, "invalid_request_error");
    await envelope(await post(s, "/v1/messages/batches", {}), 404, "not_found_error");
  });

  test("a body over the size limit: 413 request_too_large", async () => {
    const res = await post(s, "/v1/messages", "x".repeat(101 * 1024 * 1024));
    await envelope(res, 413, "request_too_large");
  });
});

describe("what Claude Code sends", () => {
  const deferredTool = {
    name: "web_fetch",
    description: "Fetch a URL",
    input_schema: { type: "object", properties: { url: { type: "string" } }, required: ["url"] },
    defer_loading: true,
  };
  const count = async (body: Record<string, unknown>) =>
    ((await (await post(s, "/v1/messages/count_tokens", { model: s.model, ...body })).json()) as any)
      .input_tokens as number;

  test("a system turn right after the first user turn joins the system text, and its breakpoint pins through it", async () => {
    const turn = "Environment: linux, cwd /tmp/project. ".repeat(20);
    const messages = [
      { role: "user", content: "Say hello" },
      { role: "system", content: [{ type: "text", text: turn, cache_control: { type: "ephemeral" } }] },
    ];
    const res = await post(s, "/v1/messages?beta=true", {
      model: "claude-opus-5-5",
      max_tokens: 32,
      system: "You are an agent.",
      messages,
    });
    expect(res.status).toBe(200);
    const m = (await res.json()) as any;
    expect(m.content).toEqual([{ type: "text", text: SCRIPTED_REPLY }]);
    // Pinned through the system turn: only the generation prompt is plain input.
    expect(m.usage.input_tokens).toBeLessThanOrEqual(16);
    expect(await count({ system: "You are an agent.", messages })).toBe(
      await count({ system: `You are an agent.\n${turn}`, messages: [messages[0]] }),
    );
    // An empty system turn adds nothing.
    expect(await count({ system: "You are an agent.", messages: [messages[0], { role: "system", content: [] }] })).toBe(
      await count({ system: "You are an agent.", messages: [messages[0]] }),
    );
  });

  test("deferred tools are not listed; a tool_reference result loads one: its definition in the result, callable after", async () => {
    const base = { system: "You are an agent.", messages: hi };
    expect(await count({ ...base, tools: [weatherTool, deferredTool] })).toBe(
      await count({ ...base, tools: [weatherTool] }),
    );
    const messages = [
      ...hi,
      {
        role: "assistant",
        content: [{ type: "tool_use", id: "toolu_1", name: "ToolSearch", input: { query: "fetch" } }],
      },
      {
        role: "user",
        content: [
          {
            type: "tool_result",
            tool_use_id: "toolu_1",
            content: [{ type: "tool_reference", tool_name: "web_fetch" }],
          },
        ],
      },
    ];
    const tools = [weatherTool, deferredTool];
    const m = (await (
      await post(s, "/v1/messages", {
        model: s.model,
        max_tokens: 128,
        tools,
        tool_choice: { type: "tool", name: "web_fetch" },
        messages,
      })
    ).json()) as any;
    expect(m.stop_reason).toBe("tool_use");
    expect(m.content[0]).toMatchObject({ type: "tool_use", name: "web_fetch" });
    expect(typeof m.content[0].input.url).toBe("string");
  });

  test("cache_creation splits what was created by the breakpoint's ttl", async () => {
    const system = [
      {
        type: "text",
        text: `Rules ${crypto.randomUUID()}. `.repeat(30),
        cache_control: { type: "ephemeral", ttl: "1h" },
      },
    ];
    const m = (await (
      await post(s, "/v1/messages", {
        model: s.model,
        max_tokens: 8,
        system,
        messages: [
          {
            role: "user",
            content: [{ type: "text", text: `Question ${crypto.randomUUID()}`, cache_control: { type: "ephemeral" } }],
          },
        ],
      })
    ).json()) as any;
    const c = m.usage.cache_creation;
    expect(c.ephemeral_1h_input_tokens).toBeGreaterThan(100);
    expect(c.ephemeral_5m_input_tokens).toBeGreaterThan(0);
    expect(c.ephemeral_1h_input_tokens + c.ephemeral_5m_input_tokens).toBe(m.usage.cache_creation_input_tokens);
  });
});

describe("structured output and automatic caching", () => {
  const schema = {
    type: "object",
    properties: { city: { type: "string" }, days: { type: "integer", minimum: 1, maximum: 7 } },
    required: ["city", "days"],
    additionalProperties: false,
  };

  test("output_config.format json_schema (and the beta's output_format): a text block that validates", async () => {
    const validate = ajv.compile(schema);
    for (const field of [
      { output_config: { format: { type: "json_schema", schema } } },
      { output_format: { type: "json_schema", schema } },
    ]) {
      const res = await post(s, "/v1/messages", { model: s.model, max_tokens: 128, messages: hi, ...field });
      const m = (await res.json()) as any;
      expect(m.stop_reason).toBe("end_turn");
      expect(validate(JSON.parse(m.content[0].text))).toBe(true);
    }
    const bad = await post(s, "/v1/messages", {
      model: s.model,
      max_tokens: 16,
      messages: hi,
      output_config: { format: { type: "yaml" } },
    });
    expect(bad.status).toBe(400);
  });

  test("a top-level cache_control pins through the last block", async () => {
    const res = await post(s, "/v1/messages", {
      model: s.model,
      max_tokens: 16,
      cache_control: { type: "ephemeral" },
      system: `Context ${crypto.randomUUID()} `.repeat(20),
      messages: hi,
    });
    const m = (await res.json()) as any;
    expect(m.usage.cache_creation_input_tokens).toBeGreaterThan(50);
    expect(m.usage.input_tokens).toBeLessThanOrEqual(16);
  });
});

describe("--alias at startup", () => {
  test("an alias to an id no model is served under stops the start, naming the served id", async () => {
    const { startTestServer } = await import("../support.ts");
    await expect(startTestServer({ fixture: "tiny-chat", extraArgs: ["--alias", "claude-*=nope"] })).rejects.toThrow(
      /--alias claude-\*=nope: no served model has the id 'nope' \(served: tiny-chat/,
    );
  });
});

describe("where a breakpoint falls", () => {
  test("on the last block, the prompt less its generation prompt: what the cut request's render gives", async () => {
    const { promptJobOf } = await import("../../../src/http/anthropic/request.ts");
    const { breakpointPins } = await import("../../../src/pipeline/prefix-pins.ts");
    const { renderChatPrompt } = await import("../../../src/pipeline/chat-job.ts");
    const model = s.server.registry.default!;
    for (const thinking of [undefined, { type: "enabled", budget_tokens: 1024 }, { type: "disabled" }]) {
      const req = {
        model: s.model,
        system: [{ type: "text", text: "You are an agent.", cache_control: { type: "ephemeral" } }],
        tools: [weatherTool],
        messages: [
          ...hi,
          { role: "assistant", content: "Hello." },
          { role: "user", content: [{ type: "text", text: "Weather?", cache_control: { type: "ephemeral" } }] },
        ],
        ...(thinking ? { thinking } : {}),
      } as any;
      const { job, breakpoints } = promptJobOf(req);
      expect(breakpoints.map((b) => b.last === true)).toEqual([false, true]);
      const { tokens: prompt } = await renderChatPrompt(model, job);
      const fast = await breakpointPins(model, job, prompt, breakpoints);
      const rendered = await breakpointPins(
        model,
        job,
        prompt,
        breakpoints.map((b) => ({ ...b, last: false })),
      );
      expect(fast).toEqual(rendered);
      expect(fast[1]!.length).toBeGreaterThan(fast[0]!.length);
      expect(fast[1]!.length).toBeLessThan(prompt.length);
    }
  });
});
