// The official clients against a model with Qwen3.5's template (random
// weights over the Qwen2 vocabulary): a forced call is written in the
// template's own XML wire (seen in the reply's raw tokens), its raw-text
// values come back typed by the schema (`days` the number 3, not "3") in
// OpenAI's tool_calls (whole and streamed), Anthropic's tool_use and Ollama's
// tool_calls, and a conversation holding the call and its result renders
// back through the template. Skipped when ../shared is absent.
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Ollama } from "ollama";
import OpenAI from "openai";
import { REAL_TEMPLATES_PRESENT, serveRealTemplate } from "./support.ts";

const CASE = { name: "qwen3.5", vocab: "ggml-vocab-qwen2.gguf", template: "Qwen3.5-4B.jinja" };
const PARAMETERS = {
  type: "object",
  properties: { city: { type: "string", maxLength: 12 }, days: { type: "integer", minimum: 1, maximum: 9 } },
  required: ["city", "days"],
  additionalProperties: false,
};
const QUESTION = "What will the weather be in Oslo for three days?";

const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

let url = "";
let model = "";
beforeAll(async () => {
  if (!REAL_TEMPLATES_PRESENT) return;
  const served = await serveRealTemplate(CASE, cleanups);
  url = served.server.url;
  model = served.model;
});

function checkArguments(args: unknown): void {
  const a = args as { city: unknown; days: unknown };
  expect(typeof a.city).toBe("string");
  expect(typeof a.days).toBe("number");
  expect(Number.isInteger(a.days)).toBe(true);
}

describe.skipIf(!REAL_TEMPLATES_PRESENT)("official clients on Qwen3.5's XML tool-call wire", () => {
  test("/props names the wire", async () => {
    const props = (await (await fetch(`${url}/props`)).json()) as { tool_call_wire: string };
    expect(props.tool_call_wire).toBe("qwen-xml");
  });

  test("openai: a forced call is written in the XML wire and comes back typed, whole and streamed", async () => {
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "none" });
    const tools = [{ type: "function" as const, function: { name: "get_weather", parameters: PARAMETERS } }];
    // The prompt warm first: every request below then prefills only its last
    // token, so the whole and the streamed reply see the same batches.
    await client.chat.completions.create({
      model,
      messages: [{ role: "user", content: QUESTION }],
      tools,
      max_tokens: 1,
    });
    for (const seed of [1, 2]) {
      const body = {
        model,
        messages: [{ role: "user" as const, content: QUESTION }],
        tools,
        tool_choice: "required" as const,
        parallel_tool_calls: false,
        temperature: 0.9,
        max_tokens: 200,
        seed,
      };
      const whole = await client.chat.completions.create({ ...body, logprobs: true });
      const choice = whole.choices[0]!;
      expect(choice.finish_reason).toBe("tool_calls");
      const raw = choice.logprobs!.content!.map((t) => t.token).join("");
      expect(raw).toStartWith("<tool_call>\n<function=get_weather>\n<parameter=city>\n");
      expect(raw).toContain("\n</parameter>\n<parameter=days>\n");
      const call = choice.message.tool_calls![0]!;
      expect(call.type === "function" && call.function.name).toBe("get_weather");
      const args = call.type === "function" ? call.function.arguments : "";
      checkArguments(JSON.parse(args));

      const stream = await client.chat.completions.create({ ...body, logprobs: true, stream: true });
      let streamed = "";
      const names: string[] = [];
      for await (const chunk of stream) {
        for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) {
          if (d.function?.name) names.push(d.function.name);
          streamed += d.function?.arguments ?? "";
        }
      }
      expect(names).toEqual(["get_weather"]);
      expect(streamed).toBe(args);
    }
  });

  test("anthropic: the forced call is a tool_use block with typed input", async () => {
    const client = new Anthropic({ baseURL: url, apiKey: "none" });
    const message = await client.messages.create({
      model,
      max_tokens: 200,
      messages: [{ role: "user", content: QUESTION }],
      tools: [{ name: "get_weather", input_schema: PARAMETERS as Anthropic.Tool.InputSchema }],
      tool_choice: { type: "tool", name: "get_weather", disable_parallel_tool_use: true },
    });
    expect(message.stop_reason).toBe("tool_use");
    const use = message.content.find((b) => b.type === "tool_use");
    expect(use?.type === "tool_use" && use.name).toBe("get_weather");
    checkArguments(use?.type === "tool_use" ? use.input : undefined);
  });

  test("ollama: the forced call comes back with typed arguments; the call and its result render back", async () => {
    const client = new Ollama({ host: url });
    const tools = [{ type: "function", function: { name: "get_weather", parameters: PARAMETERS } }];
    const res = await client.chat({
      model,
      messages: [{ role: "user", content: QUESTION }],
      tools: tools as never,
      // An OpenAI-style extra Ollama clients send; the server holds the call to the tool.
      ...({ tool_choice: "required" } as object),
      options: { temperature: 0.9, seed: 1, num_predict: 200 },
    });
    const call = res.message.tool_calls?.[0];
    expect(call?.function.name).toBe("get_weather");
    checkArguments(call?.function.arguments);

    // The next turn: the call and its result go back through the template.
    const next = await client.chat({
      model,
      messages: [
        { role: "user", content: QUESTION },
        { role: "assistant", content: "", tool_calls: [call!] },
        { role: "tool", content: "sunny, 4 C" },
      ],
      tools: tools as never,
      options: { temperature: 0, num_predict: 4 },
    });
    expect(next.done).toBe(true);
    expect(next.prompt_eval_count).toBeGreaterThan(res.prompt_eval_count!);
  });
});
