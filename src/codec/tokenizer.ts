// The slice of a tokenizer the codec layer needs. LlamaModel (src/engine/model.ts)
// satisfies it; tests can pass a small fake.
export interface Tokenizer {
  /** Text to token ids. `parseSpecial` lets control-token text (e.g. `<|im_start|>`) become its token. */
  tokenize(text: string, opts: { addSpecial?: boolean; parseSpecial?: boolean }): number[];
  /**
   * The bytes one token stands for. With `special` false a control token renders
   * as nothing; with it true (the default) as its text.
   */
  tokenBytes(token: number, special?: boolean): Uint8Array;
}
