// A Messages request as the neutral chat job (src/pipeline/chat-job.ts):
// system text and content blocks in the chat template's shape, tools and
// tool_choice as the job's, thinking as the template's switch, and the
// request's cache_control breakpoints as places in it
// (docs/api/anthropic.md#request, #content-blocks, #prompt-caching).
import type { ChatMessage, ToolCall } from "../../codec/index.ts";
import type { ModelRegistry } from "../../daemon/registry.ts";
import type { ServedModel } from "../../daemon/served-model.ts";
import type { QosClass } from "../../engine/scheduler.ts";
import {
  toolSchema,
  type ChatJob,
  type ChatTool,
  type Constraint,
  type PrefixBreakpoint,
  type ToolChoice,
} from "../../pipeline/chat-job.ts";
import { invalidRequest, RequestError, unsupportedMedia } from "../../daemon/request-error.ts";
import { checkArrayLength, checkChatText } from "../chat-limits.ts";
import { parseWith } from "../validate.ts";
import {
  countTokensRequestSchema,
  messagesRequestSchema,
  type BlockInput,
  type CountTokensRequest,
  type MessageInput,
  type MessagesRequest,
  type ToolInput,
} from "./schema.ts";

/**
 * Claude Code's first system block: `x-anthropic-billing-header: cc_version=...`,
 * different on every prompt. It is metadata for Anthropic's billing, not
 * instructions, and rendering it would put a changing line at the head of
 * every prompt, so no prefix would ever be reused: it is left out.
 */
const BILLING_HEADER = "x-anthropic-billing-header:";

/** Anthropic allows this many cache_control breakpoints per request. */
const MAX_BREAKPOINTS = 4;

const TTL_MS: Record<string, number> = { "5m": 5 * 60_000, "1h": 60 * 60_000 };

/** A JSON object with these fields present, refused in Anthropic's words before validation walks it. */
function requireFields(body: unknown, fields: string[]): void {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw invalidRequest("request body must be a JSON object");
  for (const field of fields) {
    if ((body as Record<string, unknown>)[field] === undefined) throw invalidRequest(`${field}: Field required`, field);
  }
}

/** Stop sequences a request may carry (the schema's bound, checked before validation walks them). */
const MAX_STOP_SEQUENCES = 64;

export function parseMessagesRequest(body: unknown): MessagesRequest {
  requireFields(body, ["model", "max_tokens", "messages"]);
  checkArrayLength((body as Record<string, unknown>).stop_sequences, "stop_sequences", MAX_STOP_SEQUENCES);
  return parseWith(messagesRequestSchema, body);
}

export function parseCountTokensRequest(body: unknown): CountTokensRequest {
  requireFields(body, ["model", "messages"]);
  return parseWith(countTokensRequestSchema, body);
}

/** Messages, system and tools together must fit the window (src/http/chat-limits.ts). */
export function checkRequestText(model: ServedModel, req: CountTokensRequest): void {
  checkChatText(model, [
    ["messages", req.messages, false],
    ["system", req.system, false],
    ["tools", req.tools, true],
  ]);
}

/**
 * The model a request names (loaded first when it is known but not loaded): a served id or an --alias; anything else is
 * a 404 that says how to map it.
 */
export async function anthropicModel(registry: ModelRegistry, name: string): Promise<ServedModel> {
  const model = await registry.resolve(name);
  if (model) return model;
  const served = registry.all().map((m) => m.id);
  throw new RequestError(
    404,
    `model: ${name} is not served here (served: ${served.join(", ")}). Map the names a client sends with --alias NAME=ID, e.g. --alias 'claude-*=${served[0] ?? "ID"}'`,
    "model_not_found",
    "model",
  );
}

/** The request's breakpoints in Anthropic's order (tools, system, messages), checked as Anthropic checks them. */
class Breakpoints {
  readonly list: PrefixBreakpoint[] = [];
  private sawShort = false;

  add(cacheControl: unknown, field: string, at: () => Omit<PrefixBreakpoint, "ttlMs">): void {
    if (cacheControl === undefined || cacheControl === null) return;
    const { type, ttl } = cacheControl as { type: string; ttl?: string | null };
    if (type !== "ephemeral")
      throw invalidRequest(
        `${field}.cache_control.type: must be "ephemeral", got '${type}'`,
        `${field}.cache_control.type`,
      );
    const ttlName = ttl ?? "5m";
    const ttlMs = TTL_MS[ttlName];
    if (ttlMs === undefined)
      throw invalidRequest(
        `${field}.cache_control.ttl: must be "5m" or "1h", got '${ttlName}'`,
        `${field}.cache_control.ttl`,
      );
    if (ttlName === "1h" && this.sawShort) {
      throw invalidRequest(
        `${field}.cache_control: a ttl="1h" cache_control block must not come after a ttl="5m" one`,
        `${field}.cache_control`,
      );
    }
    if (ttlName === "5m") this.sawShort = true;
    if (this.list.length === MAX_BREAKPOINTS) {
      throw invalidRequest(
        `A maximum of ${MAX_BREAKPOINTS} blocks with cache_control may be provided. Found ${MAX_BREAKPOINTS + 1} or more.`,
        field,
      );
    }
    this.list.push({ ...at(), ttlMs });
  }
}

