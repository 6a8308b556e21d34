// What a chat request of any API family may hold, checked before any work
// that grows with it (each a 400 naming the field): no more messages than the
// context window has tokens (each message renders to at least one), at most
// MAX_TOOLS tools, and no more text in its text fields (messages, system,
// tools, template variables) than the window can hold, whatever it
// tokenizes to.
import type { ModelRegistry } from "../daemon/registry.ts";
import type { ServedModel } from "../daemon/served-model.ts";
import { RequestError, invalidRequest } from "./errors.ts";
import { checkTextFits } from "../pipeline/generation.ts";

/** Tools one request may declare: coding agents send 10-60; OpenAI allows 128. */
export const MAX_TOOLS = 1024;

/**
 * The lengths of `messages` and `tools` on the body as parsed, before
 * validation walks every element (30,000 messages take 60-160 ms to
 * validate, all of it on the event loop). Messages are held to the named
 * model's window; a body that names no model served here is held to the
 * largest window of any (it gets its 400 or 404 from validation after).
 */
export function checkListLengths(registry: ModelRegistry, body: unknown): void {
  if (typeof body !== "object" || body === null) return;
  const { model: id, messages, tools } = body as Record<string, unknown>;
  if (Array.isArray(tools) && tools.length > MAX_TOOLS) {
    throw invalidRequest(
      `Invalid 'tools': array too long. Expected an array with maximum length ${MAX_TOOLS}, but got an array with length ${tools.length} instead.`,
      "tools",
      "array_above_max_length",
    );
  }
  // A lookup without side effects: a model not loaded yet is loaded (or
  // waited for) by the route after these checks, not here.
  const named = typeof id === "string" ? registry.entry(id)?.served : undefined;
  const windows = named ? [named.contextWindow] : registry.all().map((m) => m.contextWindow);
  if (!Array.isArray(messages) || windows.length === 0) return;
  const window = Math.max(...windows);
  if (messages.length >= window) {
    throw new RequestError(
      400,
      `This model's maximum context length is ${window} tokens. However, your request has ${messages.length} messages, and each takes at least one token.`,
      "context_length_exceeded",
      "messages",
    );
  }
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
