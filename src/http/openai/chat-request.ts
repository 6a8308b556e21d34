// An OpenAI chat completion request as the neutral chat job
// (src/pipeline/chat-job.ts): parsed and checked in OpenAI's terms, its
// messages in the chat template's shape, its tools, tool choice and
// response_format as the job's.
import type { ChatMessage } from "../../codec/index.ts";
import type { ServedModel } from "../../daemon/served-model.ts";
import type { QosClass } from "../../engine/scheduler.ts";
import { toolSchema, type ChatJob, type ChatTool, type Constraint, type ToolChoice } from "../../pipeline/chat-job.ts";
import { logitBiasOf, stopList } from "../../pipeline/engine-request.ts";
import { invalidRequest, RequestError } from "../../daemon/request-error.ts";
import { checkArrayLength, checkKeyCount, checkReplyBudget } from "../chat-limits.ts";
import { parseWith } from "../validate.ts";
import { refusePerRequestLora } from "./lora.ts";
import { chatRequestSchema, type ChatMessageInput, type ChatRequest } from "./chat-schema.ts";
import { requestSampling } from "./sampling-fields.ts";

/**
 * logit_bias entries: a client biases or bans a word list (tens to hundreds
 * of tokens); every key is checked against the vocabulary one by one.
 */
export const MAX_LOGIT_BIAS = 4096;

/** Stop strings: the schema's bound (chat-schema.ts), checked before validation walks them. */
const MAX_STOPS = 64;

/** Template variables: templates read a handful (enable_thinking, reasoning_effort, tools flags). */
export const MAX_TEMPLATE_KWARGS = 256;

export function parseChatRequest(body: unknown): ChatRequest {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw invalidRequest("request body must be a JSON object");
  if (!("model" in body) || (body as { model: unknown }).model === undefined)
    throw invalidRequest("you must provide a model parameter", "model");
  if (!("messages" in body)) throw invalidRequest("you must provide a messages parameter", "messages");
  refusePerRequestLora(body);
  // Before validation walks them key by key.
  const { logit_bias: bias, chat_template_kwargs: kwargs, stop } = body as Record<string, unknown>;
  checkArrayLength(stop, "stop", MAX_STOPS);
  checkKeyCount(bias, "logit_bias", MAX_LOGIT_BIAS);
  checkKeyCount(kwargs, "chat_template_kwargs", MAX_TEMPLATE_KWARGS);
  const req = parseWith(chatRequestSchema, body);
  if (req.top_logprobs !== undefined && req.top_logprobs !== null && !req.logprobs) {
    throw invalidRequest("top_logprobs requires logprobs to be true", "top_logprobs");
  }
  refuseUndeclaredToolChoice(req);
  return req;
}

/** A forced tool_choice must name a declared function. */
function refuseUndeclaredToolChoice(req: ChatRequest): void {
  const choice = req.tool_choice as { type?: unknown; function?: { name?: unknown } } | undefined | null;
  const name = choice?.type === "function" ? choice.function?.name : undefined;
  if (typeof name !== "string") return;
  const declared = (req.tools ?? []).filter((t) => t.type === "function").map((t) => t.function?.name);
  if (!declared.includes(name))
    throw invalidRequest(`tool_choice names the function '${name}', which is not declared in tools`, "tool_choice");
}

const MEDIA_KIND: Record<string, string> = {
  image_url: "images",
  image: "images",
  input_image: "images",
  input_audio: "audio",
  audio: "audio",
  file: "files",
};

/** On llama.cpp any image or audio part is refused (docs/api/openai.md#messages). */
function refuseMedia(model: ServedModel, messages: ChatMessageInput[]): void {
  messages.forEach((m, i) => {
    if (!Array.isArray(m.content)) return;
    m.content.forEach((part, j) => {
      const kind = MEDIA_KIND[part.type];
      if (!kind) return;
      throw new RequestError(
        400,
        `model '${model.id}' on runtime llamacpp does not accept ${kind}: the llamacpp runtime has no media path`,
        "unsupported_input",
        `messages[${i}].content[${j}]`,
      );
    });
  });
}

/** Template variables: top-level shorthands first, chat_template_kwargs wins. */
export function templateKwargs(req: ChatRequest): Record<string, unknown> {
  const kwargs: Record<string, unknown> = {};
  if (req.enable_thinking !== undefined && req.enable_thinking !== null) kwargs.enable_thinking = req.enable_thinking;
  if (req.reasoning_effort) kwargs.reasoning_effort = req.reasoning_effort;
  return { ...kwargs, ...(req.chat_template_kwargs ?? {}) };
}

