// POST /v1/completions as OpenAI's completions API and its clients use it
// (docs/api/openai.md#completions): stop strings, n choices, prompts as arrays of strings, token ids
// and token-id arrays, best_of, usage summed over prompts. Driven with the
// official SDK and raw HTTP/SSE. The tiny model has random weights: expected
// texts come from greedy replies generated first, never from fixed strings.
import { describe, expect, test } from "bun:test";
import { envelope, post, postJson, readSse, slots, useServer, waitIdle } from "../support.ts";

const s = useServer();

const PROMPT = "once upon a time there was";
const OTHER = "the ship sailed north across";

/**
 * A greedy request that runs to max_tokens (ignore_eos also ignores stop strings, docs/api/openai.md#sampling-fields).
 */
const greedy = (extra: Record<string, unknown> = {}): Record<string, any> => ({
  model: s.model,
  prompt: PROMPT,
  temperature: 0,
  max_tokens: 16,
  ignore_eos: true,
  ...extra,
});

const complete = (body: Record<string, unknown>) => postJson(s, "/v1/completions", body);

/** The single-prompt greedy text of `prompt`. */
const greedyText = async (prompt: unknown, extra: Record<string, unknown> = {}) => {
  const { status, json } = await complete(greedy({ prompt, ...extra }));
  expect(status).toBe(200);
  return json.choices[0].text as string;
};

/** Each choice index's streamed text joined, and its finish chunks. */
function byIndex(events: any[]) {
  const text = new Map<number, string>();
  const finishes = new Map<number, string[]>();
  for (const e of events) {
    for (const c of e.choices) {
      text.set(c.index, (text.get(c.index) ?? "") + c.text);
      if (c.finish_reason !== null) finishes.set(c.index, [...(finishes.get(c.index) ?? []), c.finish_reason]);
    }
  }
  return { text, finishes };
}

const tokensOf = async (content: string): Promise<number[]> =>
  (await postJson(s, "/v1/tokenize", { content, add_special: true })).json.tokens;

