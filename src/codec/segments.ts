// The pieces a rendered chat prompt is cut into: trusted scaffolding and
// untrusted message content. Produced by the template render (./template.ts,
// through ./sentinels.ts) and consumed by the tokenizer step (./prompt.ts); a
// module of its own so neither side imports the other for it.

export interface PromptSegment {
  text: string;
  /** true: template scaffolding or assistant history (special tokens parsed); false: message content (never parsed). */
  trusted: boolean;
}
