// Scenario (issue #6): a burst of 16 concurrent chat requests that share a
// system prompt of ~1200 tokens and differ only in a short user question, on
// 4 lanes. The shared prefix should be prefilled about once, not once per
// lane that happened to start at the same time: at most 2 replies may report
// fewer cached tokens than the shared prefix, and the prompt tokens the engine
// prefilled over the burst stay well below 16 × the shared prefix.
//
// The tiny model prefills 1200 tokens in a few milliseconds, faster than the
// requests come in over HTTP, so requests sent "at once" would reach the
// engine one after another. To make the burst really concurrent, a holder
// request with n = 4 first occupies every lane; the 16 burst requests then all
// wait in the queue, and cancelling the holder frees the 4 lanes in one go.
// The holder runs in the interactive class, above the burst's default agent
// class: fair share never crosses classes, so no burst request takes one of
// its lanes (and finishes, leaving a lane free) before the abort.
import { describe, expect, test } from "bun:test";
import { post, slots, useServer, user, waitIdle } from "../http/support.ts";
import { commonPrefix, postChat, promptTokensOf, proseOfTokens, type Message } from "./support.ts";

// A long window keeps the holders decoding until they are cancelled.
const s = useServer({ maxBatch: 4, maxContext: 8192 });
const BURST = 16;

async function waitFor(check: () => Promise<boolean>, failure: string, timeoutMs = 10_000): Promise<void> {
  const started = performance.now();
  while (!(await check())) {
    if (performance.now() - started > timeoutMs) throw new Error(failure);
    await Bun.sleep(5);
  }
}

const QUESTIONS = [
  "what is the river called",
  "where does the king live",
  "how old is the tree",
  "why is the sea blue",
  "who made the ship",
  "when does the music start",
  "which horse is fast",
  "can a fish sing",
  "tell me about the mountain",
  "is the farm near the city",
  "do birds talk at night",
  "name the color of the door",
  "does the dog eat food",
  "give me five numbers",
  "say hello to the girl",
  "find the car on the road",
];

describe("shared-prefix burst", () => {
  test(`${BURST} concurrent requests sharing a ~1200-token system prompt: at most 2 miss the shared prefix`, async () => {
    const system = await proseOfTokens(s.url, 61, 1200);
    const conversations: Message[][] = QUESTIONS.slice(0, BURST).map((q) => [
      { role: "system", content: system },
      { role: "user", content: q },
    ]);
    // The shared prefix, in tokens, as the server renders and tokenizes these prompts.
    const prompts = await Promise.all(conversations.map((m) => promptTokensOf(s, m)));
    const shared = Math.min(...prompts.slice(1).map((p) => commonPrefix(prompts[0]!, p)));
    expect(shared).toBeGreaterThan(1000);
    expect(shared).toBeLessThan(1300);
    for (const p of prompts) expect(p.length).toBeGreaterThan(shared);

    // Hold every lane: one request with n = 4, so one abort cancels all four choices at once.
    const hold = new AbortController();
    const holder = post(
      s,
      "/v1/chat/completions",
      { model: s.model, messages: user("hold the lanes"), n: 4, temperature: 0, ignore_eos: true, max_tokens: 8000 },
      { signal: hold.signal, headers: { "content-type": "application/json", "x-superfluid-qos": "interactive" } },
    ).then(
      (r) => `answered ${r.status}`,
      (err: Error) => err.name,
    );
    await waitFor(async () => (await slots(s)).lanes.active === 4, "the holder's 4 choices never all had a lane");
    const burst = conversations.map((messages) =>
      postChat(s.url, { model: s.model, messages, temperature: 0, ignore_eos: true, max_tokens: 4 }),
    );
    await waitFor(async () => {
      const e = await slots(s);
      if (e.lanes.active < 4) throw new Error("a holder finished before the burst was queued: the window is too short");
      return e.lanes.queued === BURST;
    }, `the ${BURST} burst requests never all waited in the queue`);
    const before = (await slots(s)).totals;
    hold.abort();
    expect(await holder).toBe("AbortError");
    const replies = await Promise.all(burst);
    const idle = await waitIdle(s);
    expect(idle.idle).toBe(true);
    const after = idle.entry.totals;

    for (const [i, r] of replies.entries()) {
      expect(r.status).toBe(200);
      expect(r.json.usage.prompt_tokens).toBe(prompts[i]!.length);
      expect(r.json.usage.completion_tokens).toBe(4);
    }
    const cached = replies.map((r) => r.json.usage.prompt_tokens_details.cached_tokens as number);
    const misses = cached.filter((c) => c < shared).length;
    const prefilled = after.prefilled_tokens - before.prefilled_tokens;
    const suffixes = prompts.reduce((n, p) => n + p.length - shared, 0);
    console.log(
      `shared prefix ${shared} tokens; cached per reply [${cached.join(", ")}]; ${misses} below the prefix; prefilled ${prefilled} (16 x shared = ${BURST * shared})`,
    );

    expect(misses).toBeLessThanOrEqual(2);
    // Prefilled over the burst: the shared prefix at most twice, plus each request's own suffix.
    expect(prefilled).toBeLessThanOrEqual(2 * shared + suffixes);
    expect(prefilled).toBeLessThan((BURST * shared) / 4);
  });
});
