// What every job shares between its request and the engine: the context
// checks, the reply cap, logit bias ids, sampling resolution, stop strings,
// and starting n choices that share one prefill.
import { randomUUID } from "node:crypto";
import type { ServedModel } from "../daemon/served-model.ts";
import { resolveSampling, type OperatorSampling, type RequestSampling } from "../daemon/sampling-resolve.ts";
import type { Generation } from "../daemon/worker-client.ts";
import type { GenerateRequest } from "../engine/jobs.ts";
import { drawSeed } from "../engine/sampling.ts";
import { invalidRequest, RequestError } from "../daemon/request-error.ts";

/** What the operator set for every request (serve flags). */
export interface GenerationDefaults {
  operatorSampling: OperatorSampling;
  /** --spec-max-temperature: caps a temperature from the model's own defaults, on a model that speculates. */
  specMaxTemperature?: number;
  /** --max-tokens: the cap when a request names none. */
  maxTokens?: number;
}

/** The prompt must leave room in the window (docs/api/openai.md#error-codes). */
export function checkContext(model: ServedModel, promptTokens: number, field: string): void {
  if (promptTokens === 0) throw invalidRequest(`the ${field} is empty: there is nothing to continue`, field);
  if (promptTokens >= model.contextWindow) {
    throw new RequestError(
      400,
      `This model's maximum context length is ${model.contextWindow} tokens. However, your request has ${promptTokens} prompt tokens, leaving no room for a reply. Please shorten the ${field}.`,
      "context_length_exceeded",
      field,
    );
  }
}

/**
 * Refuses text (this many characters) that cannot fit whatever it tokenizes
 * to, before any work on it. `subject` names the text in the message when it
 * is more than the `field`.
 */
export function checkTextFits(model: ServedModel, chars: number, field: string, subject = `${field} is`): void {
  const fewest = model.minTokensFor(chars);
  if (fewest >= model.contextWindow) {
    throw new RequestError(
      400,
      `This model's maximum context length is ${model.contextWindow} tokens. However, your ${subject} at least ${fewest} tokens long.`,
      "context_length_exceeded",
      field,
    );
  }
}

/** A window smaller than the model's (Ollama's num_ctx), and the request field that set it. */
export interface RequestWindow {
  tokens: number;
  field: string;
}

/** Holds a request to a smaller window: the prompt must leave room in it, the reply cap fits what is left. */
export function fitWindow(
  window: RequestWindow | undefined,
  promptTokens: number,
  request: { maxTokens: number },
): void {
  if (window === undefined) return;
  if (promptTokens >= window.tokens) {
    throw new RequestError(
      400,
      `${window.field} is ${window.tokens} tokens, but the prompt is ${promptTokens} tokens, leaving no room for a reply`,
      "context_length_exceeded",
      window.field,
    );
  }
  request.maxTokens = Math.min(request.maxTokens, window.tokens - promptTokens);
}

/** The reply cap: the request's, else --max-tokens, else the rest of the window; never past the window. */
export function replyCap(
  model: ServedModel,
  promptTokens: number,
  requested: number | undefined,
  operatorDefault?: number,
): number {
  const room = model.contextWindow - promptTokens;
  return Math.min(requested ?? operatorDefault ?? room, room);
}

/** Logit bias keys are token ids of this model's vocabulary. */
export function logitBiasOf(
  model: ServedModel,
  bias: Record<string, number> | null | undefined,
  field = "logit_bias",
): Record<number, number> | undefined {
  if (!bias) return undefined;
  const out: Record<number, number> = {};
  for (const [key, value] of Object.entries(bias)) {
    const id = Number(key);
    if (!/^\d+$/.test(key) || id >= model.tokenizer.vocabInfo.size) {
      throw invalidRequest(
        `${field}: '${key}' is not a token id of this model (0-${model.tokenizer.vocabInfo.size - 1})`,
        field,
      );
    }
    out[id] = value;
  }
  return out;
}

/** Stop strings, empty ones dropped; ignore_eos ignores every stop condition. */
export function stopList(stop: string | string[] | null | undefined, ignoreEos: boolean | null | undefined): string[] {
  if (stop === undefined || stop === null || ignoreEos) return [];
  return (typeof stop === "string" ? [stop] : stop).filter((s) => s.length > 0);
}

/** The engine request's own fields, with the request's sampling and cap before the defaults and the window apply. */
export type GenerationOptions = Omit<GenerateRequest, "prompt" | "sampling" | "maxTokens"> & {
  sampling: RequestSampling;
  maxTokens?: number;
  /** The cap when the request names none (default --max-tokens, else the rest of the window). */
  defaultMaxTokens?: number;
};

export function generateRequest(
  defaults: GenerationDefaults,
  model: ServedModel,
  prompt: number[],
  opts: GenerationOptions,
): GenerateRequest {
  const { sampling, maxTokens, defaultMaxTokens, ignoreEos, bannedTokens, ...rest } = opts;
  // Unset fields stay absent, not undefined, in what goes to the worker.
  const set = Object.fromEntries(
    Object.entries(rest).filter(([, value]) => value !== undefined),
  ) as Partial<GenerateRequest>;
  return {
    ...set,
    prompt,
    sampling: resolveSampling(
      sampling,
      defaults.operatorSampling,
      model.info.sampling,
      model.worker.info.speculation === "off" ? undefined : defaults.specMaxTemperature,
    ),
    maxTokens: replyCap(model, prompt.length, maxTokens, defaultMaxTokens ?? defaults.maxTokens),
    ignoreEos: ignoreEos ?? false,
    ...(bannedTokens?.length ? { bannedTokens } : {}),
  };
}

/**
 * Choice i's seed: the request's plus i, within the sampler's seeds
 * [0, 0xfffffffe] (drawSeed), wrapping so that no two of a request's
 * choices share one.
 */
export function choiceSeed(seed: number, i: number): number {
  return (drawSeed(seed) + i) % 0xffffffff;
}

/**
 * Starts n choices of one prompt. The first prefills; the others are sent once
 * it has, so they copy its KV instead of prefilling again. Each choice gets its
 * own seed (seed + index) so seeded choices differ yet repeat. `durable: false`
 * keeps them all out of the session log (FIM completions).
 *
 * The choices form one group (GenerateJob.group: `opts.group`, or a new one
 * when n > 1), so together they hold no more than one request's fair share
 * of lanes while other requests wait.
 *
 * The first choice starts before this returns, or the call throws at once
 * (a model being unloaded refuses it): callers read `live[0]` right after
 * the call without awaiting it.
 */
export function startChoices(
  model: ServedModel,
  req: GenerateRequest,
  n: number,
  live: Generation[] = [],
  opts: { durable?: boolean; group?: string } = {},
): Promise<Generation[]> {
  // The choices of one request share its fair share of lanes (docs/design.md#fair-share).
  const group = opts.group ?? (n > 1 ? randomUUID() : undefined);
  if (group !== undefined) req = { ...req, group };
  const first = model.worker.generate(req, opts);
  live.push(first);
  if (n === 1) return Promise.resolve(live);
  return (async () => {
    await first.prefilled;
    for (let i = 1; i < n; i++) {
      live.push(
        model.worker.generate({ ...req, sampling: { ...req.sampling, seed: choiceSeed(req.sampling.seed, i) } }, opts),
      );
    }
    return live;
  })();
}
