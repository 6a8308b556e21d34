// Issue #7's scenarios, scaled to the tiny model on 2 cores: an interactive
// chat sent while agents with long prompts hold every lane is answered whole
// before any agent finishes (it does not wait for a lane to come free), and
// every agent still finishes its full reply; a preempted stream's text equals
// the same request run alone. Order of events, not wall-clock bounds: the
// suite runs on busy machines.
import { describe, expect, test } from "bun:test";
import { slots, useServer, type TestServer } from "../http/support.ts";
import { proseOfTokens, streamChat } from "./support.ts";

const INTERACTIVE = { "x-superfluid-qos": "interactive" };

async function waitLanes(s: TestServer, active: number, ms = 20_000): Promise<void> {
  const started = performance.now();
  while (performance.now() - started < ms) {
    if ((await slots(s)).lanes.active >= active) return;
    await Bun.sleep(5);
  }
  throw new Error(`never saw ${active} active lanes`);
}

describe("an interactive chat among busy agents", () => {
  const s = useServer({ maxBatch: 8, maxContext: 4096, extraArgs: ["--prefill-budget", "512"] });

  test("is answered before any agent finishes, and every agent finishes its full reply", async () => {
    const chat = {
      model: s.model,
      messages: [{ role: "user", content: "quick: what time is it?" }],
      temperature: 0,
      max_tokens: 8,
      ignore_eos: true,
    };
    const idle = await streamChat(s.url, chat, undefined, INTERACTIVE);
    expect(idle.status).toBe(200);
    const idleMs = idle.firstTokenMs!;

    const REPLY = 200;
    const agents = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => ({
        model: s.model,
        messages: [{ role: "user", content: await proseOfTokens(s.url, 700 + i, 3000) }],
        temperature: 0,
        max_tokens: REPLY,
        ignore_eos: true,
      })),
    );
    const running = agents.map((body) => streamChat(s.url, body).then((r) => ({ ...r, endedAt: performance.now() })));
    await waitLanes(s, 8);
    const during = await slots(s);
    expect(during.lanes.prefilling).toBeGreaterThan(0); // they are still prefilling
    const urgent = await streamChat(s.url, chat, undefined, INTERACTIVE);
    const urgentEndedAt = performance.now();
    const done = await Promise.all(running);
    console.log(
      `interactive first token: idle ${idleMs.toFixed(1)} ms, among 8 prefilling agents ${urgent.firstTokenMs?.toFixed(1)} ms; preemptions ${(await slots(s)).totals.preemptions ?? "?"}`,
    );
    expect(urgent.status).toBe(200);
    expect(urgent.sse.events.at(-1).usage.completion_tokens).toBe(8);
    expect(urgentEndedAt).toBeLessThan(Math.min(...done.map((d) => d.endedAt)));
    for (const d of done) {
      expect(d.status).toBe(200);
      const end = d.sse.events.at(-1);
      expect(end.choices[0].finish_reason).toBe("length");
      expect(end.usage.completion_tokens).toBe(REPLY);
    }
  });
});

describe("a preempted stream", () => {
  const s = useServer({ maxBatch: 1, maxContext: 2048 });

  test("pauses for an interactive request and its text equals the same request run alone", async () => {
    const agent = {
      model: s.model,
      messages: [{ role: "user", content: "tell me everything" }],
      temperature: 0,
      max_tokens: 300,
      ignore_eos: true,
    };
    const reference = await streamChat(s.url, agent);
    let urgent: Promise<Awaited<ReturnType<typeof streamChat>>> | undefined;
    const preempted = await streamChat(s.url, agent, {
      chunks: 20,
      action: () => {
        urgent = streamChat(
          s.url,
          {
            model: s.model,
            messages: [{ role: "user", content: "hi" }],
            temperature: 0,
            max_tokens: 20,
            ignore_eos: true,
          },
          undefined,
          INTERACTIVE,
        );
      },
    });
    const u = await urgent!;
    expect(u.status).toBe(200);
    const entry = await slots(s);
    expect(entry.totals.preemptions).toBeGreaterThanOrEqual(1);
    expect(preempted.content + preempted.reasoning).toBe(reference.content + reference.reasoning);
    expect(preempted.sse.events.at(-1).usage.completion_tokens).toBe(300);
  });
});