function toTemplateMessage(m: ChatMessageInput): ChatMessage {
  const content = Array.isArray(m.content)
    ? m.content.map((p) => (p.type === "text" ? (p as { text: string }).text : "")).join("")
    : (m.content ?? null);
  const toolCalls = m.tool_calls?.map((c) => ({
    ...(c.id ? { id: c.id } : {}),
    type: c.type ?? "function",
    function: c.function,
  }));
  return {
    role: m.role === "developer" ? "system" : m.role,
    content,
    ...(m.name ? { name: m.name } : {}),
    ...(toolCalls ? { tool_calls: toolCalls } : {}),
    ...(m.tool_call_id ? { tool_call_id: m.tool_call_id } : {}),
    ...((m.reasoning_content ?? m.reasoning) ? { reasoning_content: (m.reasoning_content ?? m.reasoning)! } : {}),
  };
}

/** Declared functions, each with a schema (a missing one accepts any object); the template sees the tools as sent. */
function toolsOf(req: ChatRequest): ChatTool[] {
  return (req.tools ?? []).flatMap((t, i) => {
    if (t.type !== "function" || !t.function) return [];
    const parameters = toolSchema(
      (t.function as { parameters?: unknown }).parameters,
      `tools[${i}].function.parameters`,
    );
    return [{ name: t.function.name, parameters, template: t as Record<string, unknown> }];
  });
}

function toolChoiceOf(req: ChatRequest): ToolChoice {
  const choice = req.tool_choice;
  if (choice === "none" || choice === "required") return choice;
  if (typeof choice === "object" && choice !== null && choice.type === "function")
    return { name: choice.function.name };
  return "auto";
}

/** `grammar` (raw GBNF), else `response_format`. */
function constraintOf(req: ChatRequest): Constraint | undefined {
  if (req.grammar !== undefined && req.grammar !== null)
    return { type: "gbnf", grammar: req.grammar, field: "grammar" };
  const format = req.response_format;
  if (!format || format.type === "text") return undefined;
  if (format.type === "json_object") return { type: "json_object" };
  if (format.type !== "json_schema") {
    throw invalidRequest(
      `response_format.type must be text, json_object or json_schema, not '${format.type}'`,
      "response_format.type",
    );
  }
  const jsonSchema = format.json_schema;
  if (typeof jsonSchema !== "object" || jsonSchema === null) {
    throw invalidRequest("response_format.json_schema must be an object with a schema", "response_format.json_schema");
  }
  const { schema, strict } = jsonSchema as { schema?: unknown; strict?: unknown };
  if (strict !== undefined && strict !== null && typeof strict !== "boolean") {
    throw invalidRequest(
      "response_format.json_schema.strict must be true or false",
      "response_format.json_schema.strict",
    );
  }
  if (schema === undefined || schema === null) {
    throw invalidRequest(
      "response_format of type json_schema needs json_schema.schema",
      "response_format.json_schema.schema",
    );
  }
  // Only an explicit strict: false lets the compiler skip keywords it cannot enforce.
  return { type: "json_schema", schema, strict: strict !== false, field: "response_format.json_schema.schema" };
}

/** `defaultMaxTokens` is --max-tokens, the cap of a request that names none (counted in the reply budget). */
export function chatJobOf(model: ServedModel, req: ChatRequest, qos: QosClass, defaultMaxTokens?: number): ChatJob {
  const tools = toolsOf(req);
  const toolChoice = toolChoiceOf(req);
  // A forced tool choice beats response_format, which is then not even read.
  const forced = toolChoice === "required" || typeof toolChoice === "object";
  const constraint = forced ? undefined : constraintOf(req);
  refuseMedia(model, req.messages);
  const maxTokens = req.max_completion_tokens ?? req.max_tokens ?? undefined;
  // A stream carries one choice, whatever n says.
  checkReplyBudget(
    req.stream ? 1 : (req.n ?? 1),
    maxTokens ?? defaultMaxTokens,
    model.contextWindow,
    req.max_completion_tokens ? "max_completion_tokens" : "max_tokens",
  );
  return {
    messages: req.messages.map(toTemplateMessage),
    tools,
    toolChoice,
    parallelToolCalls: req.parallel_tool_calls !== false,
    ...(constraint ? { constraint } : {}),
    sampling: requestSampling(req, logitBiasOf(model, req.logit_bias)),
    maxTokens,
    ignoreEos: req.ignore_eos ?? false,
    stop: stopList(req.stop, req.ignore_eos),
    ...(req.logprobs ? { logprobs: req.top_logprobs ?? 0 } : {}),
    n: req.n ?? 1,
    qos,
    templateKwargs: templateKwargs(req),
    durable: true,
  };
}
