// One choice's reply as text: token ids from the worker become UTF-8 text at
// token cadence (never half a character), stop strings end it (the match left
// out, a possible partial match held back), and `<think>` blocks are split
// into reasoning. Shared by every route that generates.
import { IncrementalDecoder, ReasoningSplitter, StopMatcher } from "../codec/index.ts";
import type { TokenLogprob } from "../engine/logprobs.ts";
import type { LlamaModel } from "../engine/model.ts";
import type { Generation } from "./worker-client.ts";

export interface ChoiceOptions {
  stops: string[];
  /** Split reasoning markers out of the text; startInside when the prompt opened a reasoning block. */
  reasoning?: { open: string; close: string; startInside: boolean };
}

/** Text produced by one tick (either part may be empty). */
export interface ChoiceDelta {
  content: string;
  reasoning: string;
  /** Per token of this delta, when logprobs were asked for. */
  logprobs?: { token: number; logprob: TokenLogprob }[];
  /** Tokens generated so far. */
  completionTokens: number;
}

export interface ChoiceEnd {
  finishReason: "stop" | "length";
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
}

/**
 * The worker's generation failed without crashing: a decode error (500), or
 * the request's own fault, such as a grammar with no way forward (400).
 */
export class GenerationFailedError extends Error {
  readonly code = "generation_failed";
  constructor(
    message: string,
    readonly status = 500,
  ) {
    super(message);
  }
}

export async function* choiceText(
  tokenizer: LlamaModel,
  generation: Generation,
  opts: ChoiceOptions,
  onAdmitted?: (cachedTokens: number) => void,
): AsyncGenerator<ChoiceDelta, ChoiceEnd> {
  const decoder = new IncrementalDecoder(tokenizer);
  const stop = new StopMatcher(opts.stops);
  const splitter = opts.reasoning ? new ReasoningSplitter(opts.reasoning) : undefined;
  let completionTokens = 0;
  let stoppedByString = false;
  const split = (text: string) => (splitter ? splitter.push(text) : { content: text, reasoning: "" });

  for await (const event of generation) {
    if (event.type === "admitted") {
      onAdmitted?.(event.cachedTokens);
      continue;
    }
    if (event.type === "tokens") {
      if (stoppedByString) continue; // tokens already in flight when the stop matched
      completionTokens += event.tokens.length;
      const matched = stop.push(decoder.push(event.tokens));
      const { content, reasoning } = split(matched.emit);
      const logprobs = event.logprobs?.map((logprob, i) => ({ token: event.tokens[i]!, logprob }));
      if (content || reasoning || logprobs) yield { content, reasoning, completionTokens, ...(logprobs ? { logprobs } : {}) };
      if (matched.stopped) {
        stoppedByString = true;
        generation.cancel();
      }
      continue;
    }
    // finished
    if (event.reason === "error") {
      const message = event.error ?? "generation failed";
      throw new GenerationFailedError(message, event.clientError ? 400 : 500);
    }
    if (!stoppedByString) {
      const tail = stop.push(decoder.flush());
      const rest = split(tail.stopped ? tail.emit : tail.emit + stop.flush());
      const fin = splitter ? splitter.flush() : { content: "", reasoning: "" };
      const content = rest.content + fin.content;
      const reasoning = rest.reasoning + fin.reasoning;
      if (content || reasoning) yield { content, reasoning, completionTokens };
      if (tail.stopped) stoppedByString = true;
    } else if (splitter) {
      const fin = splitter.flush();
      if (fin.content || fin.reasoning) yield { ...fin, completionTokens };
    }
    return {
      finishReason: stoppedByString || event.reason !== "length" ? "stop" : "length",
      promptTokens: event.promptTokens,
      cachedTokens: event.cachedTokens,
      completionTokens,
    };
  }
  throw new GenerationFailedError("the generation ended without finishing");
}
