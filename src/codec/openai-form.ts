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

/**
 * A message in the form templates expect; `content` is null only where the client left it out of a non-assistant turn.
 */
export type ReferenceMessage = Omit<ChatMessage, "content"> & { content: string | null };

export function toReferenceForm(m: ChatMessage, argumentsAs: "object" | "string" = "object"): ReferenceMessage {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(m)) {
    if (value !== null && value !== undefined) out[key] = value;
  }
  let content = contentText(m.content);
  if (content === null && m.role === "assistant") content = "";
  out.content = content;
  if (m.tool_calls) out.tool_calls = m.tool_calls.map(argumentsAs === "object" ? argumentsAsObject : argumentsAsString);
  return out as ReferenceMessage;
}

/** A JSON-object string becomes the object; anything else (not JSON, not an object) is left as sent. */
function argumentsAsObject(call: ToolCall): ToolCall {
  const args = call.function?.arguments;
  if (typeof args !== "string") return call;
  const parsed = tryParseObject(args);
  return parsed ? { ...call, function: { ...call.function, arguments: parsed } } : call;
}

/** Arguments as the JSON text OpenAI clients send (an object given is written as JSON). */
function argumentsAsString(call: ToolCall): ToolCall {
  const args = call.function?.arguments;
  if (args === undefined || typeof args === "string") return call;
  return { ...call, function: { ...call.function, arguments: JSON.stringify(args) } };
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
    return value !== null && typeof value === "object" && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

// --- Optional fields a template may read unguarded ---------------------------
//
// OpenAI makes a tool's and a parameter's `description`, a tool's
// `parameters` and a message's `name` optional, and clients (LangChain, the
// AI SDK) leave them out, but some templates concatenate them unguarded
// (Hermes 3: `" - " + tool.description`), which Jinja2 refuses. A render that
// fails is tried once more with each absent optional field set to its empty
// value (./template.ts): what renders today is unchanged.

type Fields = Record<string, unknown>;
const isFields = (x: unknown): x is Fields => x !== null && typeof x === "object" && !Array.isArray(x);

/** The function of a tool in OpenAI's nested form (`{type, function: {...}}`) or a flat one. */
function filledFunction(fn: Fields): Fields {
  // A description the client left out goes where OpenAI's form has it, after the name.
  const out: Fields =
    fn.description === undefined ? { ...("name" in fn ? { name: fn.name } : {}), description: "", ...fn } : { ...fn };
  const params: Fields = isFields(out.parameters) ? { ...out.parameters } : { type: "object" };
  if (!isFields(params.properties)) params.properties = {};
  else {
    params.properties = Object.fromEntries(
      Object.entries(params.properties).map(([name, p]) => [
        name,
        isFields(p) && p.description === undefined ? { ...p, description: "" } : p,
      ]),
    );
  }
  out.parameters = params;
  return out;
}

/**
 * The messages and tools with every absent optional field of the OpenAI form
 * set to its empty value; undefined when none was absent (a second render
 * would fail the same way).
 */
export function withOptionalFieldsFilled<M extends ChatMessage, T>(
  messages: M[],
  tools: T[] | null | undefined,
): { messages: M[]; tools: T[] | undefined } | undefined {
  const filledTools = tools?.map((t) => {
    if (!isFields(t)) return t;
    return (isFields(t.function) ? { ...t, function: filledFunction(t.function) } : filledFunction(t)) as T;
  });
  const filledMessages = messages.map((m) => (m.name === undefined || m.name === null ? { ...m, name: "" } : m));
  const changed = JSON.stringify([filledMessages, filledTools ?? null]) !== JSON.stringify([messages, tools ?? null]);
  return changed ? { messages: filledMessages, tools: filledTools } : undefined;
}
