// Parts of OpenAI's replies that chat and completions share.
import type { ServedModel } from "../../daemon/served-model.ts";
import type { TokenLogprob } from "../../engine/logprobs.ts";

/** OpenAI's usage object, with the prompt tokens served from the prefix cache. */
export function usageOf(promptTokens: number, completionTokens: number, cachedTokens: number) {
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
    prompt_tokens_details: { cached_tokens: cachedTokens },
  };
}

/** OpenAI's chat logprob entry for one token. */
export function chatLogprob(model: ServedModel, token: number, lp: TokenLogprob) {
  const entry = (t: number, logprob: number) => {
    const bytes = model.tokenizer.tokenBytes(t);
    return { token: Buffer.from(bytes).toString("utf8"), logprob, bytes: Array.from(bytes) };
  };
  return { ...entry(token, lp.logprob), top_logprobs: lp.top.map(([t, l]) => entry(t, l)) };
}
