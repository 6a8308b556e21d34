// POST /v1/completions (api.md 6): a plain text prompt, tokenized as given (no
// chat scaffold); with a non-empty `suffix`, fill-in-the-middle: the prompt is
// the text before the cursor, the suffix the text after it, the reply the
// middle. FIM runs in the completion class, on the --fim-model when there is
// one, under the per-client bucket and the start deadline, and is kept out of
// the session log.
import * as v from "valibot";
import { choiceText, type ChoiceDelta, type ChoiceEnd } from "../../daemon/choice-stream.ts";
import type { ServedModel } from "../../daemon/served-model.ts";
import type { Generation } from "../../daemon/worker-client.ts";
import type { TokenLogprob } from "../../engine/logprobs.ts";
import { QOS } from "../../engine/scheduler.ts";
import { logAccess, RequestTimer } from "../access-log.ts";
import { modelOr404 } from "../models.ts";
import { readJsonBody } from "../body.ts";
import { ApiError, badRequest } from "../errors.ts";
import { admissionHeaders, nonStreamResponse } from "../keepalive.ts";
import { checkBatchInvariant, requestQos } from "../qos.ts";
import { sseResponse } from "../sse.ts";
import { int, opt, parseWith } from "../validate.ts";
import { FIM_MODES, fimMarkersOf, fimPrompt, type FimMode } from "./fim.ts";
import { cancelOnAbort, checkContext, checkTextFits, generateRequest, sseKeepaliveMs, usageOf, type ServerContext } from "./generation.ts";
import { requestSampling, samplingFields } from "./sampling-fields.ts";

const ROUTE = "/v1/completions";

/** The FIM reply cap when neither the request nor --max-tokens names one (api.md 6). */
export const FIM_DEFAULT_MAX_TOKENS = 128;


const completionSchema = v.looseObject({
  model: v.string("model must be a string"),
  prompt: v.string("prompt must be a string (arrays and token ids are not accepted)"),
  suffix: opt(v.string()),
  fim_mode: opt(v.string()),
  stream: opt(v.boolean()),
  stream_options: opt(v.looseObject({ include_usage: opt(v.boolean()) })),
  echo: opt(v.boolean()),
  max_tokens: opt(int(1)),
  logprobs: opt(int(0, 20)),
  ...samplingFields,
});
type CompletionRequest = v.InferOutput<typeof completionSchema>;

function parseCompletion(body: unknown): CompletionRequest {
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw badRequest("request body must be a JSON object");
  if ((body as { model?: unknown }).model === undefined) throw badRequest("you must provide a model parameter", "model");
  if ((body as { prompt?: unknown }).prompt === undefined) throw badRequest("you must provide a prompt parameter", "prompt");
  return parseWith(completionSchema, body);
}

function fimModeOf(req: CompletionRequest): FimMode {
  const mode = req.fim_mode ?? "psm";
  if (!(FIM_MODES as readonly string[]).includes(mode)) {
    throw badRequest(`fim_mode must be one of ${FIM_MODES.join(", ")}; got '${mode}'`, "fim_mode");
  }
  return mode as FimMode;
}

function refuseEchoLogprobs(req: CompletionRequest): void {
  if (req.echo && req.logprobs !== undefined && req.logprobs !== null) {
    throw new ApiError(400, "echo with logprobs needs prompt logprobs, which this server does not compute", "unsupported_parameter", "echo");
  }
}

/** api.md 6: FIM refuses echo and logprobs. */
function refuseFimParameters(req: CompletionRequest): void {
  if (req.echo) throw new ApiError(400, "echo is not supported with suffix (fill-in-the-middle)", "unsupported_parameter", "echo");
  if (req.logprobs !== undefined && req.logprobs !== null) {
    throw new ApiError(400, "logprobs is not supported with suffix (fill-in-the-middle)", "unsupported_parameter", "logprobs");
  }
}

/** The model a FIM request runs on, or 400 fim_unsupported. */
function fimTargetOf(model: ServedModel): ServedModel {
  const target = model.fimTarget();
  if (!target) throw new ApiError(400, `model '${model.id}' has no fill-in-the-middle tokens and no --fim-model is set`, "fim_unsupported", "suffix");
  return target;
}

