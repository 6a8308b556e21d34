// previous_response_id through real chat templates and tokenizers: a stored
// turn is continued warm (its own tokens, then only the new turn) even where
// the template renders history differently from the turn as it ran (Qwen3
// renders the last assistant turn with an empty think block, earlier ones
// without), and the whole stored conversation comes from the prefix cache.
// Replies are held to a one-word schema so random weights end their turns.
// Skipped when ../shared is absent.
import { afterAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { REAL_TEMPLATES_PRESENT, serveRealTemplate } from "./support.ts";

// Hermes 3's template closes turns with <|im_end|>, which the Llama 3
// vocabulary it is paired with here does not have as a token: its turns end
// in plain text, no end-of-generation token marks them, so the conversation
// is rebuilt (and still answered).
// Mistral Small 3.2 renders its tools block before the last user message:
// continued warm, every new turn would carry the block again, so it is rebuilt.
const CASES = [
  { name: "qwen3", vocab: "ggml-vocab-qwen2.gguf", template: "Qwen-Qwen3-0.6B.jinja", continued: "warm" },
  {
    name: "llama3.1",
    vocab: "ggml-vocab-llama-bpe.gguf",
    template: "meta-llama-Llama-3.1-8B-Instruct.jinja",
    continued: "warm",
  },
  {
    name: "hermes3",
    vocab: "ggml-vocab-llama-bpe.gguf",
    template: "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
    continued: "rebuilt",
  },
  {
    name: "mistral-small-3.2",
    vocab: "ggml-vocab-llama-spm.gguf",
    template: "Mistral-Small-3.2-24B-Instruct-2506.jinja",
    continued: "rebuilt",
  },
];

const tools = [
  {
    type: "function" as const,
    name: "lookup",
    description: "Look a word up",
    strict: false,
    parameters: { type: "object", properties: { word: { type: "string" } } },
  },
];

const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

const format = {
  type: "json_schema" as const,
  name: "word",
  strict: true,
  schema: { type: "string", enum: ["yes", "no", "maybe"] },
};

describe.skipIf(!REAL_TEMPLATES_PRESENT)("warm continuations through real templates", () => {
  for (const c of CASES) {
    test(`${c.name}: turns 2 and 3 continue ${c.continued}${c.continued === "warm" ? ", the earlier turns all cached" : ""}`, async () => {
      const { server, model } = await serveRealTemplate(c, cleanups);
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120_000 });
      const common = {
        model,
        instructions: "Answer in one word.",
        tools,
        text: { format },
        max_output_tokens: 32,
        temperature: 0,
      };
      const turn = (input: string, previous?: string) =>
        client.responses
          .create({ ...common, input, ...(previous ? { previous_response_id: previous } : {}) })
          .withResponse();
      const one = await turn("Is the sky blue?");
      expect(one.data.status).toBe("completed");
      const two = await turn("Is grass green?", one.data.id);
      const three = await turn("Is snow cold?", two.data.id);
      for (const [prev, next] of [
        [one, two],
        [two, three],
      ] as const) {
        expect(next.response.headers.get("x-superfluid-continued")).toBe(c.continued);
        if (c.continued === "warm")
          expect(next.data.usage!.input_tokens_details.cached_tokens).toBeGreaterThanOrEqual(
            prev.data.usage!.total_tokens,
          );
        expect(next.data.usage!.input_tokens).toBeGreaterThan(prev.data.usage!.total_tokens);
        expect(["yes", "no", "maybe"]).toContain(JSON.parse(next.data.output_text));
      }
      // The continued prompt is the conversation the client would have sent
      // whole: the same length as the turns inline, unstored (on these
      // templates the stored tokens render back as they ran).
      const inline = await client.responses.create({
        ...common,
        store: false,
        input: [
          { role: "user", content: "Is the sky blue?" },
          ...(one.data.output as any[]),
          { role: "user", content: "Is grass green?" },
          ...(two.data.output as any[]),
          { role: "user", content: "Is snow cold?" },
        ],
      });
      expect(three.data.usage!.input_tokens).toBe(inline.usage!.input_tokens);
    });
  }
});
