// A Responses request (docs/api/responses.md#request) in the neutral chat
// job's terms: its fields checked, its input items as chat messages, its
// function and namespace tools as the job's tools (built-in tools left out),
// text.format as the reply's constraint, reasoning.effort as template
// variables.
import * as v from "valibot";
import type { ChatMessage } from "../../../codec/index.ts";
import type { ServedModel } from "../../../daemon/served-model.ts";
import { toolSchema, type ChatTool, type Constraint, type ToolChoice } from "../../../pipeline/chat-job.ts";
import { invalidRequest, RequestError, unsupportedMedia } from "../../../daemon/request-error.ts";
import { checkArrayLength, checkKeyCount, MAX_TOOLS } from "../../chat-limits.ts";
import { int, num, object, opt, parseWith, record } from "../../validate.ts";
import type { Item } from "../../../response-store/store.ts";

export const responsesRequestSchema = v.looseObject({
  model: opt(v.string("model must be a string")),
  input: v.union(
    [v.string(), v.array(object({}, "input items must be objects"))],
    "input must be a string or an array of items",
  ),
  instructions: opt(v.string()),
  previous_response_id: opt(v.string()),
  store: opt(v.boolean()),
  stream: opt(v.boolean()),
  background: opt(v.boolean()),
  tools: opt(v.array(object({ type: v.string("every tool needs a type") }))),
  tool_choice: opt(
    v.union([v.string(), object({ type: v.string() })], "tool_choice must be a string or an object with a type"),
  ),
  parallel_tool_calls: opt(v.boolean()),
  text: opt(object({ format: opt(object({ type: v.string() })) })),
  reasoning: opt(object({ effort: opt(v.string()) })),
  max_output_tokens: opt(int(1)),
  temperature: opt(num(0, 2)),
  top_p: opt(num(0, 1)),
  seed: opt(v.pipe(v.number(), v.integer("must be a whole number"), v.minValue(-(2 ** 31)), v.maxValue(2 ** 32 - 1))),
  metadata: opt(record(v.string("metadata values must be strings"))),
  truncation: opt(v.string()),
});

export type ResponsesRequest = v.InferOutput<typeof responsesRequestSchema>;

/** Tool types served by OpenAI's own machinery: left out of the prompt here (the model cannot run them). */
const BUILT_IN_TOOLS = new Set([
  "web_search",
  "web_search_preview",
  "web_search_2025_08_26",
  "web_search_preview_2025_03_11",
  "file_search",
  "code_interpreter",
  "image_generation",
  "computer_use",
  "computer_use_preview",
  "computer",
  "mcp",
  "local_shell",
  "shell",
  "apply_patch",
  "custom",
  "tool_search",
]);

export function parseResponsesRequest(body: unknown): ResponsesRequest {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw invalidRequest("request body must be a JSON object");
  const fields = body as Record<string, unknown>;
  if (fields.background === true) {
    throw new RequestError(
      400,
      "background responses are not supported by this server: send the request without background",
      "unsupported_parameter",
      "background",
    );
  }
  for (const name of ["conversation", "prompt"]) {
    if (fields[name] !== undefined && fields[name] !== null) {
      throw new RequestError(
        400,
        `${name} is not supported by this server: send the conversation as input items (or continue with previous_response_id)`,
        "unsupported_parameter",
        name,
      );
    }
  }
  if (fields.input === undefined) throw invalidRequest("you must provide an input parameter", "input");
  checkMetadata(fields.metadata);
  checkNamespaceMembers(fields.tools);
  const req = parseWith(responsesRequestSchema, body);
  if (!req.model && !req.previous_response_id) throw invalidRequest("you must provide a model parameter", "model");
  return req;
}

/**
 * OpenAI's bounds on `metadata` (16 pairs, keys of 64 characters, values of
 * 512): it is stored with the response and listed back, so an unbounded one
 * would grow the store by whatever a request sends.
 */
export const METADATA_LIMITS = { keys: 16, keyChars: 64, valueChars: 512 };

