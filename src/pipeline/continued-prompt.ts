// A stored conversation continued warm (docs/api/responses.md#conversation-state):
// its exact tokens, reasoning the template would drop from history included,
// followed by only what the new turn adds, so the prefix cache serves all of
// the stored part.
//
// The addition is found by rendering the conversation twice, without the new
// turn (and no generation prompt) and with it: when the first render is a
// token prefix of the second, the template renders each message on its own
// and the difference is the new turn. The stored tokens end where the model
// stopped (its end-of-turn token is never kept), so the template's close of
// that turn, from its last end-of-generation token on, goes between them.
import type { ServedModel } from "../daemon/served-model.ts";
import { commonPrefix } from "../engine/token-prefix.ts";
import { renderChatPrompt, rendersTools, type ChatJob, type RenderedPrompt } from "./chat-job.ts";

/** A turn's close is its end token and a separator or two; more means the end token found is not that turn's. */
const MAX_CLOSE_TOKENS = 4;

/**
 * The job's prompt as `stored` (the conversation of its first `historyLength`
 * messages, as tokens) plus its later messages; undefined when the template
 * does not render messages on their own, and the caller rebuilds instead.
 */
export async function continuedPrompt(model: ServedModel, job: ChatJob, historyLength: number, stored: number[]): Promise<RenderedPrompt | undefined> {
  const withTools = rendersTools(job);
  const history = await renderChatPrompt(model, { ...job, messages: job.messages.slice(0, historyLength) }, withTools, false);
  const whole = await renderChatPrompt(model, job, withTools, true);
  const before = history.tokens;
  if (commonPrefix(before, whole.tokens) !== before.length) return undefined;
  let close = before.length - 1;
  while (close >= 0 && !model.tokenizer.isEog(before[close]!)) close--;
  if (close < 0 || before.length - close > MAX_CLOSE_TOKENS) return undefined;
  return { tokens: [...stored, ...before.slice(close), ...whole.tokens.slice(before.length)], startsInReasoning: whole.startsInReasoning };
}
