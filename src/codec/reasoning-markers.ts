// Which markers a model writes its reasoning between. Most families use
// `<think>`…`</think>`; others name their own in the chat template (Seed-OSS
// `<seed:think>`, MiniMax M3 `<mm:think>`, Mistral's reasoning models
// `[THINK]`, Command R7B `<|START_THINKING|>`, Gemma 4 its thought channel
// `<|channel>thought` … `<channel|>`). A pair counts only when the vocabulary
// holds both markers as single tokens (Gemma's channel tokens), so ordinary
// text that spells them is never taken for reasoning.
export interface ReasoningMarkers {
  open: string;
  close: string;
}

/** Named by the template, most specific first, with the tokens that must be single ones; `<think>` is the default. */
const FAMILY_MARKERS: (ReasoningMarkers & { tokens?: [string, string] })[] = [
  { open: "<seed:think>", close: "</seed:think>" },
  { open: "<mm:think>", close: "</mm:think>" },
  { open: "[THINK]", close: "[/THINK]" },
  { open: "<|START_THINKING|>", close: "<|END_THINKING|>" },
  { open: "<|channel>thought", close: "<channel|>", tokens: ["<|channel>", "<channel|>"] },
];

export const THINK_MARKERS: ReasoningMarkers = { open: "<think>", close: "</think>" };

/** The model's reasoning markers, or undefined when it has none; `single(text)`: the text is one token. */
export function detectReasoningMarkers(
  template: string,
  single: (text: string) => boolean,
): ReasoningMarkers | undefined {
  const both = ([open, close]: [string, string]) => single(open) && single(close);
  const named = FAMILY_MARKERS.find((m) => template.includes(m.open) && both(m.tokens ?? [m.open, m.close]));
  if (named) return { open: named.open, close: named.close };
  return both([THINK_MARKERS.open, THINK_MARKERS.close]) ? THINK_MARKERS : undefined;
}
