// POST /v1/responses (docs/api/responses.md): the request and the stored
// conversation it continues become the neutral chat job (warm when the
// stored turn's own tokens can be continued), its choice's deltas become
// output items, and the response is stored, durably, before it (or
// response.completed) goes out. A turn the client abandoned is stored
// nowhere but the session log. The stored response belongs to the scope of
// the key that sent the request, and only a response of that scope may be
// continued (docs/api/security.md#scoping).
import type { Generation } from "../../../daemon/worker-client.ts";
import { chatChoice, prepareChat, rendersTools, startChat, type ChatJob, type ChoiceEnd, type PreparedChat } from "../../../pipeline/chat-job.ts";
import type { Item } from "../../../responses/store.ts";
import { newResponseId } from "../../../responses/store.ts";
import { failedAccess, finishOf, logAccess, logFailure, RequestTimer } from "../../access-log.ts";
import { scopeOf } from "../../auth/principal.ts";
import { readJsonBody } from "../../body.ts";
import { checkChatText, checkListLengths } from "../../chat-limits.ts";
import { asRequestError } from "../../../pipeline/request-failure.ts";
import { admissionHeaders, nonStreamResponse } from "../../keepalive.ts";
import { loadedOr404 } from "../../models.ts";
import { checkBatchInvariant, requestQos } from "../../qos.ts";
import { cancelOnAbort, streamKeepaliveMs, type ServerContext } from "../../server-context.ts";
import { streamResponse, type StreamSink } from "../../stream.ts";
import { startStream } from "../../stream-admission.ts";
import { openaiErrorBody } from "../envelope.ts";
import { requestSampling } from "../sampling-fields.ts";
import { conversationOf, headOf, prepareNextTurn, warmPrompt, type Conversation } from "./conversation.ts";
import { RESPONSES_SSE } from "./events.ts";
import { OutputItems, type OutputEvent } from "./output.ts";
import { constraintOf, inputItems, parseResponsesRequest, reasoningKwargs, toolChoiceOf, toolsOf, type ResponsesRequest } from "./request.ts";

export const RESPONSES_ROUTE = "/v1/responses";

/** One request's turn: the prepared job and what its response and its stored record carry besides the output. */
interface Turn extends PreparedChat {
  req: ResponsesRequest;
  id: string;
  created: number;
  /** The input items, each with an id. */
  input: Item[];
  head: string;
  /** The stored response continued, and the length of its tokens when this turn continues them warm. */
  previous: string | null;
  warmBase: number | null;
  /** Built-in tools left out of the prompt. */
  ignored: string[];
  output: OutputItems;
  timer: RequestTimer;
  /** Ends the pin on the continued response (idempotent). */
  release: () => void;
  /** The scope of the request's key: the stored record's owner. */
  owner: string | undefined;
}

const ITEM_PREFIX: Record<string, string> = { message: "msg", function_call: "fc", function_call_output: "fco", reasoning: "rs" };

/**
 * Input items as input_items lists them: each with an id unique in the list
 * (the client's, else one of ours; `after` pages by it) and messages with a
 * status.
 */
function withIds(items: Item[], suffix: string): Item[] {
  const seen = new Set<string>();
  return items.map((item, i) => {
    const type = item.type ?? "message";
    const id = typeof item.id === "string" && !seen.has(item.id) ? item.id : `${ITEM_PREFIX[type] ?? "item"}_${suffix}_in${i}`;
    seen.add(id);
    return { ...item, type, id, ...(type === "message" && !item.status ? { status: "completed" } : {}) };
  });
}

export async function createResponse(ctx: ServerContext, request: Request): Promise<Response> {
  const body = await readJsonBody(request);
  checkListLengths(ctx.registry, body);
  const req = parseResponsesRequest(body);
  const id = newResponseId();
  const suffix = id.slice("resp_".length);
  const input = withIds(inputItems(req), suffix);
  const owner = scopeOf(request);
  const conversation = conversationOf(ctx.responses, req.previous_response_id, req.instructions, input, owner);
  // The continued response's files stay until this turn ends, even if it is deleted meanwhile.
  const previous = conversation.previous?.id;
  if (previous) ctx.responses.pin(previous);
  let released = false;
  const release = () => {
    if (released || !previous) return;
    released = true;
    void ctx.responses.unpin(previous);
  };
  try {
    const turn = await prepareTurn(ctx, request, req, id, input, conversation, release, owner);
    return await (req.stream ? streamTurn(ctx, turn, request.signal) : completeTurn(ctx, turn, request.signal));
  } catch (err) {
    release();
    throw err;
  }
}