function checkMetadata(metadata: unknown): void {
  checkKeyCount(metadata, "metadata", METADATA_LIMITS.keys);
  if (typeof metadata !== "object" || metadata === null) return;
  for (const [key, value] of Object.entries(metadata)) {
    if (key.length > METADATA_LIMITS.keyChars) {
      throw invalidRequest(
        `Invalid 'metadata': keys may be at most ${METADATA_LIMITS.keyChars} characters; '${key.slice(0, 64)}...' has ${key.length}.`,
        "metadata",
        "string_above_max_length",
      );
    }
    if (typeof value === "string" && value.length > METADATA_LIMITS.valueChars) {
      throw invalidRequest(
        `Invalid 'metadata.${key}': values may be at most ${METADATA_LIMITS.valueChars} characters, got ${value.length}.`,
        `metadata.${key}`,
        "string_above_max_length",
      );
    }
  }
}

/**
 * Function tools inside namespace tools count toward MAX_TOOLS with the top-level ones (checkListLengths bounds the top
 * level).
 */
function checkNamespaceMembers(tools: unknown): void {
  if (!Array.isArray(tools)) return;
  let total = tools.length;
  tools.forEach((tool, i) => {
    const members = (tool as { tools?: unknown } | null)?.tools;
    if (!Array.isArray(members)) return;
    checkArrayLength(members, `tools[${i}].tools`, MAX_TOOLS);
    total += members.length;
  });
  if (total > MAX_TOOLS) {
    throw invalidRequest(
      `Invalid 'tools': ${total} tools with namespace members; a request may declare at most ${MAX_TOOLS}.`,
      "tools",
      "array_above_max_length",
    );
  }
}

/** The input as items: a string is one user message. */
export function inputItems(req: ResponsesRequest): Item[] {
  if (typeof req.input === "string")
    return [{ type: "message", role: "user", content: [{ type: "input_text", text: req.input }] }];
  return req.input as Item[];
}

/** A message's content parts as text; media and files are refused with the part's path. */
function partsText(content: unknown, field: string): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) throw invalidRequest(`${field}: must be a string or an array of content parts`, field);
  return content
    .map((part, j) => {
      const at = `${field}[${j}]`;
      const type = (part as { type?: unknown })?.type;
      if (
        type === "input_text" ||
        type === "output_text" ||
        type === "text" ||
        type === "summary_text" ||
        type === "reasoning_text"
      ) {
        const text = (part as { text?: unknown }).text;
        if (typeof text !== "string") throw invalidRequest(`${at}.text: must be a string`, `${at}.text`);
        return text;
      }
      if (type === "refusal") return String((part as { refusal?: unknown }).refusal ?? "");
      if (type === "input_image") {
        const url = (part as { image_url?: unknown }).image_url;
        if (typeof url !== "string" || !url.startsWith("data:")) {
          throw new RequestError(
            400,
            `${at}: only data: URLs are accepted for images (remote URLs and file_id are not fetched)`,
            "unsupported_parameter",
            at,
          );
        }
        throw unsupportedMedia("images", at);
      }
      if (type === "input_audio") throw unsupportedMedia("audio", at);
      if (type === "input_file")
        throw new RequestError(
          400,
          `${at}: input_file parts are not supported by this server: send the file's text as input_text`,
          "unsupported_parameter",
          at,
        );
      throw invalidRequest(
        `${at}.type: '${String(type)}' is not a content part type (input_text, output_text)`,
        `${at}.type`,
      );
    })
    .join("");
}

/** A call's name as the model sees it: a namespace member is `namespace.member`. */
export function qualifiedName(name: string, namespace: unknown): string {
  return typeof namespace === "string" && namespace !== "" ? `${namespace}.${name}` : name;
}

/**
 * Items as chat messages (docs/api/responses.md#input-items): function calls
 * join the assistant turn before them, reasoning the assistant turn after
 * it, and a call's output becomes a tool message. `fieldOf` names item i in
 * errors.
 */
