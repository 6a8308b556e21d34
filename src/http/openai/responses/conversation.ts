// What a Responses request's prompt is made of (docs/api/responses.md#conversation-state):
// this request's instructions, the stored conversation it continues (each
// earlier response's input and output, oldest first) and its new input, as
// chat messages; and, when the stored conversation may be continued warm,
// its own tokens followed by only the new turn.
import type { ChatMessage } from "../../../codec/index.ts";
import type { ServedModel } from "../../../daemon/served-model.ts";
import type { ChatJob, RenderedPrompt } from "../../../pipeline/chat-job.ts";
import { continuedPrompt, rememberHistory } from "../../../pipeline/continued-prompt.ts";
import { contentKey } from "../../../pipeline/lru.ts";
import { RequestError } from "../../../daemon/request-error.ts";
import type { Item, ResponseIndex, ResponseStore } from "../../../response-store/store.ts";
import { itemsToMessages } from "./request.ts";

/** A continued id that is unknown, deleted or was never stored. */
export function previousNotFound(id: string): RequestError {
  return new RequestError(
    400,
    `Previous response with id '${id}' not found.`,
    "previous_response_not_found",
    "previous_response_id",
  );
}

export interface Conversation {
  messages: ChatMessage[];
  /** How many of `messages` come before the new input (instructions and stored turns). */
  historyLength: number;
  /** The stored response continued, if any. */
  previous?: ResponseIndex;
}

/**
 * The messages of `instructions`, the stored chain ending at `previous`, and
 * `input`; `previous` must be a response the scope `owner` sees (another
 * scope's is not found, as one never stored).
 */
export function conversationOf(
  store: ResponseStore,
  previousId: string | null | undefined,
  instructions: string | null | undefined,
  input: Item[],
  owner: string | undefined,
): Conversation {
  const previous = previousId ? store.get(previousId, owner) : undefined;
  if (previousId && !previous) throw previousNotFound(previousId);
  const stored = previous
    ? store.chain(previous.id).flatMap((r) => [...r.input, ...(r.response.output as Item[])])
    : [];
  const system: ChatMessage[] = instructions ? [{ role: "system", content: instructions }] : [];
  const inputField = (i: number) => (i < stored.length ? `previous_response_id` : `input[${i - stored.length}]`);
  const all = itemsToMessages([...stored, ...input], inputField);
  const history = itemsToMessages(stored, inputField);
  // A new input that joins the stored last turn (a function_call sent again)
  // leaves no clean split: the conversation is then only ever rebuilt.
  const split = history.length > 0 && contentKey(all.slice(0, history.length)) === contentKey(history);
  return {
    messages: [...system, ...all],
    historyLength: split ? system.length + history.length : 0,
    ...(previous ? { previous } : {}),
  };
}

/**
 * What a later turn must share with a stored one to continue it warm: instructions, the tools it renders, the template
 * variables.
 */
export function headOf(job: ChatJob, instructions: string | null | undefined, rendersTools: boolean): string {
  return contentKey({
    instructions: instructions ?? null,
    tools: rendersTools ? job.tools.map((t) => t.template) : [],
    kwargs: job.templateKwargs,
  });
}

/**
 * The warm prompt, when the stored response may be continued that way: same
 * model, a turn that ended normally, the same head, a clean split, and a
 * template that renders each message on its own. Undefined: rebuild.
 */
export async function warmPrompt(
  store: ResponseStore,
  model: ServedModel,
  job: ChatJob,
  conversation: Conversation,
  head: string,
): Promise<RenderedPrompt | undefined> {
  const previous = conversation.previous;
  if (!previous || previous.model !== model.id || !previous.warmable || previous.head !== head) return undefined;
  if (conversation.historyLength === 0) return undefined;
  return continuedPrompt(
    model,
    job,
    conversation.historyLength,
    store.tokens(previous.id),
    historyKey(model, previous.id, head),
  );
}

function historyKey(model: ServedModel, responseId: string, head: string): string {
  return `${model.id}\n${responseId}\n${head}`;
}

/**
 * After a turn is stored: renders its conversation for the turn that will
 * continue it under the same head, so that turn renders only once
 * (continued-prompt.ts). Failures only mean the next turn renders it itself.
 */
export function prepareNextTurn(
  store: ResponseStore,
  model: ServedModel,
  job: ChatJob,
  responseId: string,
  instructions: string | null | undefined,
  head: string,
  owner: string | undefined,
): void {
  try {
    const next = conversationOf(store, responseId, instructions, [], owner);
    if (next.historyLength === 0) return;
    void rememberHistory(
      historyKey(model, responseId, head),
      model,
      { ...job, messages: next.messages },
      next.historyLength,
    ).catch(() => {});
  } catch {
    // the record went meanwhile (deleted): nothing to prepare
  }
}
