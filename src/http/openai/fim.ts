// Fill-in-the-middle prompts for /v1/completions (docs/api/openai.md#fill-in-the-middle):
// one per request prompt, all with the same suffix, framed as
// src/pipeline/fim-prompt.ts frames them.
import type { ServedModel } from "../../daemon/served-model.ts";
import { promptLabel, tokenIdsOf, type PromptEntry, type TokenizedPrompt } from "./completion-prompt.ts";
import { checkContext, checkTextFits } from "../../pipeline/engine-request.ts";
import { fimPrompt, type FimMarkers, type FimMode } from "../../pipeline/fim-prompt.ts";

/** One FIM prompt per request prompt (all with the same suffix), each checked against the window. */
export async function fimPrompts(
  model: ServedModel,
  markers: FimMarkers,
  entries: PromptEntry[],
  suffix: string,
  mode: FimMode,
): Promise<TokenizedPrompt[]> {
  const prompts: TokenizedPrompt[] = [];
  for (const [i, entry] of entries.entries()) {
    const prefixChars = typeof entry === "string" ? entry.length : 0;
    checkTextFits(model, prefixChars + suffix.length, "prompt");
    const prefix = typeof entry === "string" ? entry : tokenIdsOf(model, entry, promptLabel(entries.length, i));
    const tokens = await fimPrompt(model, markers, prefix, suffix, mode);
    checkContext(model, tokens.length, "prompt");
    // FIM refuses echo, so there is no prompt text to put back.
    prompts.push({ tokens, text: "" });
  }
  return prompts;
}
