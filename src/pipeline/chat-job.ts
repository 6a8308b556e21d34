// The neutral chat job: what every API family's chat route becomes once its
// request is parsed (messages in the template's shape, tools, constraint,
// sampling, cache breakpoints, a smaller window), and the prompt it renders
// through the model's own template. prepare-chat.ts turns a job into an
// engine request; choice-stream.ts reads each choice back as neutral deltas.
// Errors are RequestErrors; the family renders them.
import { TemplateError, type ChatMessage, type ToolDef } from "../codec/index.ts";
import type { ToolSpec } from "../codec/tool-grammar.ts";
import type { RequestSampling } from "../daemon/sampling-resolve.ts";
import type { ServedModel } from "../daemon/served-model.ts";
import type { QosClass } from "../engine/scheduler.ts";
import type { Constraint } from "./constraint.ts";
import { invalidRequest } from "../daemon/request-error.ts";
import type { ToolChoice } from "./tool-plan.ts";

export type { Constraint } from "./constraint.ts";
export type { ToolChoice } from "./tool-plan.ts";

/** A declared tool: its schema for the grammar, and the object the chat template renders. */
export interface ChatTool extends ToolSpec {
  template: ToolDef;
  /**
   * Callable but not in the template's tool list: its definition reaches the
   * model some other way (Anthropic's deferred tools arrive in a tool result),
   * so loading it leaves the rendered tool list, and the prefix it is part
   * of, as it was.
   */
  unlisted?: boolean;
}

/** A tool's declared argument schema: a JSON Schema (an object, or true/false); none accepts any object. */
export function toolSchema(parameters: unknown, field: string): object | boolean {
  if (parameters === undefined || parameters === null) return { type: "object" };
  if (typeof parameters === "boolean" || (typeof parameters === "object" && !Array.isArray(parameters)))
    return parameters;
  throw invalidRequest(`${field}: must be a JSON Schema (an object)`, field);
}

export interface ChatJob {
  /** The conversation in the chat template's shape (Hugging Face's). */
  messages: ChatMessage[];
  tools: ChatTool[];
  toolChoice: ToolChoice;
  parallelToolCalls: boolean;
  /** The reply's shape; a forced tool choice beats it, an auto one leaves it to hold the text. */
  constraint?: Constraint;
  sampling: RequestSampling;
  /** The reply cap the request asks for (cut to what the window leaves). */
  maxTokens?: number;
  ignoreEos: boolean;
  stop: string[];
  /** Top alternatives per token; undefined = no logprobs. */
  logprobs?: number;
  /** Choices of the one prompt (each seeded seed + index). */
  n: number;
  qos?: QosClass;
  /** Template variables (enable_thinking, reasoning_effort, chat_template_kwargs). */
  templateKwargs: Record<string, unknown>;
  /** Written to the session log (false for work that must leave no trace). */
  durable: boolean;
  /** Unix ms by which it must have started, else it expires. */
  startBy?: number;
  /**
   * The prompt already made, in place of rendering `messages`: a stored
   * conversation's own tokens continued by its new turn (continued-prompt.ts).
   * `messages` still describe it, for the checks that read them.
   */
  prompt?: RenderedPrompt;
  /** Places in the request whose prompt prefix the engine pins (Anthropic's cache breakpoints). */
  breakpoints?: PrefixBreakpoint[];
  /**
   * A smaller window than the model's (Ollama's num_ctx): the prompt must leave room in it, the reply cap fits the
   * rest.
   */
  window?: { tokens: number; field: string };
}

/** A place in the request whose prompt prefix stays cached (prefix-pins.ts finds its length). */
export interface PrefixBreakpoint {
  /** The conversation up to and including the block that carries the breakpoint. */
  messages: ChatMessage[];
  /** The tools declared up to it (all of them for a breakpoint in system or messages). */
  tools: ChatTool[];
  /** How long the prefix stays pinned. */
  ttlMs: number;
  /** The breakpoint is on the request's last block: the cut is the whole conversation. */
  last?: boolean;
}

/** A breakpoint as prompt tokens: the engine keeps this prefix cached for ttlMs. */
export interface PrefixPin {
  /** Prompt tokens the pin holds. */
  length: number;
  ttlMs: number;
}

/** A prompt as token ids, and whether it leaves a reasoning block open. */
export interface RenderedPrompt {
  tokens: number[];
  startsInReasoning: boolean;
}

/** Whether the prompt renders the job's tools (none are shown under tool_choice "none"). */
export function rendersTools(job: ChatJob): boolean {
  return job.tools.some((t) => !t.unlisted) && job.toolChoice !== "none";
}

/** The prompt through the model's own template, rendered and tokenized on its prompt thread. */
export async function renderChatPrompt(
  model: ServedModel,
  job: ChatJob,
  withTools = rendersTools(job),
  addGenerationPrompt = true,
): Promise<RenderedPrompt> {
  try {
    const rendered = await model.prompts.render({
      tools: withTools,
      input: {
        messages: job.messages,
        ...(withTools ? { tools: job.tools.filter((t) => !t.unlisted).map((t) => t.template) } : {}),
        addGenerationPrompt,
        kwargs: job.templateKwargs,
      },
      addBos: model.tokenizer.vocabInfo.addBos,
      bosToken: model.tokenizer.vocabInfo.bos,
      ...(model.reasoningMarkers ? { reasoning: model.reasoningMarkers } : {}),
    });
    return { tokens: Array.from(rendered.tokens), startsInReasoning: rendered.endsInReasoning };
  } catch (err) {
    if (err instanceof TemplateError) throw invalidRequest(`the chat template refused this request: ${err.message}`);
    throw err;
  }
}
