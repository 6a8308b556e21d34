// The Responses API (docs/api/responses.md) driven through the official
// `openai` client against the built-in model: whole and streamed responses
// that agree with what is stored, text.format held by the grammar, function
// and namespace calls round-tripped through function_call_output, built-in
// tools left out, previous_response_id continued warm (the earlier turns
// served from the prefix cache, reasoning included), input_items pages,
// delete, store: false, the refusals, and a disconnect that stores nothing.
import Ajv from "ajv";
import { describe, expect, test } from "bun:test";
import type OpenAI from "openai";
import { SCRIPTED_REASONING, SCRIPTED_REPLY } from "../../../src/fixtures/index.ts";
import { apiError, getJson, post, useServer, waitIdle } from "../support.ts";

const s = useServer({ fixture: "tiny-chat", maxBatch: 2 });
/**
 * Random weights: greedy replies run to the cap, long enough to be cut off; one lane, so a second request waits;
 * keep-alives every second.
 */
const random = useServer({ maxBatch: 1, maxContext: 8192, extraArgs: ["--nonstream-keepalive", "1"] });
const ajv = new Ajv({ strict: false });

const weatherTool: OpenAI.Responses.FunctionTool = {
  type: "function",
  name: "get_weather",
  description: "Current weather for a city",
  parameters: {
    type: "object",
    properties: { city: { type: "string", minLength: 2 }, days: { type: "integer", minimum: 1, maximum: 7 } },
    required: ["city", "days"],
    additionalProperties: false,
  },
  strict: true,
};