describe("stop", () => {
  // Without ignore_eos, so stop strings apply; a reply cut short by an end token is still long enough here.
  const withStops = (extra: Record<string, unknown> = {}) => greedy({ ignore_eos: false, max_tokens: 40, ...extra });
  const baseline = async () => {
    const { json } = await complete(withStops());
    const text = json.choices[0].text as string;
    expect(text.length).toBeGreaterThan(30);
    return text;
  };

  /** A substring of `text` whose first occurrence starts at or after `from`. */
  const pick = (text: string, from: number, len: number) => {
    for (let i = from; i + len <= text.length; i++) {
      const sub = text.slice(i, i + len);
      if (text.indexOf(sub) === i && sub.trim() !== "") return sub;
    }
    throw new Error(`no fresh ${len}-char substring after ${from} in ${JSON.stringify(text)}`);
  };

  test("a string stop (SDK, not streamed): the text ends right before it, finish_reason stop", async () => {
    const text = await baseline();
    const stop = pick(text, 12, 4);
    const reply = await s.client.completions.create({
      model: s.model,
      prompt: PROMPT,
      temperature: 0,
      max_tokens: 40,
      stop,
    });
    const choice = reply.choices[0]!;
    expect(choice.text).toBe(text.slice(0, text.indexOf(stop)));
    expect(choice.text).not.toContain(stop);
    expect(choice.finish_reason).toBe("stop");
    expect(reply.usage!.completion_tokens).toBeLessThan(40);
  });

  test("an array of stops cuts at the earliest match (SDK)", async () => {
    const text = await baseline();
    const late = pick(text, 24, 3);
    const early = pick(text, 10, 3);
    expect(text.indexOf(early)).toBeLessThan(text.indexOf(late));
    const reply = await s.client.completions.create({
      model: s.model,
      prompt: PROMPT,
      temperature: 0,
      max_tokens: 40,
      stop: ["\u00a7never\u00a7", late, early],
    });
    expect(reply.choices[0]!.text).toBe(text.slice(0, text.indexOf(early)));
    expect(reply.choices[0]!.finish_reason).toBe("stop");
  });

  test("streamed, string and array (raw SSE and SDK): exactly the text before the stop, finish_reason stop", async () => {
    const text = await baseline();
    const stop = pick(text, 12, 4);
    const expected = text.slice(0, text.indexOf(stop));
    for (const body of [
      withStops({ stop, stream: true }),
      withStops({ stop: [stop, "\u00a7never\u00a7"], stream: true }),
    ]) {
      const sse = await readSse(await post(s, "/v1/completions", body));
      expect(sse.data.at(-1)).toBe("[DONE]");
      expect(sse.events.map((e) => e.choices[0].text).join("")).toBe(expected);
      expect(sse.events.at(-1).choices[0].finish_reason).toBe("stop");
    }
    const stream = await s.client.completions.create({
      model: s.model,
      prompt: PROMPT,
      temperature: 0,
      max_tokens: 40,
      stop: [stop],
      stream: true,
    });
    let joined = "";
    let finish: string | null = null;
    for await (const chunk of stream) {
      joined += chunk.choices[0]?.text ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(joined).toBe(expected);
    expect(finish).toBe("stop");
  });

  test("a stop that never occurs changes nothing; ignore_eos ignores stops", async () => {
    const text = await baseline();
    const never = await complete(withStops({ stop: "\u00a7never\u00a7" }));
    expect(never.json.choices[0].text).toBe(text);
    const ignored = await complete(greedy({ max_tokens: 20, stop: pick(text, 4, 3) }));
    expect(ignored.json.usage.completion_tokens).toBe(20);
    expect(ignored.json.choices[0].finish_reason).toBe("length");
  });

  test("stop is validated as on chat", async () => {
    const r = await complete(greedy({ stop: 5 }));
    expect(r.status).toBe(400);
    expect(envelope(r.json).param).toBe("stop");
  });
});

describe("n", () => {
  test("greedy n=3 (SDK): three choices, indices 0-2, each the single greedy reply; usage counts every choice, the prompt once", async () => {
    const single = await complete(greedy());
    const reply = await s.client.completions.create({
      model: s.model,
      prompt: PROMPT,
      temperature: 0,
      max_tokens: 16,
      n: 3,
      ignore_eos: true,
    } as any);
    expect(reply.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    for (const c of reply.choices) {
      expect(c.text).toBe(single.json.choices[0].text);
      expect(c.finish_reason).toBe("length");
    }
    expect(reply.usage!.prompt_tokens).toBe(single.json.usage.prompt_tokens);
    expect(reply.usage!.completion_tokens).toBe(48);
    expect(reply.usage!.total_tokens).toBe(reply.usage!.prompt_tokens + 48);
  });

  test("seeded n=3 at temperature 1: choices differ from each other, and the whole reply repeats", async () => {
    const body = greedy({ temperature: 1, seed: 4321, n: 3 });
    const a = await complete(body);
    const b = await complete(body);
    const texts = a.json.choices.map((c: any) => c.text);
    expect(new Set(texts).size).toBe(3);
    expect(b.json.choices.map((c: any) => c.text)).toEqual(texts);
  });

  test("streamed n=3: every chunk names its choice, each choice's text is the greedy one with one finish, usage last", async () => {
    const single = await greedyText(PROMPT, { max_tokens: 8 });
    const sse = await readSse(await post(s, "/v1/completions", greedy({ max_tokens: 8, n: 3, stream: true })));
    expect(sse.data.at(-1)).toBe("[DONE]");
    for (const e of sse.events) expect(e.choices).toHaveLength(1);
    const { text, finishes } = byIndex(sse.events);
    expect([...text.keys()].sort()).toEqual([0, 1, 2]);
    for (let i = 0; i < 3; i++) {
      expect(text.get(i)).toBe(single);
      expect(finishes.get(i)).toEqual(["length"]);
    }
    const withUsage = sse.events.filter((e) => e.usage !== undefined);
    expect(withUsage).toHaveLength(1);
    expect(withUsage[0]).toBe(sse.events.at(-1));
    expect(withUsage[0].usage.completion_tokens).toBe(24);
  });

  test("best_of: accepted equal to n, otherwise 400 unsupported_parameter naming best_of", async () => {
    expect((await complete(greedy({ max_tokens: 2, n: 2, best_of: 2 }))).json.choices).toHaveLength(2);
    expect((await complete(greedy({ max_tokens: 2, best_of: 1 }))).status).toBe(200);
    for (const extra of [{ best_of: 3 }, { n: 2, best_of: 3 }, { n: 2, best_of: 1 }]) {
      const r = await complete(greedy({ max_tokens: 2, ...extra }));
      expect(r.status).toBe(400);
      const e = envelope(r.json);
      expect(e.code).toBe("unsupported_parameter");
      expect(e.param).toBe("best_of");
    }
  });

  test("n out of range or too many choices over all prompts: 400", async () => {
    for (const [extra, param] of [
      [{ n: 0 }, "n"],
      [{ n: 129 }, "n"],
      [{ n: 2, prompt: Array(65).fill("a") }, "n"],
      [{ prompt: Array(129).fill("a") }, "prompt"],
    ] as const) {
      const r = await complete(greedy({ max_tokens: 1, ...extra }));
      expect(r.status).toBe(400);
      expect(envelope(r.json).param).toBe(param);
    }
  });
});

describe("prompt arrays", () => {
  test("2 prompts with n=2 (SDK): 4 choices in OpenAI's order, each its prompt's greedy reply; usage sums the prompts once each", async () => {
    const a = await complete(greedy());
    const b = await complete(greedy({ prompt: OTHER }));
    expect(a.json.choices[0].text).not.toBe(b.json.choices[0].text);
    const reply = await s.client.completions.create({
      model: s.model,
      prompt: [PROMPT, OTHER],
      n: 2,
      temperature: 0,
      max_tokens: 16,
      ignore_eos: true,
    } as any);
    expect(reply.choices.map((c) => c.index)).toEqual([0, 1, 2, 3]);
    expect(reply.choices.map((c) => c.text)).toEqual([a, a, b, b].map((r) => r.json.choices[0].text));
    expect(reply.usage!.prompt_tokens).toBe(a.json.usage.prompt_tokens + b.json.usage.prompt_tokens);
    expect(reply.usage!.completion_tokens).toBe(64);
    expect(reply.usage!.total_tokens).toBe(reply.usage!.prompt_tokens + 64);
  });

  test("streamed, 2 prompts with n=2: each index carries its prompt's greedy text", async () => {
    const a = await greedyText(PROMPT, { max_tokens: 6 });
    const b = await greedyText(OTHER, { max_tokens: 6 });
    const sse = await readSse(
      await post(s, "/v1/completions", greedy({ prompt: [PROMPT, OTHER], n: 2, max_tokens: 6, stream: true })),
    );
    const { text, finishes } = byIndex(sse.events);
    expect([0, 1, 2, 3].map((i) => text.get(i))).toEqual([a, a, b, b]);
    for (let i = 0; i < 4; i++) expect(finishes.get(i)).toEqual(["length"]);
    expect(sse.events.at(-1).usage.completion_tokens).toBe(24);
    expect(sse.data.at(-1)).toBe("[DONE]");
  });

  test("a client that leaves a streamed multi-prompt, multi-choice request cancels every choice", async () => {
    const before = (await slots(s)).totals.decoded_tokens;
    const controller = new AbortController();
    const res = await post(
      s,
      "/v1/completions",
      greedy({ prompt: [PROMPT, OTHER], n: 2, max_tokens: 100000, stream: true }),
      { signal: controller.signal },
    );
    const reader = res.body!.getReader();
    await reader.read();
    controller.abort();
    await reader.cancel().catch(() => {});
    const idle = await waitIdle(s);
    expect(idle.idle).toBe(true);
    // A choice whose generate reached the worker just after the idle snapshot is cancelled at
    // its first tick: wait for the count to hold still (no lane left decoding), then check it.
    let settled = idle.entry.totals.decoded_tokens;
    for (let i = 0; i < 50; i++) {
      await Bun.sleep(100);
      const now = (await slots(s)).totals.decoded_tokens;
      if (now === settled) break;
      settled = now;
    }
    expect((await waitIdle(s)).idle).toBe(true);
    // Uncancelled, the four choices would each decode the rest of the 2048-token window.
    expect(settled - before).toBeLessThan(2 * 2048);
    await Bun.sleep(100);
    expect((await slots(s)).totals.decoded_tokens).toBe(settled);
  });

  test("echo with an array echoes each prompt's text before its reply", async () => {
    const a = await greedyText(PROMPT, { max_tokens: 6 });
    const b = await greedyText(OTHER, { max_tokens: 6 });
    const { json } = await complete(greedy({ prompt: [PROMPT, OTHER], echo: true, max_tokens: 6 }));
    expect(json.choices.map((c: any) => c.text)).toEqual([PROMPT + a, OTHER + b]);
    const sse = await readSse(
      await post(s, "/v1/completions", greedy({ prompt: [PROMPT, OTHER], echo: true, max_tokens: 6, stream: true })),
    );
    const { text } = byIndex(sse.events);
    expect([text.get(0), text.get(1)]).toEqual([PROMPT + a, OTHER + b]);
  });

  test("token ids: the same reply and prompt_tokens as the text they tokenize to, alone or as arrays of arrays", async () => {
    const ids = await tokensOf(PROMPT);
    const otherIds = await tokensOf(OTHER);
    expect(ids.length).toBeGreaterThan(1);
    const text = await complete(greedy());
    const byIds = await s.client.completions.create({
      model: s.model,
      prompt: ids,
      temperature: 0,
      max_tokens: 16,
      ignore_eos: true,
    } as any);
    expect(byIds.choices).toHaveLength(1);
    expect(byIds.choices[0]!.text).toBe(text.json.choices[0].text);
    expect(byIds.usage!.prompt_tokens).toBe(text.json.usage.prompt_tokens);
    const both = await complete(greedy({ prompt: [ids, otherIds] }));
    expect(both.json.choices.map((c: any) => c.text)).toEqual([text.json.choices[0].text, await greedyText(OTHER)]);
    expect(both.json.usage.prompt_tokens).toBe(ids.length + otherIds.length);
    // echo puts back the text the ids decode to.
    const echoed = await complete(greedy({ prompt: ids, echo: true, max_tokens: 2 }));
    expect(echoed.json.choices[0].text.startsWith(PROMPT)).toBe(true);
  });

  test("a token id outside the vocabulary, a fractional or negative one: 400 naming prompt", async () => {
    const size = s.server.registry.default!.tokenizer.vocabInfo.size;
    for (const prompt of [[1, size], [-1], [1.5], [[1, 2], [size + 10]]]) {
      const r = await complete(greedy({ prompt, max_tokens: 1 }));
      expect(r.status).toBe(400);
      const e = envelope(r.json);
      expect(e.type).toBe("invalid_request_error");
      expect(e.param).toBe("prompt");
      expect(e.message).toContain("token id");
    }
    // Through the SDK the refusal is an APIError with the same status.
    const refused = await s.client.completions.create({ model: s.model, prompt: [size], max_tokens: 1 }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refused).toMatchObject({ status: 400, param: "prompt" });
  });

  test("an empty array, an empty token array, mixed or malformed prompts: 400 naming prompt", async () => {
    for (const prompt of [[], [[]], ["a", 1], [1, "a"], [["a"]], { text: "a" }, 7, [null]]) {
      const r = await complete(greedy({ prompt, max_tokens: 1 }));
      expect(r.status).toBe(400);
      expect(envelope(r.json).param).toBe("prompt");
    }
  });

  test("a prompt in the array too long for the window: 400 context_length_exceeded", async () => {
    const r = await complete(greedy({ prompt: [PROMPT, "overflow ".repeat(5000)], max_tokens: 1 }));
    expect(r.status).toBe(400);
    expect(envelope(r.json).code).toBe("context_length_exceeded");
  });
});
