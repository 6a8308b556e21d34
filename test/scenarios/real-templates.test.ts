// Forced tool calls through real chat templates and real tokenizers: random
// weights over llama.cpp's vocab-only GGUFs (../shared/models/vocab) with the
// families' own templates (../shared/templates), sampled at temperature 0.9
// like a small quantized model. Each forced call finishes with arguments
// that validate, within max_tokens, and the streamed call equals the whole
// one. Skipped when ../shared is absent (the numbers over 20 seeds come from
// bench/forced-calls.ts).
import Ajv from "ajv";
import { afterAll, describe, expect, test } from "bun:test";
import { parseSse } from "../http/support.ts";
import { REAL_TEMPLATES_PRESENT as present, serveRealTemplate } from "./support.ts";

const CASES = [
  { name: "qwen3", vocab: "ggml-vocab-qwen2.gguf", template: "Qwen-Qwen3-0.6B.jinja" },
  // Qwen3.5's XML wire: values raw text, typed by the schema.
  { name: "qwen3.5", vocab: "ggml-vocab-qwen2.gguf", template: "Qwen3.5-4B.jinja" },
  { name: "llama3.1", vocab: "ggml-vocab-llama-bpe.gguf", template: "meta-llama-Llama-3.1-8B-Instruct.jinja" },
  {
    name: "hermes3",
    vocab: "ggml-vocab-llama-bpe.gguf",
    template: "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
  },
];

const SCHEMA = {
  type: "object",
  properties: { city: { type: "string", maxLength: 24 }, unit: { type: "string", enum: ["c", "f"] } },
  required: ["city"],
  additionalProperties: false,
};
const valid = new Ajv({ strict: false }).compile(SCHEMA);
const tools = [
  {
    type: "function",
    function: { name: "get_weather", description: "Current weather for a city", parameters: SCHEMA },
  },
];

const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

const postChat = (url: string, body: unknown) =>
  fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });

describe.skipIf(!present)("forced calls through real templates and tokenizers", () => {
  for (const c of CASES) {
    test(`${c.name}: required and named calls finish and validate, streamed equal to whole`, async () => {
      const { server, model } = await serveRealTemplate(c, cleanups);
      // The prompt warm first: every request below then prefills only its
      // last token, so each whole reply and its stream see the same batches.
      const messages = [{ role: "user", content: "What is the weather in Oslo?" }];
      await (await postChat(server.url, { model, messages, tools, max_tokens: 1 })).json();
      for (const choice of ["required", { type: "function", function: { name: "get_weather" } }]) {
        for (const seed of [1, 2, 3]) {
          const body = {
            model,
            messages,
            tools,
            tool_choice: choice,
            parallel_tool_calls: false,
            temperature: 0.9,
            max_tokens: 200,
            seed,
          };
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

// Issue #34 (1-3): `add` over two unbounded integers, sent without a
// description as LangChain and the AI SDK send tools. Hermes 3 refused it
// (its template concatenates the description); a random-weight model wrote
// integers of 190 digits until max_tokens (numbers now stop at 16 digits);
// and the Llama 3 wire dropped the call the cap cut (now a partial call).
const ADD_SCHEMA = {
  type: "object",
  properties: { a: { type: "integer" }, b: { type: "integer" } },
  required: ["a", "b"],
  additionalProperties: false,
};
const validAdd = new Ajv({ strict: false }).compile(ADD_SCHEMA);
const addTools = [{ type: "function", function: { name: "add", parameters: ADD_SCHEMA } }];

/** The streamed reply's content, its one call's arguments, and its finish reason. */
async function streamedCall(url: string, body: Record<string, unknown>) {
  const { events } = parseSse(await (await postChat(url, { ...body, stream: true })).text());
  let args = "";
  let content = "";
  const names: string[] = [];
  for (const e of events) {
    content += e.choices?.[0]?.delta?.content ?? "";
    for (const d of e.choices?.[0]?.delta?.tool_calls ?? []) {
      if (d.function?.name) names.push(d.function.name);
      args += d.function?.arguments ?? "";
    }
  }
  return { content, names, args, finish: events.at(-1).choices[0].finish_reason };
}

describe.skipIf(!present)("a tool without a description, over unbounded integers", () => {
  for (const c of CASES) {
    test(`${c.name}: forced calls finish and validate; a cut call is a partial call, streamed equal to whole`, async () => {
      const { server, model } = await serveRealTemplate(c, cleanups);
      const messages = [{ role: "user", content: "Add 2 and 3." }];
      // The prompt warm before the reference reply: the reference and the cut
      // request then both prefill only its last token, one lane alone, so the
      // cut one draws the same tokens (llama.cpp's logits depend on the batch).
      await (await postChat(server.url, { model, messages, max_tokens: 1 })).json();
      for (const seed of [1, 2, 3]) {
        const body = {
          model,
          messages,
          tools: addTools,
          tool_choice: { type: "function", function: { name: "add" } },
          parallel_tool_calls: false,
          temperature: 0.9,
          max_tokens: 200,
          seed,
        };
        const res = await postChat(server.url, body);
        expect(res.status).toBe(200);
        const whole = (await res.json()) as any;
        const choice = whole.choices[0];
        expect(choice.finish_reason).toBe("tool_calls");
        const call = choice.message.tool_calls[0];
        expect(call.function.name).toBe("add");
        expect(validAdd(JSON.parse(call.function.arguments))).toBe(true);

        // The same reply cut by the cap inside its arguments.
        const cap = whole.usage.completion_tokens - 2;
        expect(cap).toBeGreaterThan(8);
        const cutBody = { ...body, max_tokens: cap };
        const cut = (await (await postChat(server.url, cutBody)).json()) as any;
        expect(cut.choices[0].finish_reason).toBe("length");
        expect(cut.choices[0].message.content ?? "").toBe("");
        expect(cut.choices[0].message.tool_calls).toHaveLength(1);
        const partial = cut.choices[0].message.tool_calls[0].function;
        expect(partial.name).toBe("add");
        expect(partial.arguments.startsWith("{")).toBe(true);
        const s = await streamedCall(server.url, cutBody);
        expect(s).toEqual({ content: "", names: ["add"], args: partial.arguments, finish: "length" });
      }
    });
  }
});
