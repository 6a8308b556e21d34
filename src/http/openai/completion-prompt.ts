// The `prompt` of /v1/completions (docs/api/openai.md#prompt-forms) in every form OpenAI's API takes:
// a string, an array of strings, an array of token ids, or an array of
// token-id arrays. Each entry is one prompt, with its own choices; an array of
// numbers is one prompt of token ids, not many prompts.
import * as v from "valibot";
import { IncrementalDecoder } from "../../codec/index.ts";
import type { ServedModel } from "../../daemon/served-model.ts";
import { invalidRequest } from "../../daemon/request-error.ts";
import { checkContext, checkTextFits } from "../../pipeline/engine-request.ts";

// Ids are checked against the vocabulary after parsing (tokenIdsOf), so a
// fractional or negative id gets the same precise message as one past the end.
export const promptField = v.union(
  [v.string(), v.array(v.string()), v.array(v.number()), v.array(v.array(v.number()))],
  "must be a string, an array of strings, an array of token ids or an array of token-id arrays",
);

/** One prompt as sent: text, or token ids used as they are. */
export type PromptEntry = string | number[];

/** The prompts a request carries, in order (choice index = prompt index * n + j). */
export function promptEntries(prompt: v.InferOutput<typeof promptField>): PromptEntry[] {
  if (typeof prompt === "string") return [prompt];
  if (prompt.length === 0) throw invalidRequest("prompt must not be an empty array", "prompt");
  if (typeof prompt[0] === "number") return [prompt as number[]];
  return prompt as PromptEntry[];
}

/** Where a prompt sits in the request, for messages about it. */
export function promptLabel(count: number, index: number): string {
  return count === 1 ? "prompt" : `prompt[${index}]`;
}

/** Token ids of this model's vocabulary, or 400 naming `prompt`. */
export function tokenIdsOf(model: ServedModel, ids: number[], label: string): number[] {
  const size = model.tokenizer.vocabInfo.size;
  ids.forEach((id, i) => {
    if (!Number.isInteger(id) || id < 0 || id >= size) {
      throw invalidRequest(`${label}[${i}]: ${id} is not a token id of this model (0-${size - 1})`, "prompt");
    }
  });
  return ids;
}

/** A prompt ready to generate from: its tokens and the text `echo` puts before the reply. */
export interface TokenizedPrompt {
  tokens: number[];
  text: string;
}

/**
 * A plain completion prompt: text tokenized as given (BOS when the vocabulary
 * adds one, control-token text parsed, no chat scaffold) on the model's prompt
 * thread, token ids as sent.
 */
export async function tokenizePrompt(model: ServedModel, entry: PromptEntry, label: string): Promise<TokenizedPrompt> {
  if (typeof entry === "string") {
    checkTextFits(model, entry.length, "prompt");
    const tokens = Array.from(await model.prompts.tokenize(entry, { addSpecial: true, parseSpecial: true }));
    checkContext(model, tokens.length, "prompt");
    return { tokens, text: entry };
  }
  const tokens = tokenIdsOf(model, entry, label);
  checkContext(model, tokens.length, "prompt");
  const decoder = new IncrementalDecoder(model.tokenizer);
  return { tokens, text: decoder.push(tokens) + decoder.flush() };
}

/** Every prompt of a request, in order (one at a time: the first that cannot fit stops the rest). */
export async function tokenizePrompts(model: ServedModel, entries: PromptEntry[]): Promise<TokenizedPrompt[]> {
  const prompts: TokenizedPrompt[] = [];
  for (const [i, entry] of entries.entries())
    prompts.push(await tokenizePrompt(model, entry, promptLabel(entries.length, i)));
  return prompts;
}
