// POST /v1/chat/completions (api.md 5): streaming and not, n choices,
// logprobs, stop strings, reasoning split out.
import { choiceText, type ChoiceDelta, type ChoiceEnd } from "../../daemon/choice-stream.ts";
import type { ToolCallEvent, ToolCallParser, ToolDialect } from "../../codec/tool-dialects/index.ts";
import { THINK_MARKERS, type ServedModel } from "../../daemon/served-model.ts";
import type { Generation } from "../../daemon/worker-client.ts";
import type { QosClass } from "../../engine/scheduler.ts";
import { logAccess, RequestTimer } from "../access-log.ts";
import { modelOr404 } from "../models.ts";
import { readJsonBody } from "../body.ts";
import { badRequest } from "../errors.ts";
import { admissionHeaders, nonStreamResponse } from "../keepalive.ts";
import { checkBatchInvariant, requestQos } from "../qos.ts";
import { sseResponse } from "../sse.ts";
import { parseWith } from "../validate.ts";
import { checkChatText, checkListLengths } from "./chat-limits.ts";
import { buildChatPrompt } from "./chat-prompt.ts";
import { chatRequestSchema, type ChatRequest } from "./chat-schema.ts";
import {
  cancelOnAbort,
  chatLogprob,
  checkContext,
  generateRequest,
  logitBiasOf,
  sseKeepaliveMs,
  startChoices,
  stopsOf,
  type ServerContext,
  usageOf,
} from "./generation.ts";
import { requestSampling } from "./sampling-fields.ts";
import { grammarOf } from "./structured.ts";
import { streamedToolCalls, ToolCallCollector } from "./tool-call-output.ts";
import { toolPlan } from "./tools.ts";

const ROUTE = "/v1/chat/completions";

/** How long a stream's headers wait for admission (to carry x-superfluid-warm). */
const HEADER_WAIT_MS = 1000;

function parseChatRequest(body: unknown): ChatRequest {
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw badRequest("request body must be a JSON object");
  if (!("model" in body) || (body as { model: unknown }).model === undefined) throw badRequest("you must provide a model parameter", "model");
  if (!("messages" in body)) throw badRequest("you must provide a messages parameter", "messages");
  const req = parseWith(chatRequestSchema, body);
  if (req.top_logprobs !== undefined && req.top_logprobs !== null && !req.logprobs) {
    throw badRequest("top_logprobs requires logprobs to be true", "top_logprobs");
  }
  refuseUndeclaredToolChoice(req);
  return req;
}

/** api.md 5.3: a forced tool_choice must name a declared function. */
function refuseUndeclaredToolChoice(req: ChatRequest): void {
  const choice = req.tool_choice as { type?: unknown; function?: { name?: unknown } } | undefined | null;
  const name = choice?.type === "function" ? choice.function?.name : undefined;
  if (typeof name !== "string") return;
  const declared = (req.tools ?? []).filter((t) => t.type === "function").map((t) => t.function?.name);
  if (!declared.includes(name)) throw badRequest(`tool_choice names the function '${name}', which is not declared in tools`, "tool_choice");
}

interface Prepared {
  model: ServedModel;
  req: ChatRequest;
  prompt: number[];
  grammar?: string;
  /** The grammar is lazy: free text until this call opener. */
  grammarTrigger?: string;
  /** Parse tool calls (and channels) in this dialect out of the reply. */
  toolDialect?: ToolDialect;
  /** The reply may make calls (see ToolPlan.callsAllowed). */
  callsAllowed: boolean;
  startsInReasoning: boolean;
  qos: QosClass;
  id: string;
  created: number;
}

function completionId(ctx: ServerContext): string {
  return `chatcmpl-superfluid-${ctx.nextId()}`;
}

