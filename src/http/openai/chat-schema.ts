// The chat completion request (docs/api/openai.md#chat-request): every field that section lists,
// with its range. Unknown fields are ignored (loose objects).
import * as v from "valibot";
import { int, object, opt, record } from "../validate.ts";
import { samplingFields } from "./sampling-fields.ts";

const textPart = v.looseObject({ type: v.literal("text"), text: v.string() });
const mediaPart = v.looseObject({
  type: v.picklist(["image_url", "input_audio", "image", "audio", "input_image", "file"]),
});
const contentPart = v.variant("type", [textPart, mediaPart], "content parts must be text, image_url or input_audio");

export const toolCallSchema = v.looseObject({
  id: opt(v.string()),
  type: opt(v.string()),
  function: v.looseObject({ name: v.string(), arguments: v.union([v.string(), v.record(v.string(), v.unknown())]) }),
});

const messageSchema = v.looseObject({
  role: v.picklist(
    ["system", "developer", "user", "assistant", "tool"],
    "role must be system, user, assistant or tool",
  ),
  content: opt(v.union([v.string(), v.array(contentPart)], "content must be a string or an array of content parts")),
  name: opt(v.string()),
  tool_calls: opt(v.array(toolCallSchema)),
  tool_call_id: opt(v.string()),
  reasoning_content: opt(v.string()),
  reasoning: opt(v.string()),
});

export type ChatMessageInput = v.InferOutput<typeof messageSchema>;

/** docs/api/openai.md#tools: the three modes, or one named function. */
const toolChoice = v.union(
  [
    v.picklist(["none", "auto", "required"]),
    object({ type: v.literal("function"), function: object({ name: v.string() }) }),
  ],
  'must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}',
);

export const chatRequestSchema = v.looseObject({
  model: v.string("model must be a string"),
  messages: v.pipe(v.array(messageSchema, "messages must be an array"), v.minLength(1, "messages must not be empty")),
  max_completion_tokens: opt(int(1)),
  max_tokens: opt(int(1)),
  stream: opt(v.boolean()),
  stream_options: opt(object({ include_usage: opt(v.boolean()), continuous_usage_stats: opt(v.boolean()) })),
  n: opt(int(1, 128)),
  stop: opt(
    v.union([v.string(), v.pipe(v.array(v.string()), v.maxLength(64))], "stop must be a string or an array of strings"),
  ),
  logprobs: opt(v.boolean()),
  top_logprobs: opt(int(0, 20)),
  logit_bias: opt(record(v.pipe(v.number(), v.minValue(-100), v.maxValue(100)))),
  chat_template_kwargs: opt(record(v.unknown())),
  enable_thinking: opt(v.boolean()),
  reasoning_effort: opt(v.string()),
  tools: opt(
    v.array(object({ type: v.string(), function: opt(object({ name: v.string(), strict: opt(v.boolean()) })) })),
  ),
  tool_choice: opt(toolChoice),
  parallel_tool_calls: opt(v.boolean()),
  response_format: opt(object({ type: v.string(), json_schema: opt(v.unknown()) })),
  grammar: opt(v.string()),
  ...samplingFields,
});

export type ChatRequest = v.InferOutput<typeof chatRequestSchema>;
