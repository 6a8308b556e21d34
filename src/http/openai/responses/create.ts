// POST /v1/responses (docs/api/responses.md): the request and the stored
// conversation it continues become the neutral chat job (warm when the
// stored turn's own tokens can be continued), its choice's deltas become
// output items, and the response is stored, durably, before it (or
// response.completed) goes out (chat-runner.ts runs it). A turn the client
// abandoned is stored nowhere but the session log. The stored response
// belongs to the scope of the key that sent the request, and only a
// response of that scope may be continued (docs/api/security.md#scoping).
import type { ChatJob } from "../../../pipeline/chat-job.ts";
import { rendersTools } from "../../../pipeline/chat-job.ts";
import type { ChoiceEnd } from "../../../pipeline/choice-stream.ts";
import type { PreparedChat } from "../../../pipeline/prepare-chat.ts";
import type { Item } from "../../../response-store/store.ts";
import { newResponseId } from "../../../response-store/store.ts";
import { scopeOf } from "../../auth/principal.ts";
import { checkChatText } from "../../chat-limits.ts";
import { runChat, type ChatFamily, type ChatReply, type ParsedChat } from "../../chat-runner.ts";
import { loadedOr404 } from "../../models.ts";
import type { ServerContext } from "../../server-context.ts";
import { openaiErrorBody } from "../envelope.ts";
import { requestSampling } from "../sampling-fields.ts";
import { conversationOf, headOf, prepareNextTurn, warmPrompt, type Conversation } from "./conversation.ts";
import { RESPONSES_SSE } from "./events.ts";
import { OutputItems, type OutputEvent } from "./output.ts";
import {
  constraintOf,
  inputItems,
  parseResponsesRequest,
  reasoningKwargs,
  toolChoiceOf,
  toolsOf,
  type ResponsesRequest,
} from "./request.ts";

export const RESPONSES_ROUTE = "/v1/responses";

/** One request's turn: the request, the stored conversation it continues, and what its stored record carries. */
interface ParsedTurn extends ParsedChat {
  req: ResponsesRequest;
  id: string;
  created: number;
  /** The input items, each with an id. */
  input: Item[];
  conversation: Conversation;
  /** The scope of the request's key: the stored record's owner. */
  owner: string | undefined;
  /** Set with the job: the rendered head, the warm continuation, the tools left out. */
  shape?: TurnShape;
}

/** What the job adds to a turn. */
interface TurnShape {
  head: string;
  /** The length of the stored response's tokens when this turn continues them warm. */
  warmBase: number | null;
  /** Built-in tools left out of the prompt. */
  ignored: string[];
  namespaces: ReturnType<typeof toolsOf>["namespaces"];
}

/** A turn with its prompt prepared: what the response and its stored record are made of. */
interface Turn extends PreparedChat, TurnShape {
  req: ResponsesRequest;
  id: string;
  created: number;
  input: Item[];
  /** The stored response continued. */
  previous: string | null;
  output: OutputItems;
  owner: string | undefined;
}

const ITEM_PREFIX: Record<string, string> = {
  message: "msg",
  function_call: "fc",
  function_call_output: "fco",
  reasoning: "rs",
};

/**
 * Input items as input_items lists them: each with an id unique in the list
 * (the client's, else one of ours; `after` pages by it) and messages with a
 * status.
 */
function withIds(items: Item[], suffix: string): Item[] {
  const seen = new Set<string>();
  return items.map((item, i) => {
    const type = item.type ?? "message";
    const id =
      typeof item.id === "string" && !seen.has(item.id) ? item.id : `${ITEM_PREFIX[type] ?? "item"}_${suffix}_in${i}`;
    seen.add(id);
    return { ...item, type, id, ...(type === "message" && !item.status ? { status: "completed" } : {}) };
  });
}

const RESPONSES_FAMILY: ChatFamily<ParsedTurn> = {
  route: RESPONSES_ROUTE,
  framing: RESPONSES_SSE,
  errorBody: openaiErrorBody,
  parse: (ctx, body, request) => parseTurn(ctx, body, request),
  job: (ctx, turn, qos) => turnJob(ctx, turn, qos),
  reply: (ctx, turn, prepared) => turnReply(ctx, turn, prepared),
};

export function createResponse(ctx: ServerContext, request: Request): Promise<Response> {
  return runChat(ctx, request, RESPONSES_FAMILY);
}

async function parseTurn(ctx: ServerContext, body: unknown, request: Request): Promise<ParsedTurn> {
  const req = parseResponsesRequest(body);
  const id = newResponseId();
  const input = withIds(inputItems(req), id.slice("resp_".length));
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
    const model = await loadedOr404(ctx.registry, req.model ?? conversation.previous!.model);
    return {
      req,
      id,
      created: Math.floor(Date.now() / 1000),
      input,
      conversation,
      owner,
      model,
      stream: req.stream === true,
      release,
    };
  } catch (err) {
    release();
    throw err;
  }
}

