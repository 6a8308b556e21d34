// What chat and completions share between parsing a request and shaping the
// reply: the context check, the token cap, logit bias ids, sampling
// resolution, and starting n choices that share one prefill.
import type { ModelRegistry } from "../../daemon/registry.ts";
import type { ServedModel } from "../../daemon/served-model.ts";
import { resolveSampling, type OperatorSampling, type RequestSampling } from "../../daemon/sampling-resolve.ts";
import type { Generation, GenerateRequest } from "../../daemon/worker-client.ts";
import type { TokenLogprob } from "../../engine/logprobs.ts";
import { drawSeed } from "../../engine/sampling.ts";
import type { QosClass } from "../../engine/scheduler.ts";
import { ApiError, badRequest } from "../errors.ts";
import { KEEPALIVE_INTERVAL_MS } from "../sse.ts";
import type { QosPolicy } from "../qos.ts";
import type { TokenBuckets } from "../rate-limit.ts";

/** Fill-in-the-middle settings (api.md 6, 18.7). */
export interface FimPolicy {
  /** --completion-deadline-ms: a completion not started by then expires; 0 = none. */
  deadlineMs: number;
  /** The per-client bucket (--completion-rate, --completion-burst). */
  buckets: TokenBuckets;
}

export interface ServerContext {
  registry: ModelRegistry;
  operatorSampling: OperatorSampling;
  /** --max-tokens: the default cap when a request names none. */
  maxTokens?: number;
  /** QoS trust (--http-default-qos, --no-http-qos-header, --http-allow-batch-invariant). */
  qos: QosPolicy;
  /** --nonstream-keepalive in seconds (0 = off); also the SSE keep-alive period when set. */
  keepaliveSec: number;
  fim: FimPolicy;
  /** Counter behind `chatcmpl-superfluid-<n>` ids. */
  nextId(): number;
}

/** The SSE comment period: the --nonstream-keepalive interval when set (api.md 0.21), else 15 s. */
export function sseKeepaliveMs(ctx: ServerContext): number {
  return ctx.keepaliveSec > 0 ? ctx.keepaliveSec * 1000 : KEEPALIVE_INTERVAL_MS;
}

/** api.md 4.4: the prompt must leave room in the window. */
export function checkContext(model: ServedModel, promptTokens: number, param: string): void {
  if (promptTokens === 0) throw badRequest(`the ${param} is empty: there is nothing to continue`, param);
  if (promptTokens >= model.contextWindow) {
    throw new ApiError(
      400,
      `This model's maximum context length is ${model.contextWindow} tokens. However, your request has ${promptTokens} prompt tokens, leaving no room for a reply. Please shorten the ${param}.`,
      "context_length_exceeded",
      param,
    );
  }
}

/**
 * Refuses text (this many characters) that cannot fit whatever it tokenizes
 * to, before any work on it. `subject` names the text in the message when it
 * is more than the `param` field.
 */
export function checkTextFits(model: ServedModel, chars: number, param: string, subject = `${param} is`): void {
  const fewest = model.minTokensFor(chars);
  if (fewest >= model.contextWindow) {
    throw new ApiError(
      400,
      `This model's maximum context length is ${model.contextWindow} tokens. However, your ${subject} at least ${fewest} tokens long.`,
      "context_length_exceeded",
      param,
    );
  }
}

/** The reply cap: the request's, else --max-tokens, else the rest of the window. */
export function replyCap(model: ServedModel, promptTokens: number, requested: number | undefined, operatorDefault?: number): number {
  const room = model.contextWindow - promptTokens;
  return Math.min(requested ?? operatorDefault ?? room, room);
}

/** logit_bias keys are token ids of this model's vocabulary. */
export function logitBiasOf(model: ServedModel, bias: Record<string, number> | null | undefined): Record<number, number> | undefined {
  if (!bias) return undefined;
  const out: Record<number, number> = {};
  for (const [key, value] of Object.entries(bias)) {
    const id = Number(key);
    if (!/^\d+$/.test(key) || id >= model.tokenizer.vocabInfo.size) {
      throw badRequest(`logit_bias: '${key}' is not a token id of this model (0-${model.tokenizer.vocabInfo.size - 1})`, "logit_bias");
    }
    out[id] = value;
  }
  return out;
}

