// POST /v1/chat/completions (docs/api/openai.md#chat-completions): the
// request becomes the neutral chat job (chat-request.ts), and its choices'
// deltas become OpenAI's reply, whole or streamed.
import type { ChoiceDelta, ChoiceEnd, PreparedChat } from "../../pipeline/chat-job.ts";
import { chatChoice, prepareChat, startChat } from "../../pipeline/chat-job.ts";
import type { Generation } from "../../daemon/worker-client.ts";
import type { ServedModel } from "../../daemon/served-model.ts";
import type { QosClass } from "../../engine/scheduler.ts";
import type { GenerationDefaults } from "../../pipeline/generation.ts";
import { invalidRequest } from "../../daemon/request-error.ts";
import { asRequestError } from "../../pipeline/request-failure.ts";
import { failedAccess, finishOf, logAccess, RequestTimer, streamLogged } from "../access-log.ts";
import { loadedOr404 } from "../models.ts";
import { readJsonBody } from "../body.ts";
import { admissionHeaders, nonStreamResponse, type JsonReply } from "../keepalive.ts";
import { checkBatchInvariant, requestQos } from "../qos.ts";
import { cancelOnAbort, streamKeepaliveMs, type ServerContext } from "../server-context.ts";
import { streamResponse } from "../stream.ts";
import { startStream } from "../stream-admission.ts";
import { checkChatText, checkListLengths } from "../chat-limits.ts";
import { chatJobOf, parseChatRequest } from "./chat-request.ts";
import type { ChatRequest } from "./chat-schema.ts";
import { OPENAI_SSE, openaiErrorBody } from "./envelope.ts";
import { streamedToolCalls, ToolCallCollector } from "./tool-call-output.ts";
import { specField } from "./spec-stats.ts";
import { chatLogprob, usageOf } from "./usage.ts";

const ROUTE = "/v1/chat/completions";

/** The prepared job with what OpenAI's reply carries besides it. */
interface Prepared extends PreparedChat {
  req: ChatRequest;
  id: string;
  created: number;
}

function completionId(ctx: ServerContext): string {
  return `chatcmpl-superfluid-${ctx.nextId()}`;
}

export async function chatCompletions(ctx: ServerContext, request: Request): Promise<Response> {
  const body = await readJsonBody(request);
  const { req, model } = await parseChat(ctx, body);
  const qos = requestQos(ctx.qos, request);
  checkBatchInvariant(ctx.qos, request);
  const p = await prepare(ctx, ctx, req, model, qos);
  return req.stream ? streamChat(ctx, p, request.signal) : completeChat(ctx, p, request.signal);
}

/** How a parsed body runs in process, outside any HTTP request (the Batches API's lines, docs/api/batches.md). */
export interface ChatRunOptions {
  qos: QosClass;
  /** Aborting it cancels the generation; the reply then ends as a cancelled one does. */
  signal: AbortSignal;
  /** Serves the body on this model whatever model it names. */
  model?: ServedModel;
  /** Sampling defaults and reply cap in place of the operator's flags. */
  defaults?: GenerationDefaults;
}

/** A chat completion body run to its whole reply: the status and the JSON body the route would answer (errors in OpenAI's envelope). */
export async function runChatCompletion(ctx: ServerContext, body: unknown, opts: ChatRunOptions): Promise<{ status: number; body: unknown }> {
  try {
    const { req, model } = await parseChat(ctx, body, opts.model);
    if (req.stream) throw invalidRequest("stream: true is not served here: this request gets one whole reply", "stream");
    const p = await prepare(ctx, opts.defaults ?? ctx, req, model, opts.qos);
    return { status: 200, body: (await chatReply(p, opts.signal).reply).body };
  } catch (err) {
    const e = asRequestError(err);
    return { status: e.status, body: openaiErrorBody(e) };
  }
}

/** The body checked and parsed, and the model it runs on (loaded first when it is known but not loaded). */
async function parseChat(ctx: ServerContext, body: unknown, served?: ServedModel): Promise<{ req: ChatRequest; model: ServedModel }> {
  checkListLengths(ctx.registry, body);
  const req = parseChatRequest(body);
  return { req, model: served ?? (await loadedOr404(ctx.registry, req.model)) };
}

async function prepare(ctx: ServerContext, defaults: GenerationDefaults, req: ChatRequest, model: ServedModel, qos: QosClass): Promise<Prepared> {
  checkChatText(model, [
    ["messages", req.messages, false],
    ["tools", req.tools, true],
    ["chat_template_kwargs", req.chat_template_kwargs, true],
  ]);
  const prepared = await prepareChat(defaults, model, chatJobOf(model, req, qos, defaults.maxTokens));
  return { ...prepared, req, id: completionId(ctx), created: Math.floor(Date.now() / 1000) };
}

async function completeChat(ctx: ServerContext, p: Prepared, signal: AbortSignal): Promise<Response> {
  const admission = admissionHeaders();
  const { reply, cancel } = chatReply(p, signal, admission.onAdmitted);
  return nonStreamResponse({
    keepaliveSec: ctx.keepaliveSec,
    admitted: admission.admitted,
    reply,
    cancel,
    route: ROUTE,
    errorBody: openaiErrorBody,
  });
}

