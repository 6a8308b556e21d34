// One reply loop for every API family (docs/design.md#the-request-path): the
// choices of a request read as neutral deltas, handed to the family's
// renderer, and written whole (padded under --nonstream-keepalive) or as a
// stream in the family's framing. Cancellation (the client going away), the
// stream's admission wait and keep-alive, the access log and token timing
// are wired here once; a family only says what each delta and end look like
// on its wire.
import { choiceText, type ChoiceDelta, type ChoiceEnd, type ChoiceOptions } from "../pipeline/choice-stream.ts";
import type { ChoiceSet } from "../pipeline/choice-set.ts";
import type { RequestError } from "../daemon/request-error.ts";
import type { ServedModel } from "../daemon/served-model.ts";
import { asRequestError } from "../pipeline/request-failure.ts";
import { failedAccess, finishOf, logAccess, logFailure, type RequestTimer } from "./access-log.ts";
import { admissionHeaders, nonStreamResponse, type JsonReply } from "./keepalive.ts";
import { streamKeepaliveMs, type ServerContext } from "./server-context.ts";
import { startStream, type StartedStream } from "./stream-admission.ts";
import { streamResponse, type StreamFraming } from "./stream.ts";

/** One frame of a stream: its data, and its event name where the framing names events. */
export interface Frame {
  data: unknown;
  event?: string;
}

/**
 * How a family writes one reply. Every delta goes through `delta` (a whole
 * reply ignores the frames; the renderer keeps what `whole` needs); a stream
 * also gets `open` first and `close` at each choice's end.
 */
export interface ReplyRenderer {
  /** The first choice got a lane, with this many prompt tokens already cached. */
  admitted?(cachedTokens: number): void;
  /** A stream's first frames (before any delta). */
  open?(): Frame[];
  /** One delta of choice `index`. */
  delta(index: number, d: ChoiceDelta): Frame[];
  /** Choice `index` ended; `all` holds every choice's end when it is the last to end. */
  close(index: number, end: ChoiceEnd, all: ChoiceEnd[] | undefined): Frame[] | Promise<Frame[]>;
  /** The whole reply, once every choice has ended. */
  whole(ends: ChoiceEnd[]): JsonReply | Promise<JsonReply>;
  /** Frames written while a stream waits, besides the framing's keep-alive (the Responses API's in_progress). */
  idle?(): Frame[];
  /** A failure after a stream began, as frames in place of the framing's error frame. */
  fail?(err: RequestError): Frame[];
  /** A stream's headers, given the cached prompt tokens when the first choice was admitted before they went out. */
  headers?(cachedTokens: number | undefined): Record<string, string>;
}

/** What one reply runs: its choices, how they read, and what the access log says of it. */
export interface ReplyPlan {
  route: string;
  /** The model generating (its tokenizer; its id in the access log). */
  model: ServedModel;
  /** Prompt tokens, summed over the request's prompts. */
  promptTokens: number;
  /** The reply's id in the access log (chatcmpl-…, msg_…). */
  id?: string;
  choices: ChoiceSet;
  /** How each choice's tokens become deltas. */
  choice: ChoiceOptions;
  /** Started when the request arrived. */
  timer: RequestTimer;
  /** Prompt tokens reused, for the access log; the first choice's by default. */
  cachedOf?(ends: ChoiceEnd[]): number;
  /** The finish the access log shows; the first choice's by default. */
  finishOf?(ends: ChoiceEnd[]): string;
  /** A stream's headers wait for the first choice's admission (stream-admission.ts); false sends them at once. */
  waitForAdmission?: boolean;
  /** Hears when the reply is over, however it ended. */
  settled?(): void;
}

/** How a family's reply is sent: its stream framing and its error envelope. */
export interface ReplyWire {
  framing: StreamFraming;
  errorBody: (err: RequestError) => unknown;
}

/** The reply as an HTTP response: a stream, or the whole reply (committed at admission under --nonstream-keepalive). */
export function replyResponse(
  ctx: ServerContext,
  signal: AbortSignal,
  plan: ReplyPlan,
  renderer: ReplyRenderer,
  wire: ReplyWire,
  stream: boolean,
): Promise<Response> {
  cancelWhenGone(signal, plan.choices);
  if (stream) return streamReply(ctx, plan, renderer, wire.framing);
  const admission = admissionHeaders();
  const reply = wholeReply(plan, renderer, admission.onAdmitted);
  return nonStreamResponse({
    keepaliveSec: ctx.keepaliveSec,
    admitted: admission.admitted,
    reply,
    cancel: () => plan.choices.cancel(),
    route: plan.route,
    errorBody: wire.errorBody,
  });
}

/** The whole reply without HTTP (the Batches API's lines): cancelled when `signal` fires. */
export function runWholeReply(signal: AbortSignal, plan: ReplyPlan, renderer: ReplyRenderer): Promise<JsonReply> {
  cancelWhenGone(signal, plan.choices);
  return wholeReply(plan, renderer);
}

function cancelWhenGone(signal: AbortSignal, choices: ChoiceSet): void {
  if (signal.aborted) choices.cancel();
  else signal.addEventListener("abort", () => choices.cancel(), { once: true });
}

