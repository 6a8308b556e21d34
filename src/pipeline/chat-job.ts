// The neutral chat job: what every API family's chat route becomes once its
// request is parsed, and the one path from there to the engine. A family maps
// its request to a ChatJob, calls prepareChat (the prompt through the model's
// template, the tool plan, which grammar holds the reply, the context check
// and the reply cap), starts the choices, reads each as neutral deltas
// (text, reasoning, tool-call events, logprobs) ending in a ChoiceEnd (why it
// ended, which stop string matched, token counts), and renders those in its
// own wire. Errors are RequestErrors; the family renders them too.
import { TemplateError, type ChatMessage, type ToolDef } from "../codec/index.ts";
import type { ToolCallEvent, ToolCallParser } from "../codec/tool-dialects/index.ts";
import type { ToolSpec } from "../codec/tool-grammar.ts";
import { choiceText, type ChoiceDelta, type ChoiceEnd, type ChoiceOptions } from "./choice-stream.ts";
import type { RequestSampling } from "../daemon/sampling-resolve.ts";
import { THINK_MARKERS, type ServedModel } from "../daemon/served-model.ts";
import type { Generation } from "../daemon/worker-client.ts";
import type { GenerateRequest } from "../engine/jobs.ts";
import type { QosClass } from "../engine/scheduler.ts";
import { constraintGrammar, type Constraint } from "./constraint.ts";
import { checkContext, generateRequest, startChoices, type GenerationDefaults } from "./generation.ts";
import { invalidRequest } from "../daemon/request-error.ts";
import { toolPlan, type ToolChoice } from "./tool-plan.ts";

export type { ChoiceDelta, ChoiceEnd } from "./choice-stream.ts";
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
  if (typeof parameters === "boolean" || (typeof parameters === "object" && !Array.isArray(parameters))) return parameters;
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
}

/** A prompt as token ids, and whether it leaves a reasoning block open. */
export interface RenderedPrompt {
  tokens: number[];
  startsInReasoning: boolean;
}

export interface PreparedChat {
  model: ServedModel;
  job: ChatJob;
  /** Prompt token ids. */
  prompt: number[];
  /** What the engine runs for choice 0 (the others differ in seed). */
  request: GenerateRequest;
  /** How each choice's tokens become deltas. */
  choice: ChoiceOptions;
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
    });
    return { tokens: Array.from(rendered.tokens), startsInReasoning: rendered.endsInReasoning };
  } catch (err) {
    if (err instanceof TemplateError) throw invalidRequest(`the chat template refused this request: ${err.message}`);
    throw err;
  }
}

/** A parser whose call events are dropped: a wire parsed for its channels when no call may be made. */
function withoutCalls(parser: ToolCallParser): ToolCallParser {
  const keep = (events: ToolCallEvent[]) => events.filter((e) => e.type === "text" || e.type === "reasoning");
  return { push: (text) => keep(parser.push(text)), flush: () => keep(parser.flush()) };
}

export async function prepareChat(defaults: GenerationDefaults, model: ServedModel, job: ChatJob): Promise<PreparedChat> {
  const tools = toolPlan(model, job.tools, job.toolChoice, job.parallelToolCalls);
  // A forced tool choice beats the constraint; an auto one only holds calls,
  // so the constraint still holds the rest.
  const forced = tools.grammar !== undefined && tools.trigger === undefined;
  const format = forced || !job.constraint ? undefined : constraintGrammar(job.constraint);
  const grammar = forced ? tools.grammar : (format ?? tools.grammar);
  const grammarTrigger = format === undefined ? tools.trigger : undefined;
  const { tokens: prompt, startsInReasoning } = job.prompt ?? (await renderChatPrompt(model, job));
  checkContext(model, prompt.length, "messages");
  const request = generateRequest(defaults, model, prompt, {
    sampling: job.sampling,
    maxTokens: job.maxTokens,
    ignoreEos: job.ignoreEos,
    ...(job.qos === undefined ? {} : { qos: job.qos }),
    ...(job.startBy === undefined ? {} : { startBy: job.startBy }),
    ...(job.logprobs === undefined ? {} : { logprobs: job.logprobs }),
    ...(grammar ? { grammar } : {}),
    ...(grammarTrigger ? { grammarTrigger } : {}),
    ...(tools.callsAllowed ? {} : { bannedTokens: model.callOpenerTokens }),
  });
  // A constrained reply is all content (the grammar holds from the first token),
  // unless the grammar is lazy and only holds from a call's opener on.
  const splitsReasoning = model.thinks && (!grammar || grammarTrigger !== undefined);
  const dialect = tools.dialect;
  const choice: ChoiceOptions = {
    stops: job.stop,
    ...(splitsReasoning ? { reasoning: { ...THINK_MARKERS, startInside: startsInReasoning } } : {}),
    ...(dialect ? { toolParser: () => (tools.callsAllowed ? dialect.parser() : withoutCalls(dialect.parser())) } : {}),
  };
  return { model, job, prompt, request, choice };
}

/**
 * Starts the job's choices. The first is in `live` at once, the others once
 * it has prefilled (they copy its KV); the promise settles when all have
 * started.
 */
export function startChat(p: PreparedChat, live: Generation[] = [], n = p.job.n): Promise<Generation[]> {
  return startChoices(p.model, p.request, n, live, { durable: p.job.durable });
}

/** One choice as neutral deltas, ending in how it ended; `onAdmitted` hears when it gets a lane. */
export function chatChoice(p: PreparedChat, generation: Generation, onAdmitted?: (cachedTokens: number) => void): AsyncGenerator<ChoiceDelta, ChoiceEnd> {
  return choiceText(p.model.tokenizer, generation, p.choice, onAdmitted);
}