export async function chatCompletions(ctx: ServerContext, request: Request): Promise<Response> {
  const body = await readJsonBody(request);
  checkListLengths(ctx.registry, body);
  const req = parseChatRequest(body);
  const model = modelOr404(ctx.registry, req.model);
  const qos = requestQos(ctx.qos, request.headers);
  checkBatchInvariant(ctx.qos, request.headers);
  checkChatText(model, req);
  const tools = toolPlan(model, req);
  // A forced tool choice beats response_format (api.md 5.3); an auto one only
  // constrains calls, so response_format still holds for the rest.
  const forced = tools.grammar !== undefined && tools.trigger === undefined;
  const format = forced ? undefined : grammarOf(req);
  const grammar = forced ? tools.grammar : (format ?? tools.grammar);
  const grammarTrigger = format === undefined && tools.trigger !== undefined ? tools.trigger : undefined;
  const { tokens: prompt, startsInReasoning } = await buildChatPrompt(model, req);
  checkContext(model, prompt.length, "messages");
  const prepared: Prepared = {
    model,
    req,
    prompt,
    startsInReasoning,
    qos,
    ...(grammar ? { grammar } : {}),
    ...(grammarTrigger ? { grammarTrigger } : {}),
    ...(tools.dialect ? { toolDialect: tools.dialect } : {}),
    callsAllowed: tools.callsAllowed,
    id: completionId(ctx),
    created: Math.floor(Date.now() / 1000),
  };
  return req.stream ? streamChat(ctx, prepared, request.signal) : completeChat(ctx, prepared, request.signal);
}

function generationOf(ctx: ServerContext, p: Prepared) {
  const { req, model } = p;
  return generateRequest(ctx, model, p.prompt, {
    sampling: requestSampling(req, logitBiasOf(model, req.logit_bias)),
    maxTokens: req.max_completion_tokens ?? req.max_tokens ?? undefined,
    ignoreEos: req.ignore_eos ?? false,
    qos: p.qos,
    ...(req.logprobs ? { logprobs: req.top_logprobs ?? 0 } : {}),
    ...(p.grammar ? { grammar: p.grammar } : {}),
    ...(p.grammarTrigger ? { grammarTrigger: p.grammarTrigger } : {}),
    ...(p.callsAllowed ? {} : { bannedTokens: p.model.callOpenerTokens }),
  });
}

/** A parser whose call events are dropped: a wire parsed for its channels when no call may be made. */
function withoutCalls(parser: ToolCallParser): ToolCallParser {
  const keep = (events: ToolCallEvent[]) => events.filter((e) => e.type === "text" || e.type === "reasoning");
  return { push: (text) => keep(parser.push(text)), flush: () => keep(parser.flush()) };
}

function choiceOptions(p: Prepared, stops: string[]) {
  // A constrained reply is all content (the grammar holds from the first token),
  // unless the grammar is lazy and only holds from a call's opener on.
  const splitsReasoning = p.model.thinks && (!p.grammar || p.grammarTrigger !== undefined);
  return {
    stops,
    ...(splitsReasoning ? { reasoning: { ...THINK_MARKERS, startInside: p.startsInReasoning } } : {}),
    ...(p.toolDialect ? { toolParser: () => (p.callsAllowed ? p.toolDialect!.parser() : withoutCalls(p.toolDialect!.parser())) } : {}),
  };
}

async function completeChat(ctx: ServerContext, p: Prepared, signal: AbortSignal): Promise<Response> {
  const timer = new RequestTimer();
  const live: Generation[] = [];
  cancelOnAbort(signal, () => live);
  // startChoices puts the first choice in `live` at once and the others once it
  // has prefilled; the first is read from the start, so its admission (which
  // commits the 200 under --nonstream-keepalive) is seen before its prefill ends.
  const starting = startChoices(p.model, generationOf(ctx, p), p.req.n ?? 1, live);
  const stops = stopsOf(p.req);
  const admission = admissionHeaders();
  const collect = async (generation: Generation, index: number, onAdmitted?: (cached: number) => void) => {
    let content = "";
    let reasoning = "";
    const calls = new ToolCallCollector();
    const logprobs: ReturnType<typeof chatLogprob>[] = [];
    const stream = choiceText(p.model.tokenizer, generation, choiceOptions(p, stops), onAdmitted);
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
  const first = collect(live[0]!, 0, admission.onAdmitted);
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
    logAccess({ status: 200, route: ROUTE, model: p.model.id, prompt: p.prompt.length, cached, completion, finish: choices[0]!.end.finishReason }, timer);
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
        superfluid: { warm: cached },
      },
      headers: { "x-superfluid-warm": String(cached) },
    };
  })();
  return nonStreamResponse({ keepaliveSec: ctx.keepaliveSec, admitted: admission.admitted, reply, cancel: () => live.forEach((g) => g.cancel()), route: ROUTE });
}

