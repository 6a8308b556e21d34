// Chat templates: Hugging Face-style Jinja rendered with @huggingface/jinja.
//
// Besides plain rendering, `render` splits the prompt into trusted text (the
// template's own scaffolding and replayed assistant turns) and untrusted text
// (system, user and tool message content), so that renderToTokens
// (./prompt.ts) can tokenize the untrusted parts without special-token parsing
// and a user typing `<|im_end|>` cannot forge a turn.
//
// How the split is found: the template is rendered twice, once with the real
// messages and once with each untrusted content replaced by a unique sentinel
// of private-use characters. The sentinel render, cut at the sentinels, gives
// the scaffolding pieces; the real render must then read scaffold, content,
// scaffold, content, ... where each content is the message's text as given,
// trimmed (Llama 3 trims every message) or JSON-string escaped (Llama 3 renders
// tool results through `tojson`). The two renders are checked to agree piece
// by piece, so a template that transforms content some other way, or branches
// on what the content says, cannot produce a wrong split: the prompt then falls
// back to one trusted segment (the whole real render tokenized with special
// parsing, as llama.cpp's server does), and `isolated` says so.
import { Environment, Interpreter, Template } from "@huggingface/jinja";
import { align, pickNonce, sentinel } from "./sentinels.ts";
import { strftime } from "./strftime.ts";
import { identifierRead } from "./template-reads.ts";

/** An error from a chat template: a parse error, a render error, or the template's own raise_exception. */
export class TemplateError extends Error {
  /** "raised": the template called raise_exception (message is the template's); "render"/"parse": the template failed. */
  readonly kind: "raised" | "render" | "parse";
  constructor(message: string, kind: "raised" | "render" | "parse", options?: { cause?: unknown }) {
    super(message, options);
    this.name = "TemplateError";
    this.kind = kind;
  }
}

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

/** A tool as OpenAI describes it: `{type: "function", function: {name, description, parameters}}`. */
export type ToolDef = Record<string, unknown>;

export interface RenderInput {
  messages: ChatMessage[];
  tools?: ToolDef[] | null;
  /** Whether to end with the assistant turn's opening (default true). */
  addGenerationPrompt?: boolean;
  /** chat_template_kwargs (enable_thinking, reasoning_effort, ...): top-level template variables. */
  kwargs?: Record<string, unknown>;
}

export interface PromptSegment {
  text: string;
  /** true: template scaffolding or assistant history (special tokens parsed); false: message content (never parsed). */
  trusted: boolean;
}

export interface RenderedPrompt {
  text: string;
  /** Consecutive pieces of `text`; their texts joined equal `text`. */
  segments: PromptSegment[];
  /** false when the content could not be told apart from the scaffolding (see the file comment). */
  isolated: boolean;
}

/** Names the renderer itself provides; chat_template_kwargs may not replace them. */
const RESERVED = new Set([
  "messages", "tools", "add_generation_prompt", "bos_token", "eos_token", "raise_exception", "strftime_now",
  "range", "namespace", "true", "false", "none", "True", "False", "None",
]);

const JINJA_CONSTANTS = { true: true, false: false, none: null, True: true, False: false, None: null };

/** Python's range(stop) / range(start, stop[, step]). */
function range(a: number, b?: number, step = 1): number[] {
  const [start, stop] = b === undefined ? [0, a] : [a, b];
  if (step === 0) throw new Error("range() step must not be zero");
  const out: number[] = [];
  for (let i = start; step > 0 ? i < stop : i > stop; i += step) out.push(i);
  return out;
}

/** Raised inside the interpreter by raise_exception, so render can tell it from other failures. */
class RaisedByTemplate extends Error {}

export class ChatTemplate {
  readonly source: string;
  readonly bosToken: string;
  readonly eosToken: string;
  readonly loadedAt: Date;
  private readonly template: Template;
  /** How the template wants assistant tool-call arguments; found on first use by argumentsForm(). */
  private argsForm?: "string" | "object";
  private readonly readsCache = new Map<string, boolean>();

  constructor(source: string, opts: { bosToken?: string; eosToken?: string; loadedAt?: Date } = {}) {
    this.source = source;
    this.bosToken = opts.bosToken ?? "";
    this.eosToken = opts.eosToken ?? "";
    this.loadedAt = opts.loadedAt ?? new Date();
    try {
      this.template = new Template(source);
    } catch (err) {
      throw new TemplateError(`chat template does not parse: ${errorMessage(err)}`, "parse", { cause: err });
    }
  }

  /** Whether the template reads the top-level variable `name` (e.g. enable_thinking). */
  reads(name: string): boolean {
    let known = this.readsCache.get(name);
    if (known === undefined) {
      known = identifierRead(this.template.parsed, name);
      this.readsCache.set(name, known);
    }
    return known;
  }