export function generateRequest(
  ctx: ServerContext,
  model: ServedModel,
  prompt: number[],
  opts: {
    sampling: RequestSampling;
    maxTokens?: number;
    /** The cap when the request names none (default --max-tokens, else the rest of the window). */
    defaultMaxTokens?: number;
    ignoreEos?: boolean;
    logprobs?: number;
    grammar?: string;
    grammarTrigger?: string;
    bannedTokens?: number[];
    qos?: QosClass;
    /** Unix ms by which it must have started (else it expires). */
    startBy?: number;
  },
): GenerateRequest {
  return {
    prompt,
    sampling: resolveSampling(opts.sampling, ctx.operatorSampling, model.info.sampling),
    maxTokens: replyCap(model, prompt.length, opts.maxTokens, opts.defaultMaxTokens ?? ctx.maxTokens),
    ignoreEos: opts.ignoreEos ?? false,
    ...(opts.qos === undefined ? {} : { qos: opts.qos }),
    ...(opts.startBy === undefined ? {} : { startBy: opts.startBy }),
    ...(opts.logprobs === undefined ? {} : { logprobs: opts.logprobs }),
    ...(opts.grammar === undefined ? {} : { grammar: opts.grammar }),
    ...(opts.grammarTrigger === undefined ? {} : { grammarTrigger: opts.grammarTrigger }),
    ...(opts.bannedTokens?.length ? { bannedTokens: opts.bannedTokens } : {}),
  };
}

/**
 * Starts n choices of one prompt. The first prefills; the others are sent once
 * it has, so they copy its KV instead of prefilling again. Each choice gets its
 * own seed (seed + index) so seeded choices differ yet repeat. `durable: false`
 * keeps them all out of the session log (FIM completions).
 */
export async function startChoices(
  model: ServedModel,
  req: GenerateRequest,
  n: number,
  live: Generation[] = [],
  opts: { durable?: boolean } = {},
): Promise<Generation[]> {
  const first = model.worker.generate(req, opts);
  live.push(first);
  if (n === 1) return live;
  await first.prefilled;
  for (let i = 1; i < n; i++) {
    live.push(model.worker.generate({ ...req, sampling: { ...req.sampling, seed: drawSeed(req.sampling.seed + i) } }, opts));
  }
  return live;
}

/** Stop strings; ignore_eos ignores every stop condition (api.md 5.2). */
export function stopsOf(req: { stop?: string | string[] | null; ignore_eos?: boolean | null }): string[] {
  if (req.stop === undefined || req.stop === null || req.ignore_eos) return [];
  return (typeof req.stop === "string" ? [req.stop] : req.stop).filter((s) => s.length > 0);
}

/** OpenAI's usage object, with the prompt tokens served from the prefix cache. */
export function usageOf(promptTokens: number, completionTokens: number, cachedTokens: number) {
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
    prompt_tokens_details: { cached_tokens: cachedTokens },
  };
}

/** Cancels every choice when the client goes away. */
export function cancelOnAbort(signal: AbortSignal, generations: () => Generation[]): void {
  if (signal.aborted) generations().forEach((g) => g.cancel());
  else signal.addEventListener("abort", () => generations().forEach((g) => g.cancel()), { once: true });
}

/** OpenAI's chat logprob entry for one token. */
export function chatLogprob(model: ServedModel, token: number, lp: TokenLogprob) {
  const entry = (t: number, logprob: number) => {
    const bytes = model.tokenizer.tokenBytes(t);
    return { token: Buffer.from(bytes).toString("utf8"), logprob, bytes: Array.from(bytes) };
  };
  return { ...entry(token, lp.logprob), top_logprobs: lp.top.map(([t, l]) => entry(t, l)) };
}
