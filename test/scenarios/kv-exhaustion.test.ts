// Scenario (issue #6): more work than the KV pool holds at once. 2 lanes of
// 1024 tokens, 8 concurrent requests (4x the lanes), each a ~500-token
// prompt that generates 300 tokens: together they need far more cells than
// the pool has, so they must queue and take turns. Every one of them
// completes in full (200, finish_reason "length", 300 tokens); none fails.
import { describe, expect, test } from "bun:test";
import { slots, useServer, waitIdle } from "../http/support.ts";
import { postChat, proseOfTokens } from "./support.ts";

const s = useServer({ maxBatch: 2, maxContext: 1024 });
const REQUESTS = 8;

describe("KV exhaustion", () => {
  test(`${REQUESTS} concurrent ~500-token prompts x 300 tokens on 2 lanes of 1024: all complete in full`, async () => {
    const prompts = await Promise.all(Array.from({ length: REQUESTS }, (_, i) => proseOfTokens(s.url, 901 + i, 490)));
    const pool = (await slots(s)).kv_pool;
    expect(pool.cells_total).toBeLessThan(REQUESTS * (500 + 300));

    const replies = await Promise.all(
      prompts.map((content) =>
        postChat(s.url, {
          model: s.model,
          messages: [{ role: "user", content }],
          temperature: 0,
          ignore_eos: true,
          max_tokens: 300,
        }),
      ),
    );
    const summary = replies.map(
      (r) =>
        `${r.status} ${r.json.choices?.[0]?.finish_reason ?? r.json.error?.message} ${r.json.usage?.prompt_tokens}+${r.json.usage?.completion_tokens}`,
    );
    console.log(summary.join("; "));
    for (const r of replies) {
      expect(r.status).toBe(200);
      expect(r.json.choices[0].finish_reason).toBe("length");
      expect(r.json.usage.completion_tokens).toBe(300);
      expect(r.json.usage.prompt_tokens).toBeGreaterThan(480);
      expect(r.json.usage.prompt_tokens).toBeLessThan(560);
    }
    const idle = await waitIdle(s);
    expect(idle.idle).toBe(true);
    expect(idle.entry.respawns).toBe(0);
    expect(s.server.registry.default!.worker.inflightCount).toBe(0);
  });
});
