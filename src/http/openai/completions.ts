// POST /v1/completions (docs/api/openai.md#completions): prompts tokenized as given (no chat
// scaffold), in every form OpenAI's API takes (completion-prompt.ts), each
// with n choices, stop strings as on chat. With a non-empty `suffix`,
// fill-in-the-middle: each prompt is the text before the cursor, the suffix
// the text after it, the reply the middle. FIM runs in the completion class,
// on the --fim-model when there is one, under the per-client bucket and the
// start deadline, and is kept out of the session log.
import * as v from "valibot";
import type { ServedModel } from "../../daemon/served-model.ts";
import { QOS } from "../../engine/scheduler.ts";
import { loadedOr404 } from "../models.ts";
import { readJsonBody } from "../body.ts";
import { RequestError, invalidRequest } from "../../daemon/request-error.ts";
import { checkBatchInvariant, requestQos } from "../qos.ts";
import { chargeFimRequest } from "../rate-limit.ts";
import { int, object, opt, parseWith } from "../validate.ts";
import { chatRequestSchema } from "./chat-schema.ts";
import { promptEntries, promptField, tokenizePrompts, type PromptEntry } from "./completion-prompt.ts";
import { completionReply } from "./completion-reply.ts";
import { finishOf } from "../access-log.ts";
import { fimPrompts } from "./fim.ts";
import {
  FIM_DEFAULT_MAX_TOKENS,
  FIM_MODES,
  fimMarkersOf,
  fimTargetOf,
  type FimMode,
} from "../../pipeline/fim-prompt.ts";
import { stopList } from "../../pipeline/engine-request.ts";
import type { ServerContext } from "../server-context.ts";
import { requestSampling, samplingFields } from "./sampling-fields.ts";
import { specField } from "./spec-stats.ts";
import { refusePerRequestLora } from "./lora.ts";
import { checkArrayLength, checkReplyBudget, MAX_CHOICES } from "../chat-limits.ts";

const completionSchema = v.looseObject({
  model: v.string("model must be a string"),
  prompt: promptField,
  suffix: opt(v.string()),
  fim_mode: opt(v.string()),
  stream: opt(v.boolean()),
  stream_options: opt(object({ include_usage: opt(v.boolean()) })),
  echo: opt(v.boolean()),
  max_tokens: opt(int(1)),
  logprobs: opt(int(0, 20)),
  // n and stop are validated exactly as on chat.
  n: chatRequestSchema.entries.n,
  stop: chatRequestSchema.entries.stop,
  best_of: opt(int(1)),
  ...samplingFields,
});
type CompletionRequest = v.InferOutput<typeof completionSchema>;

function parseCompletion(body: unknown): CompletionRequest {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw invalidRequest("request body must be a JSON object");
  if ((body as { model?: unknown }).model === undefined)
    throw invalidRequest("you must provide a model parameter", "model");
  if ((body as { prompt?: unknown }).prompt === undefined)
    throw invalidRequest("you must provide a prompt parameter", "prompt");
  refusePerRequestLora(body);
  // Each prompt is at least one choice: more prompts than MAX_CHOICES are
  // refused before validation walks them (an array of token ids is one prompt).
  const { prompt } = body as { prompt: unknown };
  if (Array.isArray(prompt) && typeof prompt[0] !== "number") checkArrayLength(prompt, "prompt", MAX_CHOICES);
  return parseWith(completionSchema, body);
}

function fimModeOf(req: CompletionRequest): FimMode {
  const mode = req.fim_mode ?? "psm";
  if (!(FIM_MODES as readonly string[]).includes(mode)) {
    throw invalidRequest(`fim_mode must be one of ${FIM_MODES.join(", ")}; got '${mode}'`, "fim_mode");
  }
  return mode as FimMode;
}

/**
 * n, after checking best_of (accepted only as n: every choice generated is
 * returned, none ranked), the choice total, and the reply tokens the choices
 * may reserve (src/http/chat-limits.ts: `cap` is the reply cap that applies
 * when max_tokens is not sent, undefined for the rest of the window).
 */
function choicesPerPrompt(
  req: CompletionRequest,
  prompts: number,
  model: ServedModel,
  cap: number | undefined,
): number {
  const n = req.n ?? 1;
  if (req.best_of !== undefined && req.best_of !== null && req.best_of !== n) {
    throw new RequestError(
      400,
      `best_of (${req.best_of}) must equal n (${n}): this server returns every choice it generates and ranks none`,
      "unsupported_parameter",
      "best_of",
    );
  }
  if (prompts * n > MAX_CHOICES) {
    throw invalidRequest(
      `${prompts} prompts with n=${n} make ${prompts * n} choices; a request may ask for at most ${MAX_CHOICES}`,
      prompts > MAX_CHOICES ? "prompt" : "n",
    );
  }
  checkReplyBudget(prompts * n, req.max_tokens ?? cap, model.contextWindow, "max_tokens", n > 1 ? "n" : "prompt");
  return n;
}