export function itemsToMessages(items: Item[], fieldOf: (i: number) => string = (i) => `input[${i}]`): ChatMessage[] {
  const out: ChatMessage[] = [];
  let reasoning: string | undefined;
  const callNames = new Map<string, string>();
  /** The assistant turn a call joins: the last message when it is the assistant's, else a new one. */
  const assistantTurn = (): ChatMessage => {
    const last = out.at(-1);
    if (last?.role === "assistant" && reasoning === undefined) return last;
    const turn: ChatMessage = {
      role: "assistant",
      content: "",
      ...(reasoning ? { reasoning_content: reasoning } : {}),
    };
    reasoning = undefined;
    out.push(turn);
    return turn;
  };
  items.forEach((item, i) => {
    const at = fieldOf(i);
    const type = item.type ?? (item.role !== undefined ? "message" : undefined);
    switch (type) {
      case "message": {
        const role = item.role;
        if (role !== "user" && role !== "system" && role !== "developer" && role !== "assistant") {
          throw invalidRequest(`${at}.role: must be user, system, developer or assistant`, `${at}.role`);
        }
        const text = partsText(item.content, `${at}.content`);
        if (role === "assistant") {
          out.push({ role, content: text, ...(reasoning ? { reasoning_content: reasoning } : {}) });
          reasoning = undefined;
        } else out.push({ role: role === "developer" ? "system" : role, content: text });
        return;
      }
      case "function_call": {
        const {
          name,
          arguments: args,
          call_id: callId,
        } = item as { name?: unknown; arguments?: unknown; call_id?: unknown };
        if (typeof name !== "string" || name === "")
          throw invalidRequest(`${at}.name: must be a function name`, `${at}.name`);
        if (typeof args !== "string") throw invalidRequest(`${at}.arguments: must be a JSON string`, `${at}.arguments`);
        if (typeof callId !== "string") throw invalidRequest(`${at}.call_id: must be a string`, `${at}.call_id`);
        const qualified = qualifiedName(name, item.namespace);
        callNames.set(callId, qualified);
        const turn = assistantTurn();
        turn.tool_calls = [
          ...(turn.tool_calls ?? []),
          { id: callId, type: "function", function: { name: qualified, arguments: args } },
        ];
        return;
      }
      case "function_call_output": {
        const callId = item.call_id;
        if (typeof callId !== "string") throw invalidRequest(`${at}.call_id: must be a string`, `${at}.call_id`);
        const output = item.output;
        const text = typeof output === "string" ? output : partsText(output, `${at}.output`);
        const name = callNames.get(callId);
        out.push({ role: "tool", content: text, tool_call_id: callId, ...(name ? { name } : {}) });
        return;
      }
      case "reasoning": {
        const parts = [item.content, item.summary].find((p) => Array.isArray(p) && p.length > 0);
        const text =
          parts === undefined ? "" : partsText(parts, `${at}.${parts === item.content ? "content" : "summary"}`);
        reasoning = reasoning === undefined ? text : `${reasoning}\n${text}`;
        return;
      }
      case "item_reference":
        throw new RequestError(
          400,
          `${at}: item_reference items are not supported by this server: send the item itself`,
          "unsupported_parameter",
          at,
        );
      default:
        throw invalidRequest(
          `${at}.type: '${String(type)}' is not an input item type this server reads (message, function_call, function_call_output, reasoning)`,
          `${at}.type`,
        );
    }
  });
  return out;
}

/**
 * The request's tools: function tools, and namespace members as `namespace.member`; built-in tool types are listed
 * apart.
 */