/** OpenAI's legacy logprobs shape, accumulated over a reply. */
class LegacyLogprobs {
  tokens: string[] = [];
  token_logprobs: number[] = [];
  top_logprobs: Record<string, number>[] = [];
  text_offset: number[] = [];

  constructor(
    private readonly model: ServedModel,
    private offset: number,
  ) {}

  add(token: number, lp: TokenLogprob): void {
    const text = (t: number) => Buffer.from(this.model.tokenizer.tokenBytes(t)).toString("utf8");
    const piece = text(token);
    this.tokens.push(piece);
    this.token_logprobs.push(lp.logprob);
    this.top_logprobs.push(Object.fromEntries(lp.top.map(([t, l]) => [text(t), l])));
    this.text_offset.push(this.offset);
    this.offset += piece.length;
  }

  /** The entries added since `from`, for one streamed chunk. */
  since(from: number) {
    return {
      tokens: this.tokens.slice(from),
      token_logprobs: this.token_logprobs.slice(from),
      top_logprobs: this.top_logprobs.slice(from),
      text_offset: this.text_offset.slice(from),
    };
  }
}

export async function completions(ctx: ServerContext, request: Request, peer = "unknown"): Promise<Response> {
  const req = parseCompletion(await readJsonBody(request));
  const model = modelOr404(ctx.registry, req.model);
  const mode = fimModeOf(req);
  checkBatchInvariant(ctx.qos, request.headers);
  if (req.suffix) return fimCompletion(ctx, request, req, model, mode, peer);
  const qos = requestQos(ctx.qos, request.headers);
  refuseEchoLogprobs(req);
  checkTextFits(model, Buffer.byteLength(req.prompt), "prompt");
  const prompt = model.tokenizer.tokenize(req.prompt, { addSpecial: true, parseSpecial: true });
  checkContext(model, prompt.length, "prompt");
  const wantLogprobs = req.logprobs !== undefined && req.logprobs !== null;
  const genReq = generateRequest(ctx, model, prompt, {
    sampling: requestSampling(req),
    maxTokens: req.max_tokens ?? undefined,
    ignoreEos: req.ignore_eos ?? false,
    qos,
    ...(wantLogprobs ? { logprobs: req.logprobs! } : {}),
  });
  return reply(ctx, request, {
    generation: model.worker.generate(genReq),
    model,
    servedAs: model.id,
    promptTokens: prompt.length,
    stream: req.stream ?? false,
    echo: req.echo ? req.prompt : "",
    logprobs: wantLogprobs,
    extras: (end) => ({ superfluid: { warm: end.cachedTokens } }),
  });
}

/**
 * Fill-in-the-middle (api.md 6). The reply's `superfluid` object carries
 * `cached` (prompt tokens reused from the prefix cache), `expired` (the
 * request was still queued at --completion-deadline-ms: 200 with empty text
 * and finish_reason "stop", api.md 0.12) and `served_by` (the model that ran
 * it: the --fim-model when there is one).
 */
async function fimCompletion(ctx: ServerContext, request: Request, req: CompletionRequest, model: ServedModel, mode: FimMode, peer: string): Promise<Response> {
  refuseFimParameters(req);
  const target = fimTargetOf(model);
  const markers = fimMarkersOf(target.info.fimTokens)!;
  checkTextFits(target, Buffer.byteLength(req.prompt) + Buffer.byteLength(req.suffix!), "prompt");
  const prompt = fimPrompt(target, markers, req.prompt, req.suffix!, mode);
  checkContext(target, prompt.length, "prompt");
  // A request refused above takes nothing from the client's bucket.
  const taken = ctx.fim.buckets.take(peer);
  if (!taken.ok) {
    throw new ApiError(
      429,
      `fill-in-the-middle requests from this client are over --completion-rate (${ctx.fim.buckets.rate}/s, burst ${ctx.fim.buckets.capacity}); retry after ${taken.retryAfter} s`,
      "completion_rate_limited",
      null,
      "rate_limit_error",
      { "retry-after": String(taken.retryAfter) },
    );
  }
  const genReq = generateRequest(ctx, target, prompt, {
    sampling: requestSampling(req),
    maxTokens: req.max_tokens ?? undefined,
    defaultMaxTokens: ctx.maxTokens ?? FIM_DEFAULT_MAX_TOKENS,
    ignoreEos: req.ignore_eos ?? false,
    // Always the completion class (api.md 20).
    qos: QOS.completion,
    ...(ctx.fim.deadlineMs > 0 ? { startBy: Date.now() + ctx.fim.deadlineMs } : {}),
  });
  return reply(ctx, request, {
    // Not durable: FIM completions are not written to the session log (api.md 6).
    generation: target.worker.generate(genReq, { durable: false }),
    model: target,
    servedAs: model.id,
    promptTokens: prompt.length,
    stream: req.stream ?? false,
    echo: "",
    logprobs: false,
    extras: (end) => ({ superfluid: { cached: end.cachedTokens, expired: end.expired, served_by: target.id } }),
    logFinish: (end) => (end.expired ? "expired" : end.finishReason),
  });
}

