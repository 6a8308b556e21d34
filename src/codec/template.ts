// Chat templates: Hugging Face-style Jinja rendered as Python Jinja2 renders
// it (./jinja/: an adapter over @huggingface/jinja), from the messages in the
// form the templates are written for (./openai-form.ts).
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
import { Template } from "@huggingface/jinja";
import { renderProgram } from "./jinja/interpreter.ts";
import { toReferenceForm, withOptionalFieldsFilled, type ChatMessage, type ReferenceMessage } from "./openai-form.ts";
import type { PromptSegment } from "./segments.ts";
import { align, pickNonce, sentinel } from "./sentinels.ts";
import { strftime } from "./strftime.ts";
import { TemplateError } from "./template-error.ts";
import { identifierRead } from "./template-reads.ts";

export { TemplateError } from "./template-error.ts";
export type { ChatMessage, TextPart, ToolCall } from "./openai-form.ts";

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

export interface RenderedPrompt {
  text: string;
  /** Consecutive pieces of `text`; their texts joined equal `text`. */
  segments: PromptSegment[];
  /** false when the content could not be told apart from the scaffolding (see the file comment). */
  isolated: boolean;
}

/** Names the renderer itself provides; chat_template_kwargs may not replace them. */
const RESERVED = new Set([
  "messages",
  "tools",
  "add_generation_prompt",
  "bos_token",
  "eos_token",
  "raise_exception",
  "strftime_now",
  "range",
  "namespace",
  "true",
  "false",
  "none",
  "True",
  "False",
  "None",
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

  /**
   * The prompt for `input`. A render that fails is tried once more with the
   * OpenAI form's absent optional fields (a tool's description, a message's
   * name, ...) set to their empty values, before the first failure is
   * reported: clients may leave them out, some templates cannot.
   */
  render(input: RenderInput): RenderedPrompt {
    try {
      return this.renderAsGiven(input);
    } catch (err) {
      if (!(err instanceof TemplateError) || err.kind === "parse") throw err;
      const filled = withOptionalFieldsFilled(input.messages, input.tools);
      const retry = filled ? { ...input, ...filled } : input;
      // Some templates (Functionary v3.2) concatenate a call's arguments as
      // text: they take the JSON string OpenAI clients send, not an object.
      const retries: ("object" | "string")[] = [
        ...(filled ? ["object" as const] : []),
        ...(input.messages.some((m) => m.tool_calls?.length) ? ["string" as const] : []),
      ];
      for (const argumentsAs of retries) {
        try {
          return this.renderAsGiven(retry, argumentsAs);
        } catch {
          // The first failure is the one reported.
        }
      }
      throw err;
    }
  }

  private renderAsGiven(input: RenderInput, argumentsAs: "object" | "string" = "object"): RenderedPrompt {
    const messages = input.messages.map((m) => toReferenceForm(m, argumentsAs));
    const context = this.context(input);
    const text = this.renderRaw(context, messages);

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
      maskedText = this.renderRaw(context, masked);
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
    const context: Record<string, unknown> = {
      ...JINJA_CONSTANTS,
      range,
      ...kwargs,
      add_generation_prompt: input.addGenerationPrompt ?? true,
      bos_token: this.bosToken,
      eos_token: this.eosToken,
      raise_exception: (message: unknown) => {
        throw new RaisedByTemplate(String(message));
      },
      strftime_now: (format: unknown) => strftime(this.loadedAt, String(format)),
    };
    // transformers leaves `tools` out when there are none, so it is undefined
    // (not none) in the template: `tools is defined`, `for t in tools` rely on it.
    if (input.tools && input.tools.length > 0) context.tools = input.tools;
    // What FireFunction v2's template reads and transformers leaves to the
    // caller, supplied as llama.cpp does: today's date and the tools as JSON.
    if (this.reads("datetime") && !Object.hasOwn(kwargs, "datetime"))
      context.datetime = strftime(this.loadedAt, "%b %d %Y");
    if (this.reads("functions") && !Object.hasOwn(kwargs, "functions"))
      context.functions = input.tools?.length ? JSON.stringify(input.tools, null, 2) : "";
    return context;
  }

  private renderRaw(context: Record<string, unknown>, messages: ReferenceMessage[]): string {
    try {
      // Through JSON so the interpreter sees plain data only (no undefined members).
      return renderProgram(this.template.parsed, { ...context, messages: JSON.parse(JSON.stringify(messages)) });
    } catch (err) {
      if (err instanceof RaisedByTemplate) throw new TemplateError(err.message, "raised");
      throw new TemplateError(`chat template failed to render: ${errorMessage(err)}`, "render", { cause: err });
    }
  }
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export { templateReads } from "./template-reads.ts";
