// Edge cases found in review: seeds at llama.cpp's "random" marker, penalties
// that must not touch the stop set, values that must be refused up front, and
// failures that are the request's fault (400, not 500).
import { describe, expect, test } from "bun:test";
import { envelope, getJson, postJson, useServer, user } from "../support.ts";

const s = useServer();
const chat = (body: Record<string, unknown>) =>
  postJson(s, "/v1/chat/completions", { model: s.model, messages: user("hi"), ...body });

describe("review fixes", () => {
  test("seed 4294967295 (and -1) repeat like any other seed", async () => {
    for (const seed of [4294967295, -1]) {
      const a = await chat({ temperature: 1, seed, max_tokens: 16, ignore_eos: true });
      const b = await chat({ temperature: 1, seed, max_tokens: 16, ignore_eos: true });
      expect(b.json.choices[0].message.content).toBe(a.json.choices[0].message.content);
    }
  });

  test("a repeat penalty does not push back the end-of-turn token the prompt contains", async () => {
    const props = (await getJson(s, "/props")).json;
    const eos = String(props.eos_token);
    const plain = await chat({ temperature: 0, max_tokens: 5, logit_bias: { [eos]: 20 } });
    expect(plain.json.choices[0].finish_reason).toBe("stop");
    const penalised = await chat({ temperature: 0, max_tokens: 5, logit_bias: { [eos]: 20 }, repeat_penalty: 2 });
    expect(penalised.json.choices[0].finish_reason).toBe("stop");
  });

  test("top_k beyond 32 bits and repeat_penalty 0 are refused", async () => {
    const topK = await chat({ top_k: 4294967297, max_tokens: 2 });
    expect(topK.status).toBe(400);
    expect(envelope(topK.json).param).toBe("top_k");
    const penalty = await chat({ repeat_penalty: 0, max_tokens: 2 });
    expect(penalty.status).toBe(400);
    expect(envelope(penalty.json).param).toBe("repeat_penalty");
  });

  test("a grammar with no way forward for this vocabulary is a 400, not a 500", async () => {
    const { status, json } = await chat({ grammar: "root ::= [\\x00]", max_tokens: 4 });
    expect(status).toBe(400);
    expect(envelope(json).message).toStartWith("constraint unsatisfiable: ");
  });

  test("a grammar nested too deeply is a 400, not a 500", async () => {
    const deep = `root ::= ${"(".repeat(20000)}"a"${")".repeat(20000)}`;
    const { status } = await chat({ grammar: deep, max_tokens: 2 });
    expect(status).toBe(400);
  });

  test("an empty completions prompt is a 400", async () => {
    const { status, json } = await postJson(s, "/v1/completions", { model: s.model, prompt: "" });
    // A model that adds BOS has one prompt token; one that does not has none and is refused.
    if (status !== 200) {
      expect(status).toBe(400);
      expect(envelope(json).param).toBe("prompt");
    }
  });

  test("a prompt that cannot fit is refused before it is tokenized", async () => {
    const big = "word ".repeat(4_000_000); // 20 MB: far more tokens than the window at any tokenization
    const res = await chat({ messages: user(big), max_tokens: 2 });
    expect(res.status).toBe(400);
    expect(envelope(res.json)).toMatchObject({ code: "context_length_exceeded", param: "messages" });
    expect(envelope(res.json).message).toContain("is at least");
    const completion = await postJson(s, "/v1/completions", { model: s.model, prompt: big, max_tokens: 2 });
    expect(envelope(completion.json)).toMatchObject({ code: "context_length_exceeded", param: "prompt" });
  });

  test("a malformed %-escape in a model path is a 404, not a 500", async () => {
    const { status } = await getJson(s, "/v1/models/%E0%A4%A");
    expect(status).toBe(404);
  });
});