async function streamChat(ctx: ServerContext, p: Prepared, requestSignal: AbortSignal): Promise<Response> {
  const timer = new RequestTimer();
  const [generation] = await startChoices(p.model, generationOf(ctx, p), 1);
  cancelOnAbort(requestSignal, () => [generation!]);
  const chunk = (delta: Record<string, unknown>, extra: Record<string, unknown> = {}, finish: string | null = null, logprobs: unknown = null) => ({
    id: p.id,
    object: "chat.completion.chunk",
    created: p.created,
    model: p.model.id,
    choices: [{ index: 0, delta, logprobs, finish_reason: finish }],
    ...extra,
  });
  // Headers go out once the request has a lane, so x-superfluid-warm can carry
  // the exact count; a request still queued after a second gets them without it.
  let cachedAtAdmission: number | undefined;
  let onAdmit!: () => void;
  const admitted = new Promise<void>((resolve) => (onAdmit = resolve));
  const stream = choiceText(p.model.tokenizer, generation!, choiceOptions(p, stopsOf(p.req)), (cached) => {
    cachedAtAdmission = cached;
    onAdmit();
  });
  const continuous = p.req.stream_options?.continuous_usage_stats === true;
  const firstStep = stream.next();
  let failedEarly: unknown;
  let waited: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([
    admitted,
    firstStep.then(() => undefined, (err) => void (failedEarly = err ?? new Error("failed"))),
    new Promise<void>((resolve) => (waited = setTimeout(resolve, HEADER_WAIT_MS))),
  ]);
  clearTimeout(waited);
  if (failedEarly) throw failedEarly; // nothing sent yet: a plain error response
  const headers: Record<string, string> = cachedAtAdmission === undefined ? {} : { "x-superfluid-warm": String(cachedAtAdmission) };
  return sseResponse(async (sink, signal) => {
    signal.addEventListener("abort", () => generation!.cancel(), { once: true });
    sink.send(chunk({ role: "assistant", content: "" }));
    let step = await firstStep;
    while (!step.done) {
      const d: ChoiceDelta = step.value;
      timer.tokenDelivered();
      const delta: Record<string, unknown> = {};
      if (d.reasoning) delta.reasoning_content = d.reasoning;
      if (d.content) delta.content = d.content;
      const toolDeltas = streamedToolCalls(d.calls);
      if (toolDeltas.length > 0) delta.tool_calls = toolDeltas;
      const logprobs = d.logprobs ? { content: d.logprobs.map((l) => chatLogprob(p.model, l.token, l.logprob)) } : null;
      const usage = continuous ? { usage: usageOf(p.prompt.length, d.completionTokens, cachedAtAdmission ?? 0) } : {};
      if (Object.keys(delta).length > 0 || logprobs) sink.send(chunk(delta, usage, null, logprobs));
      step = await stream.next();
    }
    const end = step.value;
    logAccess({ status: 200, route: ROUTE, model: p.model.id, prompt: p.prompt.length, cached: end.cachedTokens, completion: end.completionTokens, finish: end.finishReason }, timer);
    sink.send(
      chunk({}, { usage: usageOf(p.prompt.length, end.completionTokens, end.cachedTokens), superfluid: { warm: end.cachedTokens } }, end.finishReason),
    );
  }, headers, sseKeepaliveMs(ctx));
}
