// A generation's neutral deltas as Ollama's records (docs/api/ollama.md#records):
// NDJSON by default, one record per delta (`message` on chat, `response` on
// generate, reasoning apart as `thinking`), tool calls whole on one record
// right before the terminal one, and a terminal record with the done reason,
// token counts and nanosecond timings; with `stream: false`, only the
// terminal record, holding everything.
import type { ChoiceDelta, ChoiceEnd } from "../../pipeline/choice-stream.ts";
import type { ServedModel } from "../../daemon/served-model.ts";
import type { TokenLogprob } from "../../engine/logprobs.ts";
import type { RequestTimer } from "../access-log.ts";
import type { ReplyRenderer, ReplyWire } from "../reply-runner.ts";
import { OLLAMA_NDJSON, ollamaErrorBody } from "./envelope.ts";

export interface RecordPlan {
  kind: "chat" | "generate";
  /** The model name as the request gave it (records echo it). */
  name: string;
  model: ServedModel;
  promptTokens: number;
  logprobs: boolean;
  /** Started when the request arrived. */
  timer: RequestTimer;
}

/** How Ollama's replies are sent: NDJSON (no keep-alive), errors in its envelope. */
export const OLLAMA_WIRE: ReplyWire = { framing: OLLAMA_NDJSON, errorBody: ollamaErrorBody };

interface OllamaCall {
  function: { name: string; arguments: Record<string, unknown> };
}

/** What a reply has gathered so far, and when its phases happened. */
class Gathered {
  content = "";
  thinking = "";
  readonly calls: OllamaCall[] = [];
  readonly logprobs: unknown[] = [];
  private readonly open = new Map<number, string>();

  constructor(
    private readonly model: ServedModel,
    readonly timer: RequestTimer,
  ) {}

  /** One delta; returns the record fields it contributes (content, thinking, logprobs). */
  add(d: ChoiceDelta): { content: string; thinking: string; logprobs: unknown[] } {
    let content = d.content;
    for (const e of d.calls ?? []) {
      if (e.type === "call-start") this.open.set(e.index, e.name);
      else if (e.type === "call-end") {
        const args = parseObject(e.arguments);
        // Ollama's arguments are an object: a call whose arguments are not one stays text.
        if (args) this.calls.push({ function: { name: this.open.get(e.index) ?? "", arguments: args } });
        else content += e.arguments;
      }
    }
    const logprobs = (d.logprobs ?? []).map((l) => this.logprob(l.token, l.logprob));
    this.content += content;
    this.thinking += d.reasoning;
    this.logprobs.push(...logprobs);
    return { content, thinking: d.reasoning, logprobs };
  }

  private logprob(token: number, lp: TokenLogprob) {
    const text = (t: number) => Buffer.from(this.model.tokenizer.tokenBytes(t)).toString("utf8");
    return {
      token: text(token),
      logprob: lp.logprob,
      top_logprobs: lp.top.map(([t, l]) => ({ token: text(t), logprob: l })),
    };
  }

  /**
   * Ollama's timings, in nanoseconds: the whole request, the prompt from admission to the first token, the reply after
   * it.
   */
  durations(): Record<string, number> {
    const now = performance.now();
    const ns = (ms: number) => Math.max(0, Math.round(ms * 1e6));
    const first = this.timer.firstToken ?? now;
    return {
      total_duration: ns(now - this.timer.started),
      load_duration: 0,
      prompt_eval_duration: ns(first - (this.timer.admittedAt ?? this.timer.started)),
      eval_duration: ns(now - first),
    };
  }
}

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const value = JSON.parse(text === "" ? "{}" : text);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

const doneReason = (end: ChoiceEnd) => (end.finishReason === "length" ? "length" : "stop");

/** The record head every record of a reply starts with. */
function head(plan: RecordPlan) {
  return { model: plan.name, created_at: new Date().toISOString() };
}

/** The fields a record carries for its text: chat's `message`, generate's `response`. */
function body(plan: RecordPlan, content: string, thinking: string, calls: OllamaCall[] = []) {
  if (plan.kind === "chat") {
    return {
      message: {
        role: "assistant",
        content,
        ...(thinking ? { thinking } : {}),
        ...(calls.length > 0 ? { tool_calls: calls } : {}),
      },
    };
  }
  // Ollama's deprecated continuation state, empty: the prefix cache serves a
  // resent conversation. Ollama puts it on the terminal record only; the AI
  // SDK's Ollama provider requires it on every record, so every record has it.
  return { response: content, ...(thinking ? { thinking } : {}), context: [] };
}

function terminal(plan: RecordPlan, g: Gathered, end: ChoiceEnd, whole: boolean) {
  return {
    ...head(plan),
    ...(whole ? body(plan, g.content, g.thinking, g.calls) : body(plan, "", "")),
    ...(whole && plan.logprobs ? { logprobs: g.logprobs } : {}),
    done: true,
    done_reason: doneReason(end),
    ...g.durations(),
    prompt_eval_count: plan.promptTokens,
    prompt_eval_cached_count: end.cachedTokens,
    eval_count: end.completionTokens,
  };
}

/**
 * Ollama's records: one per delta when streamed, then the calls and the terminal record; whole, the terminal record
 * alone.
 */
export function ollamaRenderer(plan: RecordPlan): ReplyRenderer {
  const g = new Gathered(plan.model, plan.timer);
  return {
    delta: (_index, d) => {
      const part = g.add(d);
      if (!part.content && !part.thinking && part.logprobs.length === 0) return [];
      return [
        {
          data: {
            ...head(plan),
            ...body(plan, part.content, part.thinking),
            ...(plan.logprobs ? { logprobs: part.logprobs } : {}),
            done: false,
          },
        },
      ];
    },
    // Calls arrive whole, on one record before the terminal one.
    close: (_index, end) => [
      ...(g.calls.length > 0 ? [{ data: { ...head(plan), ...body(plan, "", "", g.calls), done: false } }] : []),
      { data: terminal(plan, g, end, false) },
    ],
    whole: ([end]) => ({
      body: terminal(plan, g, end!, true),
      headers: { "x-superfluid-warm": String(end!.cachedTokens) },
    }),
  };
}

/** A preload (empty messages or prompt): nothing runs, one terminal record says the model is loaded. */
export function preloaded(plan: Pick<RecordPlan, "kind" | "name">, stream: boolean): Response {
  const record = {
    model: plan.name,
    created_at: new Date().toISOString(),
    ...(plan.kind === "chat" ? { message: { role: "assistant", content: "" } } : { response: "" }),
    done: true,
    done_reason: "load",
  };
  if (!stream) return Response.json(record);
  return new Response(`${JSON.stringify(record)}\n`, { headers: { "content-type": OLLAMA_NDJSON.contentType } });
}
