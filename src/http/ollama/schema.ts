// Ollama's /api/chat and /api/generate requests (docs/api/ollama.md#chat,
// #generate): the fields each route reads, validated. Other fields are
// ignored, as Ollama ignores them: clients send their own (the AI SDK's
// Ollama provider sends `temperature`, `max_output_tokens`, `stop` and
// `tool_choice` at the top level), so those that mean something here are
// read as well (`options` wins where both name a value).
import * as v from "valibot";
import { invalidRequest } from "../../daemon/request-error.ts";
import { int, object, opt, parseWith, record } from "../validate.ts";

const toolCall = object({ function: object({ name: v.string(), arguments: opt(v.unknown()) }) });

const message = object({
  role: v.picklist(["system", "user", "assistant", "tool"], 'role must be "system", "user", "assistant" or "tool"'),
  content: opt(v.string()),
  thinking: opt(v.string()),
  images: opt(v.array(v.unknown())),
  tool_calls: opt(v.array(toolCall)),
  tool_name: opt(v.string()),
  tool_call_id: opt(v.string()),
});

export type OllamaMessage = v.InferOutput<typeof message>;

const tool = object({
  type: opt(v.string()),
  function: object({ name: v.string(), description: opt(v.string()), parameters: opt(v.unknown()) }),
});

/** `think`: on/off, or a reasoning effort. */
const think = v.union(
  [v.boolean(), v.picklist(["minimal", "low", "medium", "high"])],
  'think must be true, false, "minimal", "low", "medium" or "high"',
);

const format = v.union(
  [v.literal("json"), v.literal(""), record(v.unknown())],
  'format must be "json" or a JSON schema object',
);

/** `tool_choice` as OpenAI-style clients send it (Ollama itself has none). */
const toolChoice = v.union(
  [
    v.picklist(["none", "auto", "required"]),
    object({ type: opt(v.string()), name: opt(v.string()), function: opt(object({ name: v.string() })) }),
  ],
  'tool_choice must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}',
);

/** Sampling fields some clients send beside `options` (read as the options of the same meaning). */
const topLevelSampling = {
  temperature: opt(v.number()),
  top_p: opt(v.number()),
  top_k: opt(v.number()),
  min_p: opt(v.number()),
  seed: opt(v.number()),
  repeat_penalty: opt(v.number()),
  presence_penalty: opt(v.number()),
  frequency_penalty: opt(v.number()),
  max_tokens: opt(v.number()),
  max_output_tokens: opt(v.number()),
  stop: opt(v.union([v.string(), v.array(v.string())])),
};

/** Fields both routes read. */
const shared = {
  model: v.string("model must be a string"),
  stream: opt(v.boolean()),
  format: opt(format),
  think: opt(think),
  options: opt(record(v.unknown(), "options must be an object")),
  keep_alive: opt(v.unknown()),
  ...topLevelSampling,
};

/** The top-level sampling fields as `options` names them. */
const AS_OPTION: Record<string, string> = { max_tokens: "num_predict", max_output_tokens: "num_predict" };

/** `options`, with the top-level sampling fields a request sent filled in where `options` leaves them out. */
export function mergedOptions(
  req: { options?: Record<string, unknown> | null } & Record<string, unknown>,
): Record<string, unknown> {
  const merged: Record<string, unknown> = {};
  for (const key of Object.keys(topLevelSampling)) {
    const value = req[key];
    if (value !== undefined && value !== null) merged[AS_OPTION[key] ?? key] = value;
  }
  return { ...merged, ...(req.options ?? {}) };
}

export const chatSchema = object({
  ...shared,
  messages: opt(v.array(message, "messages must be an array")),
  tools: opt(v.array(tool, "tools must be an array")),
  tool_choice: opt(toolChoice),
  logprobs: opt(v.boolean()),
  top_logprobs: opt(int(0, 20)),
});

export const generateSchema = object({
  ...shared,
  prompt: opt(v.string()),
  system: opt(v.string()),
  suffix: opt(v.string()),
  raw: opt(v.boolean()),
  template: opt(v.string()),
  images: opt(v.array(v.unknown())),
});

export type ChatRequest = v.InferOutput<typeof chatSchema>;
export type GenerateRequest = v.InferOutput<typeof generateSchema>;

/** Validates a body against a route's schema. */
export function parseOllama<S extends typeof chatSchema | typeof generateSchema>(
  schema: S,
  body: unknown,
): v.InferOutput<S> {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw invalidRequest("request body must be a JSON object");
  if ((body as { model?: unknown }).model === undefined) throw invalidRequest("model is required", "model");
  // keep_alive waits for model residency control (load and unload): until then any value is refused.
  const keepAlive = (body as { keep_alive?: unknown }).keep_alive;
  if (keepAlive !== undefined && keepAlive !== null) {
    throw invalidRequest(
      "unsupported parameter: keep_alive (this server keeps its models loaded while it runs)",
      "keep_alive",
    );
  }
  return parseWith(schema, body);
}
