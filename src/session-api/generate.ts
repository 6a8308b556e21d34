// One Generate on a session (docs/api/sessions.md#generate): the prompt is the
// session's whole token stream (a new assistant turn's header appended
// first, unless an open turn is continued), sampled with the session's own
// params, each draw seeded by its stream position. What the model produces
// is recorded as Generated events (one per tick and channel), ToolUse events
// (ToolParseFailure for a call whose arguments are not a JSON object), each
// delivered only once the log has it on disk.
import { IncrementalDecoder } from "../codec/index.ts";
import { isJsonObjectText } from "../codec/json-scan.ts";
import { choiceText, type ChoiceEnd } from "../pipeline/choice-stream.ts";
import type { ServedModel } from "../daemon/served-model.ts";
import type { Generation, GenerationEvent } from "../daemon/worker-client.ts";
import type { SamplingSpec } from "../engine/sampling.ts";
import type { QosClass } from "../engine/scheduler.ts";
import { prepareChat } from "../pipeline/prepare-chat.ts";
import { rememberHistory } from "../pipeline/continued-prompt.ts";
import type { GenerationDefaults } from "../pipeline/engine-request.ts";
import type { ToolChoice } from "../pipeline/tool-plan.ts";
import {
  CHANNEL,
  FINISH,
  type EventBody,
  type FinishCode,
  type SessionEvent,
  type SessionParams,
} from "../session-log/events.ts";
import { historyKeyOf, SessionError, type SessionBook, type SessionView } from "./book.ts";
import { chatToolOf, conversationOf, renderJob, renderTail } from "./conversation.ts";

/** Where a generation's events go as they commit, and its text ahead of the commit. */
export interface GenerationSink {
  committed(event: SessionEvent): void;
  provisional?(channel: number, text: string): void;
}

export interface GenerationSummary {
  events: SessionEvent[];
  tokens_generated: number;
  finish: FinishCode;
  /** Prompt tokens that came from the prefix cache or a park artifact instead of a prefill. */
  warm_prefix: number;
}

/** What a generation needs from the server. */
export interface GenerationDeps {
  model: ServedModel;
  book: SessionBook;
  defaults: GenerationDefaults;
  /** The park artifact of a session (--park), or undefined when parking is off. */
  parkPath?: (session: number) => string;
  /** Called after a generation that sealed a park artifact (the budget sweep). */
  parked?: () => void;
  /** Session Pin: keep the prompt's KV cached this much longer (docs/api/sessions.md#pin). */
  pinTtlMs?: number;
}

/** A running generation's handle: cancel() stops it at the next tick (finish 4). */
export interface RunningGeneration {
  cancel(): void;
  readonly done: Promise<GenerationSummary>;
}

/** The session's params as the engine's sampler chain: nothing from the model's defaults, no penalties. */
export function samplingOf(p: SessionParams): SamplingSpec {
  return {
    temperature: p.temperature,
    topP: p.top_p,
    topK: p.top_k,
    minP: p.min_p,
    seed: p.seed,
    repeatPenalty: 1,
    presencePenalty: 0,
    frequencyPenalty: 0,
  };
}

/** The finish code of a choice's end. */
function finishOf(end: ChoiceEnd): FinishCode {
  switch (end.reason) {
    case "length":
      return FINISH.maxTokens;
    case "cancelled":
      return FINISH.cancelled;
    case "expired":
      return FINISH.error;
    default:
      return FINISH.endOfTurn;
  }
}

/** Taps a generation's token events, so each text delta can be recorded with the tokens it came from. */
class TokenTap implements AsyncIterable<GenerationEvent> {
  private pending: number[] = [];
  constructor(private readonly generation: Generation) {}
  cancel(): void {
    this.generation.cancel();
  }
  /** The tokens seen since the last take. */
  take(): number[] {
    const out = this.pending;
    this.pending = [];
    return out;
  }
  async *[Symbol.asyncIterator](): AsyncIterator<GenerationEvent> {
    for await (const event of this.generation) {
      if (event.type === "tokens") this.pending.push(...event.tokens);
      yield event;
    }
  }
}

/**
 * Starts a generation on the session (the caller holds it busy until `done`
 * settles). Throws SessionError before anything is recorded when the session
 * cannot generate.
 */