export function toolsOf(req: ResponsesRequest): { tools: ChatTool[]; ignored: string[]; namespaces: Set<string> } {
  const tools: ChatTool[] = [];
  const ignored: string[] = [];
  const namespaces = new Set<string>();
  const add = (t: Record<string, unknown>, name: string, at: string, namespaceDescription?: string) => {
    const parameters = toolSchema(t.parameters, `${at}.parameters`);
    const description = [namespaceDescription, t.description]
      .filter((d) => typeof d === "string" && d !== "")
      .join(" ");
    tools.push({
      name,
      parameters,
      template: {
        type: "function",
        function: { name, ...(description ? { description } : {}), parameters: t.parameters ?? { type: "object" } },
      },
    });
  };
  (req.tools ?? []).forEach((tool, i) => {
    const t = tool as Record<string, unknown>;
    const at = `tools[${i}]`;
    if (t.type === "function") {
      if (typeof t.name !== "string" || t.name === "")
        throw invalidRequest(`${at}.name: a function tool needs a name`, `${at}.name`);
      add(t, t.name, at);
    } else if (t.type === "namespace") {
      if (typeof t.name !== "string" || t.name === "")
        throw invalidRequest(`${at}.name: a namespace tool needs a name`, `${at}.name`);
      if (!Array.isArray(t.tools)) throw invalidRequest(`${at}.tools: must be a list of function tools`, `${at}.tools`);
      namespaces.add(t.name);
      (t.tools as Record<string, unknown>[]).forEach((member, j) => {
        const memberAt = `${at}.tools[${j}]`;
        if (member?.type !== "function") {
          ignored.push(`${t.name}.${String(member?.name ?? member?.type)}`);
          return;
        }
        if (typeof member.name !== "string" || member.name === "")
          throw invalidRequest(`${memberAt}.name: a function tool needs a name`, `${memberAt}.name`);
        add(
          member,
          `${t.name}.${member.name}`,
          memberAt,
          typeof t.description === "string" ? t.description : undefined,
        );
      });
    } else if (BUILT_IN_TOOLS.has(String(t.type))) {
      ignored.push(String(t.type));
    } else {
      throw invalidRequest(
        `${at}.type: '${String(t.type)}' is not a tool type (function, namespace, or a built-in tool)`,
        `${at}.type`,
      );
    }
  });
  const seen = new Set<string>();
  for (const [i, t] of tools.entries()) {
    if (seen.has(t.name)) throw invalidRequest(`tools: the function '${t.name}' is declared twice`, `tools[${i}]`);
    seen.add(t.name);
  }
  return { tools, ignored, namespaces };
}

/** auto, none, required, or one declared function (a namespace member by `namespace` and `name`). */
export function toolChoiceOf(req: ResponsesRequest, tools: ChatTool[]): ToolChoice {
  const choice = req.tool_choice;
  if (choice === undefined || choice === null || choice === "auto") return "auto";
  if (choice === "none" || choice === "required") return choice;
  if (typeof choice === "string")
    throw new RequestError(
      400,
      `tool_choice: '${choice}' is not auto, none, required or a function`,
      "unsupported_parameter",
      "tool_choice",
    );
  const c = choice as Record<string, unknown>;
  if (c.type === "function") {
    if (typeof c.name !== "string")
      throw invalidRequest("tool_choice.name: must name a declared function", "tool_choice.name");
    const name = qualifiedName(c.name, c.namespace);
    if (!tools.some((t) => t.name === name))
      throw invalidRequest(`tool_choice names the function '${name}', which is not declared in tools`, "tool_choice");
    return { name };
  }
  if (BUILT_IN_TOOLS.has(String(c.type))) {
    throw new RequestError(
      400,
      `tool_choice forces the built-in tool '${String(c.type)}', which this server cannot run`,
      "unsupported_tool",
      "tool_choice",
    );
  }
  throw new RequestError(
    400,
    `tool_choice of type '${String(c.type)}' is not supported by this server (auto, none, required or a function)`,
    "unsupported_parameter",
    "tool_choice",
  );
}

/** text.format: text (none), json_object, or json_schema {name, schema, strict}. */
export function constraintOf(req: ResponsesRequest): Constraint | undefined {
  const format = req.text?.format as Record<string, unknown> | null | undefined;
  if (!format || format.type === "text") return undefined;
  if (format.type === "json_object") return { type: "json_object" };
  if (format.type !== "json_schema") {
    throw invalidRequest(
      `text.format.type must be text, json_object or json_schema, not '${String(format.type)}'`,
      "text.format.type",
    );
  }
  if (format.schema === undefined || format.schema === null)
    throw invalidRequest("text.format of type json_schema needs a schema", "text.format.schema");
  if (format.strict !== undefined && format.strict !== null && typeof format.strict !== "boolean") {
    throw invalidRequest("text.format.strict must be true or false", "text.format.strict");
  }
  return { type: "json_schema", schema: format.schema, strict: format.strict !== false, field: "text.format.schema" };
}

/**
 * reasoning.effort: the template's reasoning_effort when it reads one, else
 * the thinking switch (off for none and minimal), else nothing.
 */
export function reasoningKwargs(model: ServedModel, effort: string | null | undefined): Record<string, unknown> {
  if (!effort) return {};
  const dialect = model.dialect();
  if (dialect.reasoning_effort) return { reasoning_effort: effort };
  if (dialect.enable_thinking) return { enable_thinking: effort !== "none" && effort !== "minimal" };
  return {};
}