/** Text blocks (a string is one block) as one text; the field names them for errors. */
function textOf(content: unknown, field: string): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) throw invalidRequest(`${field}: must be a string or an array of text blocks`, field);
  return content
    .map((b, i) => {
      const block = b as { type?: unknown; text?: unknown };
      if (block?.type === "image") throw unsupportedMedia("images", `${field}[${i}]`);
      if (block?.type !== "text") return undefined;
      if (typeof block.text !== "string")
        throw invalidRequest(`${field}[${i}].text: must be a string`, `${field}[${i}].text`);
      return block.text;
    })
    .filter((t): t is string => t !== undefined)
    .join("\n");
}

/**
 * Declared tools as the job's (client tools only: Anthropic's server tools
 * run on Anthropic's side). A deferred tool (`defer_loading`) is not listed
 * to the model; it becomes callable once a tool result references it
 * (Conversation.toolResultText).
 */
function toolsOf(
  tools: ToolInput[],
  breakpoints: Breakpoints,
): { listed: ChatTool[]; deferred: Map<string, ChatTool> } {
  const listed: ChatTool[] = [];
  const deferred = new Map<string, ChatTool>();
  tools.forEach((t, i) => {
    if (t.type !== undefined && t.type !== null && t.type !== "custom") return;
    const parameters = toolSchema(t.input_schema, `tools[${i}].input_schema`);
    const tool: ChatTool = {
      name: t.name,
      parameters,
      template: {
        type: "function",
        function: { name: t.name, ...(t.description ? { description: t.description } : {}), parameters },
      },
    };
    if (t.defer_loading === true) deferred.set(t.name, { ...tool, unlisted: true });
    else listed.push(tool);
    const upTo = listed.slice();
    breakpoints.add(t.cache_control, `tools[${i}]`, () => ({ messages: [], tools: upTo }));
  });
  return { listed, deferred };
}

function toolChoiceOf(req: CountTokensRequest, tools: ChatTool[]): ToolChoice {
  const choice = req.tool_choice;
  if (!choice || choice.type === "auto") return "auto";
  if (choice.type === "none") return "none";
  if (choice.type === "any") return "required";
  if (typeof choice.name !== "string")
    throw invalidRequest('tool_choice.name: required when tool_choice.type is "tool"', "tool_choice.name");
  if (!tools.some((t) => t.name === choice.name))
    throw invalidRequest(
      `tool_choice names the tool '${choice.name}', which is not declared in tools`,
      "tool_choice.name",
    );
  return { name: choice.name };
}

/**
 * Structured output: `output_config.format` of type json_schema (or the
 * beta's top-level `output_format`) holds the reply to the schema with the
 * grammar; a keyword the compiler cannot enforce is refused by name.
 */
function constraintOf(req: CountTokensRequest): Constraint | undefined {
  const [format, field] = req.output_config?.format
    ? [req.output_config.format, "output_config.format"]
    : [req.output_format, "output_format"];
  if (!format) return undefined;
  if (format.type !== "json_schema")
    throw invalidRequest(`${field}.type: must be "json_schema", got '${format.type}'`, `${field}.type`);
  if (typeof format.schema !== "object" || format.schema === null)
    throw invalidRequest(`${field}.schema: a JSON Schema object is required`, `${field}.schema`);
  return { type: "json_schema", schema: format.schema, strict: true, field: `${field}.schema` };
}

/** thinking: enabled and disabled set the template's switch; adaptive leaves the template's default. */
function thinkingKwargs(req: CountTokensRequest): Record<string, unknown> {
  if (req.thinking?.type === "enabled") return { enable_thinking: true };
  if (req.thinking?.type === "disabled") return { enable_thinking: false };
  return {};
}

/**
 * Messages and system text in the template's shape, with the breakpoints
 * they carry. Role "system" messages before the first turn join the system
 * text; later ones stay system messages where they are.
 */
class Conversation {
  readonly messages: ChatMessage[] = [];
  private systemParts: string[] = [];
  private systemAt = -1;

  /** Deferred tools a tool result has loaded, in the order they were. */
  readonly loaded: ChatTool[] = [];

  constructor(
    private readonly breakpoints: Breakpoints,
    private readonly tools: ChatTool[],
    private readonly deferred: Map<string, ChatTool>,
  ) {}