interface ReplyOptions {
  generation: Generation;
  /** The model generating (its tokenizer, its id in the access log). */
  model: ServedModel;
  /** The model id the reply names (the requested one). */
  servedAs: string;
  promptTokens: number;
  stream: boolean;
  /** The prompt text to put before the reply (`echo`), or "". */
  echo: string;
  logprobs: boolean;
  /** What the terminal object adds beside `usage` (the `superfluid` object). */
  extras: (end: ChoiceEnd) => Record<string, unknown>;
  /** The finish the access log shows; the reply's by default. */
  logFinish?: (end: ChoiceEnd) => string;
}

/** A text completion's reply, whole (padded under --nonstream-keepalive) or streamed. */
function reply(ctx: ServerContext, request: Request, o: ReplyOptions): Response | Promise<Response> {
  const { generation, model } = o;
  cancelOnAbort(request.signal, () => [generation]);
  const timer = new RequestTimer();
  const base = { id: `cmpl-superfluid-${ctx.nextId()}`, object: "text_completion", created: Math.floor(Date.now() / 1000), model: o.servedAs };
  const logprobs = o.logprobs ? new LegacyLogprobs(model, o.echo.length) : undefined;
  const admission = admissionHeaders();
  const stream = choiceText(model.tokenizer, generation, { stops: [] }, admission.onAdmitted);
  const record = (d: ChoiceDelta) => {
    timer.tokenDelivered();
    for (const l of d.logprobs ?? []) logprobs?.add(l.token, l.logprob);
  };
  const terminal = (end: ChoiceEnd) => {
    const finish = o.logFinish?.(end) ?? end.finishReason;
    logAccess({ status: 200, route: ROUTE, model: model.id, prompt: o.promptTokens, cached: end.cachedTokens, completion: end.completionTokens, finish }, timer);
    return { usage: usageOf(o.promptTokens, end.completionTokens, end.cachedTokens), ...o.extras(end) };
  };

  if (!o.stream) {
    const whole = (async () => {
      let text = o.echo;
      let step = await stream.next();
      while (!step.done) {
        record(step.value);
        text += step.value.content + step.value.reasoning;
        step = await stream.next();
      }
      const end = step.value;
      return {
        body: { ...base, choices: [{ index: 0, text, logprobs: logprobs ? logprobs.since(0) : null, finish_reason: end.finishReason }], ...terminal(end) },
        headers: { "x-superfluid-warm": String(end.cachedTokens) },
      };
    })();
    return nonStreamResponse({ keepaliveSec: ctx.keepaliveSec, admitted: admission.admitted, reply: whole, cancel: () => generation.cancel(), route: ROUTE });
  }

  return sseResponse(
    async (sink, signal) => {
      signal.addEventListener("abort", () => generation.cancel(), { once: true });
      const send = (text: string, lp: unknown, finish: string | null, extra: Record<string, unknown> = {}) =>
        sink.send({ ...base, choices: [{ index: 0, text, logprobs: lp, finish_reason: finish }], ...extra });
      if (o.echo) send(o.echo, null, null);
      let step = await stream.next();
      let sent = 0;
      while (!step.done) {
        record(step.value);
        const lp = logprobs ? logprobs.since(sent) : null;
        sent = logprobs?.tokens.length ?? 0;
        const text = step.value.content + step.value.reasoning;
        if (text || lp) send(text, lp, null);
        step = await stream.next();
      }
      const end = step.value;
      send("", null, end.finishReason, terminal(end));
    },
    {},
    sseKeepaliveMs(ctx),
  );
}
