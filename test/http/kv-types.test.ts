// --kv-bits and llama-server's -ctk/-ctv end to end: the worker builds its
// context with those types, /props says them and the bytes a token takes,
// the startup log names them, and a chat completes (twice: the second warm).
import { describe, expect, test } from "bun:test";
import { getJson, useServer } from "./support.ts";

const lines: string[] = [];
// The built-in model: its heads hold 32 values, whole blocks of q8_0 and q4_0.
const s = useServer({ fixture: "tiny-chat", extraArgs: ["--kv-bits", "8", "-ctv", "q4_0"], log: (l) => lines.push(l) });

describe("a quantized KV cache over HTTP", () => {
  test("/props names the types; a token takes (34 + 18) / 128 of its f16 bytes", async () => {
    const { json } = await getJson(s, "/props");
    expect(json.kv_cache).toMatchObject({ type_k: "q8_0", type_v: "q4_0" });
    // tiny-chat: one block, one KV head of 32 values: 64 f16 values (128 bytes) a token.
    expect(json.kv_cache.bytes_per_token).toBe(34 + 18);
    expect(json.kv_cache.bytes).toBe(json.kv_cache.cells_total * (34 + 18));
    expect(lines.some((l) => l.includes("KV K q8_0, V q4_0"))).toBe(true);
    const models = await getJson(s, "/v1/models");
    expect(models.json.data[0].meta).toMatchObject({ kv_type_k: "q8_0", kv_type_v: "q4_0", kv_bytes_per_token: 52 });
  });

  test("a chat completes, and its repeat is served warm from the prefix cache", async () => {
    const body = {
      model: s.model,
      messages: [{ role: "user" as const, content: "Tell me about the sea and the wind. ".repeat(40) }],
      max_tokens: 8,
    };
    const first = await s.client.chat.completions.create(body);
    const second = await s.client.chat.completions.create(body);
    expect(first.choices[0]!.message.content!.length).toBeGreaterThan(0);
    expect(second.choices[0]!.message.content).toBe(first.choices[0]!.message.content);
    expect(second.usage?.prompt_tokens_details?.cached_tokens).toBeGreaterThan(0);
  });
});
