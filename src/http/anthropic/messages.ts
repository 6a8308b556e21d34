// POST /v1/messages (docs/api/anthropic.md#messages): the request becomes the
// neutral chat job (request.ts) with its cache breakpoints as prefix pins,
// and its choice's deltas become Anthropic's message, whole or streamed.
import type { Generation } from "../../daemon/worker-client.ts";
import { chatChoice, prepareChat, startChat, type PreparedChat } from "../../pipeline/chat-job.ts";
import { breakpointPins, type PrefixPin } from "../../pipeline/prefix-pins.ts";
import { failedAccess, finishOf, logAccess, RequestTimer, streamLogged } from "../access-log.ts";
import { readJsonBody } from "../body.ts";
import { checkListLengths } from "../chat-limits.ts";
import { admissionHeaders, nonStreamResponse } from "../keepalive.ts";
import { checkBatchInvariant, requestQos } from "../qos.ts";
import { cancelOnAbort, streamKeepaliveMs, type ServerContext } from "../server-context.ts";
import { streamResponse } from "../stream.ts";
import { startStream } from "../stream-admission.ts";
import { ANTHROPIC_SSE, anthropicErrorBody } from "./envelope.ts";
import { MessageBlocks, stopReasonOf, usageOf, type AnthropicUsage, type ContentBlock, type StopReason } from "./reply.ts";
import { anthropicModel, checkRequestText, messagesJobOf, parseMessagesRequest } from "./request.ts";

export const MESSAGES_ROUTE = "/v1/messages";

interface Prepared extends PreparedChat {
  id: string;
  /** What the request's breakpoints pin. */
  pins: PrefixPin[];
}

export async function createMessage(ctx: ServerContext, request: Request): Promise<Response> {
  const body = await readJsonBody(request);
  checkListLengths(ctx.registry, body);
  const req = parseMessagesRequest(body);
  const model = await anthropicModel(ctx.registry, req.model);
  const qos = requestQos(ctx.qos, request);
  checkBatchInvariant(ctx.qos, request);
  checkRequestText(model, req);
  const { job, breakpoints } = messagesJobOf(req, qos);
  const prepared = await prepareChat(ctx, model, job);
  const pins = await breakpointPins(model, job, prepared.prompt, breakpoints);
  if (pins.length > 0) prepared.request.pins = pins;
  const p: Prepared = { ...prepared, id: `msg_superfluid_${ctx.nextId()}`, pins };
  const blocks = new MessageBlocks(() => `toolu_${ctx.nextId()}`, p.request.grammar !== undefined);
  return req.stream ? streamMessage(ctx, p, blocks, request.signal) : completeMessage(ctx, p, blocks, request.signal);
}

/** The message object, before its content and stop are known (message_start) or with them. */
function messageOf(p: Prepared, content: ContentBlock[], stop: StopReason | null, stopSequence: string | null, usage: AnthropicUsage) {
  return {
    id: p.id,
    type: "message",
    role: "assistant",
    model: p.model.id,
    content,
    stop_reason: stop,
    stop_sequence: stopSequence,
    usage,
  };
}

/** What the access log knows of a reply before its end. */
const accessBase = (p: Prepared) => ({ route: MESSAGES_ROUTE, model: p.model.id, prompt: p.prompt.length, id: p.id });

async function completeMessage(ctx: ServerContext, p: Prepared, blocks: MessageBlocks, signal: AbortSignal): Promise<Response> {
  const timer = new RequestTimer();
  const live: Generation[] = [];
  cancelOnAbort(signal, () => live);
  const starting = startChat(p, live);
  const admission = admissionHeaders();
  // The one choice is in `live` at once; it is read from the start so its
  // admission (which commits the 200 under --nonstream-keepalive) is seen
  // before its prefill ends.
  starting.catch(() => {}); // awaited below; this only keeps an early failure from counting as unhandled
  const reply = (async () => {
    const stream = chatChoice(p, live[0]!, timer.onAdmitted(admission.onAdmitted));
    let step = await stream.next();
    while (!step.done) {
      timer.tokenDelivered();
      blocks.push(step.value);
      step = await stream.next();
    }
    await starting;
    blocks.finish();
    const end = step.value;
    logAccess({ ...accessBase(p), status: 200, cached: end.cachedTokens, completion: end.completionTokens, finish: finishOf(end) }, timer);
    const usage = usageOf(p.prompt.length, end.cachedTokens, p.pins, end.completionTokens);
    return {
      body: messageOf(p, blocks.content, stopReasonOf(end), end.stopSequence ?? null, usage),
      headers: { "x-superfluid-warm": String(end.cachedTokens) },
    };
  })().catch(failedAccess(accessBase(p), timer));
  return nonStreamResponse({
    keepaliveSec: ctx.keepaliveSec,
    admitted: admission.admitted,
    reply,
    cancel: () => live.forEach((g) => g.cancel()),
    route: MESSAGES_ROUTE,
    errorBody: anthropicErrorBody,
  });
}

async function streamMessage(ctx: ServerContext, p: Prepared, blocks: MessageBlocks, requestSignal: AbortSignal): Promise<Response> {
  const timer = new RequestTimer();
  const [generation] = await startChat(p, [], 1);
  cancelOnAbort(requestSignal, () => [generation!]);
  const started = await startStream((onAdmitted) => chatChoice(p, generation!, timer.onAdmitted(onAdmitted))).catch(failedAccess(accessBase(p), timer));
  const { stream, first, headers } = started;
  return streamResponse(
    ANTHROPIC_SSE,
    streamLogged(accessBase(p), timer, async (sink, signal) => {
      signal.addEventListener("abort", () => generation!.cancel(), { once: true });
      const send = (events: { event: string; data: unknown }[]) => events.forEach((e) => sink.send(e.data, e.event));
      const startUsage = usageOf(p.prompt.length, started.cachedAtAdmission ?? 0, p.pins, 0);
      sink.send({ type: "message_start", message: messageOf(p, [], null, null, startUsage) }, "message_start");
      sink.send({ type: "ping" }, "ping");
      let step = await first;
      while (!step.done) {
        timer.tokenDelivered();
        send(blocks.push(step.value));
        step = await stream.next();
      }
      send(blocks.finish());
      const end = step.value;
      logAccess({ ...accessBase(p), status: 200, cached: end.cachedTokens, completion: end.completionTokens, finish: finishOf(end) }, timer);
      sink.send(
        {
          type: "message_delta",
          delta: { stop_reason: stopReasonOf(end), stop_sequence: end.stopSequence ?? null },
          usage: usageOf(p.prompt.length, end.cachedTokens, p.pins, end.completionTokens),
        },
        "message_delta",
      );
      sink.send({ type: "message_stop" }, "message_stop");
    }),
    headers,
    streamKeepaliveMs(ctx),
  );
}