async function turnJob(ctx: ServerContext, turn: ParsedTurn, qos: ChatJob["qos"]): Promise<ChatJob> {
  const { req, model, conversation } = turn;
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
    ...(qos === undefined ? {} : { qos }),
    templateKwargs: reasoningKwargs(model, req.reasoning?.effort),
    durable: true,
  };
  const head = headOf(job, req.instructions, rendersTools(job));
  const warm = await warmPrompt(ctx.responses, model, job, conversation, head);
  if (warm) job.prompt = warm;
  const warmBase = warm && conversation.previous ? ctx.responses.tokens(conversation.previous.id).length : null;
  turn.shape = { head, warmBase, ignored, namespaces };
  return job;
}

function usageOf(t: Turn, end: ChoiceEnd | undefined) {
  const output = end?.completionTokens ?? 0;
  const reasoning = t.output.reasoningText;
  return {
    input_tokens: t.prompt.length,
    input_tokens_details: { cached_tokens: end?.cachedTokens ?? 0 },
    output_tokens: output,
    output_tokens_details: {
      reasoning_tokens: reasoning
        ? t.model.tokenizer.tokenize(reasoning, { addSpecial: false, parseSpecial: false }).length
        : 0,
    },
    total_tokens: t.prompt.length + output,
  };
}

type Status = "in_progress" | "completed" | "incomplete" | "failed" | "cancelled";

/**
 * The response object (docs/api/responses.md#response-object): the turn's output so far and the request fields it
 * echoes.
 */
function responseObject(
  t: Turn,
  status: Status,
  end?: ChoiceEnd,
  error: { code: string; message: string } | null = null,
): Record<string, unknown> {
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
    ? responseObject(t, "cancelled", end, {
        code: "cancelled",
        message: "the generation was cancelled before it finished (the server is stopping)",
      })
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
  return response;
}

/**
 * x-superfluid-warm (cached prompt tokens), how a stored conversation was continued, and the built-in tools left out.
 */
function replyHeaders(t: Turn, cached: number | undefined): Record<string, string> {
  return {
    ...(cached === undefined ? {} : { "x-superfluid-warm": String(cached) }),
    ...(t.previous === null ? {} : { "x-superfluid-continued": t.warmBase === null ? "rebuilt" : "warm" }),
    ...(t.ignored.length > 0 ? { "x-superfluid-ignored-tools": t.ignored.join(",") } : {}),
  };
}

/**
 * The turn's output items as events (streamed) or the response object (whole), the response stored before either ends.
 */
function turnReply(ctx: ServerContext, parsed: ParsedTurn, prepared: PreparedChat): ChatReply {
  const shape = parsed.shape!;
  const t: Turn = {
    ...prepared,
    ...shape,
    req: parsed.req,
    id: parsed.id,
    created: parsed.created,
    input: parsed.input,
    previous: parsed.conversation.previous?.id ?? null,
    output: new OutputItems(parsed.id.slice("resp_".length), prepared.request.grammar !== undefined, shape.namespaces),
    owner: parsed.owner,
  };
  let sequence = 0;
  const frame = (event: OutputEvent) => ({ data: { ...event, sequence_number: sequence++ }, event: event.type });
  return {
    id: t.id,
    renderer: {
      open: () => [
        frame({ type: "response.created", response: responseObject(t, "in_progress") }),
        frame({ type: "response.in_progress", response: responseObject(t, "in_progress") }),
      ],
      // Until the first item opens (a long prefill, a wait in the queue) the
      // idle keep-alive is a real event: Codex times a stream out after 300 s
      // without one, and comment lines do not count. Before any output a
      // repeated in_progress changes nothing in what a client accumulates.
      idle: () =>
        t.output.items.length === 0
          ? [frame({ type: "response.in_progress", response: responseObject(t, "in_progress") })]
          : [],
      delta: (_index, d) => t.output.push(d).map(frame),
      close: async (_index, end) => {
        const frames = t.output.finish(end.finishReason === "length").map(frame);
        const response = await finishTurn(ctx, t, end);
        const terminal =
          { completed: "response.completed", incomplete: "response.incomplete" }[response.status as string] ??
          "response.failed";
        return [...frames, frame({ type: terminal, response })];
      },
      whole: async ([end]) => {
        t.output.finish(end!.finishReason === "length");
        return { body: await finishTurn(ctx, t, end!), headers: replyHeaders(t, end!.cachedTokens) };
      },
      fail: (e) => {
        const code = e.code ?? (e.status >= 500 ? "server_error" : "invalid_request_error");
        return [
          frame({ type: "error", code, message: e.message, param: e.field }),
          frame({
            type: "response.failed",
            response: responseObject(t, "failed", undefined, { code, message: e.message }),
          }),
        ];
      },
      headers: (cached) => replyHeaders(t, cached),
    },
  };
}
