// Forced tool calls through real chat templates and real tokenizers: random
// weights over llama.cpp's vocab-only GGUFs (../shared/models/vocab) with the
// families' own templates (../shared/templates), sampled at temperature 0.9
// like a small quantized model. Each forced call finishes with arguments
// that validate, within max_tokens, and the streamed call equals the whole
// one. Skipped when ../shared is absent (the numbers over 20 seeds come from
// bench/forced-calls.ts).
import Ajv from "ajv";
import { afterAll, describe, expect, test } from "bun:test";
import { parseSse } from "../api/support.ts";
import { REAL_TEMPLATES_PRESENT as present, serveRealTemplate } from "./support.ts";


const CASES = [
  { name: "qwen3", vocab: "ggml-vocab-qwen2.gguf", template: "Qwen-Qwen3-0.6B.jinja" },
  { name: "llama3.1", vocab: "ggml-vocab-llama-bpe.gguf", template: "meta-llama-Llama-3.1-8B-Instruct.jinja" },
  { name: "hermes3", vocab: "ggml-vocab-llama-bpe.gguf", template: "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja" },
];

const SCHEMA = {
  type: "object",
  properties: { city: { type: "string", maxLength: 24 }, unit: { type: "string", enum: ["c", "f"] } },
  required: ["city"],
  additionalProperties: false,
};
const valid = new Ajv({ strict: false }).compile(SCHEMA);
const tools = [{ type: "function", function: { name: "get_weather", description: "Current weather for a city", parameters: SCHEMA } }];

const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

const postChat = (url: string, body: unknown) =>
  fetch(`${url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

describe.skipIf(!present)("forced calls through real templates and tokenizers", () => {
  for (const c of CASES) {
    test(`${c.name}: required and named calls finish and validate, streamed equal to whole`, async () => {
      const { server, model } = await serveRealTemplate(c, cleanups);
      for (const choice of ["required", { type: "function", function: { name: "get_weather" } }]) {
        for (const seed of [1, 2, 3]) {
          const body = { model, messages: [{ role: "user", content: "What is the weather in Oslo?" }], tools, tool_choice: choice, parallel_tool_calls: false, temperature: 0.9, max_tokens: 200, seed };
          const whole = (await (await postChat(server.url, body)).json()) as any;
          const choice0 = whole.choices[0];
          expect(choice0.finish_reason).toBe("tool_calls");
          expect(choice0.message.content).toBeNull();
          expect(choice0.message.tool_calls).toHaveLength(1);
          const call = choice0.message.tool_calls[0];
          expect(call.function.name).toBe("get_weather");
          expect(valid(JSON.parse(call.function.arguments))).toBe(true);

          const { events } = parseSse(await (await postChat(server.url, { ...body, stream: true })).text());
          let args = "";
          let content = "";
          for (const e of events) {
            content += e.choices?.[0]?.delta?.content ?? "";
            for (const d of e.choices?.[0]?.delta?.tool_calls ?? []) args += d.function?.arguments ?? "";
          }
          expect(content).toBe("");
          expect(args).toBe(call.function.arguments);
          expect(events.at(-1).choices[0].finish_reason).toBe("tool_calls");
        }
      }
    });
  }
});
