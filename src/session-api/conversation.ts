// A session's events read as a chat conversation (docs/api/sessions.md#how-messages-become-tokens):
// the messages the chat template renders, the tools its system turn declared,
// whether an assistant turn is still open, and the token stream (every span
// in order) that is the model's input. New input is rendered as the tail the
// template adds to the conversation so far, so the stored tokens, the model's
// own generated ones included, are never re-tokenized: the prefix cache
// serves all of them.
import type { ChatMessage, ToolCall } from "../codec/index.ts";
import type { ServedModel } from "../daemon/served-model.ts";
import { commonPrefix } from "../engine/token-prefix.ts";
import { renderChatPrompt, toolSchema, type ChatJob, type ChatTool } from "../pipeline/chat-job.ts";
import { continuedPrompt } from "../pipeline/continued-prompt.ts";
import type { ToolChoice } from "../pipeline/tool-plan.ts";
import { CHANNEL, FINISH, type SessionEvent } from "../session-log/events.ts";

export const ROLE_NAMES = ["system", "user", "assistant", "tool"] as const;

export interface Conversation {
  messages: ChatMessage[];
  /** The tools the session's system turn declared (AppendSystem), as sent. */
  tools: string[];
  /** The model's input so far: every record's span, in order. */
  stream: number[];
  /**
   * An assistant turn the model has not ended (cut by max_tokens, cancel or an error), and whether it stopped inside
   * reasoning.
   */
  openTurn: { inReasoning: boolean } | null;
  /** Tool calls not answered yet: [call_id, name, arguments]. */
  openCalls: [number, string, string][];
  /** The QoS class the session asked for last (SetQos). */
  qos?: number;
  /**
   * The last message is an assistant turn the model generated: the stream ends where it stopped, without the turn's
   * close.
   */
  generatedTail: boolean;
}

/** The tool call id a template sees for the ToolUse event with this id. */
export function callIdOf(eventId: number): string {
  return `call_${eventId}`;
}

/** Reads a session's events (its whole history, shared events of a fork included). */
export function conversationOf(events: SessionEvent[]): Conversation {
  const c: Conversation = { messages: [], tools: [], stream: [], openTurn: null, openCalls: [], generatedTail: false };
  let assistant: ChatMessage | null = null;
  const answered = new Set<number>();
  const calls: [number, string, string][] = [];
  for (const { event_id: id, body } of events) {
    if ("Message" in body) {
      const m = body.Message;
      c.stream.push(...m.span);
      c.messages.push({ role: ROLE_NAMES[m.role] ?? "user", content: m.text });
      if (m.tools) c.tools = m.tools;
      assistant = null;
      c.openTurn = null;
      c.generatedTail = false;
    } else if ("GenerationPrompt" in body) {
      c.stream.push(...body.GenerationPrompt.span);
      assistant = { role: "assistant", content: "" };
      c.messages.push(assistant);
      c.openTurn = { inReasoning: false };
      c.generatedTail = true;
    } else if ("Generated" in body) {
      const g = body.Generated;
      c.stream.push(...g.span);
      if (!assistant) {
        assistant = { role: "assistant", content: "" };
        c.messages.push(assistant);
        c.generatedTail = true;
      }
      if (g.channel === CHANNEL.reasoning) assistant.reasoning_content = (assistant.reasoning_content ?? "") + g.text;
      else if (g.channel !== CHANNEL.toolCall) assistant.content = (assistant.content ?? "") + g.text;
      const closed = g.finish === FINISH.endOfTurn || g.finish === FINISH.grammar;
      c.openTurn = closed
        ? null
        : {
            inReasoning: g.channel === CHANNEL.reasoning || (g.span.length === 0 && (c.openTurn?.inReasoning ?? false)),
          };
    } else if ("ToolUse" in body) {
      const call: ToolCall = {
        id: callIdOf(id),
        type: "function",
        function: { name: body.ToolUse.name, arguments: body.ToolUse.arguments },
      };
      if (!assistant) {
        assistant = { role: "assistant", content: "" };
        c.messages.push(assistant);
      }
      (assistant.tool_calls ??= []).push(call);
      calls.push([id, body.ToolUse.name, body.ToolUse.arguments]);
    } else if ("ToolResult" in body) {
      const r = body.ToolResult;
      c.stream.push(...r.span);
      c.messages.push({ role: "tool", tool_call_id: callIdOf(r.call_id), content: r.content });
      answered.add(r.call_id);
      assistant = null;
      c.openTurn = null;
      c.generatedTail = false;
    } else if ("Appended" in body) {
      c.stream.push(...body.Appended.span);
    } else if ("QosSet" in body) {
      c.qos = body.QosSet.class;
    }
  }
  c.openCalls = calls.filter(([id]) => !answered.has(id));
  return c;
}

