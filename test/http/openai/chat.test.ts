// POST /v1/chat/completions over HTTP (docs/api/openai.md#chat-completions):
// response shape, streaming, n choices, logprobs, stop strings, token caps,
// seeds, template switches. Driven with raw fetch and the official SDK.
// The tiny model has random weights: tests check structure and determinism.
import { describe, expect, test } from "bun:test";
import { post, postJson, readSse, slots, useServer, user } from "../support.ts";

const s = useServer();

const PROMPT = "tell me a story about the sea";

/** A greedy request that always runs to max_tokens. */
const greedy = (extra: Record<string, unknown> = {}): Record<string, any> => ({
  model: s.model,
  messages: user(PROMPT),
  temperature: 0,
  max_tokens: 24,
  ignore_eos: true,
  ...extra,
});

const chat = (body: Record<string, unknown>) => postJson(s, "/v1/chat/completions", body);

/** Concatenated content of a parsed chat stream (choice 0). */
const streamedText = (events: any[]) => events.map((e) => e.choices?.[0]?.delta?.content ?? "").join("");

describe("non-streaming chat", () => {
  test("the reply has OpenAI's shape, usage with cached_tokens, and x-superfluid-warm", async () => {
    const before = Math.floor(Date.now() / 1000);
    const { status, headers, json } = await chat(greedy());
    expect(status).toBe(200);
    expect(headers.get("content-type")).toContain("application/json");
    expect(json.id).toMatch(/^chatcmpl-superfluid-\d+$/);
    expect(json.object).toBe("chat.completion");
    expect(Number.isInteger(json.created)).toBe(true);
    expect(json.created).toBeGreaterThanOrEqual(before - 1);
    expect(json.created).toBeLessThanOrEqual(Math.floor(Date.now() / 1000) + 1);
    expect(json.model).toBe(s.model);
    expect(json.choices).toHaveLength(1);
    const choice = json.choices[0];
    expect(choice.index).toBe(0);
    expect(choice.message.role).toBe("assistant");
    expect(typeof choice.message.content).toBe("string");
    expect(choice.message.content.length).toBeGreaterThan(0);
    expect(choice.message.tool_calls).toBeUndefined();
    expect(choice.logprobs).toBeNull();
    expect(choice.finish_reason).toBe("length");
    const u = json.usage;
    expect(Number.isInteger(u.prompt_tokens)).toBe(true);
    expect(u.prompt_tokens).toBeGreaterThan(5);
    expect(u.completion_tokens).toBe(24);
    expect(u.total_tokens).toBe(u.prompt_tokens + u.completion_tokens);
    const cached = u.prompt_tokens_details.cached_tokens;
    expect(Number.isInteger(cached)).toBe(true);
    expect(cached).toBeGreaterThanOrEqual(0);
    expect(cached).toBeLessThanOrEqual(u.prompt_tokens);
    expect(headers.get("x-superfluid-warm")).toBe(String(cached));
    expect(json.superfluid.warm).toBe(cached);
    expect(json.superfluid.spec).toBeUndefined(); // no speculative decoding ran
  });

  test("ids are unique per request", async () => {
    const a = await chat(greedy({ max_tokens: 1 }));
    const b = await chat(greedy({ max_tokens: 1 }));
    expect(a.json.id).not.toBe(b.json.id);
  });

  test("a repeated prompt is served warm from the prefix cache (cached_tokens, header and superfluid.warm agree)", async () => {
    const body = greedy({
      messages: user(`warm prefix check ${Math.random()} ${"alpha beta gamma ".repeat(20)}`),
      max_tokens: 4,
    });
    const first = await chat(body);
    const second = await chat(body);
    const P = second.json.usage.prompt_tokens;
    expect(first.json.usage.prompt_tokens).toBe(P);
    expect(first.json.usage.prompt_tokens_details.cached_tokens).toBeLessThan(P / 2); // cold: only the scaffold can match
    const warm = second.json.usage.prompt_tokens_details.cached_tokens;
    expect(warm).toBeGreaterThanOrEqual(P - 1);
    expect(warm).toBeLessThanOrEqual(P);
    expect(second.headers.get("x-superfluid-warm")).toBe(String(warm));
    expect(second.json.superfluid.warm).toBe(warm);
    // Warm or cold, greedy output is the same.
    expect(second.json.choices[0].message.content).toBe(first.json.choices[0].message.content);
  });

  test("a follow-up turn that repeats the conversation is served warm", async () => {
    const opening = `conversation ${Math.random()} ${"delta epsilon zeta ".repeat(15)}`;
    const a = await chat(greedy({ messages: user(opening), max_tokens: 6 }));
    const b = await chat(
      greedy({
        messages: [
          { role: "user", content: opening },
          { role: "assistant", content: a.json.choices[0].message.content },
          { role: "user", content: "and then?" },
        ],
        max_tokens: 4,
      }),
    );
    expect(b.json.usage.prompt_tokens).toBeGreaterThan(a.json.usage.prompt_tokens);
    // Everything up to the first reply's prompt is reused (a token or two of slack at the turn seam).
    expect(b.json.usage.prompt_tokens_details.cached_tokens).toBeGreaterThanOrEqual(a.json.usage.prompt_tokens - 2);
  });

  test("the SDK reads the same reply and the warm header", async () => {
    const raw = await chat(greedy());
    const { data, response } = await s.client.chat.completions.create(greedy() as any).withResponse();
    expect(data.object).toBe("chat.completion");
    expect(data.model).toBe(s.model);
    expect(data.choices[0]!.message.content).toBe(raw.json.choices[0].message.content);
    expect(data.choices[0]!.finish_reason).toBe("length");
    expect(data.usage!.completion_tokens).toBe(24);
    expect(response.headers.get("x-superfluid-warm")).toBe(String(data.usage!.prompt_tokens_details!.cached_tokens));
  });

  test("content given as text parts is the same prompt as a string", async () => {
    const asString = await chat(greedy({ messages: user("part one part two") }));
    const asParts = await chat(
      greedy({
        messages: user([
          { type: "text", text: "part one " },
          { type: "text", text: "part two" },
        ]),
      }),
    );
    expect(asParts.status).toBe(200);
    expect(asParts.json.usage.prompt_tokens).toBe(asString.json.usage.prompt_tokens);
    expect(asParts.json.choices[0].message.content).toBe(asString.json.choices[0].message.content);
  });

  test("system, developer, assistant (with tool calls) and tool turns are accepted; unknown fields are ignored", async () => {
    const { status, json } = await chat(
      greedy({
        messages: [
          { role: "system", content: "you are terse" },
          { role: "user", content: "hi" },
          { role: "assistant", content: "hello" },
          { role: "developer", content: "be nice" },
          { role: "user", content: "weather in Oslo?" },
          {
            role: "assistant",
            content: null,
            tool_calls: [
              { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } },
            ],
          },
          { role: "tool", tool_call_id: "call_1", content: "rainy" },
          { role: "user", content: "thanks" },
        ],
        max_tokens: 3,
        some_unknown_field: { nested: [1, 2, 3] },
        user: "someone",
        metadata: { a: "b" },
      }),
    );
    expect(status).toBe(200);
    expect(json.usage.completion_tokens).toBe(3);
  });

  test("marker-shaped text in client content is ordinary text, not a special token", async () => {
    const empty = await chat(greedy({ messages: user(""), max_tokens: 1 }));
    const marker = await chat(greedy({ messages: user("<|im_end|>"), max_tokens: 1 }));
    expect(marker.status).toBe(200);
    // As a special token it would add exactly one token; as text it is several.
    expect(marker.json.usage.prompt_tokens - empty.json.usage.prompt_tokens).toBeGreaterThan(1);
  });

  test("tools are rendered into the prompt; tool_choice none hides them from the model", async () => {
    const tools = [
      {
        type: "function",
        function: {
          name: "get_weather",
          description: "current weather",
          parameters: { type: "object", properties: { city: { type: "string" } } },
        },
      },
    ];
    const plain = await chat(greedy({ max_tokens: 1 }));
    const withTools = await chat(greedy({ max_tokens: 1, tools }));
    const hidden = await chat(greedy({ max_tokens: 1, tools, tool_choice: "none" }));
    expect(withTools.status).toBe(200);
    expect(withTools.json.usage.prompt_tokens).toBeGreaterThan(plain.json.usage.prompt_tokens + 20);
    expect(hidden.json.usage.prompt_tokens).toBe(plain.json.usage.prompt_tokens);
  });

  test("logit_bias +100 on a token id forces that token", async () => {
    const id = (await postJson(s, "/v1/tokenize", { content: " world" })).json.tokens;
    expect(id).toHaveLength(1);
    const { json } = await chat(greedy({ max_tokens: 3, logit_bias: { [String(id[0])]: 100 } }));
    expect(json.choices[0].message.content).toBe(" world world world");
  });

  test("an end-of-generation token ends the reply: finish_reason stop, no marker in the text", async () => {
    const props = (await (await fetch(`${s.url}/props`)).json()) as any;
    const eos = props.eos_token;
    expect(Number.isInteger(eos)).toBe(true);
    const { json } = await chat({
      model: s.model,
      messages: user(PROMPT),
      temperature: 0,
      max_tokens: 8,
      logit_bias: { [String(eos)]: 100 },
    });
    expect(json.choices[0].finish_reason).toBe("stop");
    expect(json.choices[0].message.content).toBe("");
    expect(json.usage.completion_tokens).toBeLessThanOrEqual(1);
  });

  test("ignore_eos ignores stop strings too (every stop condition)", async () => {
    const base = await chat(greedy({ max_tokens: 30 }));
    const text = base.json.choices[0].message.content as string;
    const { json } = await chat(greedy({ max_tokens: 30, stop: text.slice(5, 8) }));
    expect(json.choices[0].message.content).toBe(text);
    expect(json.choices[0].finish_reason).toBe("length");
  });

  test("ignore_eos never samples an end-of-generation token, even when it is the favourite", async () => {
    const props = (await (await fetch(`${s.url}/props`)).json()) as any;
    const eos = props.eos_token;
    for (const sampling of [{ temperature: 0 }, { temperature: 1, seed: 7 }]) {
      const { json } = await chat({
        model: s.model,
        messages: user(PROMPT),
        max_tokens: 8,
        ignore_eos: true,
        logit_bias: { [String(eos)]: 100 },
        ...sampling,
      });
      expect(json.choices[0].finish_reason).toBe("length");
      expect(json.usage.completion_tokens).toBe(8);
      expect(json.choices[0].message.content).not.toContain("<|im_end|>");
    }
  });

  test("requests beyond the lane count queue and all complete", async () => {
    const bodies = Array.from({ length: 7 }, (_, i) =>
      greedy({ max_tokens: 8 + i, messages: user(`queue ${i}`), stream: i % 2 === 1 }),
    );
    const results = await Promise.all(
      bodies.map(async (b) => {
        const res = await post(s, "/v1/chat/completions", b);
        expect(res.status).toBe(200);
        if (!b.stream) return ((await res.json()) as any).usage.completion_tokens;
        const sse = await readSse(res);
        expect(sse.data.at(-1)).toBe("[DONE]");
        return sse.events.at(-1).usage.completion_tokens;
      }),
    );
    expect(results).toEqual(bodies.map((b) => b.max_tokens));
    const entry = await slots(s);
    expect(entry.lanes.active).toBe(0);
    expect(entry.lanes.queued).toBe(0);
  });
});

