// Scenario (issue #6): a conversation's second turn reuses the first turn's
// KV. Turn 2 = turn 1's messages + the assistant's reply + a new user
// message; its cached tokens cover all of turn 1's prompt, the warm count is
// reported the same way everywhere (usage, x-superfluid-warm, the stream's
// terminal superfluid.warm), and the engine prefills no more than the
// uncached rest. Then the same with the first turn's prefix pushed out of the
// KV pool by other conversations: it comes back from the host tier.
//
// Times to first token are printed for a look, never asserted.
import { describe, expect, test } from "bun:test";
import { slots, useServer, waitIdle, type TestServer } from "../http/support.ts";
import { postChat, proseOfTokens, streamChat, type Message } from "./support.ts";

/** A ~800-token conversation (with the template's tokens) whose text comes from `seed`. */
async function conversation(s: TestServer, seed: number): Promise<Message[]> {
  return [
    { role: "system", content: await proseOfTokens(s.url, seed, 400) },
    { role: "user", content: await proseOfTokens(s.url, seed + 1, 200) },
    { role: "assistant", content: await proseOfTokens(s.url, seed + 2, 120) },
    { role: "user", content: await proseOfTokens(s.url, seed + 3, 60) },
  ];
}

const chat = (s: TestServer, messages: Message[]) => ({
  model: s.model,
  messages,
  temperature: 0,
  ignore_eos: true,
  max_tokens: 16,
});

const turn2 = (turn1: Message[], reply: string): Message[] => [
  ...turn1,
  { role: "assistant", content: reply },
  { role: "user", content: "and what happened after that" },
];

describe("warm repeat", () => {
  const s = useServer({ maxBatch: 2, maxContext: 2048 });

  test("turn 2 (non-streamed) finds all of turn 1 cached; header, usage and superfluid.warm agree; prefill covers only the rest", async () => {
    const messages = await conversation(s, 101);
    const first = await postChat(s.url, chat(s, messages));
    expect(first.status).toBe(200);
    const p1 = first.json.usage.prompt_tokens as number;
    expect(p1).toBeGreaterThan(750);
    expect(p1).toBeLessThan(900);

    const before = (await waitIdle(s)).entry.totals;
    const second = await postChat(s.url, chat(s, turn2(messages, first.json.choices[0].message.content)));
    const after = (await waitIdle(s)).entry.totals;
    expect(second.status).toBe(200);
    const prompt = second.json.usage.prompt_tokens as number;
    const cached = second.json.usage.prompt_tokens_details.cached_tokens as number;
    console.log(
      `turn 1: ${p1} prompt tokens; turn 2: ${prompt} prompt tokens, ${cached} cached, ${after.prefilled_tokens - before.prefilled_tokens} prefilled`,
    );
    expect(cached).toBeGreaterThanOrEqual(p1);
    expect(cached).toBeLessThan(prompt);
    expect(second.headers.get("x-superfluid-warm")).toBe(String(cached));
    expect(second.json.superfluid.warm).toBe(cached);
    expect(after.prefilled_tokens - before.prefilled_tokens).toBeLessThanOrEqual(prompt - cached);
  });

  test("turn 2 streamed: the terminal chunk's superfluid.warm equals usage's cached_tokens and the header; times to first token printed", async () => {
    const messages = await conversation(s, 301);
    const first = await streamChat(s.url, chat(s, messages));
    expect(first.status).toBe(200);
    const end1 = first.sse.events.at(-1);
    expect(end1.choices[0].finish_reason).toBe("length");
    const p1 = end1.usage.prompt_tokens as number;
    expect(first.content.length + first.reasoning.length).toBeGreaterThan(0);

    const second = await streamChat(s.url, chat(s, turn2(messages, first.content)));
    expect(second.status).toBe(200);
    expect(second.sse.data.at(-1)).toBe("[DONE]");
    const end2 = second.sse.events.at(-1);
    expect(end2.choices[0].finish_reason).toBe("length");
    const cached = end2.usage.prompt_tokens_details.cached_tokens as number;
    console.log(
      `time to first token: turn 1 ${first.firstTokenMs?.toFixed(1)} ms (${p1} prompt tokens, ${end1.usage.prompt_tokens_details.cached_tokens} cached); ` +
        `turn 2 ${second.firstTokenMs?.toFixed(1)} ms (${end2.usage.prompt_tokens} prompt tokens, ${cached} cached)`,
    );
    expect(cached).toBeGreaterThanOrEqual(p1);
    expect(end2.superfluid.warm).toBe(cached);
    expect(second.headers.get("x-superfluid-warm")).toBe(String(cached));
  });
});

describe("warm repeat from the host tier", () => {
  // One lane: the pool has 4 sequences (lanes + 2, at least 4), so 5 other
  // conversations push conversation A's prefix out of it.
  const s = useServer({ maxBatch: 1, maxContext: 2048 });

  test("turn 2 of a conversation pushed out of the KV pool by 5 others still finds turn 1 cached", async () => {
    const a = await conversation(s, 501);
    const first = await postChat(s.url, chat(s, a));
    expect(first.status).toBe(200);
    const p1 = first.json.usage.prompt_tokens as number;
    expect(p1).toBeGreaterThan(750);

    for (let i = 0; i < 5; i++) {
      const other = await postChat(s.url, chat(s, await conversation(s, 601 + 10 * i)));
      expect(other.status).toBe(200);
      expect(other.json.usage.prompt_tokens).toBeGreaterThan(750);
      // Distinct conversations: nothing worth reusing between them.
      expect(other.json.usage.prompt_tokens_details.cached_tokens).toBeLessThan(16);
    }
    const entry = await slots(s);
    expect(entry.kv_pool.sequences).toBe(4);

    const second = await postChat(s.url, chat(s, turn2(a, first.json.choices[0].message.content)));
    expect(second.status).toBe(200);
    const cached = second.json.usage.prompt_tokens_details.cached_tokens as number;
    const tier = (await slots(s)).prefix_cache;
    console.log(
      `host tier: turn 1 ${p1} prompt tokens; turn 2 ${second.json.usage.prompt_tokens} prompt tokens, ${cached} cached; prefix cache ${JSON.stringify(tier)}`,
    );
    // It came back from host memory: A's cells had been overwritten.
    expect(tier.host_imports).toBeGreaterThanOrEqual(1);
    expect(cached).toBeGreaterThanOrEqual(p1);
    expect(second.headers.get("x-superfluid-warm")).toBe(String(cached));
  });
});
