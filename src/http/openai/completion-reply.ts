// A /v1/completions reply (docs/api/openai.md#completions-response): n choices for every prompt, numbered as
// OpenAI numbers them (choice index = prompt index * n + j), whole (padded
// under --nonstream-keepalive) or streamed with each chunk naming its choice.
// Usage sums every prompt (each counted once) and every choice; streamed, the
// finish chunk of the last choice to end carries it.
import { randomUUID } from "node:crypto";
import { choiceText, type ChoiceDelta, type ChoiceEnd } from "../../pipeline/choice-stream.ts";
import type { ServedModel } from "../../daemon/served-model.ts";
import type { Generation } from "../../daemon/worker-client.ts";
import { finishOf, logAccess, logFailure, RequestTimer } from "../access-log.ts";
import { admissionHeaders, nonStreamResponse } from "../keepalive.ts";
import { generateRequest, startChoices, type GenerationOptions } from "../../pipeline/generation.ts";
import { streamKeepaliveMs, type ServerContext } from "../server-context.ts";
import { streamResponse } from "../stream.ts";
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

/**
 * Every choice of every prompt. Each prompt's first choice starts at once (so
 * reading it sees its admission), its siblings once it has prefilled (they
 * share its KV); a cancel also reaches siblings that start after it.
 */
class ChoiceSet {
  readonly generations: Promise<Generation>[] = [];
  private readonly live: Generation[] = [];
  private cancelled = false;

  constructor(ctx: ServerContext, plan: CompletionPlan) {
    // Every request is built before any starts, so a refusal leaves nothing running.
    const requests = plan.prompts.map((p) => generateRequest(ctx, plan.model, p.tokens, plan.generation));
    // Every prompt's choices are one request's: they share its fair share of lanes.
    const group = requests.length * plan.n > 1 ? randomUUID() : undefined;
    try {
      for (const req of requests) this.start(plan, req, group);
    } catch (err) {
      // A prompt refused at its start (the model being unloaded, the log failing): the ones started before it stop too.
      this.cancel();
      throw err;
    }
  }

  /** Starts one prompt's choices; throws at once when its first choice is refused. */
  private start(plan: CompletionPlan, req: ReturnType<typeof generateRequest>, group: string | undefined): void {
    const mine: Generation[] = [];
    const started = startChoices(plan.model, req, plan.n, mine, { durable: plan.durable, ...(group ? { group } : {}) }).finally(() => {
      this.live.push(...mine.slice(1));
      if (this.cancelled) mine.forEach((g) => g.cancel());
    });
    started.catch(() => {}); // each choice awaits it; this keeps a failure from also counting as unhandled
    if (mine[0]) this.live.push(mine[0]);
    for (let j = 0; j < plan.n; j++) {
      this.generations.push(j === 0 && mine[0] ? Promise.resolve(mine[0]) : started.then((gens) => gens[j]!));
    }
  }

  cancel(): void {
    this.cancelled = true;
    this.live.forEach((g) => g.cancel());
  }
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

/** Reads one choice to its end, handing each delta to `onDelta`. */
async function readChoice(
  plan: CompletionPlan,
  generation: Promise<Generation>,
  timer: RequestTimer,
  onDelta: (d: ChoiceDelta) => void,
  onAdmitted?: (cached: number) => void,
): Promise<ChoiceEnd> {
  const stream = choiceText(plan.model.tokenizer, await generation, { stops: plan.stops }, onAdmitted);
  let step = await stream.next();
  while (!step.done) {
    timer.tokenDelivered();
    onDelta(step.value);
    step = await stream.next();
  }
  return step.value;
}

export function completionReply(ctx: ServerContext, request: Request, plan: CompletionPlan): Response | Promise<Response> {
  const set = new ChoiceSet(ctx, plan);
  const cancel = () => set.cancel();
  if (request.signal.aborted) cancel();
  else request.signal.addEventListener("abort", cancel, { once: true });
  const timer = new RequestTimer();
  const base = { id: `cmpl-superfluid-${ctx.nextId()}`, object: "text_completion", created: Math.floor(Date.now() / 1000), model: plan.servedAs };
  const promptOf = (index: number) => plan.prompts[Math.floor(index / plan.n)]!;
  const states = set.generations.map((_, i) => new ChoiceState(plan, promptOf(i)));
  const promptTokens = plan.prompts.reduce((n, p) => n + p.tokens.length, 0);
  // Each prompt's reuse is its first choice's (its siblings copy that prefill).
  const cachedOf = (ends: ChoiceEnd[]) => ends.reduce((n, e, i) => n + (i % plan.n === 0 ? e.cachedTokens : 0), 0);
  const terminal = (ends: ChoiceEnd[]) => {
    const cached = cachedOf(ends);
    const completion = ends.reduce((n, e) => n + e.completionTokens, 0);
    const finish = plan.logFinish?.(ends) ?? finishOf(ends[0]!);
    logAccess({ status: 200, route: ROUTE, model: plan.model.id, prompt: promptTokens, cached, completion, finish, id: base.id }, timer);
    return { usage: usageOf(promptTokens, completion, cached), ...plan.extras(ends, cached) };
  };
  const failed = (err: unknown): never => {
    cancel();
    logFailure({ route: ROUTE, model: plan.model.id, prompt: promptTokens, id: base.id }, timer, err, plan.stream);
    throw err;
  };

  if (!plan.stream) {
    const admission = admissionHeaders();
    const reading = set.generations.map((g, i) =>
      readChoice(plan, g, timer, (d) => states[i]!.add(d), i === 0 ? timer.onAdmitted(admission.onAdmitted) : undefined),
    );
    const whole = Promise.all(reading).then((ends) => ({
      body: {
        ...base,
        choices: ends.map((end, index) => ({ index, text: states[index]!.text, logprobs: states[index]!.logprobs?.since(0) ?? null, finish_reason: end.finishReason })),
        ...terminal(ends),
      },
      headers: { "x-superfluid-warm": String(cachedOf(ends)) },
    }), failed);
    return nonStreamResponse({ keepaliveSec: ctx.keepaliveSec, admitted: admission.admitted, reply: whole, cancel, route: ROUTE, errorBody: openaiErrorBody });
  }

  return streamResponse(
    OPENAI_SSE,
    async (sink, signal) => {
      signal.addEventListener("abort", cancel, { once: true });
      const send = (index: number, text: string, lp: unknown, finish: string | null, extra: Record<string, unknown> = {}) =>
        sink.send({ ...base, choices: [{ index, text, logprobs: lp, finish_reason: finish }], ...extra });
      const ends: ChoiceEnd[] = [];
      let open = set.generations.length;
      const streamChoice = async (generation: Promise<Generation>, index: number) => {
        const state = states[index]!;
        if (state.text) send(index, state.text, null, null);
        let sent = 0;
        const end = await readChoice(plan, generation, timer, (d) => {
          const text = state.add(d);
          const lp = state.logprobs ? state.logprobs.since(sent) : null;
          sent = state.logprobs?.tokens.length ?? 0;
          if (text || lp) send(index, text, lp, null);
        });
        ends[index] = end;
        send(index, "", null, end.finishReason, --open === 0 ? terminal(ends) : {});
      };
      await Promise.all(set.generations.map(streamChoice)).catch(failed);
    },
    {},
    streamKeepaliveMs(ctx),
  );
}