describe("responses.create and responses.stream", () => {
  test("a string input: the fixed reply as one message item, the response shape, usage", async () => {
    const r = await s.client.responses.create({
      model: s.model,
      input: "Hi there, who are you?",
      metadata: { run: "a" },
    });
    expect(r.id).toMatch(/^resp_[0-9a-f]{32}$/);
    expect(r.object).toBe("response");
    expect(r.status).toBe("completed");
    expect(r.model).toBe(s.model);
    expect(r.output_text).toBe(SCRIPTED_REPLY);
    expect(r.output).toHaveLength(1);
    const item = r.output[0] as OpenAI.Responses.ResponseOutputMessage;
    expect(item.type).toBe("message");
    expect(item.id).toBe(`msg_${r.id.slice(5)}_0`);
    expect(item.status).toBe("completed");
    expect(item.content).toEqual([{ type: "output_text", text: SCRIPTED_REPLY, annotations: [], logprobs: [] }]);
    expect(r.metadata).toEqual({ run: "a" });
    expect(r.incomplete_details).toBeNull();
    expect(r.usage!.input_tokens).toBeGreaterThan(0);
    expect(r.usage!.output_tokens).toBeGreaterThan(0);
    expect(r.usage!.total_tokens).toBe(r.usage!.input_tokens + r.usage!.output_tokens);
    // Stored: GET returns the same object.
    const got = await s.client.responses.retrieve(r.id);
    expect(got.output).toEqual(r.output);
  });

  test("streamed: named events numbered from 0, no [DONE], the final response equal to the stored one", async () => {
    const res = await post(s, "/v1/responses", { model: s.model, input: "Hi", stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const raw = await res.text();
    expect(raw).not.toContain("[DONE]");
    const frames = raw.split("\n\n").filter((b) => b.trim() !== "" && !b.startsWith(":"));
    const events = frames.map((block) => {
      const [eventLine, dataLine] = block.split("\n");
      const data = JSON.parse(dataLine!.slice(6));
      expect(eventLine).toBe(`event: ${data.type}`);
      return data;
    });
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const types = events.map((e) => e.type);
    expect(types.slice(0, 4)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
    ]);
    expect(types.slice(-4)).toEqual([
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(events[0].response.status).toBe("in_progress");
    const text = events
      .filter((e) => e.type === "response.output_text.delta")
      .map((e) => e.delta)
      .join("");
    expect(text).toBe(SCRIPTED_REPLY);
    const final = events.at(-1).response;
    const stored = await s.client.responses.retrieve(final.id);
    expect(stored.output).toEqual(final.output);
  });

  test("responses.stream: the SDK's accumulated final response", async () => {
    const stream = s.client.responses.stream({ model: s.model, input: "Hi" });
    const deltas: string[] = [];
    stream.on("response.output_text.delta", (e) => deltas.push(e.delta));
    const final = await stream.finalResponse();
    expect(final.status).toBe("completed");
    expect(final.output_text).toBe(SCRIPTED_REPLY);
    expect(deltas.join("")).toBe(SCRIPTED_REPLY);
  });

  test("reasoning.effort turns the template's thinking on: a reasoning item, then the message; reasoning_tokens counted", async () => {
    const r = await s.client.responses.create({ model: s.model, input: "Hi", reasoning: { effort: "high" } });
    expect(r.output.map((i) => i.type)).toEqual(["reasoning", "message"]);
    const reasoning = r.output[0] as any;
    expect(reasoning.id).toBe(`rs_${r.id.slice(5)}_0`);
    expect(reasoning.summary).toEqual([]);
    expect(reasoning.content).toEqual([{ type: "reasoning_text", text: SCRIPTED_REASONING }]);
    expect(r.output_text).toBe(SCRIPTED_REPLY);
    expect(r.usage!.output_tokens_details.reasoning_tokens).toBeGreaterThan(0);
    const off = await s.client.responses.create({ model: s.model, input: "Hi", reasoning: { effort: "minimal" } });
    expect(off.output.map((i) => i.type)).toEqual(["message"]);
  });

  test("text.format json_schema: the reply validates", async () => {
    const schema = {
      type: "object",
      properties: { word: { type: "string" }, n: { type: "integer", minimum: 0, maximum: 9 } },
      required: ["word", "n"],
      additionalProperties: false,
    };
    const r = await s.client.responses.create({
      model: s.model,
      input: "Answer in JSON",
      max_output_tokens: 200,
      text: { format: { type: "json_schema", name: "answer", schema, strict: true } },
    });
    expect(r.status).toBe("completed");
    expect(ajv.validate(schema, JSON.parse(r.output_text))).toBe(true);
  });

  test("max_output_tokens cuts the reply: incomplete, with the reason", async () => {
    const r = await s.client.responses.create({ model: s.model, input: "Hi", max_output_tokens: 2 });
    expect(r.status).toBe("incomplete");
    expect(r.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(r.usage!.output_tokens).toBe(2);
    expect((r.output[0] as any).status).toBe("incomplete");
    // A cut turn is continued by rebuilding the conversation.
    const next = await s.client.responses.create({ model: s.model, input: "Go on", previous_response_id: r.id });
    expect(next.output_text).toBe(SCRIPTED_REPLY);
  });
});

describe("tools", () => {
  test("a function call round trip: the call held to its schema, then function_call_output continues the stored conversation", async () => {
    const first = await s.client.responses.create({
      model: s.model,
      input: "Weather in Paris?",
      tools: [weatherTool],
      tool_choice: "required",
    });
    const calls = first.output.filter((i) => i.type === "function_call") as OpenAI.Responses.ResponseFunctionToolCall[];
    expect(calls.length).toBeGreaterThan(0);
    const call = calls[0]!;
    expect(call.name).toBe("get_weather");
    expect(call.call_id).toMatch(new RegExp(`^call_${first.id.slice(5)}_\\d+$`));
    expect(call.id).toMatch(new RegExp(`^fc_${first.id.slice(5)}_\\d+$`));
    expect(ajv.validate(weatherTool.parameters!, JSON.parse(call.arguments))).toBe(true);
    const second = await s.client.responses.create({
      model: s.model,
      previous_response_id: first.id,
      tools: [weatherTool],
      input: calls.map((c) => ({
        type: "function_call_output" as const,
        call_id: c.call_id,
        output: '{"temperature": 21}',
      })),
    });
    expect(second.status).toBe("completed");
    expect(second.output_text).toBe(SCRIPTED_REPLY);
    expect(second.previous_response_id).toBe(first.id);
    // Sent back unchanged as input (no previous_response_id), the first output is accepted.
    const replay = await s.client.responses.create({
      model: s.model,
      tools: [weatherTool],
      input: [
        { role: "user", content: "Weather in Paris?" },
        ...(first.output as any[]),
        ...calls.map((c) => ({
          type: "function_call_output" as const,
          call_id: c.call_id,
          output: [{ type: "input_text" as const, text: "21 C" }],
        })),
      ],
    });
    expect(replay.output_text).toBe(SCRIPTED_REPLY);
  });

  test("streamed calls: argument deltas add up to the done event and the final item", async () => {
    const stream = s.client.responses.stream({
      model: s.model,
      input: "Weather?",
      tools: [weatherTool],
      tool_choice: { type: "function", name: "get_weather" },
    });
    let args = "";
    let done = "";
    stream.on("response.function_call_arguments.delta", (e) => (args += e.delta));
    stream.on("response.function_call_arguments.done", (e) => (done = e.arguments));
    const final = await stream.finalResponse();
    const call = final.output.find((i) => i.type === "function_call") as OpenAI.Responses.ResponseFunctionToolCall;
    expect(args).toBe(done);
    expect(call.arguments).toBe(done);
    expect(ajv.validate(weatherTool.parameters!, JSON.parse(done))).toBe(true);
  });

  test("namespace tools: the model sees namespace.member, the call comes back with name and namespace", async () => {
    const tools = [
      {
        type: "namespace",
        name: "crm",
        description: "Customer records.",
        tools: [
          {
            type: "function",
            name: "lookup",
            parameters: { type: "object", properties: { email: { type: "string" } }, required: ["email"] },
          },
        ],
      },
    ];
    const r = await s.client.responses.create({
      model: s.model,
      input: "Find bob",
      tools: tools as any,
      tool_choice: { type: "function", name: "lookup", namespace: "crm" } as any,
    });
    const call = r.output.find((i) => i.type === "function_call") as any;
    expect(call.name).toBe("lookup");
    expect(call.namespace).toBe("crm");
    expect(typeof JSON.parse(call.arguments).email).toBe("string");
    // The call sent back with its namespace continues.
    const next = await s.client.responses.create({
      model: s.model,
      tools: tools as any,
      input: [
        { role: "user", content: "Find bob" },
        call,
        { type: "function_call_output", call_id: call.call_id, output: "bob@example.com" },
      ],
    });
    expect(next.output_text).toBe(SCRIPTED_REPLY);
  });

  test("built-in tools are left out (named in a header) and the reply is normal; forcing one is 400 unsupported_tool", async () => {
    const res = await post(s, "/v1/responses", {
      model: s.model,
      input: "Hi",
      tools: [{ type: "web_search" }, weatherTool],
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-superfluid-ignored-tools")).toBe("web_search");
    expect(((await res.json()) as any).status).toBe("completed");
    const err = await apiError(
      s.client.responses.create({
        model: s.model,
        input: "Hi",
        tools: [{ type: "web_search" }],
        tool_choice: { type: "web_search_preview" },
      }),
    );
    expect(err.status).toBe(400);
    expect(err.code).toBe("unsupported_tool");
    expect((err.error as any).param).toBe("tool_choice");
  });
});

describe("previous_response_id", () => {
  test("three turns: turns 2 and 3 find the whole earlier conversation cached (reasoning included)", async () => {
    const opts = { model: s.model, instructions: "Be brief.", reasoning: { effort: "high" as const } };
    const one = await s.client.responses.create({ ...opts, input: "First question" });
    expect(one.output[0]!.type).toBe("reasoning");
    const { data: two, response: twoReply } = await s.client.responses
      .create({ ...opts, input: "Second question", previous_response_id: one.id })
      .withResponse();
    const { data: three, response: threeReply } = await s.client.responses
      .create({ ...opts, input: "Third question", previous_response_id: two.id })
      .withResponse();
    expect(twoReply.headers.get("x-superfluid-continued")).toBe("warm");
    expect(threeReply.headers.get("x-superfluid-continued")).toBe("warm");
    expect(Number(threeReply.headers.get("x-superfluid-warm"))).toBe(three.usage!.input_tokens_details.cached_tokens);
    expect(two.usage!.input_tokens_details.cached_tokens).toBeGreaterThanOrEqual(one.usage!.total_tokens);
    expect(three.usage!.input_tokens_details.cached_tokens).toBeGreaterThanOrEqual(two.usage!.total_tokens);
    expect(three.output_text).toBe(SCRIPTED_REPLY);
  });

  test("other instructions rebuild the conversation without the earlier ones (and it still answers)", async () => {
    const one = await s.client.responses.create({ model: s.model, instructions: "Be brief.", input: "First" });
    const { data: two, response } = await s.client.responses
      .create({ model: s.model, instructions: "Be long.", input: "Second", previous_response_id: one.id })
      .withResponse();
    expect(response.headers.get("x-superfluid-continued")).toBe("rebuilt");
    expect(two.status).toBe("completed");
    expect(two.instructions).toBe("Be long.");
    expect(two.usage!.input_tokens).toBeGreaterThan(one.usage!.total_tokens - 10);
  });

  test("the model defaults to the continued response's", async () => {
    const one = await s.client.responses.create({ model: s.model, input: "First" });
    const res = await post(s, "/v1/responses", { input: "Second", previous_response_id: one.id });
    expect(res.status).toBe(200);
    expect(((await res.json()) as any).model).toBe(s.model);
  });

  test("unknown, deleted and unstored ids: 400 previous_response_not_found with param; GET 404", async () => {
    const unknown = await apiError(
      s.client.responses.create({
        model: s.model,
        input: "x",
        previous_response_id: "resp_00000000000000000000000000000000",
      }),
    );
    expect(unknown.status).toBe(400);
    expect(unknown.code).toBe("previous_response_not_found");
    expect((unknown.error as any).param).toBe("previous_response_id");

    const kept = await s.client.responses.create({ model: s.model, input: "First" });
    await s.client.responses.delete(kept.id);
    const again = await fetch(`${s.url}/v1/responses/${kept.id}`, { method: "DELETE" });
    expect(again.status).toBe(404);
    expect((await getJson(s, `/v1/responses/${kept.id}`)).status).toBe(404);
    const cont = await apiError(
      s.client.responses.create({ model: s.model, input: "x", previous_response_id: kept.id }),
    );
    expect(cont.code).toBe("previous_response_not_found");

    const unstored = await s.client.responses.create({ model: s.model, input: "First", store: false });
    expect((unstored as any).store).toBe(false);
    expect((await getJson(s, `/v1/responses/${unstored.id}`)).status).toBe(404);
    expect(
      (await apiError(s.client.responses.create({ model: s.model, input: "x", previous_response_id: unstored.id })))
        .code,
    ).toBe("previous_response_not_found");
  });

  test("DELETE answers the deleted object; a response continued later keeps serving its continuation", async () => {
    const one = await s.client.responses.create({ model: s.model, input: "First" });
    const two = await s.client.responses.create({ model: s.model, input: "Second", previous_response_id: one.id });
    const res = await fetch(`${s.url}/v1/responses/${one.id}`, { method: "DELETE" });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ id: one.id, object: "response", deleted: true });
    const three = await s.client.responses.create({ model: s.model, input: "Third", previous_response_id: two.id });
    expect(three.output_text).toBe(SCRIPTED_REPLY);
    expect(three.usage!.input_tokens).toBeGreaterThan(two.usage!.total_tokens);
  });
});

describe("input_items", () => {
  test("pages by limit, order and after", async () => {
    const input = ["one", "two", "three", "four", "five"].map((text) => ({ role: "user" as const, content: text }));
    const r = await s.client.responses.create({ model: s.model, input });
    const all = await s.client.responses.inputItems.list(r.id, { order: "asc" });
    expect(all.data.map((i: any) => i.content[0].text ?? i.content)).toEqual(["one", "two", "three", "four", "five"]);
    const page = await getJson(s, `/v1/responses/${r.id}/input_items?limit=2&order=asc`);
    expect(page.json.object).toBe("list");
    expect(page.json.data).toHaveLength(2);
    expect(page.json.has_more).toBe(true);
    expect(page.json.first_id).toBe(page.json.data[0].id);
    const next = await getJson(s, `/v1/responses/${r.id}/input_items?limit=2&order=asc&after=${page.json.last_id}`);
    expect(next.json.data.map((i: any) => i.content)).toEqual(["three", "four"]);
    const desc = await getJson(s, `/v1/responses/${r.id}/input_items?limit=1`);
    expect(desc.json.data[0].content).toBe("five");
    // The SDK's auto-pagination walks every page.
    const walked: string[] = [];
    for await (const item of s.client.responses.inputItems.list(r.id, { order: "asc", limit: 2 }))
      walked.push((item as any).content);
    expect(walked).toEqual(["one", "two", "three", "four", "five"]);
    expect((await getJson(s, `/v1/responses/${r.id}/input_items?limit=0`)).status).toBe(400);
    // Ids a client repeats are made unique, so paging by them ends.
    const dup = await s.client.responses.create({
      model: s.model,
      input: ["a", "b", "c"].map((text) => ({
        type: "message" as const,
        id: "msg_same",
        role: "user" as const,
        content: text,
      })),
    });
    const ids: string[] = [];
    for await (const item of s.client.responses.inputItems.list(dup.id, { limit: 1 })) ids.push((item as any).id);
    expect(ids).toHaveLength(3);
    expect(new Set(ids).size).toBe(3);
  });
});

describe("refusals and bad input", () => {
  const cases: [string, Record<string, unknown>, number, string | null, string | null][] = [
    ["background", { input: "x", background: true }, 400, "unsupported_parameter", "background"],
    ["conversation", { input: "x", conversation: "conv_1" }, 400, "unsupported_parameter", "conversation"],
    ["no input", {}, 400, null, "input"],
    [
      "an image",
      { input: [{ role: "user", content: [{ type: "input_image", image_url: "data:image/png;base64,AAAA" }] }] },
      400,
      "unsupported_input",
      "input[0].content[0]",
    ],
    [
      "a remote image",
      { input: [{ role: "user", content: [{ type: "input_image", image_url: "https://example.com/a.png" }] }] },
      400,
      "unsupported_parameter",
      "input[0].content[0]",
    ],
    ["item_reference", { input: [{ type: "item_reference", id: "msg_1" }] }, 400, "unsupported_parameter", "input[0]"],
    ["an unknown item", { input: [{ type: "telepathy" }] }, 400, null, "input[0].type"],
    ["a bad role", { input: [{ type: "message", role: "robot", content: "x" }] }, 400, null, "input[0].role"],
    [
      "an undeclared tool_choice",
      { input: "x", tool_choice: { type: "function", name: "nope" } },
      400,
      null,
      "tool_choice",
    ],
    [
      "allowed_tools",
      { input: "x", tool_choice: { type: "allowed_tools", tools: [] } },
      400,
      "unsupported_parameter",
      "tool_choice",
    ],
    ["a bad format", { input: "x", text: { format: { type: "yaml" } } }, 400, null, "text.format.type"],
    ["an unknown model", { model: "nope", input: "x" }, 404, null, "model"],
  ];
  for (const [name, body, status, code, param] of cases) {
    test(`${name}: ${status}${code ? ` ${code}` : ""}`, async () => {
      const res = await post(s, "/v1/responses", { model: s.model, ...body });
      expect(res.status).toBe(status);
      const json = (await res.json()) as any;
      expect(json.error.code).toBe(code);
      expect(json.error.param).toBe(param);
    });
  }

  test("cancel is 400 unsupported_parameter; an unknown id is 404 in OpenAI's envelope", async () => {
    const r = await s.client.responses.create({ model: s.model, input: "x" });
    const err = await apiError(s.client.responses.cancel(r.id));
    expect(err.status).toBe(400);
    expect(err.code).toBe("unsupported_parameter");
    const missing = await getJson(s, "/v1/responses/resp_nope");
    expect(missing.status).toBe(404);
    expect(missing.json.error.type).toBe("not_found_error");
  });
});

test("a client that disconnects mid-stream: the generation stops and nothing is stored", async () => {
  const abort = new AbortController();
  const res = await post(
    random,
    "/v1/responses",
    { model: random.model, input: "Hi", stream: true, temperature: 0 },
    { signal: abort.signal },
  );
  const reader = res.body!.getReader();
  let raw = "";
  while (!raw.includes("response.output_text.delta")) {
    const step = await reader.read();
    if (step.done) throw new Error(`the stream ended before any text: ${raw}`);
    raw += new TextDecoder().decode(step.value);
  }
  const created = JSON.parse(
    raw
      .split("\n")
      .find((l) => l.startsWith("data: ") && l.includes("response.created"))!
      .slice(6),
  );
  abort.abort();
  const idle = await waitIdle(random);
  expect(idle.idle).toBe(true);
  expect((await getJson(random, `/v1/responses/${created.response.id}`)).status).toBe(404);
});

test("a stream whose first output is slow to come repeats response.in_progress as its keep-alive (Codex times out on comments)", async () => {
  // A stopped worker stands in for a long prefill or a long wait in the queue.
  const worker = random.server.registry.default!.worker.pid!;
  process.kill(worker, "SIGSTOP");
  let raw = "";
  try {
    const res = await post(random, "/v1/responses", {
      model: random.model,
      input: "Hi",
      stream: true,
      max_output_tokens: 4,
    });
    const reader = res.body!.getReader();
    while ((raw.match(/event: response\.in_progress/g) ?? []).length < 3) {
      const step = await reader.read();
      if (step.done) throw new Error(`the stream ended: ${raw}`);
      raw += new TextDecoder().decode(step.value);
    }
    expect(raw).not.toContain("response.output_item.added");
    process.kill(worker, "SIGCONT");
    for (;;) {
      const step = await reader.read();
      if (step.done) break;
      raw += new TextDecoder().decode(step.value);
    }
  } finally {
    process.kill(worker, "SIGCONT");
  }
  const events = raw
    .split("\n")
    .filter((l) => l.startsWith("data: "))
    .map((l) => JSON.parse(l.slice(6)));
  expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
  expect(["response.completed", "response.incomplete"]).toContain(events.at(-1).type);
});
