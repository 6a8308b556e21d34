// One choice's reply as text: token ids from the worker become UTF-8 text at
// token cadence (never half a character), stop strings end it (the match left
// out, a possible partial match held back), and `<think>` blocks are split
// into reasoning. Shared by every route that generates.
import { IncrementalDecoder, ReasoningSplitter, StopMatcher } from "../codec/index.ts";
import type { ToolCallEvent, ToolCallParser } from "../codec/tool-dialects/index.ts";
import type { SpecTally } from "../engine/jobs.ts";
import type { TokenLogprob } from "../engine/logprobs.ts";
import type { LlamaModel } from "../engine/model.ts";
import type { GenerationEvent } from "../daemon/worker-client.ts";

/** What a choice reads: a generation's events, and the way to stop it (a Generation, or a tap on one). */
export type ChoiceSource = AsyncIterable<GenerationEvent> & { cancel(): void };

export interface ChoiceOptions {
  stops: string[];
  /** Split reasoning markers out of the text; startInside when the prompt opened a reasoning block. */
  reasoning?: { open: string; close: string; startInside: boolean };
  /** Parses the model's tool-call wire (and, for some wires, its channels) out of the content. */
  toolParser?: () => ToolCallParser;
}

/** Text produced by one tick (either part may be empty). */
export interface ChoiceDelta {
  content: string;
  reasoning: string;
  /** Per token of this delta, when logprobs were asked for. */
  logprobs?: { token: number; logprob: TokenLogprob }[];
  /** Tokens generated so far. */
  completionTokens: number;
  /** Tool-call events (start, argument fragments, end) found in this delta. */
  calls?: ToolCallEvent[];
}

/**
 * Why a choice ended: the model ended its turn (eos), a stop string matched
 * (stop_sequence), the cap or the window cut it (length), it ended with
 * complete tool calls (tool_calls), it was cancelled, or it expired in the
 * queue before it started.
 */
export type EndReason = "eos" | "stop_sequence" | "length" | "tool_calls" | "cancelled" | "expired";

export interface ChoiceEnd {
  reason: EndReason;
  /** The stop string that matched, when reason is stop_sequence. */
  stopSequence?: string;
  /** The coarse class every API family reports: stop (eos, stop string, cancelled, expired), length, tool_calls. */
  finishReason: "stop" | "length" | "tool_calls";
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
  /**
   * The generated token ids, as the model produced them (a stop string's tokens included; the end-of-turn token never
   * is).
   */
  tokens: number[];
  /**
   * It never started: still queued at its start deadline (a FIM completion, docs/design.md#deadlines-and-cancellation).
   */
  expired: boolean;
  /**
   * Speculative decoding's draft tokens proposed and accepted, when the choice drafted
   * (docs/cli.md#speculative-decoding).
   */
  spec?: SpecTally;
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

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

export async function* choiceText(
  tokenizer: LlamaModel,
  generation: ChoiceSource,
  opts: ChoiceOptions,
  onAdmitted?: (cachedTokens: number) => void,
): AsyncGenerator<ChoiceDelta, ChoiceEnd> {
  const decoder = new IncrementalDecoder(tokenizer);
  const stop = new StopMatcher(opts.stops);
  const splitter = opts.reasoning ? new ReasoningSplitter(opts.reasoning) : undefined;
  const tools = opts.toolParser?.();
  let completionTokens = 0;
  const generated: number[] = [];
  let stoppedByString = false;
  let stopSequence: string | undefined;
  let toolCalls = 0;
  let brokenCalls = 0;

  /**
   * Raw text (after the stop check) through the reasoning split and the tool-call parser; null when it yields nothing.
   */
  const shape = (text: string, last: boolean, logprobs?: ChoiceDelta["logprobs"]): ChoiceDelta | null => {
    const parts = splitter ? splitter.push(text) : { content: text, reasoning: "" };
    if (last && splitter) {
      const fin = splitter.flush();
      parts.content += fin.content;
      parts.reasoning += fin.reasoning;
    }
    let content = parts.content;
    let calls: ToolCallEvent[] | undefined;
    if (tools) {
      const events = [...tools.push(content), ...(last ? tools.flush() : [])];
      content = events.map((e) => (e.type === "text" ? e.text : "")).join("");
      parts.reasoning += events.map((e) => (e.type === "reasoning" ? e.text : "")).join("");
      calls = events.filter((e) => e.type !== "text" && e.type !== "reasoning");
      for (const e of calls) {
        if (e.type !== "call-end") continue;
        if (isJson(e.arguments)) toolCalls++;
        else brokenCalls++; // cut by a stop string (or the cap) before it closed
      }
      if (calls.length === 0) calls = undefined;
    }
    if (!content && !parts.reasoning && !logprobs && !calls) return null;
    return {
      content,
      reasoning: parts.reasoning,
      completionTokens,
      ...(logprobs ? { logprobs } : {}),
      ...(calls ? { calls } : {}),
    };
  };

  for await (const event of generation) {
    if (event.type === "admitted") {
      onAdmitted?.(event.cachedTokens);
      continue;
    }
    if (event.type === "tokens") {
      if (stoppedByString) continue; // tokens already in flight when the stop matched
      completionTokens += event.tokens.length;
      for (const t of event.tokens) generated.push(t);
      const matched = stop.push(decoder.push(event.tokens));
      const logprobs = event.logprobs?.map((logprob, i) => ({ token: event.tokens[i]!, logprob }));
      const delta = shape(matched.emit, false, logprobs);
      if (delta) yield delta;
      if (matched.stopped) {
        stoppedByString = true;
        stopSequence = matched.match;
        generation.cancel();
      }
      continue;
    }
    // finished
    if (event.reason === "error") {
      const message = event.error ?? "generation failed";
      throw new GenerationFailedError(message, event.clientError ? 400 : 500);
    }
    let tail = "";
    if (!stoppedByString) {
      const rest = stop.push(decoder.flush());
      tail = rest.stopped ? rest.emit : rest.emit + stop.flush();
      if (rest.stopped) {
        stoppedByString = true;
        stopSequence = rest.match;
      }
    }
    const delta = shape(tail, true);
    if (delta) yield delta;
    const cut = !stoppedByString && event.reason === "length";
    // A reply cut by the token cap is length even if it holds a call;
    // one holding a call that never closed is not offered as a call to run.
    const finishReason = cut ? "length" : toolCalls > 0 && brokenCalls === 0 ? "tool_calls" : "stop";
    const reason: EndReason =
      finishReason !== "stop"
        ? finishReason
        : stoppedByString
          ? "stop_sequence"
          : event.reason === "expired"
            ? "expired"
            : event.reason === "cancelled"
              ? "cancelled"
              : "eos";
    return {
      reason,
      ...(stopSequence === undefined ? {} : { stopSequence }),
      finishReason,
      promptTokens: event.promptTokens,
      cachedTokens: event.cachedTokens,
      completionTokens,
      tokens: generated,
      expired: event.reason === "expired",
      ...(event.spec ? { spec: event.spec } : {}),
    };
  }
  throw new GenerationFailedError("the generation ended without finishing");
}