/** A declared tool (JSON text): an OpenAI function tool, a bare function, or an Anthropic tool with input_schema. */
export function chatToolOf(json: string, field: string): ChatTool {
  let tool: Record<string, unknown>;
  try {
    tool = JSON.parse(json) as Record<string, unknown>;
  } catch {
    throw new Error(`${field}: not JSON`);
  }
  if (typeof tool !== "object" || tool === null || Array.isArray(tool))
    throw new Error(`${field}: a tool is a JSON object`);
  const fn = (
    tool.type === "function" && typeof tool.function === "object" && tool.function !== null ? tool.function : tool
  ) as Record<string, unknown>;
  if (typeof fn.name !== "string" || fn.name === "") throw new Error(`${field}: a tool needs a name`);
  const rawSchema = fn.parameters ?? fn.input_schema;
  const parameters = toolSchema(rawSchema, `${field}.parameters`);
  const template = {
    type: "function",
    function: {
      name: fn.name,
      ...(typeof fn.description === "string" ? { description: fn.description } : {}),
      parameters: rawSchema ?? { type: "object", properties: {} },
    },
  };
  return { name: fn.name, parameters, template };
}

/** The chat job the session's conversation renders as (sampling and caps are the generation's business). */
export function renderJob(messages: ChatMessage[], tools: ChatTool[], toolChoice: ToolChoice = "auto"): ChatJob {
  return {
    messages,
    tools,
    toolChoice,
    parallelToolCalls: true,
    sampling: {},
    ignoreEos: false,
    stop: [],
    n: 1,
    templateKwargs: {},
    durable: true,
  };
}

/** What a new turn adds to the stream, and whether the model's reply starts inside reasoning. */
export interface RenderedTail {
  span: number[];
  startsInReasoning: boolean;
  /**
   * The template's render of the whole conversation with the added messages (the next tail's `known` when it has no
   * generation prompt).
   */
  rendered: number[];
}

/** Renders a later tail can start from instead of rendering the conversation again. */
export interface TailHints {
  /** The template's render of the conversation's messages, without a generation prompt. */
  known?: number[];
  /** The key its history renders were remembered under after its last generation (rememberHistory). */
  historyKey?: string;
}

/**
 * The tokens the template puts after the conversation `c` for `added`
 * messages (none: only the generation prompt), with the generation prompt
 * when `addGenerationPrompt`. After a generated assistant turn, the turn's
 * close (its end token and separator, never kept by the engine) comes first.
 * A template that renders history differently once more follows gets the
 * tail after the longest common prefix: served, but not append-exact.
 */
export async function renderTail(
  model: ServedModel,
  c: Conversation,
  tools: ChatTool[],
  added: ChatMessage[],
  addGenerationPrompt: boolean,
  hints: TailHints = {},
): Promise<RenderedTail> {
  const job = renderJob([...c.messages, ...added], tools);
  if (c.messages.length === 0) {
    const whole = await renderChatPrompt(model, job, undefined, addGenerationPrompt);
    return { span: whole.tokens, startsInReasoning: whole.startsInReasoning, rendered: whole.tokens };
  }
  if (c.generatedTail) {
    const continued = await continuedPrompt(
      model,
      job,
      c.messages.length,
      c.stream,
      hints.historyKey,
      addGenerationPrompt,
    );
    if (continued)
      return {
        span: continued.tokens.slice(c.stream.length),
        startsInReasoning: continued.startsInReasoning,
        rendered: continued.rendered,
      };
  }
  const [before, whole] = await Promise.all([
    hints.known ?? renderChatPrompt(model, renderJob(c.messages, tools), undefined, false).then((r) => r.tokens),
    renderChatPrompt(model, job, undefined, addGenerationPrompt),
  ]);
  return {
    span: whole.tokens.slice(commonPrefix(before, whole.tokens)),
    startsInReasoning: whole.startsInReasoning,
    rendered: whole.tokens,
  };
}
