// A choice's neutral deltas as Anthropic's content blocks
// (docs/api/anthropic.md#response, #streaming): blocks in the order the
// model produced them (thinking, text, tool_use), each opened, grown by
// deltas and closed. The stream sends the events as they come; the whole
// reply is the blocks the same events built, so a client's accumulated
// stream equals the reply it would have got unstreamed.
import type { ChoiceDelta, ChoiceEnd } from "../../pipeline/choice-stream.ts";
import type { PrefixPin } from "../../pipeline/chat-job.ts";

export type ContentBlock =
  | { type: "thinking"; thinking: string; signature: string }
  | { type: "text"; text: string }
  | { type: "tool_use"; id: string; name: string; input: unknown };

export interface BlockEvent {
  event: "content_block_start" | "content_block_delta" | "content_block_stop";
  data: Record<string, unknown>;
}

export type StopReason = "end_turn" | "max_tokens" | "stop_sequence" | "tool_use";

export function stopReasonOf(end: ChoiceEnd): StopReason {
  switch (end.reason) {
    case "length":
      return "max_tokens";
    case "stop_sequence":
      return "stop_sequence";
    case "tool_calls":
      return "tool_use";
    default:
      return "end_turn";
  }
}

export interface AnthropicUsage {
  input_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  /** The created tokens by the TTL of the breakpoint that pinned them. */
  cache_creation: { ephemeral_5m_input_tokens: number; ephemeral_1h_input_tokens: number };
  output_tokens: number;
}

const HOUR_MS = 60 * 60_000;

/**
 * Usage as Anthropic counts it: the prefix-cache hit is read, what this
 * request's breakpoints pin beyond it is created (split by the TTL that
 * pinned it: 1h breakpoints come first, so they reach less far), the rest is
 * input; the three add up to the prompt.
 */
export function usageOf(
  promptTokens: number,
  cachedTokens: number,
  pins: PrefixPin[],
  outputTokens: number,
): AnthropicUsage {
  const beyondCache = (length: number) => Math.max(0, Math.min(promptTokens, length) - cachedTokens);
  const created = beyondCache(Math.max(0, ...pins.map((p) => p.length)));
  const createdLong = beyondCache(Math.max(0, ...pins.filter((p) => p.ttlMs >= HOUR_MS).map((p) => p.length)));
  return {
    input_tokens: promptTokens - cachedTokens - created,
    cache_creation_input_tokens: created,
    cache_read_input_tokens: cachedTokens,
    cache_creation: { ephemeral_5m_input_tokens: created - createdLong, ephemeral_1h_input_tokens: createdLong },
    output_tokens: outputTokens,
  };
}

/** A tool call's arguments text as the block's input: a JSON object, else undefined. */
function inputOf(args: string): Record<string, unknown> | undefined {
  try {
    const parsed = JSON.parse(args === "" ? "{}" : args);
    if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) return parsed;
  } catch {
    // not JSON
  }
  return undefined;
}

export class MessageBlocks {
  readonly content: ContentBlock[] = [];
  /** The open block's kind and, for a call, its index in the parser's numbering. */
  private open?: { kind: ContentBlock["type"]; call?: number };
  /** A call whose arguments are held back until they are known to parse. */
  private held?: { index: number; name: string };

  /**
   * `callsValid`: the grammar holds every call to its schema, so argument
   * fragments stream as they come. Otherwise a call is sent whole when it
   * closes, as a tool_use block if its arguments are a JSON object and as a
   * text block holding them if not.
   */
  constructor(
    private readonly newToolId: () => string,
    private readonly callsValid: boolean,
  ) {}

  /**
   * One delta as block events: reasoning, then text, then call events (the order the model wrote them within a tick).
   */
  push(d: ChoiceDelta): BlockEvent[] {
    const out: BlockEvent[] = [];
    if (d.reasoning) this.appendText("thinking", d.reasoning, out);
    if (d.content) this.appendText("text", d.content, out);
    for (const e of d.calls ?? []) {
      if (e.type === "call-start") {
        this.close(out);
        if (this.callsValid) this.openCall(e.index, e.name, out);
        else this.held = { index: e.index, name: e.name };
      } else if (e.type === "call-args" && e.text !== "") {
        if (this.open?.call === e.index)
          out.push(this.event("content_block_delta", { delta: { type: "input_json_delta", partial_json: e.text } }));
      } else if (e.type === "call-end") {
        const input = inputOf(e.arguments);
        if (this.held?.index === e.index) {
          const { name } = this.held;
          this.held = undefined;
          if (input === undefined) {
            this.appendText("text", e.arguments, out);
            continue;
          }
          this.openCall(e.index, name, out);
          if (e.arguments !== "")
            out.push(
              this.event("content_block_delta", { delta: { type: "input_json_delta", partial_json: e.arguments } }),
            );
        }
        if (this.open?.call !== e.index) continue;
        (this.content.at(-1) as Extract<ContentBlock, { type: "tool_use" }>).input = input ?? {};
        this.close(out);
      }
    }
    return out;
  }

  private openCall(index: number, name: string, out: BlockEvent[]): void {
    const block: ContentBlock = { type: "tool_use", id: this.newToolId(), name, input: {} };
    this.content.push(block);
    this.open = { kind: "tool_use", call: index };
    out.push(this.event("content_block_start", { content_block: { ...block, input: {} } }));
  }

  /** The end of the reply: the open block closes. */
  finish(): BlockEvent[] {
    const out: BlockEvent[] = [];
    this.close(out);
    return out;
  }

  private appendText(kind: "thinking" | "text", text: string, out: BlockEvent[]): void {
    if (this.open?.kind !== kind) {
      this.close(out);
      const block: ContentBlock =
        kind === "thinking" ? { type: "thinking", thinking: "", signature: "" } : { type: "text", text: "" };
      this.content.push(block);
      this.open = { kind };
      out.push(this.event("content_block_start", { content_block: { ...block } }));
    }
    const block = this.content.at(-1)!;
    if (block.type === "thinking") block.thinking += text;
    else if (block.type === "text") block.text += text;
    const delta = kind === "thinking" ? { type: "thinking_delta", thinking: text } : { type: "text_delta", text };
    out.push(this.event("content_block_delta", { delta }));
  }

  private close(out: BlockEvent[]): void {
    if (!this.open) return;
    // A thinking block ends with its signature; a local model signs nothing.
    if (this.open.kind === "thinking")
      out.push(this.event("content_block_delta", { delta: { type: "signature_delta", signature: "" } }));
    out.push(this.event("content_block_stop", {}));
    this.open = undefined;
  }

  private event(event: BlockEvent["event"], body: Record<string, unknown>): BlockEvent {
    return { event, data: { type: event, index: this.content.length - 1, ...body } };
  }
}
