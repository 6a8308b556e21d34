// The per-request work budget on every API family (docs/api/openai.md#request-limits):
// lists and objects over their bound are refused with a 400 in the family's
// envelope naming the field, before validation walks them; n × max_tokens is
// bounded; a body that stops sending is answered 408 request_timeout; the
// Files and Batches caps refuse a form of thousands of parts and a
// million-line batch file without reading the rest.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { toFile } from "openai";
import { setBodyIdleTimeoutMs } from "../../src/http/body.ts";
import { MAX_OLLAMA_OPTIONS, MAX_REPLY_TOKENS, MAX_TOOLS } from "../../src/http/chat-limits.ts";
import { MAX_LOGIT_BIAS, MAX_TEMPLATE_KWARGS } from "../../src/http/openai/chat-request.ts";
import { MAX_INPUTS } from "../../src/pipeline/embedding.ts";
import { MAX_LINES } from "../../src/batches/input.ts";
import { CHAT, waitBatch, ended } from "./openai/batches-support.ts";
import { envelope, postJson, RawConnection, useServer, user } from "./support.ts";

// A 4096-token window: 128 choices of a whole window (524,288 tokens) are past MAX_REPLY_TOKENS.
const s = useServer({ maxContext: 4096 });

const keys = (n: number, value: unknown = 1) =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, value]));

/** A 400 in OpenAI's envelope naming `param` (and its code when given). */
async function openai400(path: string, body: unknown, param: string, code?: string) {
  const r = await postJson(s, path, body);
  expect(r.status).toBe(400);
  const e = envelope(r.json);
  expect(e.param).toBe(param);
  if (code) expect(e.code).toBe(code);
  return e;
}

/** A 400 in Anthropic's envelope whose message names `field`. */
async function anthropic400(path: string, body: unknown, field: string) {
  const r = await postJson(s, path, body);
  expect(r.status).toBe(400);
  expect(r.json.type).toBe("error");
  expect(r.json.error.type).toBe("invalid_request_error");
  expect(r.json.error.message).toContain(field);
}

/** A 400 in Ollama's envelope whose message names `field`. */
async function ollama400(path: string, body: unknown, field: string) {
  const r = await postJson(s, path, body);
  expect(r.status).toBe(400);
  expect(Object.keys(r.json)).toEqual(["error"]);
  expect(r.json.error).toContain(field);
}

describe("lists and objects past their bound: 400 naming the field, in each family's envelope", () => {
  const chat = (extra: Record<string, unknown>) => ({ model: s.model, messages: user("hi"), max_tokens: 2, ...extra });

  test("chat: content parts past the window, logit_bias, chat_template_kwargs and stop", async () => {
    const parts = Array.from({ length: 4096 }, () => ({ type: "text", text: "" }));
    await openai400("/v1/chat/completions", chat({ messages: user(parts) }), "messages", "context_length_exceeded");
    await openai400(
      "/v1/chat/completions",
      chat({ logit_bias: keys(MAX_LOGIT_BIAS + 1) }),
      "logit_bias",
      "object_above_max_size",
    );
    await openai400(
      "/v1/chat/completions",
      chat({ chat_template_kwargs: keys(MAX_TEMPLATE_KWARGS + 1) }),
      "chat_template_kwargs",
    );
    await openai400("/v1/chat/completions", chat({ stop: Array(1000).fill("x") }), "stop", "array_above_max_length");
  });

  test("completions: more prompts than choices, before validation", async () => {
    await openai400(
      "/v1/completions",
      { model: s.model, prompt: Array(100_000).fill("a") },
      "prompt",
      "array_above_max_length",
    );
  });

  test("Responses: 100,000 input items, metadata past OpenAI's bounds, namespace tools past MAX_TOOLS", async () => {
    const items = Array.from({ length: 100_000 }, () => ({ role: "user", content: "x" }));
    const e = await openai400("/v1/responses", { model: s.model, input: items }, "input", "context_length_exceeded");
    expect(e.message).toContain("100000 input items");
    await openai400("/v1/responses", { model: s.model, input: "hi", metadata: keys(17, "v") }, "metadata");
    await openai400("/v1/responses", { model: s.model, input: "hi", metadata: { k: "v".repeat(513) } }, "metadata.k");
    const members = Array.from({ length: MAX_TOOLS }, (_, i) => ({ type: "function", name: `f${i}` }));
    await openai400(
      "/v1/responses",
      {
        model: s.model,
        input: "hi",
        tools: [
          { type: "function", name: "top" },
          { type: "namespace", name: "ns", tools: members },
        ],
      },
      "tools",
    );
  });

  test("Anthropic: content blocks past the window (messages and count_tokens), stop_sequences", async () => {
    const blocks = Array.from({ length: 4096 }, () => ({ type: "text", text: "x" }));
    const body = { model: s.model, max_tokens: 2, messages: [{ role: "user", content: blocks }] };
    await anthropic400("/v1/messages", body, "content blocks");
    await anthropic400("/v1/messages/count_tokens", body, "content blocks");
    await anthropic400(
      "/v1/messages",
      { ...body, messages: user("hi"), stop_sequences: Array(65).fill("x") },
      "stop_sequences",
    );
  });

  test("Ollama: an options object of 10,000 keys on chat and generate, 1,000 stop strings", async () => {
    const options = keys(10_000, null);
    await ollama400("/api/chat", { model: s.model, messages: user("hi"), stream: false, options }, "options");
    await ollama400("/api/generate", { model: s.model, prompt: "hi", stream: false, options }, "options");
    const r = await postJson(s, "/api/chat", {
      model: s.model,
      messages: user("hi"),
      stream: false,
      options: keys(MAX_OLLAMA_OPTIONS + 1, null),
    });
    expect(r.status).toBe(400);
    await ollama400(
      "/api/chat",
      { model: s.model, messages: user("hi"), stream: false, options: { stop: Array(1000).fill("") } },
      "options.stop",
    );
  });

  test("embeddings and rerank: more inputs than MAX_INPUTS, before validation", async () => {
    await openai400(
      "/v1/embeddings",
      { model: s.model, input: Array(MAX_INPUTS + 1).fill("a") },
      "input",
      "array_above_max_length",
    );
    await openai400(
      "/v1/rerank",
      { model: s.model, query: "q", documents: Array(MAX_INPUTS + 1).fill("a") },
      "documents",
      "array_above_max_length",
    );
  });
});

