// A stored conversation continued warm (docs/api/responses.md#conversation-state):
// its exact tokens, reasoning the template would drop from history included,
// followed by only what the new turn adds, so the prefix cache serves all of
// the stored part.
//
// The new turn is the tail of the whole conversation's render. It starts
// after the close of the stored last turn: the end-of-generation token that
// ends it and the separator after that token. Both are read off the render
// of the stored conversation alone (without a generation prompt): its last
// end-of-generation token and what follows. In the whole render the same
// close is the one with as many end-of-generation tokens before it, since
// each message renders its own end token whatever the template does to the
// history's text (Qwen3 drops earlier turns' reasoning, and renders the last
// turn differently once it is no longer last). The stored tokens end where
// the model stopped: its end-of-turn token is never kept, so the close goes
// between them and the new turn.
//
// What comes before the stored last turn must render the same whether or
// not new turns follow (checked: its render is a token prefix of the whole
// one). Templates that move something to the last user message (Mistral's
// tools block) fail it, and are rebuilt: continuing them warm would repeat
// it in every new turn.
import type { ServedModel } from "../daemon/served-model.ts";
import { commonPrefix } from "../engine/token-prefix.ts";
import { renderChatPrompt, rendersTools, type ChatJob, type RenderedPrompt } from "./chat-job.ts";
import { Lru } from "./lru.ts";

/** A turn's close is its end token and a separator or two; more means the end token found is not that turn's. */
const MAX_SEPARATOR_TOKENS = 3;

/**
 * What a warm continuation compares the whole render with: the stored conversation rendered without its last turn, and
 * whole (no generation prompt).
 */
export interface HistoryRenders {
  earlier: number[];
  history: number[];
}

/**
 * Renders of stored conversations, by the caller's key (a stored response
 * and the head it would be continued under): made right after a turn is
 * stored, while the client reads the reply or runs its tools, so the next
 * turn renders only once, as a rebuilt one does.
 */
const historyRenders = new Lru<HistoryRenders>(64);

/**
 * The renders of the job's first `historyLength` messages; undefined when the template refuses a partial conversation
 * (one that must end with a user turn).
 */
async function renderHistory(
  model: ServedModel,
  job: ChatJob,
  historyLength: number,
): Promise<HistoryRenders | undefined> {
  const withTools = rendersTools(job);
  const render = async (count: number) =>
    (await renderChatPrompt(model, { ...job, messages: job.messages.slice(0, count) }, withTools, false)).tokens;
  const renders = await Promise.all([render(historyLength - 1), render(historyLength)]).catch(() => undefined);
  return renders && { earlier: renders[0], history: renders[1] };
}

/**
 * Renders the job's conversation (`historyLength` messages, all stored) ahead of the turn that will continue it, under
 * `key`.
 */
export async function rememberHistory(
  key: string,
  model: ServedModel,
  job: ChatJob,
  historyLength: number,
): Promise<void> {
  const renders = await renderHistory(model, job, historyLength);
  if (renders) historyRenders.set(key, renders);
}

/**
 * The job's prompt as `stored` (the conversation of its first `historyLength`
 * messages, as tokens, ending with an assistant turn) plus its later
 * messages; undefined when the renders do not line up that way, and the
 * caller rebuilds instead. `key` finds renders remembered for it. Without
 * the generation prompt, the tokens end with the later messages (the
 * session API appends a message that way).
 */
export async function continuedPrompt(
  model: ServedModel,
  job: ChatJob,
  historyLength: number,
  stored: number[],
  key?: string,
  addGenerationPrompt = true,
): Promise<(RenderedPrompt & { rendered: number[] }) | undefined> {
  if (job.messages[historyLength - 1]?.role !== "assistant") return undefined;
  const remembered = key === undefined ? undefined : historyRenders.get(key);
  const [renders, whole] = await Promise.all([
    remembered ?? renderHistory(model, job, historyLength),
    renderChatPrompt(model, job, rendersTools(job), addGenerationPrompt).catch(() => undefined),
  ]);
  if (!renders || !whole) return undefined;
  const { earlier, history } = renders;
  if (commonPrefix(earlier, whole.tokens) !== earlier.length) return undefined;
  const ends = (tokens: number[]) => tokens.flatMap((t, i) => (model.tokenizer.isEog(t) ? [i] : []));
  const historyEnds = ends(history);
  const last = historyEnds.at(-1);
  if (last === undefined || history.length - last - 1 > MAX_SEPARATOR_TOKENS) return undefined;
  const close = history.slice(last);
  const at = ends(whole.tokens)[historyEnds.length - 1];
  if (at === undefined || commonPrefix(whole.tokens.slice(at, at + close.length), close) !== close.length)
    return undefined;
  return {
    tokens: [...stored, ...close, ...whole.tokens.slice(at + close.length)],
    startsInReasoning: whole.startsInReasoning,
    rendered: whole.tokens,
  };
}
