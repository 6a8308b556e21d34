// Fill-in-the-middle prompts (api.md 6): the text before the cursor and the
// text after it, each tokenized as plain text (control-token text in them
// stays text, so a client cannot inject markers), framed by the model's FIM
// tokens the way llama.cpp's server frames /infill (format_infill):
//   psm: [BOS] <FIM_PRE> prefix <FIM_SUF> suffix <FIM_MID>
//   spm: [BOS] <FIM_SUF> suffix <FIM_PRE> prefix <FIM_MID>
// BOS only when the vocabulary asks for one (llama_vocab_get_add_bos).
// llama.cpp's repository-level scaffolding (<FIM_REP>myproject,
// <FIM_SEP>filename) serves its `input_extra` chunks, which OpenAI's request
// has no field for, so it is left out; and nothing is trimmed to fit a batch:
// a prompt that does not fit the window is refused like any other.
import type { ServedModel } from "../../daemon/served-model.ts";
import type { FimTokenIds } from "../../gguf/index.ts";

export const FIM_MODES = ["psm", "spm"] as const;
export type FimMode = (typeof FIM_MODES)[number];

export interface FimMarkers {
  prefix: number;
  suffix: number;
  middle: number;
}

/** The three markers FIM needs, or undefined when the vocabulary lacks one. */
export function fimMarkersOf(ids: FimTokenIds): FimMarkers | undefined {
  if (ids.prefix === undefined || ids.suffix === undefined || ids.middle === undefined) return undefined;
  return { prefix: ids.prefix, suffix: ids.suffix, middle: ids.middle };
}

/** Frames tokenized prefix and suffix text with the FIM markers (and BOS when given). */
export function assembleFimPrompt(markers: FimMarkers, prefix: readonly number[], suffix: readonly number[], mode: FimMode, bos?: number): number[] {
  const pre = [markers.prefix, ...prefix];
  const suf = [markers.suffix, ...suffix];
  const [first, second] = mode === "spm" ? [suf, pre] : [pre, suf];
  return [...(bos === undefined ? [] : [bos]), ...first, ...second, markers.middle];
}

/** The whole FIM prompt for a model whose vocabulary has the markers. */
export function fimPrompt(model: ServedModel, markers: FimMarkers, prefix: string, suffix: string, mode: FimMode): number[] {
  const plain = (text: string) => model.tokenizer.tokenize(text, { addSpecial: false, parseSpecial: false });
  const vocab = model.tokenizer.vocabInfo;
  return assembleFimPrompt(markers, plain(prefix), plain(suffix), mode, vocab.addBos ? vocab.bos : undefined);
}
