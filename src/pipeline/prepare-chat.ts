// A chat job as what the engine runs: the prompt through the model's template
// (or the job's own prompt), the tool plan, which grammar holds the reply, the
// context and window checks, the reply cap, and the cache breakpoints as
// pinned prefixes. Choices then start as a ChoiceSet (choice-set.ts) and read
// back through choice-stream.ts with the options made here.
import type { ToolCallEvent, ToolCallParser } from "../codec/tool-dialects/index.ts";
import type { ServedModel } from "../daemon/served-model.ts";
import type { GenerateRequest } from "../engine/jobs.ts";
import { renderChatPrompt, type ChatJob, type PrefixPin } from "./chat-job.ts";
import { ChoiceSet } from "./choice-set.ts";
import type { ChoiceOptions } from "./choice-stream.ts";
import { afterReasoning } from "../codec/tool-grammar.ts";
import { constraintGrammar } from "./constraint.ts";
import { contentKey, Lru } from "./lru.ts";
import { checkContext, fitWindow, generateRequest, type GenerationDefaults } from "./engine-request.ts";
import { breakpointPins } from "./prefix-pins.ts";
import { toolPlan } from "./tool-plan.ts";

export interface PreparedChat {
  model: ServedModel;
  job: ChatJob;
  /** Prompt token ids. */
  prompt: number[];
  /** What the engine runs for choice 0 (the others differ in seed). */
  request: GenerateRequest;
  /** How each choice's tokens become deltas. */
  choice: ChoiceOptions;
  /** What the job's breakpoints pin (empty without breakpoints). */
  pins: PrefixPin[];
}

/** A parser whose call events are dropped: a wire parsed for its channels when no call may be made. */
function withoutCalls(parser: ToolCallParser): ToolCallParser {
  const keep = (events: ToolCallEvent[]) => events.filter((e) => e.type === "text" || e.type === "reasoning");
  return { push: (text) => keep(parser.push(text)), flush: () => keep(parser.flush()) };
}

/**
 * Held grammars behind an open reasoning block, by grammar and closing marker:
 * an agent on a thinking model forces the same tools every turn, and the
 * wrapped grammar is parsed and printed again otherwise.
 */
const afterReasoningGrammars = new Lru<string>(32);

function grammarAfterReasoning(grammar: string, close: string): string {
  const key = contentKey([grammar, close]);
  let wrapped = afterReasoningGrammars.get(key);
  if (wrapped === undefined) {
    wrapped = afterReasoning(grammar, close);
    afterReasoningGrammars.set(key, wrapped);
  }
  return wrapped;
}

export async function prepareChat(
  defaults: GenerationDefaults,
  model: ServedModel,
  job: ChatJob,
): Promise<PreparedChat> {
  const tools = toolPlan(model, job.tools, job.toolChoice, job.parallelToolCalls);
  // A forced tool choice beats the constraint; an auto one only holds calls,
  // so the constraint still holds the rest. A constrained reply is all
  // content (the grammar holds from the first token), unless the grammar is
  // lazy and only holds from a call's opener on, or the prompt opened a
  // reasoning block (below).
  const forced = tools.grammar !== undefined && tools.trigger === undefined;
  const format = forced || !job.constraint ? undefined : constraintGrammar(job.constraint);
  const grammar = forced ? tools.grammar : (format ?? tools.grammar);
  const grammarTrigger = format === undefined ? tools.trigger : undefined;
  const { tokens: prompt, startsInReasoning } = job.prompt ?? (await renderChatPrompt(model, job));
  checkContext(model, prompt.length, "messages");
  // A grammar that holds the whole reply, on a prompt that opened a reasoning
  // block, holds it from the block's end: the model reasons first.
  const reasonsFirst = grammar !== undefined && grammarTrigger === undefined && startsInReasoning;
  const markers = !grammar || grammarTrigger !== undefined || reasonsFirst ? model.reasoningMarkers : undefined;
  const held = reasonsFirst && markers ? grammarAfterReasoning(grammar!, markers.close) : grammar;
  const request = generateRequest(defaults, model, prompt, {
    sampling: job.sampling,
    maxTokens: job.maxTokens,
    ignoreEos: job.ignoreEos,
    ...(job.qos === undefined ? {} : { qos: job.qos }),
    ...(job.startBy === undefined ? {} : { startBy: job.startBy }),
    ...(job.logprobs === undefined ? {} : { logprobs: job.logprobs }),
    ...(held ? { grammar: held } : {}),
    ...(grammarTrigger ? { grammarTrigger } : {}),
    ...(tools.callsAllowed ? {} : { bannedTokens: model.callOpenerTokens }),
  });
  fitWindow(job.window, prompt.length, request);
  const pins = job.breakpoints?.length ? await breakpointPins(model, job, prompt, job.breakpoints) : [];
  if (pins.length > 0) request.pins = pins;
  const dialect = tools.dialect;
  const choice: ChoiceOptions = {
    stops: tools.callsAllowed && dialect?.stops ? [...job.stop, ...dialect.stops] : job.stop,
    ...(markers ? { reasoning: { ...markers, startInside: startsInReasoning } } : {}),
    ...(dialect
      ? {
          toolParser: () => {
            const parser = dialect.parser({ tools: job.tools });
            return tools.callsAllowed ? parser : withoutCalls(parser);
          },
        }
      : {}),
  };
  return { model, job, prompt, request, choice, pins };
}

/** Starts the job's choices (`n` of them; a stream carries one). */
export function startChat(p: PreparedChat, n = p.job.n): ChoiceSet {
  return new ChoiceSet(p.model, [p.request], n, { durable: p.job.durable });
}