  render(input: RenderInput): RenderedPrompt {
    const messages = input.messages.map((m) => this.normalize(m));
    const context = this.context(input);
    const text = this.renderOrRetry(context, messages);

    const nonce = pickNonce(JSON.stringify([messages, input.tools ?? null, input.kwargs ?? null]));
    const untrusted = new Map<number, string>();
    const masked = messages.map((m, i) => {
      if (m.role === "assistant" || typeof m.content !== "string" || m.content === "") return m;
      untrusted.set(i, m.content);
      return { ...m, content: sentinel(nonce, i) };
    });
    if (untrusted.size === 0) return { text, segments: [{ text, trusted: true }], isolated: true };

    let maskedText: string;
    try {
      maskedText = this.renderOrRetry(context, masked);
    } catch {
      return { text, segments: [{ text, trusted: true }], isolated: false };
    }
    const segments = align(text, maskedText, nonce, untrusted);
    if (!segments) return { text, segments: [{ text, trusted: true }], isolated: false };
    return { text, segments, isolated: true };
  }

  private context(input: RenderInput): Record<string, unknown> {
    const kwargs = input.kwargs ?? {};
    for (const key of Object.keys(kwargs)) {
      if (RESERVED.has(key)) throw new TemplateError(`chat_template_kwargs may not set "${key}"`, "render");
    }
    return {
      ...kwargs,
      // transformers passes tools=None when there are none; templates are written against that.
      tools: input.tools && input.tools.length > 0 ? input.tools : null,
      add_generation_prompt: input.addGenerationPrompt ?? true,
      bos_token: this.bosToken,
      eos_token: this.eosToken,
      raise_exception: (message: unknown) => {
        throw new RaisedByTemplate(String(message));
      },
      strftime_now: (format: unknown) => strftime(this.loadedAt, String(format)),
    };
  }

  /**
   * Renders; when that fails for a reason other than raise_exception and some
   * message has null content, retries with "" there (templates that do
   * `'x' in message.content` break on an assistant tool-call turn's null).
   */
  private renderOrRetry(context: Record<string, unknown>, messages: NormalizedMessage[]): string {
    try {
      return this.renderRaw(context, messages);
    } catch (err) {
      const hasNull = messages.some((m) => m.content === null);
      if (!(err instanceof TemplateError) || err.kind !== "render" || !hasNull) throw err;
      try {
        return this.renderRaw(context, messages.map((m) => (m.content === null ? { ...m, content: "" } : m)));
      } catch {
        throw err;
      }
    }
  }

  private renderRaw(context: Record<string, unknown>, messages: NormalizedMessage[]): string {
    try {
      // Template.render would declare its own raise_exception and an undated
      // strftime_now, which cannot then be replaced; so the globals are set here.
      const env = new Environment();
      for (const [name, value] of Object.entries(JINJA_CONSTANTS)) env.set(name, value);
      env.set("range", range);
      for (const [name, value] of Object.entries(context)) env.set(name, value);
      // Through JSON so the interpreter sees plain data only (no undefined members).
      env.set("messages", JSON.parse(JSON.stringify(messages)));
      return new Interpreter(env).run(this.template.parsed).value as string;
    } catch (err) {
      if (err instanceof RaisedByTemplate) throw new TemplateError(err.message, "raised");
      throw new TemplateError(`chat template failed to render: ${errorMessage(err)}`, "render", { cause: err });
    }
  }

  /**
   * OpenAI clients send tool-call arguments as a JSON string. Some templates
   * print that string as it is (Qwen, DeepSeek); others `tojson` the arguments
   * and so need an object (Llama 3), or a string would come out quoted and
   * escaped. A probe conversation rendered once tells which: if the string
   * comes through verbatim, strings stay; otherwise arguments are parsed into
   * objects. A template that renders neither probe is judged by whether its
   * source tests `arguments is string`.
   */
  private argumentsForm(): "string" | "object" {
    if (this.argsForm) return this.argsForm;
    const args = { probe_argument: "probe value" };
    const asText = JSON.stringify(args);
    const probe = (value: unknown): string | undefined => {
      const call = { id: "probe0001", type: "function", function: { name: "probe_tool", arguments: value } };
      const tool = { type: "function", function: { name: "probe_tool", description: "probe", parameters: { type: "object", properties: {} } } };
      const messages = [
        { role: "user", content: "probe" },
        { role: "assistant", content: null, tool_calls: [call] },
      ] as NormalizedMessage[];
      try {
        return this.renderOrRetry(this.context({ messages: [], tools: [tool], addGenerationPrompt: false }), messages);
      } catch {
        return undefined;
      }
    };
    if (probe(asText)?.includes(asText)) this.argsForm = "string";
    else if (probe(args)?.includes('"probe_argument"')) this.argsForm = "object";
    else this.argsForm = /arguments\s+is\s+string/.test(this.source) ? "string" : "object";
    return this.argsForm;
  }

  private normalize(m: ChatMessage): NormalizedMessage {
    const out: NormalizedMessage = { ...m, content: contentText(m.content) };
    if (m.tool_calls && this.argumentsForm() === "object") {
      out.tool_calls = m.tool_calls.map((call) => {
        const args = call.function?.arguments;
        if (typeof args !== "string") return call;
        const parsed = tryParseObject(args);
        return parsed ? { ...call, function: { ...call.function, arguments: parsed } } : call;
      });
    }
    return out;
  }
}

type NormalizedMessage = Omit<ChatMessage, "content"> & { content: string | null };

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

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export { templateReads } from "./template-reads.ts";

// The tokenizing half lives in ./prompt.ts; re-exported so callers need one import.
export { renderToTokens, type PromptTokens, type PromptTokenOptions } from "./prompt.ts";
