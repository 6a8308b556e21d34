// Scenario (issue #6): the engine worker is SIGKILLed in the middle of a
// streamed greedy reply. The stream ends with a typed error frame and
// [DONE]; what the client got is a clean prefix of the reply; the server
// replaces its worker by itself; and the same request then gives the reference
// reply again, exactly.
//
// The tiny model decodes thousands of tokens a second here, so the reply is
// long enough (1000 tokens) that the kill after 5 chunks lands well before it ends.
import { describe, expect, test } from "bun:test";
import { envelope, getJson, slots, useServer } from "../http/support.ts";
import { postChat, streamChat, type StreamResult } from "./support.ts";

const s = useServer({ maxBatch: 2, maxContext: 2048 });
const KILL_AFTER_CHUNKS = 5;

const request = () => ({
  model: s.model,
  messages: [{ role: "user", content: "tell me a story about the river and the old mountain" }],
  temperature: 0,
  ignore_eos: true,
  max_tokens: 1000,
});

let reference: { content: string; reasoning: string; finish: string; completion: number } | undefined;
let killed: { stream: StreamResult; pid: number } | undefined;

describe("worker killed mid-stream", () => {
  test("reference: a non-streamed greedy reply", async () => {
    const r = await postChat(s.url, request());
    expect(r.status).toBe(200);
    const choice = r.json.choices[0];
    reference = {
      content: choice.message.content ?? "",
      reasoning: choice.message.reasoning_content ?? "",
      finish: choice.finish_reason,
      completion: r.json.usage.completion_tokens,
    };
    expect(reference.finish).toBe("length");
    expect(reference.completion).toBe(1000);
    expect(reference.content.length + reference.reasoning.length).toBeGreaterThan(0);
  });

  test(`SIGKILL after ${KILL_AFTER_CHUNKS} chunks: the stream ends with a typed error frame, then [DONE]`, async () => {
    expect(reference).toBeDefined();
    const pid = s.server.registry.default!.worker.pid!;
    const stream = await streamChat(s.url, request(), {
      chunks: KILL_AFTER_CHUNKS,
      action: () => void process.kill(pid, "SIGKILL"),
    });
    killed = { stream, pid };
    expect(stream.status).toBe(200);
    const { data, events } = stream.sse;
    expect(data.at(-1)).toBe("[DONE]");
    // The frame before [DONE] is the error, as the server types it today: a 500 server_error with no code.
    const last = JSON.parse(data.at(-2)!);
    const error = envelope(last);
    expect(error.type).toBe("server_error");
    expect(error.code).toBeNull();
    expect(error.message).toContain("worker");
    expect(Object.keys(last)).toEqual(["error"]);
    // Exactly one error frame, and no chunk claims the reply finished.
    expect(events.filter((e) => e.error !== undefined)).toHaveLength(1);
    expect(events.filter((e) => e.choices?.[0]?.finish_reason)).toHaveLength(0);
  });

  test("what the client got is a clean, non-empty prefix of the reference", () => {
    expect(killed).toBeDefined();
    const { stream } = killed!;
    const got = stream.content.length + stream.reasoning.length;
    expect(stream.textChunks).toBeGreaterThanOrEqual(KILL_AFTER_CHUNKS);
    expect(got).toBeGreaterThan(0);
    expect(reference!.content.startsWith(stream.content)).toBe(true);
    expect(reference!.reasoning.startsWith(stream.reasoning)).toBe(true);
    // The kill cut the reply short (otherwise this run proved nothing).
    expect(got).toBeLessThan(reference!.content.length + reference!.reasoning.length);
  });

  test("the server recovers by itself: a new worker, /health ok", async () => {
    expect(killed).toBeDefined();
    const started = performance.now();
    while (s.server.registry.default!.worker.pid === killed!.pid) {
      if (performance.now() - started > 10_000) throw new Error("no new worker within 10 s");
      await Bun.sleep(10);
    }
    const health = await getJson(s, "/health");
    expect(health.status).toBe(200);
    expect(health.json.status).toBe("ok");
    const entry = await slots(s);
    expect(entry.respawns).toBe(1);
    expect(entry.lanes.active).toBe(0);
  });

  test("the same request again equals the reference exactly (non-streamed and streamed)", async () => {
    expect(reference).toBeDefined();
    const again = await postChat(s.url, request());
    expect(again.status).toBe(200);
    const choice = again.json.choices[0];
    expect(choice.message.content ?? "").toBe(reference!.content);
    expect(choice.message.reasoning_content ?? "").toBe(reference!.reasoning);
    expect(choice.finish_reason).toBe(reference!.finish);
    expect(again.json.usage.completion_tokens).toBe(reference!.completion);

    const streamed = await streamChat(s.url, request());
    expect(streamed.sse.data.at(-1)).toBe("[DONE]");
    expect(streamed.content).toBe(reference!.content);
    expect(streamed.reasoning).toBe(reference!.reasoning);
    expect(streamed.sse.events.at(-1)?.choices?.[0]?.finish_reason).toBe("length");
  });
});
