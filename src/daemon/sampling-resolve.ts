// Where a request's sampling values come from (docs/api/openai.md#sampling-fields): the request,
// then the operator's flags, then the model's published defaults, then
// constants. The truncation set (top_p, top_k, min_p) comes whole from the
// first rung that names any of it.
import { randomInt } from "node:crypto";
import type { SamplingSpec } from "../engine/sampling.ts";
import type { SamplingDefaults } from "../gguf/describe.ts";

/** Sampling fields as a request names them (already validated). */
export interface RequestSampling {
  temperature?: number;
  topP?: number;
  topK?: number;
  minP?: number;
  seed?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  repeatPenalty?: number;
  logitBias?: Record<number, number>;
}

/** The operator's flags: --temperature, --top-p, --top-k, --min-p, --repeat-penalty. */
export type OperatorSampling = Pick<RequestSampling, "temperature" | "topP" | "topK" | "minP" | "repeatPenalty">;

type Rung = Pick<RequestSampling, "temperature" | "topP" | "topK" | "minP" | "repeatPenalty">;

function modelRung(d: SamplingDefaults): Rung {
  return { temperature: d.temperature, topP: d.topP, topK: d.topK, minP: d.minP, repeatPenalty: d.penaltyRepeat };
}

const namesTruncation = (r: Rung) => r.topP !== undefined || r.topK !== undefined || r.minP !== undefined;

export const DEFAULT_TOP_K_WHEN_SAMPLING = 40;

/** The effective defaults a request naming nothing runs with (for /props); unknown values are omitted. */
export function effectiveDefaults(operator: OperatorSampling, model: SamplingDefaults): Rung {
  return resolveRungs({}, operator, model);
}

function resolveRungs(request: Rung, operator: OperatorSampling, model: SamplingDefaults): Required<Rung> {
  const rungs = [request, operator, modelRung(model)];
  const temperature = rungs.map((r) => r.temperature).find((v) => v !== undefined) ?? 1.0;
  const truncation = rungs.find(namesTruncation);
  const topK = truncation ? (truncation.topK ?? 0) : temperature > 0 ? DEFAULT_TOP_K_WHEN_SAMPLING : 0;
  return {
    temperature,
    topK,
    topP: truncation?.topP ?? 1,
    minP: truncation?.minP ?? 0,
    repeatPenalty: rungs.map((r) => r.repeatPenalty).find((v) => v !== undefined) ?? 1.0,
  };
}

/**
 * A request's sampling: its own values, then the operator's, then the model's.
 * `modelTemperatureCap` (--spec-max-temperature on a speculating model) caps
 * a temperature only when it came from the model's defaults: a high default
 * temperature makes drafts rarely accepted, a caller's choice is kept.
 */
export function resolveSampling(
  request: RequestSampling,
  operator: OperatorSampling,
  model: SamplingDefaults,
  modelTemperatureCap?: number,
): SamplingSpec {
  const r = resolveRungs(request, operator, model);
  const fromModel =
    request.temperature === undefined && operator.temperature === undefined && model.temperature !== undefined;
  if (fromModel && modelTemperatureCap !== undefined) r.temperature = Math.min(r.temperature, modelTemperatureCap);
  return {
    ...r,
    // seed 0 reads as unseeded: a fresh seed per request.
    seed: request.seed ? request.seed >>> 0 : randomInt(0, 2 ** 32 - 1),
    presencePenalty: request.presencePenalty ?? 0,
    frequencyPenalty: request.frequencyPenalty ?? 0,
    ...(request.logitBias && Object.keys(request.logitBias).length > 0 ? { logitBias: request.logitBias } : {}),
  };
}
