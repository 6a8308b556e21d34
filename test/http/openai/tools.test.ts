// Tool calls on the JSON-in-tags wire (the fixture's template renders
// <tool_call>{"name", "arguments"}</tool_call>): forced calls are held to the
// tool's schema, parsed into message.tool_calls, and streamed as OpenAI
// partial deltas that add up to the non-streamed call.
import Ajv2020 from "ajv/dist/2020";
import { describe, expect, test } from "bun:test";
import { parseSse, post, postJson, useServer, user } from "../support.ts";

const s = useServer();
const ajv = new Ajv2020({ strict: false });

const WEATHER = {
  type: "object",
  properties: { city: { type: "string", maxLength: 10 }, unit: { enum: ["c", "f"] } },
  required: ["city", "unit"],
  additionalProperties: false,
};
const tools = [
  { type: "function", function: { name: "get_weather", description: "weather now", parameters: WEATHER } },
  {
    type: "function",
    function: {
      name: "get_time",
      parameters: { type: "object", properties: { zone: { type: "string", maxLength: 6 } }, required: ["zone"] },
    },
  },
];
const ask = (extra: Record<string, unknown>) => ({
  model: s.model,
  messages: user("weather in Oslo?"),
  tools,
  temperature: 1,
  max_tokens: 120,
  ...extra,
});

function checkCall(call: any) {
  expect(call.type).toBe("function");
  expect(call.id).toMatch(/^call_/);
  const tool = tools.find((t) => t.function.name === call.function.name)!;
  expect(tool).toBeDefined();
  const args = JSON.parse(call.function.arguments);
  expect(ajv.validate(tool.function.parameters, args)).toBe(true);
}

/** Joins streamed tool-call deltas per index, as an OpenAI client does. */
function joinStreamed(events: any[]) {
  const calls: { id?: string; name?: string; arguments: string }[] = [];
  for (const e of events) {
    for (const d of e.choices?.[0]?.delta?.tool_calls ?? []) {
      calls[d.index] ??= { arguments: "" };
      if (d.id) calls[d.index]!.id = d.id;
      if (d.function?.name) calls[d.index]!.name = d.function.name;
      calls[d.index]!.arguments += d.function?.arguments ?? "";
    }
  }
  return calls;
}

describe("tool calls", () => {
  test("tool_choice required: one call that parses and validates, finish_reason tool_calls, over several seeds", async () => {
    for (const seed of [1, 2, 3, 4]) {
      const { status, json } = await postJson(
        s,
        "/v1/chat/completions",
        ask({ seed, tool_choice: "required", parallel_tool_calls: false }),
      );
      expect(status).toBe(200);
      const choice = json.choices[0];
      expect(choice.finish_reason).toBe("tool_calls");
      expect(choice.message.tool_calls).toHaveLength(1);
      checkCall(choice.message.tool_calls[0]);
      expect(choice.message.content ?? "").not.toContain("<tool_call>");
    }
  });

  test("a named function is the one called", async () => {
    const { json } = await postJson(
      s,
      "/v1/chat/completions",
      ask({ seed: 9, tool_choice: { type: "function", function: { name: "get_time" } }, parallel_tool_calls: false }),
    );
    expect(json.choices[0].message.tool_calls[0].function.name).toBe("get_time");
    checkCall(json.choices[0].message.tool_calls[0]);
  });

  test("streamed deltas add up to exactly the non-streamed call; no tag text leaks into content", async () => {
    const body = ask({ seed: 5, tool_choice: "required", parallel_tool_calls: false });
    const whole = (await postJson(s, "/v1/chat/completions", body)).json.choices[0].message.tool_calls[0];
    const sse = parseSse(await (await post(s, "/v1/chat/completions", { ...body, stream: true })).text());
    const streamed = joinStreamed(sse.events);
    expect(streamed).toHaveLength(1);
    expect(streamed[0]!.name).toBe(whole.function.name);
    expect(streamed[0]!.arguments).toBe(whole.function.arguments);
    expect(streamed[0]!.id).toMatch(/^call_/);
    const content = sse.events.map((e: any) => e.choices?.[0]?.delta?.content ?? "").join("");
    expect(content).not.toContain("<tool_call>");
    expect(sse.events.at(-1).choices[0].finish_reason).toBe("tool_calls");
  });

  test("parallel calls get distinct ids and increasing indexes; a reply cut by the cap is length", async () => {
    const body = ask({ seed: 3, tool_choice: "required", max_tokens: 160 });
    const sse = parseSse(await (await post(s, "/v1/chat/completions", { ...body, stream: true })).text());
    const streamed = joinStreamed(sse.events);
    const { json } = await postJson(s, "/v1/chat/completions", body);
    const calls = json.choices[0].message.tool_calls ?? [];
    expect(calls.length).toBeGreaterThanOrEqual(2);
    expect(new Set(calls.map((c: any) => c.id)).size).toBe(calls.length);
    expect(streamed.length).toBeGreaterThanOrEqual(calls.length);
    if (json.choices[0].finish_reason === "length") expect(json.usage.completion_tokens).toBe(160);
    else expect(json.choices[0].finish_reason).toBe("tool_calls");
  });

  test("the official openai client reads the calls, streamed and not", async () => {
    const params = {
      model: s.model,
      messages: [{ role: "user" as const, content: "time?" }],
      tools: tools as any,
      tool_choice: "required" as const,
      parallel_tool_calls: false,
      temperature: 1,
      seed: 11,
      max_tokens: 120,
    };
    const reply = await s.client.chat.completions.create(params);
    const call = reply.choices[0]!.message.tool_calls![0]! as any;
    checkCall(call);
    const stream = await s.client.chat.completions.create({ ...params, stream: true });
    let args = "";
    let name = "";
    for await (const chunk of stream) {
      for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) {
        name += d.function?.name ?? "";
        args += d.function?.arguments ?? "";
      }
    }
    expect(name).toBe(call.function.name);
    expect(args).toBe(call.function.arguments);
  });

  test("a conversation with a call and its result goes on", async () => {
    const messages = [
      { role: "user", content: "weather in Oslo?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          {
            id: "call_1",
            type: "function",
            function: { name: "get_weather", arguments: '{"city":"Oslo","unit":"c"}' },
          },
        ],
      },
      { role: "tool", tool_call_id: "call_1", content: '{"temp": 3}' },
    ];
    const { status, json } = await postJson(s, "/v1/chat/completions", {
      model: s.model,
      messages,
      tools,
      max_tokens: 8,
      temperature: 0,
    });
    expect(status).toBe(200);
    expect(json.usage.prompt_tokens).toBeGreaterThan(20);
  });

  test("tool_choice auto: free text stays free, but a call that starts is held to its schema", async () => {
    // Push the model to open a call (the fixture's <tool_call> is token 6); from there the lazy grammar holds.
    for (const seed of [1, 2, 3]) {
      const { json } = await postJson(
        s,
        "/v1/chat/completions",
        ask({ seed, tool_choice: "auto", parallel_tool_calls: false, logit_bias: { "6": 100 } }),
      );
      const choice = json.choices[0];
      expect(choice.finish_reason).toBe("tool_calls");
      checkCall(choice.message.tool_calls[0]);
    }
  });

  test("tool_choice none and auto do not force a call", async () => {
    for (const tool_choice of ["none", "auto"]) {
      const { json } = await postJson(
        s,
        "/v1/chat/completions",
        ask({ tool_choice, seed: 2, max_tokens: 8, ignore_eos: true }),
      );
      expect(json.choices[0].finish_reason).toBe("length");
    }
  });
});