/** Every choice read to its end as OpenAI's whole reply; `onAdmitted` hears when the first choice gets a lane. */
function chatReply(p: Prepared, signal: AbortSignal, onAdmitted?: (cached: number) => void): { reply: Promise<JsonReply>; cancel: () => void } {
  const timer = new RequestTimer();
  const live: Generation[] = [];
  cancelOnAbort(signal, () => live);
  // startChoices puts the first choice in `live` at once and the others once it
  // has prefilled; the first is read from the start, so its admission (which
  // commits the 200 under --nonstream-keepalive) is seen before its prefill ends.
  const starting = startChat(p, live);
  const collect = async (generation: Generation, index: number, onAdmitted?: (cached: number) => void) => {
    let content = "";
    let reasoning = "";
    const calls = new ToolCallCollector();
    const logprobs: ReturnType<typeof chatLogprob>[] = [];
    const stream = chatChoice(p, generation, onAdmitted);
    let step = await stream.next();
    while (!step.done) {
      const delta: ChoiceDelta = step.value;
      timer.tokenDelivered();
      content += delta.content;
      reasoning += delta.reasoning;
      calls.add(delta.calls);
      for (const l of delta.logprobs ?? []) logprobs.push(chatLogprob(p.model, l.token, l.logprob));
      step = await stream.next();
    }
    const end: ChoiceEnd = step.value;
    return { index, content, reasoning, logprobs, end, toolCalls: calls.done() };
  };
  const first = collect(live[0]!, 0, timer.onAdmitted(onAdmitted));
  first.catch(() => {}); // awaited below; this only keeps an early failure from counting as unhandled
  const reply = (async () => {
    const generations = await starting;
    if (signal.aborted) generations.forEach((g) => g.cancel());
    const choices = await Promise.all([first, ...generations.slice(1).map((g, i) => collect(g, i + 1))]).catch((err) => {
      generations.forEach((g) => g.cancel());
      throw err;
    });
    const cached = choices[0]!.end.cachedTokens;
    const completion = choices.reduce((n, c) => n + c.end.completionTokens, 0);
    logAccess({ status: 200, route: ROUTE, model: p.model.id, prompt: p.prompt.length, cached, completion, finish: finishOf(choices[0]!.end), id: p.id }, timer);
    return {
      body: {
        id: p.id,
        object: "chat.completion",
        created: p.created,
        model: p.model.id,
        choices: choices.map((c) => ({
          index: c.index,
          message: {
            role: "assistant",
            // OpenAI sends null content beside tool calls when there is no text.
            content: c.content === "" && c.toolCalls.length > 0 ? null : c.content,
            ...(c.reasoning ? { reasoning_content: c.reasoning } : {}),
            ...(c.toolCalls.length > 0 ? { tool_calls: c.toolCalls } : {}),
          },
          logprobs: p.req.logprobs ? { content: c.logprobs } : null,
          finish_reason: c.end.finishReason,
        })),
        usage: usageOf(p.prompt.length, completion, cached),
        superfluid: { warm: cached, ...specField(choices.map((c) => c.end)) },
      },
      headers: { "x-superfluid-warm": String(cached) },
    };
  })().catch(failedAccess({ route: ROUTE, model: p.model.id, prompt: p.prompt.length, id: p.id }, timer));
  return { reply, cancel: () => live.forEach((g) => g.cancel()) };
}

async function streamChat(ctx: ServerContext, p: Prepared, requestSignal: AbortSignal): Promise<Response> {
  const timer = new RequestTimer();
  // A stream carries one choice.
  const [generation] = await startChat(p, [], 1);
  cancelOnAbort(requestSignal, () => [generation!]);
  const chunk = (delta: Record<string, unknown>, extra: Record<string, unknown> = {}, finish: string | null = null, logprobs: unknown = null) => ({
    id: p.id,
    object: "chat.completion.chunk",
    created: p.created,
    model: p.model.id,
    choices: [{ index: 0, delta, logprobs, finish_reason: finish }],
    ...extra,
  });
  const base = { route: ROUTE, model: p.model.id, prompt: p.prompt.length, id: p.id };
  const started = await startStream((onAdmitted) => chatChoice(p, generation!, timer.onAdmitted(onAdmitted))).catch(failedAccess(base, timer));
  const { stream, first, headers } = started;
  const continuous = p.req.stream_options?.continuous_usage_stats === true;
  return streamResponse(OPENAI_SSE, streamLogged(base, timer, async (sink, signal) => {
    signal.addEventListener("abort", () => generation!.cancel(), { once: true });
    sink.send(chunk({ role: "assistant", content: "" }));
    let step = await first;
    while (!step.done) {
      const d: ChoiceDelta = step.value;
      timer.tokenDelivered();
      const delta: Record<string, unknown> = {};
      if (d.reasoning) delta.reasoning_content = d.reasoning;
      if (d.content) delta.content = d.content;
      const toolDeltas = streamedToolCalls(d.calls);
      if (toolDeltas.length > 0) delta.tool_calls = toolDeltas;
      const logprobs = d.logprobs ? { content: d.logprobs.map((l) => chatLogprob(p.model, l.token, l.logprob)) } : null;
      const usage = continuous ? { usage: usageOf(p.prompt.length, d.completionTokens, started.cachedAtAdmission ?? 0) } : {};
      if (Object.keys(delta).length > 0 || logprobs) sink.send(chunk(delta, usage, null, logprobs));
      step = await stream.next();
    }
    const end = step.value;
    logAccess({ ...base, status: 200, cached: end.cachedTokens, completion: end.completionTokens, finish: finishOf(end) }, timer);
    sink.send(
      chunk({}, { usage: usageOf(p.prompt.length, end.completionTokens, end.cachedTokens), superfluid: { warm: end.cachedTokens, ...specField([end]) } }, end.finishReason),
    );
  }), headers, streamKeepaliveMs(ctx));
}