  /** The system text so far as the first message. */
  addSystem(blocks: { text: string; cacheControl?: unknown; field: string }[]): void {
    for (const b of blocks) {
      if (b.text.startsWith(BILLING_HEADER)) continue;
      if (b.cacheControl && b.text === "")
        throw invalidRequest(
          `${b.field}.cache_control: cache_control cannot be set for empty text blocks`,
          `${b.field}.cache_control`,
        );
      this.systemParts.push(b.text);
      this.setSystem();
      this.breakpoints.add(b.cacheControl, b.field, () => this.snapshot());
    }
  }

  private setSystem(): void {
    const system: ChatMessage = { role: "system", content: this.systemParts.join("\n") };
    if (this.systemAt < 0) {
      this.messages.unshift(system);
      this.systemAt = 0;
    } else this.messages[this.systemAt] = system;
  }

  /** The conversation so far (the last message copied, since it may still grow). */
  snapshot(): Omit<PrefixBreakpoint, "ttlMs"> {
    return { messages: this.messages.map((m) => ({ ...m })), tools: [...this.tools, ...this.loaded] };
  }

  add(m: MessageInput, i: number): void {
    const field = `messages[${i}]`;
    if (m.role === "system") {
      this.addSystemMessage(m, field);
      return;
    }
    if (typeof m.content === "string") {
      this.messages.push({ role: m.role, content: m.content });
      return;
    }
    if (m.role === "user") this.addUserBlocks(m.content, field);
    else this.addAssistantBlocks(m.content, field);
  }

  /**
   * A system turn inside messages (Claude Code sends one right after the
   * first user turn). Before the first assistant turn it joins the system
   * text, which every template takes and which keeps the prompt's head the
   * same from turn to turn; later it stays where it is, for the template to
   * render as it can.
   */
  private addSystemMessage(m: MessageInput, field: string): void {
    if (this.messages.some((x) => x.role === "assistant")) {
      this.messages.push({ role: "system", content: textOf(m.content, `${field}.content`) });
      return;
    }
    if (typeof m.content === "string") {
      this.addSystem([{ text: m.content, field: `${field}.content` }]);
      return;
    }
    const blocks = m.content.flatMap((b, j) => {
      const at = `${field}.content[${j}]`;
      if (b.type === "image") throw unsupportedMedia("images", at);
      if (b.type !== "text") return [];
      return [
        {
          text: this.textField(b as Record<string, unknown>, at),
          cacheControl: (b as Record<string, unknown>).cache_control,
          field: at,
        },
      ];
    });
    this.addSystem(blocks);
  }

  /**
   * A tool result's content as text: text blocks, and the definitions of the deferred tools it references, which it
   * loads.
   */
  private toolResultText(content: unknown, field: string): string {
    if (content === undefined || content === null) return "";
    if (!Array.isArray(content)) return textOf(content, field);
    const parts = content.flatMap((b, k) => {
      const block = b as { type?: unknown; tool_name?: unknown };
      if (block?.type !== "tool_reference") return [textOf([b], `${field}[${k}]`)];
      const tool =
        typeof block.tool_name === "string"
          ? (this.deferred.get(block.tool_name) ?? this.tools.find((t) => t.name === block.tool_name))
          : undefined;
      if (!tool) return [];
      if (tool.unlisted && !this.loaded.includes(tool)) this.loaded.push(tool);
      return [JSON.stringify(tool.template)];
    });
    return parts.filter((p) => p !== "").join("\n");
  }

  private addUserBlocks(blocks: BlockInput[], field: string): void {
    let text: ChatMessage | undefined;
    blocks.forEach((b, j) => {
      const at = `${field}.content[${j}]`;
      const block = b as Record<string, unknown>;
      switch (b.type) {
        case "text":
          if (!text) this.messages.push((text = { role: "user", content: "" }));
          text.content =
            text.content === "" ? this.textField(block, at) : `${text.content}\n${this.textField(block, at)}`;
          break;
        case "tool_result": {
          if (typeof block.tool_use_id !== "string")
            throw invalidRequest(`${at}.tool_use_id: Field required`, `${at}.tool_use_id`);
          const content = this.toolResultText(block.content, `${at}.content`);
          // The template has no error flag for a tool result; the text says it.
          this.messages.push({
            role: "tool",
            tool_call_id: block.tool_use_id,
            content: block.is_error === true ? `Error: ${content}` : content,
          });
          text = undefined;
          break;
        }
        case "image":
          throw unsupportedMedia("images", at);
        case "document":
          throw new RequestError(
            400,
            "document blocks are not supported: send the document's text as a text block",
            "unsupported_input",
            at,
          );
        default:
          return; // kinds a local model has no use for (search results, server tool blocks) are skipped
      }
      this.checkBreakpointOn(block, at);
    });
  }