describe("streaming chat", () => {
  test("raw SSE: role chunk, content deltas, one terminal chunk with usage and warm, then [DONE]", async () => {
    const reference = await chat(greedy());
    const res = await post(s, "/v1/chat/completions", greedy({ stream: true }));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toStartWith("text/event-stream");
    const sse = await readSse(res);
    expect(sse.raw.endsWith("data: [DONE]\n\n")).toBe(true);
    expect(sse.data.at(-1)).toBe("[DONE]");
    expect(sse.data.filter((d) => d === "[DONE]")).toHaveLength(1);
    const { events } = sse;
    expect(events.length).toBeGreaterThanOrEqual(3);
    const id = events[0].id;
    expect(id).toMatch(/^chatcmpl-superfluid-\d+$/);
    for (const e of events) {
      expect(e.id).toBe(id);
      expect(e.object).toBe("chat.completion.chunk");
      expect(e.model).toBe(s.model);
      expect(Number.isInteger(e.created)).toBe(true);
      expect(e.choices).toHaveLength(1);
      expect(e.choices[0].index).toBe(0);
    }
    // First chunk: the role, no text yet.
    const first = events[0].choices[0];
    expect(first.delta.role).toBe("assistant");
    expect(first.delta.content ?? "").toBe("");
    expect(first.finish_reason).toBeNull();
    // Only the last chunk finishes, and it carries usage and superfluid.warm.
    const finishing = events.filter((e) => e.choices[0].finish_reason !== null);
    expect(finishing).toHaveLength(1);
    const last = events.at(-1);
    expect(finishing[0]).toBe(last);
    expect(last.choices[0].finish_reason).toBe("length");
    expect(last.usage.prompt_tokens).toBe(reference.json.usage.prompt_tokens);
    expect(last.usage.completion_tokens).toBe(24);
    expect(last.usage.total_tokens).toBe(last.usage.prompt_tokens + 24);
    const cached = last.usage.prompt_tokens_details.cached_tokens;
    expect(Number.isInteger(cached)).toBe(true);
    expect(last.superfluid.warm).toBe(cached);
    // The header, when sent, agrees with the terminal chunk.
    const header = res.headers.get("x-superfluid-warm");
    if (header !== null) expect(header).toBe(String(cached));
    // Content arrives as deltas (more than one), never on the role or terminal chunk.
    const contentChunks = events.filter((e) => (e.choices[0].delta.content ?? "") !== "");
    expect(contentChunks.length).toBeGreaterThan(1);
    expect(streamedText(events)).toBe(reference.json.choices[0].message.content);
  });

  test("the SDK streams the same text as the non-streamed reply", async () => {
    const reference = await chat(greedy());
    const stream = (await s.client.chat.completions.create({
      ...(greedy() as any),
      stream: true,
    })) as unknown as AsyncIterable<any>;
    const chunks: any[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks[0].choices[0].delta.role).toBe("assistant");
    expect(streamedText(chunks)).toBe(reference.json.choices[0].message.content);
    const last = chunks.at(-1);
    expect(last.choices[0].finish_reason).toBe("length");
    expect(last.usage.completion_tokens).toBe(24);
    expect(last.superfluid.warm).toBe(last.usage.prompt_tokens_details.cached_tokens);
  });

  test("stream_options.include_usage: false still ends with usage (always on)", async () => {
    const sse = await readSse(
      await post(
        s,
        "/v1/chat/completions",
        greedy({ stream: true, stream_options: { include_usage: false }, max_tokens: 4 }),
      ),
    );
    expect(sse.events.at(-1).usage.completion_tokens).toBe(4);
  });

  test("n is treated as 1 while streaming", async () => {
    const sse = await readSse(await post(s, "/v1/chat/completions", greedy({ stream: true, n: 3, max_tokens: 6 })));
    expect(sse.data.at(-1)).toBe("[DONE]");
    for (const e of sse.events) expect(e.choices.map((c: any) => c.index)).toEqual([0]);
    expect(sse.events.at(-1).usage.completion_tokens).toBe(6);
  });

  test("continuous_usage_stats puts cumulative completion_tokens on content chunks", async () => {
    const sse = await readSse(
      await post(
        s,
        "/v1/chat/completions",
        greedy({ stream: true, stream_options: { continuous_usage_stats: true }, max_tokens: 10 }),
      ),
    );
    const content = sse.events.filter((e) => (e.choices[0].delta.content ?? "") !== "");
    expect(content.length).toBeGreaterThan(1);
    let previous = 0;
    for (const e of content) {
      expect(e.usage.completion_tokens).toBeGreaterThanOrEqual(previous);
      expect(e.usage.completion_tokens).toBeLessThanOrEqual(10);
      previous = e.usage.completion_tokens;
    }
    expect(previous).toBeGreaterThan(1);
    expect(sse.events.at(-1).usage.completion_tokens).toBe(10);
  });
});

