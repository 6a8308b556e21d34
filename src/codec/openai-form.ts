// Chat messages as OpenAI clients send them, and the form Hugging Face chat
// templates are written for (the form transformers renders, which the
// template corpus's reference renders use): content parts joined into one
// string, an assistant turn's null content as "", tool-call `arguments` as
// an object rather than the JSON string OpenAI sends, and no null-valued
// optional fields (`'tool_calls' in message` must not see a None).
import { TemplateError } from "./template-error.ts";

export interface TextPart {
  type: "text";
  text: string;
}

export interface ToolCall {
  id?: string | null;
  type?: string | null;
  /** `arguments`: a JSON string as OpenAI sends it, or an object. */
  function: { name: string; arguments: string | Record<string, unknown> };
}

export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool" | (string & {});
  content?: string | null | TextPart[];
  tool_calls?: ToolCall[] | null;
  tool_call_id?: string | null;
  name?: string | null;
  reasoning_content?: string | null;
}

/** A message in the form templates expect; `content` is null only where the client left it out of a non-assistant turn. */
export type ReferenceMessage = Omit<ChatMessage, "content"> & { content: string | null };

export function toReferenceForm(m: ChatMessage): ReferenceMessage {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(m)) {
    if (value !== null && value !== undefined) out[key] = value;
  }
  let content = contentText(m.content);
  if (content === null && m.role === "assistant") content = "";
  out.content = content;
  if (m.tool_calls) out.tool_calls = m.tool_calls.map(argumentsAsObject);
  return out as ReferenceMessage;
}

/** A JSON-object string becomes the object; anything else (not JSON, not an object) is left as sent. */
function argumentsAsObject(call: ToolCall): ToolCall {
  const args = call.function?.arguments;
  if (typeof args !== "string") return call;
  const parsed = tryParseObject(args);
  return parsed ? { ...call, function: { ...call.function, arguments: parsed } } : call;
}

/** OpenAI content parts become one string, parts joined by newlines (as llama.cpp and vLLM do). */
function contentText(content: ChatMessage["content"]): string | null {
  if (content === undefined || content === null) return null;
  if (typeof content === "string") return content;
  return content
    .map((part) => {
      if (part.type !== "text") throw new TemplateError(`unsupported content part type "${part.type}"`, "render");
      return part.text;
    })
    .join("\n");
}

function tryParseObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
