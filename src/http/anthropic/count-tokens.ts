// POST /v1/messages/count_tokens (docs/api/anthropic.md#count-tokens): the
// prompt a Messages request with these messages, system, tools and thinking
// switch would run, counted exactly (rendered by the model's template and
// tokenized, as a real request is).
import { renderChatPrompt } from "../../pipeline/chat-job.ts";
import { invalidRequest } from "../../pipeline/request-error.ts";
import { readJsonBody } from "../body.ts";
import { checkChatText, checkListLengths } from "../chat-limits.ts";
import type { ServerContext } from "../server-context.ts";
import { parseWith } from "../validate.ts";
import { anthropicModel, promptJobOf } from "./request.ts";
import { countTokensRequestSchema } from "./schema.ts";

export async function countTokens(ctx: ServerContext, request: Request): Promise<{ input_tokens: number }> {
  const body = await readJsonBody(request);
  checkListLengths(ctx.registry, body);
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw invalidRequest("request body must be a JSON object");
  for (const field of ["model", "messages"]) {
    if ((body as Record<string, unknown>)[field] === undefined) throw invalidRequest(`${field}: Field required`, field);
  }
  const req = parseWith(countTokensRequestSchema, body);
  const model = anthropicModel(ctx.registry, req.model);
  checkChatText(model, [
    ["messages", req.messages, false],
    ["system", req.system, false],
    ["tools", req.tools, true],
  ]);
  const { job } = promptJobOf(req);
  const { tokens } = await renderChatPrompt(model, job);
  return { input_tokens: tokens.length };
}