describe("n choices", () => {
  test("greedy n=3: three choices, indexes 0-2, identical text, usage counts every choice", async () => {
    const single = await chat(greedy({ max_tokens: 12 }));
    const { status, json } = await chat(greedy({ n: 3, max_tokens: 12 }));
    expect(status).toBe(200);
    expect(json.choices.map((c: any) => c.index)).toEqual([0, 1, 2]);
    for (const c of json.choices) {
      expect(c.message.role).toBe("assistant");
      expect(c.message.content).toBe(single.json.choices[0].message.content);
      expect(c.finish_reason).toBe("length");
    }
    expect(json.usage.prompt_tokens).toBe(single.json.usage.prompt_tokens);
    expect(json.usage.completion_tokens).toBe(36);
    expect(json.usage.total_tokens).toBe(json.usage.prompt_tokens + 36);
  });

  test("seeded n=3 at temperature 1: choices differ from each other, and the whole reply repeats", async () => {
    const body = {
      model: s.model,
      messages: user(PROMPT),
      temperature: 1,
      seed: 1234,
      n: 3,
      max_tokens: 16,
      ignore_eos: true,
    };
    const a = await chat(body);
    const b = await chat(body);
    const texts = a.json.choices.map((c: any) => c.message.content);
    expect(texts).toHaveLength(3);
    expect(new Set(texts).size).toBe(3);
    expect(b.json.choices.map((c: any) => c.message.content)).toEqual(texts);
    expect(a.json.usage.completion_tokens).toBe(48);
  });

  test("stop strings and logprobs apply to every choice", async () => {
    const base = await chat(greedy({ max_tokens: 30, ignore_eos: false }));
    const text = base.json.choices[0].message.content as string;
    const stop = text.slice(12, 15);
    const { json } = await chat(
      greedy({ max_tokens: 30, ignore_eos: false, n: 2, stop, logprobs: true, top_logprobs: 2 }),
    );
    for (const c of json.choices) {
      expect(c.message.content).toBe(text.slice(0, text.indexOf(stop)));
      expect(c.finish_reason).toBe("stop");
      expect(c.logprobs.content.length).toBeGreaterThan(0);
      for (const e of c.logprobs.content) expect(e.top_logprobs).toHaveLength(2);
    }
  });

  test("the prompt of n=3 is prefilled once, not three times", async () => {
    const content = `shared prefill ${Math.random()} ${"one two three four five six seven eight nine ten ".repeat(12)}`;
    const before = (await slots(s)).totals.prefilled_tokens;
    const { json } = await chat(greedy({ messages: user(content), n: 3, max_tokens: 4 }));
    const after = (await slots(s)).totals.prefilled_tokens;
    const P = json.usage.prompt_tokens;
    const cold = P - json.usage.prompt_tokens_details.cached_tokens;
    expect(cold).toBeGreaterThan(50);
    const delta = after - before;
    expect(delta).toBeGreaterThanOrEqual(cold);
    // Siblings copy the first choice's KV; at most the last prompt token is run again for each.
    expect(delta).toBeLessThanOrEqual(cold + 2);
  });
});

