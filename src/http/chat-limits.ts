// What a request of any API family may hold, checked before any work that
// grows with it (each a 400 naming the field and the limit): no more
// messages and content blocks than the context window has tokens, at most
// MAX_TOOLS tools, no more text in its text fields (messages, system, tools,
// template variables) than the window can hold, whatever it tokenizes to,
// short lists and objects where a real client sends a handful, and a bound
// on the reply tokens n choices may reserve.
import type { ModelRegistry } from "../daemon/registry.ts";
import type { ServedModel } from "../daemon/served-model.ts";
import { RequestError, invalidRequest } from "../daemon/request-error.ts";
import { checkTextFits } from "../pipeline/engine-request.ts";

/** Tools one request may declare: coding agents send 10-60; OpenAI allows 128. */
export const MAX_TOOLS = 1024;

/**
 * Keys an Ollama `options` object may have: Ollama's own options are about
 * 40, and a client that fills in every one sends no more.
 */
export const MAX_OLLAMA_OPTIONS = 128;

/**
 * The lengths of a chat body's lists on the body as parsed, before
 * validation walks every element (30,000 messages take 60-160 ms to
 * validate, all of it on the event loop): `tools`, Ollama's `options`, and
 * the turns (`messages`, or the Responses API's `input` items) with their
 * content blocks and Anthropic's `system` blocks. Turns are held to the
 * named model's window; a body that names no model served here is held to
 * the largest window of any (it gets its 400 or 404 from validation after).
 */
export function checkListLengths(registry: ModelRegistry, body: unknown): void {
  if (typeof body !== "object" || body === null) return;
  const { model: id, messages, input, system, tools, options } = body as Record<string, unknown>;
  checkArrayLength(tools, "tools", MAX_TOOLS);
  checkKeyCount(options, "options", MAX_OLLAMA_OPTIONS);
  // A lookup without side effects: a model not loaded yet is loaded (or
  // waited for) by the route after these checks, not here.
  const named = typeof id === "string" ? registry.entry(id)?.served : undefined;
  const windows = named ? [named.contextWindow] : registry.all().map((m) => m.contextWindow);
  if (windows.length === 0) return;
  const window = Math.max(...windows);
  // The turns under the name each family gives them: chat, Messages and
  // Ollama's `messages`, the Responses API's `input` items (a body with
  // `messages` is not a Responses body).
  const [field, turns] = Array.isArray(messages) ? ["messages", messages] : ["input", input];
  if (!Array.isArray(turns)) return;
  const noun = field === "input" ? "input items" : "messages";
  if (turns.length >= window) {
    throw new RequestError(
      400,
      `This model's maximum context length is ${window} tokens. However, your request has ${turns.length} ${noun}, and each takes at least one token.`,
      "context_length_exceeded",
      field,
    );
  }
  // A turn's content blocks (and tool calls) are validated and rendered one
  // by one too; a block a real client sends holds text, so the window bounds
  // them as it bounds the turns.
  const blocks = turns.reduce((sum: number, turn) => sum + partsOf(turn), Array.isArray(system) ? system.length : 0);
  if (turns.length + blocks >= window) {
    throw new RequestError(
      400,
      `This model's maximum context length is ${window} tokens. However, your request has ${turns.length} ${noun} holding ${blocks} content blocks, and each takes at least one token.`,
      "context_length_exceeded",
      field,
    );
  }
}

/** The content blocks and tool calls of one turn as sent (any family's names). */
function partsOf(turn: unknown): number {
  if (typeof turn !== "object" || turn === null) return 0;
  const { content, tool_calls: calls, output, summary } = turn as Record<string, unknown>;
  let parts = 0;
  for (const list of [content, calls, output, summary]) if (Array.isArray(list)) parts += list.length;
  return parts;
}

/**
 * An array field of at most `max` elements, checked before validation walks
 * it; the 400 is OpenAI's wording for an array over its maximum length.
 */
export function checkArrayLength(value: unknown, field: string, max: number): void {
  if (!Array.isArray(value) || value.length <= max) return;
  throw invalidRequest(
    `Invalid '${field}': array too long. Expected an array with maximum length ${max}, but got an array with length ${value.length} instead.`,
    field,
    "array_above_max_length",
  );
}

/** An object field of at most `max` keys, checked before validation walks it. */
export function checkKeyCount(value: unknown, field: string, max: number): void {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return;
  let keys = 0;
  for (const _ in value) {
    if (++keys > max) {
      throw invalidRequest(
        `Invalid '${field}': too many keys. Expected an object with at most ${max} keys.`,
        field,
        "object_above_max_size",
      );
    }
  }
}

/** Choices one request may ask for: OpenAI's own bound on `n` (and over all of a completion's prompts). */
export const MAX_CHOICES = 128;

/**
 * Reply tokens one request may reserve over all its choices (n × the reply
 * cap). Each choice holds a lane and its KV until it ends, so a request of
 * 128 choices of a full 128k window (16.7M tokens; with ignore_eos every
 * one runs to its cap) would hold the lanes for hours. 2^18 tokens is two
 * whole 131,072-token replies, 8 choices of 32k or 128 of 2k: past what a
 * sampling client asks for, and at most minutes of decode on a GPU.
 */
export const MAX_REPLY_TOKENS = 262_144;

/**
 * `choices` × the reply cap within MAX_REPLY_TOKENS. A request that names no
 * cap may reply up to the window, so that is what its choices are counted
 * at; one choice is never refused (the window bounds it). The 400 names the
 * choices field (`n`, the multiplier); `capField` names the cap in its message.
 */
export function checkReplyBudget(
  choices: number,
  cap: number | null | undefined,
  window: number,
  capField: string,
  choicesField = "n",
): void {
  if (choices <= 1) return;
  const each = Math.min(cap ?? window, window);
  if (choices * each <= MAX_REPLY_TOKENS) return;
  const asked =
    cap === undefined || cap === null ? `no ${capField} (so up to the window, ${window})` : `${capField}=${cap}`;
  throw invalidRequest(
    `${choices} choices with ${asked} may generate ${choices * each} tokens; a request may reserve at most ${MAX_REPLY_TOKENS} (choices × ${capField}). Ask for fewer choices or set a smaller ${capField}.`,
    choicesField,
    "reply_budget_exceeded",
  );
}

/**
 * The characters of every string in a JSON value, iteratively (a deep schema
 * cannot exhaust the stack); with `keys`, object keys count too (tools and
 * kwargs are rendered as JSON, keys and all).
 */
export function textLength(value: unknown, keys: boolean): number {
  let total = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === "string") total += v.length;
    else if (Array.isArray(v)) for (const item of v) stack.push(item);
    else if (typeof v === "object" && v !== null) {
      for (const [key, item] of Object.entries(v)) {
        if (keys) total += key.length;
        stack.push(item);
      }
    }
  }
  return total;
}

/**
 * The request's text fields together must fit the window; the error names
 * the largest. Each field is [name, value, whether object keys count].
 */
export function checkChatText(model: ServedModel, fields: [name: string, value: unknown, keys: boolean][]): void {
  const parts = fields
    .map(([name, value, keys]) => [name, textLength(value ?? null, keys)] as [string, number])
    .filter(([, chars]) => chars > 0)
    .sort((a, b) => b[1] - a[1]);
  if (parts.length === 0) return;
  const total = parts.reduce((sum, [, chars]) => sum + chars, 0);
  const names = parts.map(([name]) => name);
  const subject = names.length === 1 ? `${names[0]} is` : `${names.slice(0, -1).join(", ")} and ${names.at(-1)} are`;
  checkTextFits(model, total, names[0]!, subject);
}
