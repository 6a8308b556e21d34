// Sampling fields shared by chat and completions (docs/api/openai.md#sampling-fields).
import * as v from "valibot";
import type { RequestSampling } from "../../daemon/sampling-resolve.ts";
import { int, num, opt } from "../validate.ts";

/** A repeat penalty divides logits: it must be above 0 (1.0 disables it). */
const penalty = v.pipe(v.number(), v.finite(), v.gtValue(0, "must be above 0"), v.maxValue(2, "must be at most 2"));

/**
 * llama.cpp's sampler takes a 32-bit seed, so a seed is a 32-bit integer,
 * unsigned or signed (-1 is 4294967295, as C reads it); any other value is
 * refused rather than folded onto one of these.
 */
const SEED_RANGE = "must be a 32-bit integer, from -2147483648 to 4294967295 (the sampler's seed is 32 bits)";
const seed = v.pipe(
  v.number(),
  v.integer("must be a whole number"),
  v.minValue(-(2 ** 31), SEED_RANGE),
  v.maxValue(2 ** 32 - 1, SEED_RANGE),
);

export const samplingFields = {
  temperature: opt(num(0, 2)),
  top_p: opt(num(0, 1)),
  top_k: opt(int(0, 2 ** 31 - 1)),
  min_p: opt(num(0, 1)),
  seed: opt(seed),
  presence_penalty: opt(num(-2, 2)),
  frequency_penalty: opt(num(-2, 2)),
  repeat_penalty: opt(penalty),
  repetition_penalty: opt(penalty),
  ignore_eos: opt(v.boolean()),
};

type SamplingInput = { [K in keyof typeof samplingFields]?: v.InferOutput<(typeof samplingFields)[K]> };

export function requestSampling(body: SamplingInput, logitBias?: Record<number, number>): RequestSampling {
  const defined = <T>(x: T | null | undefined) => (x === null ? undefined : x);
  return {
    temperature: defined(body.temperature),
    topP: defined(body.top_p),
    topK: defined(body.top_k),
    minP: defined(body.min_p),
    seed: defined(body.seed),
    presencePenalty: defined(body.presence_penalty),
    frequencyPenalty: defined(body.frequency_penalty),
    repeatPenalty: defined(body.repeat_penalty) ?? defined(body.repetition_penalty),
    logitBias,
  };
}