  private addAssistantBlocks(blocks: BlockInput[], field: string): void {
    const message: ChatMessage = { role: "assistant", content: "" };
    const calls: ToolCall[] = [];
    let reasoning = "";
    this.messages.push(message);
    blocks.forEach((b, j) => {
      const at = `${field}.content[${j}]`;
      const block = b as Record<string, unknown>;
      switch (b.type) {
        case "text":
          message.content =
            message.content === "" ? this.textField(block, at) : `${message.content}\n${this.textField(block, at)}`;
          break;
        case "thinking":
          if (block.cache_control)
            throw invalidRequest(
              `${at}.cache_control: cache_control cannot be set on thinking blocks`,
              `${at}.cache_control`,
            );
          if (typeof block.thinking !== "string")
            throw invalidRequest(`${at}.thinking: must be a string`, `${at}.thinking`);
          reasoning += block.thinking;
          message.reasoning_content = reasoning;
          break;
        case "tool_use": {
          if (typeof block.id !== "string" || typeof block.name !== "string")
            throw invalidRequest(`${at}: tool_use blocks need an id and a name`, at);
          const input = block.input ?? {};
          if (typeof input !== "object" || Array.isArray(input))
            throw invalidRequest(`${at}.input: must be an object`, `${at}.input`);
          calls.push({
            id: block.id,
            type: "function",
            function: { name: block.name, arguments: JSON.stringify(input) },
          });
          message.tool_calls = calls;
          break;
        }
        case "image":
          throw unsupportedMedia("images", at);
        default:
          return; // redacted_thinking and server tool blocks are skipped
      }
      this.checkBreakpointOn(block, at);
    });
    if (message.content === "" && calls.length > 0) message.content = null;
  }

  private textField(block: Record<string, unknown>, at: string): string {
    if (typeof block.text !== "string") throw invalidRequest(`${at}.text: must be a string`, `${at}.text`);
    if (block.text === "" && block.cache_control)
      throw invalidRequest(
        `${at}.cache_control: cache_control cannot be set for empty text blocks`,
        `${at}.cache_control`,
      );
    return block.text;
  }

  private checkBreakpointOn(block: Record<string, unknown>, at: string): void {
    this.breakpoints.add(block.cache_control, at, () => this.snapshot());
  }
}

export interface MessagesJob {
  job: ChatJob;
  breakpoints: PrefixBreakpoint[];
}

/**
 * What shapes the prompt: messages, system, tools, tool choice and the thinking switch (count_tokens needs no more).
 */
export function promptJobOf(req: CountTokensRequest): MessagesJob {
  const breakpoints = new Breakpoints();
  const { listed, deferred } = toolsOf(req.tools ?? [], breakpoints);
  const conversation = new Conversation(breakpoints, listed, deferred);
  if (typeof req.system === "string") conversation.addSystem([{ text: req.system, field: "system" }]);
  else if (req.system)
    conversation.addSystem(
      req.system.map((b, i) => ({ text: b.text, cacheControl: b.cache_control, field: `system[${i}]` })),
    );
  req.messages.forEach((m, i) => conversation.add(m, i));
  // A top-level cache_control is Anthropic's automatic caching: a breakpoint on the last block.
  breakpoints.add(req.cache_control, "cache_control", () => conversation.snapshot());
  const tools = [...listed, ...conversation.loaded];
  const toolChoice = toolChoiceOf(req, tools);
  const forced = toolChoice === "required" || typeof toolChoice === "object";
  const constraint = forced ? undefined : constraintOf(req);
  // Agents put their moving breakpoint on the newest block: its cut is the whole conversation.
  const final = breakpoints.list.at(-1);
  if (
    final &&
    final.tools.length === tools.length &&
    JSON.stringify(final.messages) === JSON.stringify(conversation.messages)
  )
    final.last = true;
  return {
    job: {
      messages: conversation.messages,
      tools,
      toolChoice,
      parallelToolCalls: req.tool_choice?.disable_parallel_tool_use !== true,
      ...(constraint ? { constraint } : {}),
      sampling: {},
      ignoreEos: false,
      stop: [],
      n: 1,
      templateKwargs: thinkingKwargs(req),
      durable: true,
    },
    breakpoints: breakpoints.list,
  };
}

/** The request as the neutral job, its cache breakpoints in it. */
export function messagesJobOf(req: MessagesRequest, qos: QosClass): ChatJob {
  const { job, breakpoints } = promptJobOf(req);
  return {
    ...job,
    sampling: {
      ...(req.temperature === undefined || req.temperature === null ? {} : { temperature: req.temperature }),
      ...(req.top_p === undefined || req.top_p === null ? {} : { topP: req.top_p }),
      ...(req.top_k === undefined || req.top_k === null ? {} : { topK: req.top_k }),
    },
    maxTokens: req.max_tokens,
    stop: req.stop_sequences ?? [],
    qos,
    ...(breakpoints.length > 0 ? { breakpoints } : {}),
  };
}