async function prepareTurn(
  ctx: ServerContext,
  request: Request,
  req: ResponsesRequest,
  id: string,
  input: Item[],
  conversation: Conversation,
  release: () => void,
  owner: string | undefined,
): Promise<Turn> {
  const suffix = id.slice("resp_".length);
  const model = await loadedOr404(ctx.registry, req.model ?? conversation.previous!.model);
  const qos = requestQos(ctx.qos, request);
  checkBatchInvariant(ctx.qos, request);
  checkChatText(model, [
    ["input", req.input, false],
    ["instructions", req.instructions, false],
    ["tools", req.tools, true],
  ]);
  const { tools, ignored, namespaces } = toolsOf(req);
  const toolChoice = toolChoiceOf(req, tools);
  // A forced tool choice beats text.format, which is then not even read.
  const forced = toolChoice === "required" || typeof toolChoice === "object";
  const constraint = forced ? undefined : constraintOf(req);
  const job: ChatJob = {
    messages: conversation.messages,
    tools,
    toolChoice,
    parallelToolCalls: req.parallel_tool_calls !== false,
    ...(constraint ? { constraint } : {}),
    sampling: requestSampling({ temperature: req.temperature, top_p: req.top_p, seed: req.seed }),
    maxTokens: req.max_output_tokens ?? undefined,
    ignoreEos: false,
    stop: [],
    n: 1,
    qos,
    templateKwargs: reasoningKwargs(model, req.reasoning?.effort),
    durable: true,
  };
  const head = headOf(job, req.instructions, rendersTools(job));
  const warm = await warmPrompt(ctx.responses, model, job, conversation, head);
  if (warm) job.prompt = warm;
  const prepared = await prepareChat(ctx, model, job);
  return {
    ...prepared,
    req,
    id,
    created: Math.floor(Date.now() / 1000),
    input,
    head,
    previous: conversation.previous?.id ?? null,
    warmBase: warm && conversation.previous ? ctx.responses.tokens(conversation.previous.id).length : null,
    ignored,
    output: new OutputItems(suffix, prepared.request.grammar !== undefined, namespaces),
    timer: new RequestTimer(),
    release,
    owner,
  };
}

function usageOf(t: Turn, end: ChoiceEnd | undefined) {
  const output = end?.completionTokens ?? 0;
  const reasoning = t.output.reasoningText;
  return {
    input_tokens: t.prompt.length,
    input_tokens_details: { cached_tokens: end?.cachedTokens ?? 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: reasoning ? t.model.tokenizer.tokenize(reasoning, { addSpecial: false, parseSpecial: false }).length : 0 },
    total_tokens: t.prompt.length + output,
  };
}

type Status = "in_progress" | "completed" | "incomplete" | "failed" | "cancelled";

/** The response object (docs/api/responses.md#response-object): the turn's output so far and the request fields it echoes. */
function responseObject(t: Turn, status: Status, end?: ChoiceEnd, error: { code: string; message: string } | null = null): Record<string, unknown> {
  const req = t.req;
  return {
    id: t.id,
    object: "response",
    created_at: t.created,
    status,
    background: false,
    error,
    incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
    instructions: req.instructions ?? null,
    max_output_tokens: req.max_output_tokens ?? null,
    model: t.model.id,
    output: status === "in_progress" ? [] : structuredClone(t.output.items),
    parallel_tool_calls: req.parallel_tool_calls ?? true,
    previous_response_id: t.previous,
    reasoning: { effort: req.reasoning?.effort ?? null, summary: null },
    store: req.store ?? true,
    temperature: req.temperature ?? null,
    text: req.text ?? { format: { type: "text" } },
    tool_choice: req.tool_choice ?? "auto",
    tools: req.tools ?? [],
    top_p: req.top_p ?? null,
    truncation: req.truncation ?? "disabled",
    usage: status === "in_progress" ? null : usageOf(t, end),
    metadata: req.metadata ?? {},
  };
}

/**
 * The finished turn's response, recorded (when the request stores it and
 * the client is still there) before anyone sees it. The tokens kept are
 * what this turn added to the conversation: everything, or after a warm
 * continuation only what follows the stored tokens.
 */
async function finishTurn(ctx: ServerContext, t: Turn, end: ChoiceEnd): Promise<Record<string, unknown>> {
  const cut = end.finishReason === "length";
  // Cancelled with the client still there: the server is stopping.
  const cancelled = end.reason === "cancelled";
  const response = cancelled
    ? responseObject(t, "cancelled", end, { code: "cancelled", message: "the generation was cancelled before it finished (the server is stopping)" })
    : responseObject(t, cut ? "incomplete" : "completed", end);
  const stored = t.req.store !== false && !cancelled;
  if (stored) {
    const prompt = t.warmBase === null ? t.prompt : t.prompt.slice(t.warmBase);
    await ctx.responses.save(
      {
        id: t.id,
        model: t.model.id,
        created_at: t.created,
        previous: t.previous,
        response,
        input: t.input,
        head: t.head,
        warmable: !cut,
        tokensBase: t.warmBase === null ? null : t.previous,
        ...(t.owner === undefined ? {} : { owner: t.owner }),
      },
      [...prompt, ...end.tokens],
    );
  }
  if (stored && !cut) prepareNextTurn(ctx.responses, t.model, t.job, t.id, t.req.instructions, t.head, t.owner);
  logAccess({ ...accessBase(t), status: 200, cached: end.cachedTokens, completion: end.completionTokens, finish: finishOf(end) }, t.timer);
  return response;
}

