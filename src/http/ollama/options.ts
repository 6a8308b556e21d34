// Ollama's `options` (docs/api/ollama.md#options) as the job's sampling, reply
// cap and stop strings. Each option is checked as Ollama's own range allows;
// one this server cannot honour is refused by name (`unsupported option:
// <name>`) rather than silently dropped.
import type { RequestSampling } from "../../daemon/sampling-resolve.ts";
import type { ServedModel } from "../../daemon/served-model.ts";
import { invalidRequest } from "../../daemon/request-error.ts";
import type { RequestWindow } from "../../pipeline/engine-request.ts";
import { checkKeyCount, MAX_OLLAMA_OPTIONS } from "../chat-limits.ts";

export interface OptionsPlan {
  sampling: RequestSampling;
  /** The reply cap; undefined fills the window. */
  maxTokens?: number;
  stop: string[];
  /** num_ctx below the served window: this request's prompt and reply must fit it. */
  window?: RequestWindow;
}

/**
 * Samplers this server does not have, at the values that turn them off
 * (what clients send when they fill in every option): accepted as no-ops.
 */
const OFF_VALUES: Record<string, unknown> = {
  mirostat: 0,
  tfs_z: 1,
  typical_p: 1,
  repeat_last_n: 64,
  penalize_newline: false,
};

/**
 * Options that tune how Ollama loads and runs a model (GPU layers, threads,
 * batch, memory mapping): here the server's flags decide those, and a
 * request's value changes nothing about its reply, so it is ignored rather
 * than refused (clients send them from their settings).
 */
const SERVER_KNOBS = new Set([
  "num_gpu",
  "main_gpu",
  "num_thread",
  "num_batch",
  "numa",
  "low_vram",
  "f16_kv",
  "use_mmap",
  "use_mlock",
  "vocab_only",
  "logits_all",
  "embedding_only",
  "num_keep",
]);

/** Stop strings an Ollama request may carry. */
const MAX_STOPS = 4;

/**
 * Stop strings as sent, empty ones included (dropped before MAX_STOPS applies): the array is walked only below this.
 */
const MAX_SENT_STOPS = 64;

function numberOption(
  name: string,
  value: unknown,
  min: number,
  max = Infinity,
  opts: { int?: boolean; exclusiveMin?: boolean } = {},
): number {
  const ok =
    typeof value === "number" &&
    Number.isFinite(value) &&
    (opts.exclusiveMin ? value > min : value >= min) &&
    value <= max &&
    (!opts.int || Number.isInteger(value));
  if (!ok) {
    const floor = `${opts.exclusiveMin ? "above" : "at least"} ${min}`;
    const range = max === Infinity ? floor : opts.exclusiveMin ? `${floor} and at most ${max}` : `${min} to ${max}`;
    throw invalidRequest(
      `options.${name}: must be ${opts.int ? "a whole number" : "a number"} ${range}`,
      `options.${name}`,
    );
  }
  return value as number;
}

export function optionsPlan(model: ServedModel, options: Record<string, unknown> | null | undefined): OptionsPlan {
  const plan: OptionsPlan = { sampling: {}, stop: [] };
  // /api/chat checks this before validation (checkListLengths); /api/generate gets here first.
  checkKeyCount(options, "options", MAX_OLLAMA_OPTIONS);
  for (const [name, value] of Object.entries(options ?? {})) {
    if (value === null || value === undefined) continue;
    switch (name) {
      case "num_predict": {
        if (value === -1 || value === -2) break; // fill the window
        plan.maxTokens = numberOption(name, value, 1, Infinity, { int: true });
        break;
      }
      case "num_ctx": {
        // The window is the server's (serve --max-context); a smaller one is honoured per request.
        const window = numberOption(name, value, 1, Infinity, { int: true });
        if (window > model.contextWindow) {
          throw invalidRequest(
            `options.num_ctx: this server runs ${model.id} with a window of ${model.contextWindow} tokens (serve --max-context); got ${window}`,
            "options.num_ctx",
          );
        }
        if (window < model.contextWindow) plan.window = { tokens: window, field: "options.num_ctx" };
        break;
      }
      case "temperature":
        plan.sampling.temperature = numberOption(name, value, 0);
        break;
      case "top_p":
        plan.sampling.topP = numberOption(name, value, 0, 1);
        break;
      case "min_p":
        plan.sampling.minP = numberOption(name, value, 0, 1);
        break;
      case "top_k":
        plan.sampling.topK = numberOption(name, value, 0, 2 ** 31 - 1, { int: true });
        break;
      case "seed":
        // -1 is Ollama's "random", as an unset seed is here.
        if (value !== -1) plan.sampling.seed = numberOption(name, value, 0, 2 ** 53, { int: true });
        break;
      case "repeat_penalty":
        plan.sampling.repeatPenalty = numberOption(name, value, 0, 2, { exclusiveMin: true });
        break;
      case "presence_penalty":
        plan.sampling.presencePenalty = numberOption(name, value, -2, 2);
        break;
      case "frequency_penalty":
        plan.sampling.frequencyPenalty = numberOption(name, value, -2, 2);
        break;
      case "stop": {
        const stops = typeof value === "string" ? [value] : value;
        if (Array.isArray(stops) && stops.length > MAX_SENT_STOPS)
          throw invalidRequest(`options.stop: at most ${MAX_STOPS} stop strings, got ${stops.length}`, "options.stop");
        if (!Array.isArray(stops) || stops.some((s) => typeof s !== "string"))
          throw invalidRequest("options.stop: must be a string or an array of strings", "options.stop");
        const kept = (stops as string[]).filter((s) => s !== "");
        if (kept.length > MAX_STOPS)
          throw invalidRequest(`options.stop: at most ${MAX_STOPS} stop strings, got ${kept.length}`, "options.stop");
        plan.stop = kept;
        break;
      }
      default:
        if (SERVER_KNOBS.has(name) || (name in OFF_VALUES && OFF_VALUES[name] === value)) break;
        throw invalidRequest(`unsupported option: ${name}`, `options.${name}`);
    }
  }
  return plan;
}