describe("logprobs", () => {
  const checkEntries = (entries: any[], k: number) => {
    for (const e of entries) {
      expect(typeof e.token).toBe("string");
      expect(Number.isFinite(e.logprob)).toBe(true);
      expect(e.logprob).toBeLessThanOrEqual(0);
      expect(Array.isArray(e.bytes)).toBe(true);
      for (const b of e.bytes) expect(Number.isInteger(b) && b >= 0 && b <= 255).toBe(true);
      expect(Buffer.from(e.bytes).toString("utf8")).toBe(e.token);
      expect(e.top_logprobs).toHaveLength(k);
      for (let i = 1; i < e.top_logprobs.length; i++) {
        expect(e.top_logprobs[i - 1].logprob).toBeGreaterThanOrEqual(e.top_logprobs[i].logprob);
      }
      let mass = 0;
      for (const t of e.top_logprobs) {
        expect(t.logprob).toBeLessThanOrEqual(0);
        expect(Buffer.from(t.bytes).toString("utf8")).toBe(t.token);
        mass += Math.exp(t.logprob);
      }
      expect(mass).toBeLessThanOrEqual(1 + 1e-6);
    }
  };

  test("top_logprobs 5 at temperature 0: one entry per token, sorted, the chosen token first", async () => {
    const { json } = await chat(greedy({ logprobs: true, top_logprobs: 5, max_tokens: 16 }));
    const entries = json.choices[0].logprobs.content;
    expect(entries).toHaveLength(16);
    expect(json.usage.completion_tokens).toBe(16);
    checkEntries(entries, 5);
    for (const e of entries) {
      expect(e.top_logprobs[0].token).toBe(e.token);
      expect(e.top_logprobs[0].logprob).toBeCloseTo(e.logprob, 9);
    }
    expect(entries.map((e: any) => e.token).join("")).toBe(json.choices[0].message.content);
  });

  test("logprobs without top_logprobs gives empty alternatives; logprobs off gives null", async () => {
    const on = await chat(greedy({ logprobs: true, max_tokens: 4 }));
    const entries = on.json.choices[0].logprobs.content;
    expect(entries).toHaveLength(4);
    checkEntries(entries, 0);
    const off = await chat(greedy({ logprobs: false, max_tokens: 4 }));
    expect(off.json.choices[0].logprobs).toBeNull();
  });

  test("logprobs are of the unscaled distribution: temperature does not change them", async () => {
    const cold = await chat(greedy({ logprobs: true, top_logprobs: 5, max_tokens: 1 }));
    const hot = await chat(greedy({ logprobs: true, top_logprobs: 5, max_tokens: 1, temperature: 1.7, seed: 7 }));
    const a = cold.json.choices[0].logprobs.content[0].top_logprobs;
    const b = hot.json.choices[0].logprobs.content[0].top_logprobs;
    expect(b.map((t: any) => t.token)).toEqual(a.map((t: any) => t.token));
    b.forEach((t: any, i: number) => expect(t.logprob).toBeCloseTo(a[i].logprob, 6));
  });

  test("streamed logprobs match the non-streamed ones", async () => {
    const body = greedy({ logprobs: true, top_logprobs: 3, max_tokens: 12 });
    const { json } = await chat(body);
    const sse = await readSse(await post(s, "/v1/chat/completions", { ...body, stream: true }));
    const streamed = sse.events.flatMap((e) => e.choices[0].logprobs?.content ?? []);
    expect(streamed).toEqual(json.choices[0].logprobs.content);
  });
});

