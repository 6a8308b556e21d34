// OpenAI chat messages to prompt tokens through the model's own template,
// rendered and tokenized on the model's prompt thread (src/daemon/prompt-thread.ts).
import { TemplateError, type ChatMessage } from "../../codec/index.ts";
import type { ServedModel } from "../../daemon/served-model.ts";
import { ApiError, badRequest } from "../errors.ts";
import type { ChatMessageInput, ChatRequest } from "./chat-schema.ts";

const MEDIA_KIND: Record<string, string> = {
  image_url: "images",
  image: "images",
  input_image: "images",
  input_audio: "audio",
  audio: "audio",
  file: "files",
};

/** api.md 2.3: on llama.cpp any image or audio part is refused. */
function refuseMedia(model: ServedModel, messages: ChatMessageInput[]): void {
  messages.forEach((m, i) => {
    if (!Array.isArray(m.content)) return;
    m.content.forEach((part, j) => {
      const kind = MEDIA_KIND[part.type];
      if (!kind) return;
      throw new ApiError(
        400,
        `model '${model.id}' on runtime llamacpp does not accept ${kind}: the llamacpp runtime has no media path`,
        "unsupported_input",
        `messages[${i}].content[${j}]`,
      );
    });
  });
}

/** Template variables: top-level shorthands first, chat_template_kwargs wins (api.md 5.6). */
export function templateKwargs(req: ChatRequest): Record<string, unknown> {
  const kwargs: Record<string, unknown> = {};
  if (req.enable_thinking !== undefined && req.enable_thinking !== null) kwargs.enable_thinking = req.enable_thinking;
  if (req.reasoning_effort) kwargs.reasoning_effort = req.reasoning_effort;
  return { ...kwargs, ...(req.chat_template_kwargs ?? {}) };
}

function toTemplateMessage(m: ChatMessageInput): ChatMessage {
  const content = Array.isArray(m.content)
    ? m.content.map((p) => (p.type === "text" ? (p as { text: string }).text : "")).join("")
    : (m.content ?? null);
  const toolCalls = m.tool_calls?.map((c) => ({ ...(c.id ? { id: c.id } : {}), type: c.type ?? "function", function: c.function }));
  return {
    role: m.role === "developer" ? "system" : m.role,
    content,
    ...(m.name ? { name: m.name } : {}),
    ...(toolCalls ? { tool_calls: toolCalls } : {}),
    ...(m.tool_call_id ? { tool_call_id: m.tool_call_id } : {}),
    ...((m.reasoning_content ?? m.reasoning) ? { reasoning_content: (m.reasoning_content ?? m.reasoning)! } : {}),
  };
}

export interface ChatPrompt {
  tokens: number[];
  /** The generation prompt left a reasoning block open: output starts as reasoning. */
  startsInReasoning: boolean;
}

export async function buildChatPrompt(model: ServedModel, req: ChatRequest): Promise<ChatPrompt> {
  refuseMedia(model, req.messages);
  const useTools = (req.tools?.length ?? 0) > 0 && req.tool_choice !== "none";
  try {
    const rendered = await model.prompts.render({
      tools: useTools,
      input: {
        messages: req.messages.map(toTemplateMessage),
        ...(useTools ? { tools: req.tools! } : {}),
        addGenerationPrompt: true,
        kwargs: templateKwargs(req),
      },
      addBos: model.tokenizer.vocabInfo.addBos,
      bosToken: model.tokenizer.vocabInfo.bos,
    });
    return { tokens: Array.from(rendered.tokens), startsInReasoning: rendered.endsInReasoning };
  } catch (err) {
    if (err instanceof TemplateError) throw badRequest(`the chat template refused this request: ${err.message}`);
    throw err;
  }
}