export async function startGeneration(
  deps: GenerationDeps,
  view: SessionView,
  maxTokens: number | undefined,
  sink: GenerationSink,
  toolChoice: ToolChoice = "auto",
): Promise<RunningGeneration> {
  const { model, book } = deps;
  const conversation = conversationOf(view.events);
  const tools = conversation.tools.map((t, i) => chatToolOf(t, `tools[${i}]`));
  if (toolChoice === "required" && tools.length === 0)
    throw new SessionError(
      `tool_choice "required": session ${view.header.id} declares no tools (AppendSystem declares them)`,
    );
  if (typeof toolChoice === "object" && !tools.some((t) => t.name === toolChoice.name)) {
    const declared = tools.map((t) => t.name).join(", ") || "none";
    throw new SessionError(
      `tool_choice names '${toolChoice.name}', which session ${view.header.id} does not declare (declared: ${declared})`,
    );
  }
  const committed: SessionEvent[] = [];
  const commit = async (bodies: EventBody[]) => {
    const events: SessionEvent[] = [];
    for (const body of bodies) events.push(await book.append(view, body));
    await book.store.flush();
    for (const event of events) {
      committed.push(event);
      sink.committed(event);
    }
  };

  let prompt = conversation.stream;
  let startsInReasoning = false;
  let turnHeader: number[] | undefined;
  if (conversation.openTurn) {
    startsInReasoning = conversation.openTurn.inReasoning;
  } else if (conversation.messages.length > 0) {
    const known = view.rendered?.messages === conversation.messages.length ? view.rendered.tokens : undefined;
    const tail = await renderTail(model, conversation, tools, [], true, known ? { known } : {});
    turnHeader = tail.span;
    prompt = [...prompt, ...tail.span];
    startsInReasoning = tail.startsInReasoning;
  }
  if (prompt.length === 0) throw new SessionError(`session ${view.header.id} has no input yet: append a message first`);

  const prepared = await prepareChat(deps.defaults, model, {
    ...renderJob(conversation.messages, tools, toolChoice),
    prompt: { tokens: prompt, startsInReasoning },
    ...(maxTokens === undefined ? {} : { maxTokens }),
    ...(conversation.qos === undefined ? {} : { qos: conversation.qos as QosClass }),
  });
  // Recorded only once the request is known to run (the window checked, the tools planned).
  if (turnHeader) await commit([{ GenerationPrompt: { span: turnHeader } }]);
  const park = deps.parkPath?.(view.header.id);
  const request = {
    ...prepared.request,
    sampling: samplingOf(view.params),
    positionSeeded: true,
    ...(deps.pinTtlMs === undefined ? {} : { pins: [{ length: prompt.length, ttlMs: deps.pinTtlMs }] }),
    ...(park === undefined ? {} : { park, resume: park }),
  };
  const generation = model.worker.generate(request, { journaled: false });
  const tap = new TokenTap(generation);
  const decoder = new IncrementalDecoder(model.tokenizer);
  /** Calls started and not ended: their names and argument text so far, by index. */
  const callNames = new Map<number, string>();
  const callArgs = new Map<number, string>();
  let channel: number = startsInReasoning ? CHANNEL.reasoning : CHANNEL.text;

  const run = async (): Promise<GenerationSummary> => {
    const reader = choiceText(model.tokenizer, tap, prepared.choice);
    let end: ChoiceEnd | undefined;
    let finish: FinishCode = FINISH.error;
    let failure: unknown;
    try {
      for (;;) {
        const next = await reader.next();
        if (next.done) {
          end = next.value;
          break;
        }
        const delta = next.value;
        let span = tap.take();
        const raw = decoder.push(span);
        const bodies: EventBody[] = [];
        const text = (c: number, t: string) => {
          channel = c;
          bodies.push({ Generated: { span, text: t, channel: c, finish: FINISH.open } });
          sink.provisional?.(c, t);
          span = [];
        };
        if (delta.reasoning) text(CHANNEL.reasoning, delta.reasoning);
        if (delta.content) text(CHANNEL.text, delta.content);
        if (span.length > 0) text(delta.calls ? CHANNEL.toolCall : channel, raw);
        for (const call of delta.calls ?? []) {
          if (call.type === "call-start") callNames.set(call.index, call.name);
          if (call.type === "call-args") callArgs.set(call.index, (callArgs.get(call.index) ?? "") + call.text);
          if (call.type !== "call-end") continue;
          const name = callNames.get(call.index) ?? "";
          callNames.delete(call.index);
          // A call whose arguments never became JSON (cut by the cap, or malformed) is not a call to run.
          bodies.push(
            isJsonObjectText(call.arguments)
              ? { ToolUse: { name, arguments: call.arguments } }
              : { ToolParseFailure: { name, text: call.arguments } },
          );
        }
        await commit(bodies);
      }
      finish = finishOf(end);
    } catch (err) {
      failure = err;
    }
    if (end === undefined) {
      // Failed here (the log, a transport), not in the engine: stop the lane nobody reads.
      tap.cancel();
      await reader.return(undefined as never).catch(() => {});
    }
    // The end record: the tokens not yet recorded, and how the turn ended. Text the parsers
    // still held (a call cut by the cap never closes) is recorded raw, as tool-call text when a
    // tool wire was being parsed; a call that started and never ended is a ToolParseFailure.
    const rest = tap.take();
    const held = decoder.push(rest) + decoder.flush();
    const restChannel = held !== "" && prepared.choice.toolParser ? CHANNEL.toolCall : channel;
    const unfinished: EventBody[] = [...callNames].map(([index, name]) => ({
      ToolParseFailure: { name, text: callArgs.get(index) ?? "" },
    }));
    await commit([...unfinished, { Generated: { span: rest, text: held, channel: restChannel, finish } }]).catch(
      (err: unknown) => (failure ??= err),
    );
    if (park !== undefined) deps.parked?.();
    if (failure !== undefined) throw failure;
    // The history renders the next appended message starts from, made while the client reads the reply.
    const after = conversationOf(view.events);
    if (after.generatedTail) {
      void rememberHistory(
        historyKeyOf(book.store.storeId, view),
        model,
        renderJob(after.messages, tools),
        after.messages.length,
      ).catch(() => {});
    }
    return {
      events: committed,
      tokens_generated: end?.completionTokens ?? 0,
      finish,
      warm_prefix: end?.cachedTokens ?? 0,
    };
  };
  return { cancel: () => generation.cancel(), done: run() };
}
