// A loaded vocabulary's control tokens, read once per model, for splitting
// prompts in JS (src/codec/control-tokens.ts) instead of llama_tokenize's
// special parsing.
import { ControlTokens, type ControlToken } from "../codec/index.ts";
import type { LlamaModel } from "../engine/model.ts";

// llama_token_attr bits (llama.h).
const ATTR_LSTRIP = 1 << 7;
const ATTR_RSTRIP = 1 << 8;

/**
 * The tokens special parsing adds to plain tokenizing: those that render as
 * nothing in plain text but as their text with specials (control and unknown
 * tokens). User-defined tokens are left out: plain tokenizing finds them too.
 * Only tokens that are neither normal nor byte tokens are looked at (one
 * attribute call each), so a 150k vocabulary takes a few milliseconds.
 */
export function controlTokensOf(model: LlamaModel): ControlTokens {
  const decoder = new TextDecoder();
  const tokens: ControlToken[] = [];
  for (let id = 0; id < model.vocabInfo.size; id++) {
    if (!model.isSpecial(id) || model.tokenBytes(id, false).length > 0) continue;
    const text = decoder.decode(model.tokenBytes(id, true));
    if (text === "") continue;
    const attr = model.llama.api.llama_vocab_get_attr(model.vocab, id);
    tokens.push({ text, id, lstrip: (attr & ATTR_LSTRIP) !== 0, rstrip: (attr & ATTR_RSTRIP) !== 0 });
  }
  return new ControlTokens(tokens);
}
