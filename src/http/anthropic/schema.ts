// The Messages request (docs/api/anthropic.md#request) as far as validation
// goes: the fields read, with their types and ranges. Content blocks are
// only typed objects here; request.ts reads each kind (and skips kinds it
// does not know). Unknown fields are ignored (loose objects): agents send
// fields a local model cannot honour (context_management, output_config).
import * as v from "valibot";
import { int, num, object, opt } from "../validate.ts";

const block = object({ type: v.string("must be a string") }, "content blocks must be objects with a type");

export const cacheControlSchema = object({ type: v.string(), ttl: opt(v.string()) });

const messageSchema = object({
  role: v.picklist(["user", "assistant", "system"], 'role must be "user" or "assistant"'),
  content: v.union([v.string(), v.array(block)], "content must be a string or an array of content blocks"),
});

export type MessageInput = v.InferOutput<typeof messageSchema>;
export type BlockInput = v.InferOutput<typeof block>;

export const textBlockSchema = object({
  type: v.literal("text"),
  text: v.string(),
  cache_control: opt(cacheControlSchema),
});

const toolSchema = object({
  name: v.pipe(v.string(), v.minLength(1, "must not be empty")),
  type: opt(v.string()),
  description: opt(v.string()),
  input_schema: opt(v.unknown()),
  cache_control: opt(cacheControlSchema),
  defer_loading: opt(v.boolean()),
});

export type ToolInput = v.InferOutput<typeof toolSchema>;

const toolChoiceSchema = object({
  type: v.picklist(["auto", "any", "tool", "none"], 'type must be "auto", "any", "tool" or "none"'),
  name: opt(v.string()),
  disable_parallel_tool_use: opt(v.boolean()),
});

/** enabled / disabled switch the template's thinking; adaptive (and other kinds) leave the template's default. */
const thinkingSchema = object({ type: v.string(), budget_tokens: opt(int(0)) });

const countTokensEntries = {
  model: v.string("model must be a string"),
  messages: v.pipe(
    v.array(messageSchema, "messages must be an array"),
    v.minLength(1, "at least one message is required"),
  ),
  system: opt(v.union([v.string(), v.array(textBlockSchema)], "system must be a string or an array of text blocks")),
  tools: opt(v.array(toolSchema, "tools must be an array")),
  tool_choice: opt(toolChoiceSchema),
  thinking: opt(thinkingSchema),
  /**
   * Structured output: `output_config.format` (and the beta's top-level `output_format`), `{type: "json_schema",
   * schema}`.
   */
  output_config: opt(object({ format: opt(object({ type: v.string(), schema: opt(v.unknown()) })) })),
  output_format: opt(object({ type: v.string(), schema: opt(v.unknown()) })),
  /** Automatic caching: one breakpoint at the request's last block. */
  cache_control: opt(cacheControlSchema),
};

/** POST /v1/messages/count_tokens: what shapes the prompt. */
export const countTokensRequestSchema = object(countTokensEntries);

export const messagesRequestSchema = object({
  ...countTokensEntries,
  max_tokens: int(1),
  stop_sequences: opt(
    v.pipe(
      v.array(v.string(), "stop_sequences must be an array of strings"),
      v.maxLength(64, "at most 64 stop sequences"),
    ),
  ),
  stream: opt(v.boolean()),
  temperature: opt(num(0, 2)),
  top_p: opt(num(0, 1)),
  top_k: opt(int(0, 2 ** 31 - 1)),
  metadata: opt(v.unknown()),
});

export type CountTokensRequest = v.InferOutput<typeof countTokensRequestSchema>;
export type MessagesRequest = v.InferOutput<typeof messagesRequestSchema>;
