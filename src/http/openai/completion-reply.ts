// A /v1/completions reply (docs/api/openai.md#completions-response): n choices for every prompt, numbered as
// OpenAI numbers them (choice index = prompt index * n + j), whole (padded
// under --nonstream-keepalive) or streamed with each chunk naming its choice.
// Usage sums every prompt (each counted once) and every choice; streamed, the
// finish chunk of the last choice to end carries it.
import type { ServedModel } from "../../daemon/served-model.ts";
import { ChoiceSet } from "../../pipeline/choice-set.ts";
import type { ChoiceDelta, ChoiceEnd } from "../../pipeline/choice-stream.ts";
import { generateRequest, type GenerationOptions } from "../../pipeline/engine-request.ts";
import { RequestTimer } from "../access-log.ts";
import { replyResponse, type Frame, type ReplyPlan, type ReplyRenderer } from "../reply-runner.ts";
import type { ServerContext } from "../server-context.ts";
import type { TokenizedPrompt } from "./completion-prompt.ts";
import { OPENAI_SSE, openaiErrorBody } from "./envelope.ts";
import { usageOf } from "./usage.ts";
import { LegacyLogprobs } from "./legacy-logprobs.ts";

const ROUTE = "/v1/completions";

export interface CompletionPlan {
  /** The model generating (its tokenizer, its id in the access log). */
  model: ServedModel;
  /** The model id the reply names (the requested one). */
  servedAs: string;
  prompts: TokenizedPrompt[];
  /** Choices per prompt. */
  n: number;
  /** How each prompt is generated (sampling, caps, class). */
  generation: GenerationOptions;
  /** false keeps the generations out of the session log (FIM). */
  durable: boolean;
  stream: boolean;
  /** Put each prompt's text before its choices' text. */
  echo: boolean;
  logprobs: boolean;
  stops: string[];
  /** What the terminal object adds beside `usage`; `cached` is the prompt tokens reused, summed over prompts. */
  extras: (ends: ChoiceEnd[], cached: number) => Record<string, unknown>;
  /** The finish the access log shows; the first choice's by default. */
  logFinish?: (ends: ChoiceEnd[]) => string;
}

/** One choice's text (echoed prompt first) and logprobs so far. */
class ChoiceState {
  text: string;
  readonly logprobs?: LegacyLogprobs;

  constructor(plan: CompletionPlan, prompt: TokenizedPrompt) {
    this.text = plan.echo ? prompt.text : "";
    if (plan.logprobs) this.logprobs = new LegacyLogprobs(plan.model, this.text.length);
  }

  /** Adds a delta; returns its text. */
  add(d: ChoiceDelta): string {
    for (const l of d.logprobs ?? []) this.logprobs?.add(l.token, l.logprob);
    const text = d.content + d.reasoning;
    this.text += text;
    return text;
  }
}

export function completionReply(ctx: ServerContext, request: Request, plan: CompletionPlan): Promise<Response> {
  // Every request is built before any starts, so a refusal leaves nothing running.
  const requests = plan.prompts.map((p) => generateRequest(ctx, plan.model, p.tokens, plan.generation));
  const choices = new ChoiceSet(plan.model, requests, plan.n, { durable: plan.durable });
  const base = {
    id: `cmpl-superfluid-${ctx.nextId()}`,
    object: "text_completion",
    created: Math.floor(Date.now() / 1000),
    model: plan.servedAs,
  };
  const promptOf = (index: number) => plan.prompts[Math.floor(index / plan.n)]!;
  const states = choices.generations.map((_, i) => new ChoiceState(plan, promptOf(i)));
  const sent = states.map(() => 0);
  const promptTokens = plan.prompts.reduce((n, p) => n + p.tokens.length, 0);
  // Each prompt's reuse is its first choice's (its siblings copy that prefill).
  const cachedOf = (ends: ChoiceEnd[]) => ends.reduce((n, e, i) => n + (i % plan.n === 0 ? e.cachedTokens : 0), 0);
  const terminal = (ends: ChoiceEnd[]) => {
    const cached = cachedOf(ends);
    const completion = ends.reduce((n, e) => n + e.completionTokens, 0);
    return { usage: usageOf(promptTokens, completion, cached), ...plan.extras(ends, cached) };
  };
  const chunk = (
    index: number,
    text: string,
    lp: unknown,
    finish: string | null,
    extra: Record<string, unknown> = {},
  ): Frame => ({
    data: { ...base, choices: [{ index, text, logprobs: lp, finish_reason: finish }], ...extra },
  });
  const renderer: ReplyRenderer = {
    // Echoed prompts go first, each in its choice's first chunk.
    open: () => states.flatMap((state, index) => (state.text ? [chunk(index, state.text, null, null)] : [])),
    delta: (index, d) => {
      const state = states[index]!;
      const text = state.add(d);
      if (!plan.stream) return [];
      const lp = state.logprobs ? state.logprobs.since(sent[index]!) : null;
      sent[index] = state.logprobs?.tokens.length ?? 0;
      return text || lp ? [chunk(index, text, lp, null)] : [];
    },
    // The last choice to end carries the usage.
    close: (index, end, all) => [chunk(index, "", null, end.finishReason, all ? terminal(all) : {})],
    whole: (ends) => ({
      body: {
        ...base,
        choices: ends.map((end, index) => ({
          index,
          text: states[index]!.text,
          logprobs: states[index]!.logprobs?.since(0) ?? null,
          finish_reason: end.finishReason,
        })),
        ...terminal(ends),
      },
      headers: { "x-superfluid-warm": String(cachedOf(ends)) },
    }),
  };
  const reply: ReplyPlan = {
    route: ROUTE,
    model: plan.model,
    promptTokens,
    id: base.id,
    choices,
    choice: { stops: plan.stops },
    timer: new RequestTimer(),
    cachedOf,
    ...(plan.logFinish ? { finishOf: plan.logFinish } : {}),
    // Headers go at once: a reply of many prompts has no one admission to wait for.
    waitForAdmission: false,
  };
  return replyResponse(
    ctx,
    request.signal,
    reply,
    renderer,
    { framing: OPENAI_SSE, errorBody: openaiErrorBody },
    plan.stream,
  );
}
