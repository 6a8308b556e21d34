// The prompt thread itself (see ./prompt-thread.ts): a vocabulary-only load of
// the model, its chat templates, and one answer per request, in order. Every
// failure of a request is its answer; only `close` ends the thread.
import { ChatTemplate, renderToTokens, TemplateError, tokenizeText, type ControlTokens } from "../codec/index.ts";
import { LlamaModel } from "../engine/model.ts";
import { controlTokensOf } from "./control-vocabulary.ts";
import type { PromptThreadOptions, ThreadReply, ThreadRequest } from "./prompt-thread.ts";

declare const self: Worker;

/** Used when a GGUF carries no chat template: plain "role: content" turns. */
const FALLBACK_TEMPLATE =
  "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}";

interface Loaded {
  model: LlamaModel;
  controls: ControlTokens;
  chat: ChatTemplate;
  tool: ChatTemplate;
}

function load(opts: PromptThreadOptions): Loaded {
  const model = LlamaModel.load(opts.model, { vocabOnly: true });
  try {
    const text = (id: number | undefined) =>
      id === undefined ? undefined : Buffer.from(model.tokenBytes(id, true)).toString("utf8");
    const templateOpts = { bosToken: text(opts.bos), eosToken: text(opts.eos), loadedAt: opts.loadedAt };
    const chat = opts.chatTemplate
      ? new ChatTemplate(opts.chatTemplate, templateOpts)
      : new ChatTemplate(FALLBACK_TEMPLATE, {});
    const tool = opts.toolTemplate ? new ChatTemplate(opts.toolTemplate, templateOpts) : chat;
    return { model, controls: controlTokensOf(model), chat, tool };
  } catch (err) {
    model.free();
    throw err;
  }
}

function reply(message: ThreadReply): void {
  if (message.type === "done") self.postMessage(message, [message.tokens.buffer]);
  else self.postMessage(message);
}

function answer(loaded: Loaded, request: Extract<ThreadRequest, { type: "render" | "tokenize" }>): void {
  try {
    if (request.type === "render") {
      const template = request.tools ? loaded.tool : loaded.chat;
      const rendered = renderToTokens(template, loaded.model, loaded.controls, request.input, {
        addBos: request.addBos,
        bosToken: request.bosToken,
        ...(request.reasoning ? { reasoning: request.reasoning } : {}),
      });
      reply({
        type: "done",
        id: request.id,
        tokens: Int32Array.from(rendered.tokens),
        endsInReasoning: rendered.endsInReasoning,
      });
    } else {
      const tokens = request.parseSpecial
        ? tokenizeText(loaded.model, loaded.controls, request.text, { addSpecial: request.addSpecial })
        : loaded.model.tokenize(request.text, { addSpecial: request.addSpecial, parseSpecial: false });
      reply({ type: "done", id: request.id, tokens: Int32Array.from(tokens), endsInReasoning: false });
    }
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    reply({
      type: "error",
      id: request.id,
      message,
      ...(err instanceof TemplateError ? { templateKind: err.kind } : {}),
    });
  }
}

let loaded: Loaded | undefined;

self.onmessage = (event: MessageEvent<ThreadRequest>) => {
  const request = event.data;
  switch (request.type) {
    case "init":
      try {
        loaded = load(request);
        reply({ type: "ready" });
      } catch (err) {
        reply({ type: "failed", message: err instanceof Error ? err.message : String(err) });
      }
      return;
    case "close":
      loaded?.model.free();
      loaded = undefined;
      process.exit(0);
      return;
    default:
      if (loaded) answer(loaded, request);
      else reply({ type: "error", id: request.id, message: "the prompt thread has no model loaded" });
  }
};