describe("tool call edge cases", () => {
  test("a stop string that cuts a call before it closes: not offered as a call to run (finish stop)", async () => {
    const { json } = await postJson(
      s,
      "/v1/chat/completions",
      ask({
        seed: 1,
        tool_choice: "auto",
        parallel_tool_calls: false,
        logit_bias: { "6": 100 },
        stop: ['"arguments"'],
      }),
    );
    expect(json.choices[0].finish_reason).toBe("stop");
  });

  test("a forced choice with no function to call is a 400, never served unconstrained", async () => {
    for (const body of [
      { tools: [], tool_choice: "required" },
      { tools: [{ type: "retrieval" }], tool_choice: "required" },
      {
        tools: [{ type: "custom", function: { name: "f" } }],
        tool_choice: { type: "function", function: { name: "f" } },
      },
    ]) {
      const { status, json } = await postJson(s, "/v1/chat/completions", {
        model: s.model,
        messages: user("hi"),
        max_tokens: 4,
        ...body,
      });
      expect(status).toBe(400);
      expect(json.error.param).toBe("tool_choice");
    }
  });

  test("under auto, a tool schema the compiler cannot honour leaves calls unconstrained instead of failing", async () => {
    const odd = [
      {
        type: "function",
        function: { name: "f", parameters: { type: "object", properties: { a: { type: "string", pattern: "(((" } } } },
      },
    ];
    const auto = await postJson(s, "/v1/chat/completions", {
      model: s.model,
      messages: user("hi"),
      tools: odd,
      max_tokens: 4,
    });
    expect(auto.status).toBe(200);
    const forced = await postJson(s, "/v1/chat/completions", {
      model: s.model,
      messages: user("hi"),
      tools: odd,
      tool_choice: "required",
      max_tokens: 4,
    });
    expect(forced.status).toBe(400);
  });

  test("parameters that are no schema at all are a 400 under any tool_choice", async () => {
    for (const tool_choice of [undefined, "auto", "required"]) {
      const bad = [{ type: "function", function: { name: "f", parameters: "x" } }];
      const r = await postJson(s, "/v1/chat/completions", {
        model: s.model,
        messages: user("hi"),
        tools: bad,
        tool_choice,
        max_tokens: 4,
      });
      expect(r.status).toBe(400);
      expect(r.json.error.param).toBe("tools[0].function.parameters");
    }
  });
});
