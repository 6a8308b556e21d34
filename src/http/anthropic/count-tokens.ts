// POST /v1/messages/count_tokens (docs/api/anthropic.md#count-tokens): the
// prompt a Messages request with these messages, system, tools and thinking
// switch would run, counted exactly (rendered by the model's template and
// tokenized, as a real request is).
import { renderChatPrompt } from "../../pipeline/chat-job.ts";
import { readJsonBody } from "../body.ts";
import { checkListLengths } from "../chat-limits.ts";
import type { ServerContext } from "../server-context.ts";
import { anthropicModel, checkRequestText, parseCountTokensRequest, promptJobOf } from "./request.ts";

export async function countTokens(ctx: ServerContext, request: Request): Promise<{ input_tokens: number }> {
  const body = await readJsonBody(request);
  checkListLengths(ctx.registry, body);
  const req = parseCountTokensRequest(body);
  const model = await anthropicModel(ctx.registry, req.model);
  checkRequestText(model, req);
  const { job } = promptJobOf(req);
  const { tokens } = await renderChatPrompt(model, job);
  return { input_tokens: tokens.length };
}
