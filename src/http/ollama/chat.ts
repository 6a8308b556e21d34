// POST /api/chat (docs/api/ollama.md#chat): the request becomes the neutral
// chat job (request.ts), its deltas Ollama's records (reply.ts). Empty
// messages preload (the model is always loaded: one `load` record).
import { chatChoice, prepareChat, startChat } from "../../pipeline/chat-job.ts";
import { RequestTimer } from "../access-log.ts";
import { readJsonBody } from "../body.ts";
import { checkChatText, checkListLengths } from "../chat-limits.ts";
import { checkBatchInvariant, requestQos } from "../qos.ts";
import type { ServerContext } from "../server-context.ts";
import { CURL_BODIES } from "./envelope.ts";
import { loadedOllamaModel } from "./model-name.ts";
import { applyWindow } from "./options.ts";
import { ollamaReply, preloaded } from "./reply.ts";
import { chatJobOf } from "./request.ts";
import { chatSchema, parseOllama } from "./schema.ts";

export const CHAT_ROUTE = "/api/chat";

export async function chat(ctx: ServerContext, request: Request): Promise<Response> {
  const timer = new RequestTimer();
  const body = await readJsonBody(request, CURL_BODIES);
  checkListLengths(ctx.registry, body);
  const req = parseOllama(chatSchema, body);
  const model = await loadedOllamaModel(ctx.registry, req.model);
  const stream = req.stream ?? true;
  if (!req.messages || req.messages.length === 0) return preloaded({ kind: "chat", name: req.model }, stream);
  const qos = requestQos(ctx.qos, request);
  checkBatchInvariant(ctx.qos, request);
  checkChatText(model, [
    ["messages", req.messages, false],
    ["tools", req.tools, true],
  ]);
  const { job, options } = chatJobOf(model, req, qos);
  const p = await prepareChat(ctx, model, job);
  applyWindow(options, p.prompt.length, p.request);
  const [generation] = await startChat(p, [], 1);
  return ollamaReply(
    ctx,
    {
      kind: "chat",
      route: CHAT_ROUTE,
      name: req.model,
      model,
      promptTokens: p.prompt.length,
      logprobs: req.logprobs === true,
      timer,
      generation: generation!,
      deltas: (onAdmitted) => chatChoice(p, generation!, onAdmitted),
    },
    stream,
    request.signal,
  );
}