const accessBase = (plan: ReplyPlan) => ({
  route: plan.route,
  model: plan.model.id,
  prompt: plan.promptTokens,
  ...(plan.id ? { id: plan.id } : {}),
});

function logReply(plan: ReplyPlan, ends: ChoiceEnd[]): void {
  logAccess(
    {
      ...accessBase(plan),
      status: 200,
      cached: plan.cachedOf?.(ends) ?? ends[0]!.cachedTokens,
      completion: ends.reduce((n, e) => n + e.completionTokens, 0),
      finish: plan.finishOf?.(ends) ?? finishOf(ends[0]!),
    },
    plan.timer,
  );
}

/** Choice `index` as deltas, once its generation has started. */
async function* deltasOf(
  plan: ReplyPlan,
  index: number,
  onAdmitted?: (cachedTokens: number) => void,
): AsyncGenerator<ChoiceDelta, ChoiceEnd> {
  const generation = await plan.choices.generations[index]!;
  return yield* choiceText(plan.model.tokenizer, generation, plan.choice, onAdmitted);
}

/** The first choice's admission: the timer notes it, the renderer and `then` hear of it. */
function onFirstAdmitted(
  plan: ReplyPlan,
  renderer: ReplyRenderer,
  then?: (cachedTokens: number) => void,
): (cachedTokens: number) => void {
  return plan.timer.onAdmitted((cached) => {
    renderer.admitted?.(cached);
    then?.(cached);
  });
}

async function wholeReply(
  plan: ReplyPlan,
  renderer: ReplyRenderer,
  onAdmitted?: (cachedTokens: number) => void,
): Promise<JsonReply> {
  const read = async (index: number) => {
    // The first choice is read from the start, so its admission (which
    // commits the 200 under --nonstream-keepalive) is seen before its prefill ends.
    const deltas = deltasOf(plan, index, index === 0 ? onFirstAdmitted(plan, renderer, onAdmitted) : undefined);
    let step = await deltas.next();
    while (!step.done) {
      plan.timer.tokenDelivered();
      renderer.delta(index, step.value);
      step = await deltas.next();
    }
    return step.value;
  };
  try {
    const ends = await Promise.all(plan.choices.generations.map((_, i) => read(i))).catch((err) => {
      plan.choices.cancel();
      throw err;
    });
    const reply = await renderer.whole(ends);
    logReply(plan, ends);
    return reply;
  } catch (err) {
    return failedAccess(accessBase(plan), plan.timer)(err);
  } finally {
    plan.settled?.();
  }
}

/** A stream whose headers go out at once (no admission wait). */
function startedAtOnce(deltas: AsyncGenerator<ChoiceDelta, ChoiceEnd>): StartedStream {
  const first = deltas.next();
  first.catch(() => {}); // read by the producer; this keeps an early failure from counting as unhandled
  return { stream: deltas, first, cachedAtAdmission: undefined, headers: {} };
}

async function streamReply(
  ctx: ServerContext,
  plan: ReplyPlan,
  renderer: ReplyRenderer,
  framing: StreamFraming,
): Promise<Response> {
  const open = (onAdmitted: (cachedTokens: number) => void) =>
    deltasOf(plan, 0, onFirstAdmitted(plan, renderer, onAdmitted));
  const started =
    plan.waitForAdmission === false
      ? startedAtOnce(open(() => {}))
      : await startStream(open).catch((err) => {
          plan.settled?.();
          return failedAccess(accessBase(plan), plan.timer)(err);
        });
  const headers = renderer.headers?.(started.cachedAtAdmission) ?? started.headers;
  const keepaliveMs = streamKeepaliveMs(ctx);
  return streamResponse(
    framing,
    async (sink, signal) => {
      signal.addEventListener("abort", () => plan.choices.cancel(), { once: true });
      const send = (frames: Frame[]) => frames.forEach((f) => sink.send(f.data, f.event));
      const idle = renderer.idle ? setInterval(() => send(renderer.idle!()), keepaliveMs) : undefined;
      const ends: ChoiceEnd[] = [];
      let running = plan.choices.generations.length;
      const run = async (index: number) => {
        const deltas = index === 0 ? started.stream : deltasOf(plan, index);
        let step = index === 0 ? await started.first : await deltas.next();
        while (!step.done) {
          plan.timer.tokenDelivered();
          send(renderer.delta(index, step.value));
          step = await deltas.next();
        }
        ends[index] = step.value;
        const last = --running === 0;
        const frames = await renderer.close(index, step.value, last ? ends : undefined);
        if (last) logReply(plan, ends);
        send(frames);
      };
      try {
        send(renderer.open?.() ?? []);
        await Promise.all(plan.choices.generations.map((_, i) => run(i)));
      } catch (err) {
        plan.choices.cancel();
        logFailure(accessBase(plan), plan.timer, err, true);
        if (!renderer.fail) throw err;
        send(renderer.fail(asRequestError(err)));
      } finally {
        clearInterval(idle);
        plan.settled?.();
      }
    },
    headers,
    keepaliveMs,
  );
}