describe("stop strings", () => {
  // ignore_eos ignores every stop condition, stop strings included (docs/api/openai.md#sampling-fields), so these
  // requests leave it off.
  const greedyStops = (extra: Record<string, unknown> = {}) => greedy({ ignore_eos: false, ...extra });
  const baseline = async () => {
    const { json } = await chat(greedyStops({ max_tokens: 40, logprobs: true }));
    return {
      text: json.choices[0].message.content as string,
      tokens: json.choices[0].logprobs.content.map((e: any) => e.token) as string[],
    };
  };

  /** A substring of `text` whose first occurrence starts at or after `from`. */
  const pick = (text: string, from: number, len: number) => {
    for (let i = from; i + len <= text.length; i++) {
      const s = text.slice(i, i + len);
      if (text.indexOf(s) === i && s.trim() !== "") return s;
    }
    throw new Error(`no fresh ${len}-char substring after ${from} in ${JSON.stringify(text)}`);
  };

  test("a stop string ends the reply right before it, finish_reason stop", async () => {
    const { text } = await baseline();
    expect(text.length).toBeGreaterThan(40);
    const stop = pick(text, 20, 4);
    const { json } = await chat(greedyStops({ max_tokens: 40, stop }));
    expect(json.choices[0].message.content).toBe(text.slice(0, text.indexOf(stop)));
    expect(json.choices[0].finish_reason).toBe("stop");
    expect(json.usage.completion_tokens).toBeLessThan(40);
  });

  test("streaming with a stop string sends exactly the text before it", async () => {
    const { text } = await baseline();
    const stop = pick(text, 20, 4);
    const sse = await readSse(
      await post(s, "/v1/chat/completions", greedyStops({ max_tokens: 40, stop, stream: true })),
    );
    expect(streamedText(sse.events)).toBe(text.slice(0, text.indexOf(stop)));
    expect(sse.events.at(-1).choices[0].finish_reason).toBe("stop");
    expect(sse.data.at(-1)).toBe("[DONE]");
  });

  test("a stop string spanning two tokens is found", async () => {
    const { text, tokens } = await baseline();
    let stop: string | undefined;
    let offset = 0;
    for (let k = 0; k + 1 < tokens.length; k++) {
      offset += tokens[k]!.length;
      if (k < 4 || tokens[k]!.length < 2 || tokens[k + 1]!.length < 2) continue;
      const candidate = tokens[k]!.slice(-2) + tokens[k + 1]!.slice(0, 2);
      if (text.indexOf(candidate) === offset - 2) {
        stop = candidate;
        break;
      }
    }
    expect(stop).toBeDefined();
    const { json } = await chat(greedyStops({ max_tokens: 40, stop }));
    expect(json.choices[0].message.content).toBe(text.slice(0, text.indexOf(stop!)));
    expect(json.choices[0].finish_reason).toBe("stop");
  });

  test("an array of stops cuts at the earliest match", async () => {
    const { text } = await baseline();
    const late = pick(text, 30, 3);
    const early = pick(text, 12, 3);
    expect(text.indexOf(early)).toBeLessThan(text.indexOf(late));
    const { json } = await chat(greedyStops({ max_tokens: 40, stop: ["\u00a7never\u00a7", late, early] }));
    expect(json.choices[0].message.content).toBe(text.slice(0, text.indexOf(early)));
    expect(json.choices[0].finish_reason).toBe("stop");
  });

  test("a partial stop match at the very end is flushed, not swallowed (streamed and not)", async () => {
    const { text } = await baseline();
    // The reply ends with the first three characters of this stop string, which never completes.
    const stop = `${text.slice(-3)}\u00a7`;
    const { json } = await chat(greedyStops({ max_tokens: 40, stop }));
    expect(json.choices[0].message.content).toBe(text);
    expect(json.choices[0].finish_reason).toBe("length");
    const sse = await readSse(
      await post(s, "/v1/chat/completions", greedyStops({ max_tokens: 40, stop, stream: true })),
    );
    expect(streamedText(sse.events)).toBe(text);
    expect(sse.events.at(-1).choices[0].finish_reason).toBe("length");
  });

  test("a stop that never occurs changes nothing", async () => {
    const { text } = await baseline();
    const { json } = await chat(greedyStops({ max_tokens: 40, stop: ["\u00a7never-here\u00a7"] }));
    expect(json.choices[0].message.content).toBe(text);
    expect(json.choices[0].finish_reason).toBe("length");
    expect(json.usage.completion_tokens).toBe(40);
  });
});