function refuseEchoLogprobs(req: CompletionRequest): void {
  if (req.echo && req.logprobs !== undefined && req.logprobs !== null) {
    throw new RequestError(
      400,
      "echo with logprobs needs prompt logprobs, which this server does not compute",
      "unsupported_parameter",
      "echo",
    );
  }
}

/** docs/api/openai.md#fill-in-the-middle: FIM refuses echo and logprobs. */
function refuseFimParameters(req: CompletionRequest): void {
  if (req.echo)
    throw new RequestError(
      400,
      "echo is not supported with suffix (fill-in-the-middle)",
      "unsupported_parameter",
      "echo",
    );
  if (req.logprobs !== undefined && req.logprobs !== null) {
    throw new RequestError(
      400,
      "logprobs is not supported with suffix (fill-in-the-middle)",
      "unsupported_parameter",
      "logprobs",
    );
  }
}

/** What plain and FIM completions take from the request alike. */
function sharedPlan(req: CompletionRequest, n: number) {
  return {
    n,
    stream: req.stream ?? false,
    stops: stopList(req.stop, req.ignore_eos),
    generation: {
      sampling: requestSampling(req),
      maxTokens: req.max_tokens ?? undefined,
      ignoreEos: req.ignore_eos ?? false,
    },
  };
}

export async function completions(ctx: ServerContext, request: Request, peer = "unknown"): Promise<Response> {
  const req = parseCompletion(await readJsonBody(request));
  const model = await loadedOr404(ctx.registry, req.model);
  const mode = fimModeOf(req);
  const entries = promptEntries(req.prompt);
  // The reply cap when the request names none: --max-tokens, and for FIM its own default (fimCompletion).
  const n = choicesPerPrompt(
    req,
    entries.length,
    model,
    req.suffix ? (ctx.maxTokens ?? FIM_DEFAULT_MAX_TOKENS) : ctx.maxTokens,
  );
  checkBatchInvariant(ctx.qos, request);
  if (req.suffix) return fimCompletion(ctx, request, req, model, entries, n, mode, peer);
  const qos = requestQos(ctx.qos, request);
  refuseEchoLogprobs(req);
  const prompts = await tokenizePrompts(model, entries);
  const wantLogprobs = req.logprobs !== undefined && req.logprobs !== null;
  const shared = sharedPlan(req, n);
  return completionReply(ctx, request, {
    ...shared,
    model,
    servedAs: model.id,
    prompts,
    generation: { ...shared.generation, qos, ...(wantLogprobs ? { logprobs: req.logprobs! } : {}) },
    durable: true,
    echo: req.echo ?? false,
    logprobs: wantLogprobs,
    extras: (ends, cached) => ({ superfluid: { warm: cached, ...specField(ends) } }),
  });
}

/**
 * Fill-in-the-middle (docs/api/openai.md#fill-in-the-middle), one per prompt, all with the same suffix. The
 * reply's `superfluid` object carries `cached` (prompt tokens reused from the
 * prefix cache), `expired` (a choice was still queued at
 * --completion-deadline-ms: 200 with empty text and finish_reason "stop",
 * docs/api/openai.md#fill-in-the-middle) and `served_by` (the model that ran it: the --fim-model when
 * there is one). A request takes one token from the client's bucket however
 * many prompts it carries.
 */
async function fimCompletion(
  ctx: ServerContext,
  request: Request,
  req: CompletionRequest,
  model: ServedModel,
  entries: PromptEntry[],
  n: number,
  mode: FimMode,
  peer: string,
): Promise<Response> {
  refuseFimParameters(req);
  const target = fimTargetOf(model);
  const prompts = await fimPrompts(target, fimMarkersOf(target.info.fimTokens)!, entries, req.suffix!, mode);
  // A request refused above takes nothing from the client's bucket.
  chargeFimRequest(ctx.fim.buckets, peer);
  const shared = sharedPlan(req, n);
  return completionReply(ctx, request, {
    ...shared,
    model: target,
    servedAs: model.id,
    prompts,
    generation: {
      ...shared.generation,
      defaultMaxTokens: ctx.maxTokens ?? FIM_DEFAULT_MAX_TOKENS,
      // Always the completion class (docs/api/openai.md#qos-classes).
      qos: QOS.completion,
      ...(ctx.fim.deadlineMs > 0 ? { startBy: Date.now() + ctx.fim.deadlineMs } : {}),
    },
    // Not durable: FIM completions are not written to the session log (docs/api/openai.md#fill-in-the-middle).
    durable: false,
    echo: false,
    logprobs: false,
    extras: (ends, cached) => ({
      superfluid: { cached, expired: ends.some((e) => e.expired), served_by: target.id, ...specField(ends) },
    }),
    logFinish: (ends) => (ends.some((e) => e.expired) ? "expired" : finishOf(ends[0]!)),
  });
}