/** What the access log knows of a turn before its end. */
const accessBase = (t: Turn) => ({ route: RESPONSES_ROUTE, model: t.model.id, prompt: t.prompt.length, id: t.id });

/** x-superfluid-warm (cached prompt tokens), how a stored conversation was continued, and the built-in tools left out. */
function replyHeaders(t: Turn, cached: number | undefined): Record<string, string> {
  return {
    ...(cached === undefined ? {} : { "x-superfluid-warm": String(cached) }),
    ...(t.previous === null ? {} : { "x-superfluid-continued": t.warmBase === null ? "rebuilt" : "warm" }),
    ...(t.ignored.length > 0 ? { "x-superfluid-ignored-tools": t.ignored.join(",") } : {}),
  };
}

async function completeTurn(ctx: ServerContext, t: Turn, signal: AbortSignal): Promise<Response> {
  const live: Generation[] = [];
  cancelOnAbort(signal, () => live);
  const starting = startChat(t, live);
  starting.catch(() => {}); // awaited below; this only keeps an early failure from counting as unhandled
  const admission = admissionHeaders();
  const reply = (async () => {
    const stream = chatChoice(t, live[0]!, t.timer.onAdmitted(admission.onAdmitted));
    let step = await stream.next();
    while (!step.done) {
      t.timer.tokenDelivered();
      t.output.push(step.value);
      step = await stream.next();
    }
    await starting;
    const end = step.value;
    t.output.finish(end.finishReason === "length");
    return { body: await finishTurn(ctx, t, end), headers: replyHeaders(t, end.cachedTokens) };
  })().catch(failedAccess(accessBase(t), t.timer));
  reply.then(t.release, t.release);
  return nonStreamResponse({
    keepaliveSec: ctx.keepaliveSec,
    admitted: admission.admitted,
    reply,
    cancel: () => live.forEach((g) => g.cancel()),
    route: RESPONSES_ROUTE,
    errorBody: openaiErrorBody,
  });
}

async function streamTurn(ctx: ServerContext, t: Turn, requestSignal: AbortSignal): Promise<Response> {
  const [generation] = await startChat(t, [], 1);
  cancelOnAbort(requestSignal, () => [generation!]);
  const started = await startStream((onAdmitted) => chatChoice(t, generation!, t.timer.onAdmitted(onAdmitted))).catch(failedAccess(accessBase(t), t.timer));
  const { stream, first } = started;
  return streamResponse(
    RESPONSES_SSE,
    async (raw, signal) => {
      signal.addEventListener("abort", () => generation!.cancel(), { once: true });
      let sequence = 0;
      const sink: StreamSink = raw;
      const send = (event: OutputEvent) => sink.send({ ...event, sequence_number: sequence++ }, event.type);
      // Until the first item opens (a long prefill, a wait in the queue) the
      // idle keep-alive is a real event: Codex times a stream out after 300 s
      // without one, and comment lines do not count. Before any output a
      // repeated in_progress changes nothing in what a client accumulates.
      const waiting = setInterval(() => {
        if (t.output.items.length === 0) send({ type: "response.in_progress", response: responseObject(t, "in_progress") });
      }, streamKeepaliveMs(ctx));
      signal.addEventListener("abort", () => clearInterval(waiting), { once: true });
      try {
        send({ type: "response.created", response: responseObject(t, "in_progress") });
        send({ type: "response.in_progress", response: responseObject(t, "in_progress") });
        let step = await first;
        while (!step.done) {
          t.timer.tokenDelivered();
          t.output.push(step.value).forEach(send);
          step = await stream.next();
        }
        const end = step.value;
        t.output.finish(end.finishReason === "length").forEach(send);
        const response = await finishTurn(ctx, t, end);
        const terminal = { completed: "response.completed", incomplete: "response.incomplete" }[response.status as string] ?? "response.failed";
        send({ type: terminal, response });
      } catch (err) {
        generation!.cancel();
        logFailure(accessBase(t), t.timer, err, true);
        const e = asRequestError(err);
        const code = e.code ?? (e.status >= 500 ? "server_error" : "invalid_request_error");
        send({ type: "error", code, message: e.message, param: e.field });
        send({ type: "response.failed", response: responseObject(t, "failed", undefined, { code, message: e.message }) });
      } finally {
        clearInterval(waiting);
        t.release();
      }
    },
    replyHeaders(t, started.cachedAtAdmission),
    streamKeepaliveMs(ctx),
  );
}
