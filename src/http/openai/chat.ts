// POST /v1/chat/completions (docs/api/openai.md#chat-completions): the
// request becomes the neutral chat job (chat-request.ts), and its choices'
// deltas become OpenAI's reply, whole or streamed (chat-runner.ts runs it).
import type { ServedModel } from "../../daemon/served-model.ts";
import { invalidRequest } from "../../daemon/request-error.ts";
import type { ChoiceDelta, ChoiceEnd } from "../../pipeline/choice-stream.ts";
import type { GenerationDefaults } from "../../pipeline/engine-request.ts";
import type { PreparedChat } from "../../pipeline/prepare-chat.ts";
import { asRequestError } from "../../pipeline/request-failure.ts";
import type { QosClass } from "../../engine/scheduler.ts";
import { checkChatText, checkListLengths } from "../chat-limits.ts";
import { runChat, runWholeChat, type ChatFamily, type ChatReply, type ParsedChat } from "../chat-runner.ts";
import { loadedOr404 } from "../models.ts";
import type { Frame } from "../reply-runner.ts";
import type { ServerContext } from "../server-context.ts";
import { chatJobOf, parseChatRequest } from "./chat-request.ts";
import type { ChatRequest } from "./chat-schema.ts";
import { OPENAI_SSE, openaiErrorBody } from "./envelope.ts";
import { specField } from "./spec-stats.ts";
import { streamedToolCalls, ToolCallCollector } from "./tool-call-output.ts";
import { chatLogprob, usageOf } from "./usage.ts";

const ROUTE = "/v1/chat/completions";

interface ParsedCompletion extends ParsedChat {
  req: ChatRequest;
}

const CHAT_FAMILY: ChatFamily<ParsedCompletion> = {
  route: ROUTE,
  framing: OPENAI_SSE,
  errorBody: openaiErrorBody,
  parse: async (ctx, body) => parseChat(ctx, body),
  job: (_ctx, { req, model }, qos, defaults) => {
    checkChatText(model, [
      ["messages", req.messages, false],
      ["tools", req.tools, true],
      ["chat_template_kwargs", req.chat_template_kwargs, true],
    ]);
    return chatJobOf(model, req, qos, defaults.maxTokens);
  },
  reply: (ctx, { req }, p) => chatReply(req, p, `chatcmpl-superfluid-${ctx.nextId()}`),
};

export function chatCompletions(ctx: ServerContext, request: Request): Promise<Response> {
  return runChat(ctx, request, CHAT_FAMILY);
}

/** The body checked and parsed, and the model it runs on (loaded first when it is known but not loaded). */
async function parseChat(ctx: ServerContext, body: unknown, served?: ServedModel): Promise<ParsedCompletion> {
  const req = parseChatRequest(body);
  return { req, model: served ?? (await loadedOr404(ctx.registry, req.model)), stream: req.stream === true };
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

/**
 * A chat completion body run to its whole reply: the status and the JSON body the route would answer (errors in
 * OpenAI's envelope).
 */
export async function runChatCompletion(
  ctx: ServerContext,
  body: unknown,
  opts: ChatRunOptions,
): Promise<{ status: number; body: unknown }> {
  try {
    checkListLengths(ctx.registry, body);
    const parsed = await parseChat(ctx, body, opts.model);
    if (parsed.stream)
      throw invalidRequest("stream: true is not served here: this request gets one whole reply", "stream");
    const reply = await runWholeChat(ctx, CHAT_FAMILY, parsed, {
      qos: opts.qos,
      signal: opts.signal,
      ...(opts.defaults ? { defaults: opts.defaults } : {}),
    });
    return { status: 200, body: reply.body };
  } catch (err) {
    const e = asRequestError(err);
    return { status: e.status, body: openaiErrorBody(e) };
  }
}

/** One choice's content, reasoning, calls and logprobs, gathered for the whole reply. */
class GatheredChoice {
  content = "";
  reasoning = "";
  readonly calls = new ToolCallCollector();
  readonly logprobs: ReturnType<typeof chatLogprob>[] = [];
}

/** OpenAI's reply: chunks of one choice when streamed, every choice gathered when whole. */
function chatReply(req: ChatRequest, p: PreparedChat, id: string): ChatReply {
  const created = Math.floor(Date.now() / 1000);
  const gathered: GatheredChoice[] = [];
  const continuous = req.stream_options?.continuous_usage_stats === true;
  let cachedAtAdmission = 0;
  const chunk = (
    delta: Record<string, unknown>,
    extra: Record<string, unknown> = {},
    finish: string | null = null,
    logprobs: unknown = null,
  ): Frame => ({
    data: {
      id,
      object: "chat.completion.chunk",
      created,
      model: p.model.id,
      choices: [{ index: 0, delta, logprobs, finish_reason: finish }],
      ...extra,
    },
  });
  return {
    id,
    renderer: {
      admitted: (cached) => void (cachedAtAdmission = cached),
      open: () => [chunk({ role: "assistant", content: "" })],
      delta: (index, d: ChoiceDelta) => {
        const g = (gathered[index] ??= new GatheredChoice());
        g.content += d.content;
        g.reasoning += d.reasoning;
        g.calls.add(d.calls);
        const logprobs = (d.logprobs ?? []).map((l) => chatLogprob(p.model, l.token, l.logprob));
        g.logprobs.push(...logprobs);
        if (!req.stream) return [];
        const delta: Record<string, unknown> = {};
        if (d.reasoning) delta.reasoning_content = d.reasoning;
        if (d.content) delta.content = d.content;
        const toolDeltas = streamedToolCalls(d.calls);
        if (toolDeltas.length > 0) delta.tool_calls = toolDeltas;
        const usage = continuous ? { usage: usageOf(p.prompt.length, d.completionTokens, cachedAtAdmission) } : {};
        const lp = d.logprobs ? { content: logprobs } : null;
        return Object.keys(delta).length > 0 || lp ? [chunk(delta, usage, null, lp)] : [];
      },
      close: (_index, end: ChoiceEnd) => [
        chunk(
          {},
          {
            usage: usageOf(p.prompt.length, end.completionTokens, end.cachedTokens),
            superfluid: { warm: end.cachedTokens, ...specField([end]) },
          },
          end.finishReason,
        ),
      ],
      whole: (ends) => {
        const cached = ends[0]!.cachedTokens;
        const completion = ends.reduce((n, e) => n + e.completionTokens, 0);
        return {
          body: {
            id,
            object: "chat.completion",
            created,
            model: p.model.id,
            choices: ends.map((end, index) => {
              const g = gathered[index] ?? new GatheredChoice();
              const toolCalls = g.calls.done();
              return {
                index,
                message: {
                  role: "assistant",
                  // OpenAI sends null content beside tool calls when there is no text.
                  content: g.content === "" && toolCalls.length > 0 ? null : g.content,
                  ...(g.reasoning ? { reasoning_content: g.reasoning } : {}),
                  ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
                },
                logprobs: req.logprobs ? { content: g.logprobs } : null,
                finish_reason: end.finishReason,
              };
            }),
            usage: usageOf(p.prompt.length, completion, cached),
            superfluid: { warm: cached, ...specField(ends) },
          },
          headers: { "x-superfluid-warm": String(cached) },
        };
      },
    },
  };
}
