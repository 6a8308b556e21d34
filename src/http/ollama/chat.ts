// POST /api/chat (docs/api/ollama.md#chat): the request becomes the neutral
// chat job (request.ts), its deltas Ollama's records (reply.ts), run by
// chat-runner.ts. Empty messages preload (the model is always loaded: one
// `load` record).
import { readJsonBody } from "../body.ts";
import { checkChatText } from "../chat-limits.ts";
import { runChat, type ChatFamily, type ParsedChat } from "../chat-runner.ts";
import type { ServerContext } from "../server-context.ts";
import { CURL_BODIES } from "./envelope.ts";
import { loadedOllamaModel } from "./model-name.ts";
import { OLLAMA_WIRE, ollamaRenderer, preloaded } from "./reply.ts";
import { chatJobOf } from "./request.ts";
import { chatSchema, parseOllama, type ChatRequest } from "./schema.ts";

export const CHAT_ROUTE = "/api/chat";

interface ParsedOllamaChat extends ParsedChat {
  req: ChatRequest;
}

const OLLAMA_CHAT_FAMILY: ChatFamily<ParsedOllamaChat> = {
  ...OLLAMA_WIRE,
  route: CHAT_ROUTE,
  readBody: (request) => readJsonBody(request, CURL_BODIES),
  parse: async (ctx, body) => {
    const req = parseOllama(chatSchema, body);
    const model = await loadedOllamaModel(ctx.registry, req.model);
    const stream = req.stream ?? true;
    if (!req.messages || req.messages.length === 0) return preloaded({ kind: "chat", name: req.model }, stream);
    return { req, model, stream };
  },
  job: (_ctx, { req, model }, qos) => {
    checkChatText(model, [
      ["messages", req.messages, false],
      ["tools", req.tools, true],
    ]);
    return chatJobOf(model, req, qos);
  },
  reply: (_ctx, { req, model }, p, timer) => ({
    renderer: ollamaRenderer({
      kind: "chat",
      name: req.model,
      model,
      promptTokens: p.prompt.length,
      logprobs: req.logprobs === true,
      timer,
    }),
  }),
};

export function chat(ctx: ServerContext, request: Request): Promise<Response> {
  return runChat(ctx, request, OLLAMA_CHAT_FAMILY);
}