describe("token caps", () => {
  test("max_tokens caps the reply with finish_reason length", async () => {
    const { json } = await chat(greedy({ max_tokens: 5 }));
    expect(json.usage.completion_tokens).toBe(5);
    expect(json.choices[0].finish_reason).toBe("length");
  });

  test("max_completion_tokens wins over max_tokens", async () => {
    const { json } = await chat(greedy({ max_tokens: 7, max_completion_tokens: 3 }));
    expect(json.usage.completion_tokens).toBe(3);
    expect(json.choices[0].finish_reason).toBe("length");
    const sdk = await s.client.chat.completions.create({
      ...(greedy() as any),
      max_tokens: 9,
      max_completion_tokens: 2,
    });
    expect(sdk.usage!.completion_tokens).toBe(2);
  });
});

describe("seeds", () => {
  const sampled = (seed: number, extra: Record<string, unknown> = {}) =>
    chat({ model: s.model, messages: user(PROMPT), temperature: 1, seed, max_tokens: 24, ignore_eos: true, ...extra });

  test("temperature 1 with the same seed repeats; another seed differs", async () => {
    const a = await sampled(42);
    const b = await sampled(42);
    const c = await sampled(43);
    expect(a.json.choices[0].message.content).toBe(b.json.choices[0].message.content);
    expect(c.json.choices[0].message.content).not.toBe(a.json.choices[0].message.content);
  });

  test("a seeded stream gives the seeded non-streamed text", async () => {
    const a = await sampled(42);
    const sse = await readSse(
      await post(s, "/v1/chat/completions", {
        model: s.model,
        messages: user(PROMPT),
        temperature: 1,
        seed: 42,
        max_tokens: 24,
        ignore_eos: true,
        stream: true,
      }),
    );
    expect(streamedText(sse.events)).toBe(a.json.choices[0].message.content);
  });

  test("seed 0 reads as unseeded: two requests differ", async () => {
    const a = await sampled(0);
    const b = await sampled(0);
    expect(a.json.choices[0].message.content).not.toBe(b.json.choices[0].message.content);
  });
});

describe("templates", () => {
  test("chat_template_kwargs enable_thinking false is accepted and renders the empty think block", async () => {
    const plain = await chat(greedy({ max_tokens: 2 }));
    const off = await chat(greedy({ max_tokens: 2, chat_template_kwargs: { enable_thinking: false } }));
    expect(off.status).toBe(200);
    expect(off.json.choices[0].message.reasoning_content).toBeUndefined();
    // The template appends "<think>\n\n</think>\n\n" to the generation prompt.
    expect(off.json.usage.prompt_tokens).toBeGreaterThan(plain.json.usage.prompt_tokens + 1);
    // Top-level shorthand does the same; chat_template_kwargs wins over it.
    const shorthand = await chat(greedy({ max_tokens: 2, enable_thinking: false }));
    expect(shorthand.json.usage.prompt_tokens).toBe(off.json.usage.prompt_tokens);
    const kwargsWin = await chat(
      greedy({ max_tokens: 2, enable_thinking: false, chat_template_kwargs: { enable_thinking: true } }),
    );
    expect(kwargsWin.json.usage.prompt_tokens).toBe(plain.json.usage.prompt_tokens);
  });
});
