// Ollama's chat (and templated generate) as the neutral chat job
// (src/pipeline/chat-job.ts): messages in the template's shape, tools,
// `format` as the reply's constraint, `think` as the template's switch or
// reasoning effort, `options` as sampling, cap and stops.
import type { ChatMessage } from "../../codec/index.ts";
import type { ServedModel } from "../../daemon/served-model.ts";
import type { QosClass } from "../../engine/scheduler.ts";
import { toolSchema, type ChatJob, type ChatTool, type Constraint, type ToolChoice } from "../../pipeline/chat-job.ts";
import { invalidRequest, unsupportedMedia } from "../../daemon/request-error.ts";
import { optionsPlan } from "./options.ts";
import { mergedOptions, type ChatRequest, type GenerateRequest, type OllamaMessage } from "./schema.ts";

/** Images on llama.cpp: refused by field. */
export function refuseImages(images: unknown[] | null | undefined, field: string): void {
  if (images && images.length > 0) {
    throw unsupportedMedia("images", field);
  }
}

function toTemplateMessage(m: OllamaMessage, i: number): ChatMessage {
  refuseImages(m.images, `messages[${i}].images`);
  const calls = m.tool_calls?.map((c, j) => {
    const args = c.function.arguments ?? {};
    if (typeof args !== "object" || Array.isArray(args))
      throw invalidRequest(
        `messages[${i}].tool_calls[${j}].function.arguments: must be an object`,
        `messages[${i}].tool_calls[${j}].function.arguments`,
      );
    return { type: "function", function: { name: c.function.name, arguments: JSON.stringify(args) } };
  });
  return {
    role: m.role,
    content: m.content ?? "",
    ...(m.thinking ? { reasoning_content: m.thinking } : {}),
    ...(calls && calls.length > 0 ? { tool_calls: calls } : {}),
    ...(m.tool_name ? { name: m.tool_name } : {}),
    ...(m.tool_call_id ? { tool_call_id: m.tool_call_id } : {}),
  };
}

function toolsOf(tools: ChatRequest["tools"]): ChatTool[] {
  return (tools ?? []).map((t, i) => {
    const parameters = toolSchema(t.function.parameters, `tools[${i}].function.parameters`);
    return { name: t.function.name, parameters, template: t as Record<string, unknown> };
  });
}

/**
 * `format`: "json" for any JSON object, a schema for one that validates (held by the grammar, keywords it cannot
 * enforce refused).
 */
function constraintOf(format: ChatRequest["format"]): Constraint | undefined {
  if (format === undefined || format === null || format === "") return undefined;
  if (format === "json") return { type: "json_object" };
  return { type: "json_schema", schema: format, strict: true, field: "format" };
}

/** `think`: true/false switch the template's thinking; a level is a reasoning effort (with thinking on). */
function thinkKwargs(think: ChatRequest["think"]): Record<string, unknown> {
  if (think === undefined || think === null) return {};
  if (typeof think === "boolean") return { enable_thinking: think };
  return { enable_thinking: true, reasoning_effort: think };
}

/** `tool_choice` (an OpenAI-style extra some clients send): a forced call is held to the tool's schema. */
function toolChoiceOf(req: ChatRequest, tools: ChatTool[]): ToolChoice {
  const choice = req.tool_choice;
  if (choice === undefined || choice === null || choice === "auto") return "auto";
  if (choice === "none" || choice === "required") return choice;
  const name = choice.function?.name ?? choice.name;
  if (!name) throw invalidRequest("tool_choice: a named choice needs function.name", "tool_choice");
  if (!tools.some((t) => t.name === name))
    throw invalidRequest(`tool_choice names the function '${name}', which is not declared in tools`, "tool_choice");
  return { name };
}

function jobOf(
  model: ServedModel,
  req: ChatRequest | GenerateRequest,
  messages: ChatMessage[],
  tools: ChatTool[],
  toolChoice: ToolChoice,
  qos: QosClass,
  logprobs?: number,
): ChatJob {
  const options = optionsPlan(model, mergedOptions(req));
  // A forced call beats `format`, as on the other families.
  const constraint = toolChoice === "required" || typeof toolChoice === "object" ? undefined : constraintOf(req.format);
  const job: ChatJob = {
    messages,
    tools,
    toolChoice,
    parallelToolCalls: true,
    ...(constraint ? { constraint } : {}),
    sampling: options.sampling,
    ...(options.maxTokens === undefined ? {} : { maxTokens: options.maxTokens }),
    ignoreEos: false,
    stop: options.stop,
    ...(logprobs === undefined ? {} : { logprobs }),
    n: 1,
    qos,
    templateKwargs: thinkKwargs(req.think),
    durable: true,
    ...(options.window ? { window: options.window } : {}),
  };
  return job;
}

export function chatJobOf(model: ServedModel, req: ChatRequest, qos: QosClass): ChatJob {
  if (req.top_logprobs !== undefined && req.top_logprobs !== null && !req.logprobs)
    throw invalidRequest("top_logprobs requires logprobs to be true", "top_logprobs");
  const messages = (req.messages ?? []).map(toTemplateMessage);
  const tools = toolsOf(req.tools);
  return jobOf(
    model,
    req,
    messages,
    tools,
    toolChoiceOf(req, tools),
    qos,
    req.logprobs ? (req.top_logprobs ?? 0) : undefined,
  );
}

/** A templated generate: the prompt as the user turn, after `system` when given. */
export function generateJobOf(model: ServedModel, req: GenerateRequest, qos: QosClass): ChatJob {
  refuseImages(req.images, "images");
  const messages: ChatMessage[] = [
    ...(req.system ? [{ role: "system", content: req.system }] : []),
    { role: "user", content: req.prompt ?? "" },
  ];
  return jobOf(model, req, messages, [], "auto", qos);
}