describe("n × max_tokens", () => {
  test(`past ${MAX_REPLY_TOKENS} reply tokens: 400 reply_budget_exceeded naming n, on chat and completions`, async () => {
    const e = await openai400(
      "/v1/chat/completions",
      { model: s.model, messages: user("hi"), n: 128, max_tokens: 4096 },
      "n",
      "reply_budget_exceeded",
    );
    expect(e.message).toContain(String(MAX_REPLY_TOKENS));
    // No max_tokens: every choice may run to the window.
    await openai400(
      "/v1/chat/completions",
      { model: s.model, messages: user("hi"), n: 65 },
      "n",
      "reply_budget_exceeded",
    );
    await openai400(
      "/v1/completions",
      { model: s.model, prompt: "hi", n: 128, max_tokens: 4096 },
      "n",
      "reply_budget_exceeded",
    );
    await openai400("/v1/completions", { model: s.model, prompt: ["a", "b"], n: 64 }, "n", "reply_budget_exceeded");
  });

  test("within the budget: many short choices are served", async () => {
    const r = await postJson(s, "/v1/chat/completions", {
      model: s.model,
      messages: user("hi"),
      n: 3,
      max_tokens: 2,
      temperature: 0,
    });
    expect(r.status).toBe(200);
    expect(r.json.choices).toHaveLength(3);
  });
});

describe("a body that stops sending", () => {
  let previous: number;
  beforeAll(() => (previous = setBodyIdleTimeoutMs(200)));
  afterAll(() => setBodyIdleTimeoutMs(previous));

  for (const [path, headers] of [
    ["/v1/chat/completions", "content-type: application/json\r\n"],
    ["/api/chat", ""],
  ] as const) {
    test(`${path}: 408 request_timeout once it has sent nothing for the idle limit`, async () => {
      const c = await RawConnection.open(s.port);
      try {
        await c.write(
          `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1:${s.port}\r\n${headers}content-length: 1000\r\n\r\n{"model": "${s.model}", `,
        );
        // A hang guard only: the reply is waited for, never timed.
        const reply = await c.waitResponse(60_000);
        expect(reply?.status).toBe(408);
        const body = JSON.parse(reply!.body);
        if (path.startsWith("/v1/")) expect(envelope(body).code).toBe("request_timeout");
        else expect(body.error).toContain("sent nothing");
      } finally {
        c.destroy();
      }
    });
  }
});

describe("Files and Batches caps", () => {
  test("a multipart upload of thousands of parts is refused", async () => {
    const boundary = "b0undary";
    const parts = Array.from(
      { length: 5000 },
      (_, i) => `--${boundary}\r\ncontent-disposition: form-data; name="f${i}"\r\n\r\nx\r\n`,
    ).join("");
    const body = `${parts}--${boundary}--\r\n`;
    const res = await fetch(`${s.url}/v1/files`, {
      method: "POST",
      headers: { "content-type": `multipart/form-data; boundary=${boundary}` },
      body,
    });
    expect(res.status).toBe(400);
    expect(envelope(await res.json()).message).toContain("too many parts");
  });

  test("a 1,000,000-line batch file fails with too_many_tasks alone: the check stops at the first request past the limit", async () => {
    // MAX_LINES + 1 requests, then lines that are not JSON: had the check read
    // on, they would be reported as invalid_json_line.
    const requests = Array.from(
      { length: MAX_LINES + 1 },
      (_, i) => `{"custom_id":"r${i}","method":"POST","url":"${CHAT}","body":{}}`,
    );
    const rest = Array(1_000_000 - requests.length).fill("x");
    const text = `${[...requests, ...rest].join("\n")}\n`;
    const file = await s.client.files.create({
      file: await toFile(Buffer.from(text), "million.jsonl"),
      purpose: "batch",
    });
    const created = await s.client.batches.create({ input_file_id: file.id, endpoint: CHAT, completion_window: "24h" });
    const b = await waitBatch(s.client, created.id, ended);
    expect(b.status).toBe("failed");
    expect(b.errors!.data!.map((e) => e.code)).toEqual(["too_many_tasks"]);
  });
});
