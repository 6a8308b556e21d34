// POST /v1/messages (docs/api/anthropic.md#messages): the request becomes the
// neutral chat job (request.ts) with its cache breakpoints in it, and its
// choice's deltas become Anthropic's message, whole or streamed
// (chat-runner.ts runs it).
import type { PreparedChat } from "../../pipeline/prepare-chat.ts";
import { runChat, type ChatFamily, type ChatReply, type ParsedChat } from "../chat-runner.ts";
import type { ServerContext } from "../server-context.ts";
import { ANTHROPIC_SSE, anthropicErrorBody } from "./envelope.ts";
import {
  MessageBlocks,
  stopReasonOf,
  usageOf,
  type AnthropicUsage,
  type ContentBlock,
  type StopReason,
} from "./reply.ts";
import { anthropicModel, checkRequestText, messagesJobOf, parseMessagesRequest } from "./request.ts";
import type { MessagesRequest } from "./schema.ts";

export const MESSAGES_ROUTE = "/v1/messages";

interface ParsedMessages extends ParsedChat {
  req: MessagesRequest;
}

const MESSAGES_FAMILY: ChatFamily<ParsedMessages> = {
  route: MESSAGES_ROUTE,
  framing: ANTHROPIC_SSE,
  errorBody: anthropicErrorBody,
  parse: async (ctx, body) => {
    const req = parseMessagesRequest(body);
    return { req, model: await anthropicModel(ctx.registry, req.model), stream: req.stream === true };
  },
  job: (_ctx, { req, model }, qos) => {
    checkRequestText(model, req);
    return messagesJobOf(req, qos);
  },
  reply: (ctx, _parsed, p) => messageReply(ctx, p),
};

export function createMessage(ctx: ServerContext, request: Request): Promise<Response> {
  return runChat(ctx, request, MESSAGES_FAMILY);
}

/** Anthropic's message: content blocks as they open, grow and close, then the stop and usage. */
function messageReply(ctx: ServerContext, p: PreparedChat): ChatReply {
  const id = `msg_superfluid_${ctx.nextId()}`;
  const blocks = new MessageBlocks(() => `toolu_${ctx.nextId()}`, p.request.grammar !== undefined);
  let cachedAtAdmission = 0;
  /** The message object, before its content and stop are known (message_start) or with them. */
  const messageOf = (
    content: ContentBlock[],
    stop: StopReason | null,
    stopSequence: string | null,
    usage: AnthropicUsage,
  ) => ({
    id,
    type: "message",
    role: "assistant",
    model: p.model.id,
    content,
    stop_reason: stop,
    stop_sequence: stopSequence,
    usage,
  });
  return {
    id,
    renderer: {
      admitted: (cached) => void (cachedAtAdmission = cached),
      open: () => [
        {
          data: {
            type: "message_start",
            message: messageOf([], null, null, usageOf(p.prompt.length, cachedAtAdmission, p.pins, 0)),
          },
          event: "message_start",
        },
        { data: { type: "ping" }, event: "ping" },
      ],
      delta: (_index, d) => blocks.push(d),
      close: (_index, end) => [
        ...blocks.finish(),
        {
          data: {
            type: "message_delta",
            delta: { stop_reason: stopReasonOf(end), stop_sequence: end.stopSequence ?? null },
            usage: usageOf(p.prompt.length, end.cachedTokens, p.pins, end.completionTokens),
          },
          event: "message_delta",
        },
        { data: { type: "message_stop" }, event: "message_stop" },
      ],
      whole: ([end]) => {
        blocks.finish();
        const usage = usageOf(p.prompt.length, end!.cachedTokens, p.pins, end!.completionTokens);
        return {
          body: messageOf(blocks.content, stopReasonOf(end!), end!.stopSequence ?? null, usage),
          headers: { "x-superfluid-warm": String(end!.cachedTokens) },
        };
      },
    },
  };
}
