// Token ids to text at token cadence. Byte-fallback tokenizers split one
// character over several tokens (an emoji is four <0xNN> tokens), so bytes are
// fed through a streaming TextDecoder that holds an incomplete UTF-8 sequence
// until its last byte arrives.
import type { Tokenizer } from "./tokenizer.ts";

export class IncrementalDecoder {
  private readonly tokenizer: Tokenizer;
  // ignoreBOM: a U+FEFF the model emits first is text, not a byte-order mark to drop.
  private decoder = new TextDecoder("utf-8", { ignoreBOM: true });

  constructor(tokenizer: Tokenizer) {
    this.tokenizer = tokenizer;
  }

  /** Text completed by these tokens. Special tokens come out as their text (`<think>`, `<tool_call>`). */
  push(tokens: number[]): string {
    if (tokens.length === 0) return "";
    const pieces = tokens.map((t) => this.tokenizer.tokenBytes(t, true));
    const bytes = new Uint8Array(pieces.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of pieces) {
      bytes.set(p, at);
      at += p.length;
    }
    return this.decoder.decode(bytes, { stream: true });
  }

  /** Ends the stream: bytes of a character that never completed come out as U+FFFD. */
  flush(): string {
    const rest = this.decoder.decode();
    this.decoder = new TextDecoder("utf-8", { ignoreBOM: true });
    return rest;
  }
}
