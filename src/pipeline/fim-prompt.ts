// Fill-in-the-middle prompts (docs/api/openai.md#fill-in-the-middle), for
// every API family that offers FIM: the text before the cursor (or its
// token ids) and the text after it, text tokenized as plain text
// (control-token text in it stays text, so a client cannot inject markers),
// framed by the model's FIM tokens the way llama.cpp's server frames /infill
// (format_infill):
//   psm: [BOS] <FIM_PRE> prefix <FIM_SUF> suffix <FIM_MID>
//   spm: [BOS] <FIM_SUF> suffix <FIM_PRE> prefix <FIM_MID>
// BOS only when the vocabulary asks for one (llama_vocab_get_add_bos).
// llama.cpp's repository-level scaffolding (<FIM_REP>myproject,
// <FIM_SEP>filename) serves its `input_extra` chunks, which no request here
// has a field for, so it is left out; and nothing is trimmed to fit a batch:
// a prompt that does not fit the window is refused like any other.
import type { ServedModel } from "../daemon/served-model.ts";
import type { FimTokenIds } from "../gguf/index.ts";
import { RequestError } from "../daemon/request-error.ts";

export const FIM_MODES = ["psm", "spm"] as const;
export type FimMode = (typeof FIM_MODES)[number];

/** The reply cap of a FIM completion when neither the request nor --max-tokens names one. */
export const FIM_DEFAULT_MAX_TOKENS = 128;

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

/** The model a FIM request runs on (the --fim-model when there is one), or 400 fim_unsupported. */
export function fimTargetOf(model: ServedModel, field = "suffix"): ServedModel {
  const target = model.fimTarget();
  if (!target)
    throw new RequestError(
      400,
      `model '${model.id}' has no fill-in-the-middle tokens and no --fim-model is set`,
      "fim_unsupported",
      field,
    );
  return target;
}

/** Frames tokenized prefix and suffix text with the FIM markers (and BOS when given). */
export function assembleFimPrompt(
  markers: FimMarkers,
  prefix: readonly number[],
  suffix: readonly number[],
  mode: FimMode,
  bos?: number,
): number[] {
  const pre = [markers.prefix, ...prefix];
  const suf = [markers.suffix, ...suffix];
  const [first, second] = mode === "spm" ? [suf, pre] : [pre, suf];
  return [...(bos === undefined ? [] : [bos]), ...first, ...second, markers.middle];
}

/** The whole FIM prompt for a model whose vocabulary has the markers; a prefix given as token ids is used as it is. */
export async function fimPrompt(
  model: ServedModel,
  markers: FimMarkers,
  prefix: string | readonly number[],
  suffix: string,
  mode: FimMode,
): Promise<number[]> {
  const plain = async (text: string) =>
    Array.from(await model.prompts.tokenize(text, { addSpecial: false, parseSpecial: false }));
  const vocab = model.tokenizer.vocabInfo;
  const before = typeof prefix === "string" ? await plain(prefix) : prefix;
  return assembleFimPrompt(markers, before, await plain(suffix), mode, vocab.addBos ? vocab.bos : undefined);
}
