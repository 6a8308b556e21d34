// OpenAI's legacy logprobs shape for /v1/completions (docs/api/openai.md#completions-response): per token its
// text, logprob, the top alternatives by text, and its offset in the choice's
// text (echoed prompt included).
import type { ServedModel } from "../../daemon/served-model.ts";
import type { TokenLogprob } from "../../engine/logprobs.ts";

/** One choice's logprobs, accumulated over its reply. */
export class LegacyLogprobs {
  tokens: string[] = [];
  token_logprobs: number[] = [];
  top_logprobs: Record<string, number>[] = [];
  text_offset: number[] = [];

  constructor(
    private readonly model: ServedModel,
    private offset: number,
  ) {}

  add(token: number, lp: TokenLogprob): void {
    const text = (t: number) => Buffer.from(this.model.tokenizer.tokenBytes(t)).toString("utf8");
    const piece = text(token);
    this.tokens.push(piece);
    this.token_logprobs.push(lp.logprob);
    this.top_logprobs.push(Object.fromEntries(lp.top.map(([t, l]) => [text(t), l])));
    this.text_offset.push(this.offset);
    this.offset += piece.length;
  }

  /** The entries added since `from`, for one streamed chunk. */
  since(from: number) {
    return {
      tokens: this.tokens.slice(from),
      token_logprobs: this.token_logprobs.slice(from),
      top_logprobs: this.top_logprobs.slice(from),
      text_offset: this.text_offset.slice(from),
    };
  }
}
