// Issue #34 (5): a request with n: 8 choices held all 8 lanes of the
// built-in model and a 2-token chat sent 1.5 s later was answered after
// 156.9 s. A request's choices now share the lanes fairly with other
// requests of their class (docs/design.md#fair-share): the chat is answered
// while the big request runs, and the big request still completes with all
// its choices. Events, not clocks: the test waits for /slots to show every
// lane busy, and checks that the big request is still running when the chat
// has its whole reply.
import { describe, expect, test } from "bun:test";
import { slots, useServer, user, type TestServer } from "./support.ts";

const LANES = 4;
const s = useServer({ maxBatch: LANES });

/** Polls /slots until every lane is active with nothing prefilling (the hang guard is no bound on the wait). */
async function allLanesDecoding(server: TestServer, hangGuardMs = 120_000): Promise<void> {
  const started = performance.now();
  for (;;) {
    const e = await slots(server);
    if (e.lanes.active === LANES && e.lanes.prefilling === 0) return;
    if (performance.now() - started > hangGuardMs) throw new Error(`lanes never all busy: ${JSON.stringify(e.lanes)}`);
    await Bun.sleep(10);
  }
}

const postJson = (path: string, body: object) =>
  fetch(`${s.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: s.model, ...body }),
  }).then(async (res) => ({ status: res.status, json: (await res.json()) as any }));

/**
 * Sends `big`, waits until it holds every lane, then a 2-token chat: the chat must be answered while `big` still runs.
 */
async function chatBeside(big: () => Promise<{ status: number; json: any }>) {
  let bigDone = false;
  const running = big().finally(() => (bigDone = true));
  await allLanesDecoding(s);
  const before = await slots(s);
  // ignore_eos: the random-weight fixture may sample its end token first, a reply of 0 tokens.
  const chat = await postJson("/v1/chat/completions", { messages: user("Hi"), max_tokens: 2, ignore_eos: true });
  const stillRunning = !bigDone;
  const after = await slots(s);
  return { chat, stillRunning, preempted: after.totals.preemptions - before.totals.preemptions, big: await running };
}

describe("one request's choices share the lanes with other requests", () => {
  test("chat n: 4 holding every lane: a 2-token chat is answered before it ends; all its choices complete", async () => {
    const r = await chatBeside(() =>
      postJson("/v1/chat/completions", {
        messages: user("a long story"),
        n: LANES,
        max_tokens: 1500,
        ignore_eos: true,
      }),
    );
    expect(r.chat.status).toBe(200);
    expect(r.chat.json.usage.completion_tokens).toBe(2);
    expect(r.stillRunning).toBe(true);
    expect(r.preempted).toBeGreaterThanOrEqual(1);
    expect(r.big.status).toBe(200);
    expect(r.big.json.choices).toHaveLength(LANES);
    for (const c of r.big.json.choices) expect(c.finish_reason).toBe("length");
    expect(r.big.json.usage.completion_tokens).toBe(LANES * 1500);
  });

  test("a completions prompt array holding every lane shares them the same way", async () => {
    const prompts = Array.from({ length: LANES }, (_, i) => `story number ${i}`);
    const r = await chatBeside(() =>
      postJson("/v1/completions", { prompt: prompts, max_tokens: 1500, ignore_eos: true }),
    );
    expect(r.chat.status).toBe(200);
    expect(r.stillRunning).toBe(true);
    expect(r.big.json.choices).toHaveLength(LANES);
    for (const c of r.big.json.choices) expect(c.finish_reason).toBe("length");
  });
});
