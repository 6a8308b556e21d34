// POST /v1/completions (api.md 6): a plain text prompt, tokenized as given (no
// chat scaffold). Fill-in-the-middle (`suffix`) lands with the scheduling work.
import * as v from "valibot";
import { choiceText, type ChoiceDelta } from "../../daemon/choice-stream.ts";
import type { ServedModel } from "../../daemon/served-model.ts";
import type { TokenLogprob } from "../../engine/logprobs.ts";
import { logAccess, RequestTimer } from "../access-log.ts";
import { modelOr404 } from "../models.ts";
import { readJsonBody } from "../body.ts";
import { ApiError, badRequest } from "../errors.ts";
import { sseResponse } from "../sse.ts";
import { int, opt, parseWith } from "../validate.ts";
import { cancelOnAbort, checkContext, checkTextFits, generateRequest, startChoices, type ServerContext } from "./generation.ts";
import { requestSampling, samplingFields } from "./sampling-fields.ts";

const ROUTE = "/v1/completions";

const completionSchema = v.looseObject({
  model: v.string("model must be a string"),
  prompt: v.string("prompt must be a string (arrays and token ids are not accepted)"),
  suffix: opt(v.string()),
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

/** api.md 6: suffix means fill-in-the-middle; a model without FIM tokens refuses it. */
function refuseFim(model: ServedModel, req: CompletionRequest): void {
  if (req.suffix === undefined || req.suffix === null) return;
  if (!model.dialect().fim) {
    throw new ApiError(400, `model '${model.id}' has no fill-in-the-middle tokens and no --fim-model is set`, "fim_unsupported", "suffix");
  }
  throw new ApiError(400, "suffix (fill-in-the-middle) is not served by this build yet", "unsupported_parameter", "suffix");
}

function refuseEchoLogprobs(req: CompletionRequest): void {
  if (req.echo && req.logprobs !== undefined && req.logprobs !== null) {
    throw new ApiError(400, "echo with logprobs needs prompt logprobs, which this server does not compute", "unsupported_parameter", "echo");
  }
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

export async function completions(ctx: ServerContext, request: Request): Promise<Response> {
  const req = parseCompletion(await readJsonBody(request));
  const model = modelOr404(ctx.registry, req.model);
  refuseFim(model, req);
  refuseEchoLogprobs(req);
  checkTextFits(model, Buffer.byteLength(req.prompt), "prompt");
  const prompt = model.tokenizer.tokenize(req.prompt, { addSpecial: true, parseSpecial: true });
  checkContext(model, prompt.length, "prompt");
  const wantLogprobs = req.logprobs !== undefined && req.logprobs !== null;
  const genReq = generateRequest(ctx, model, prompt, {
    sampling: requestSampling(req),
    maxTokens: req.max_tokens ?? undefined,
    ignoreEos: req.ignore_eos ?? false,
    ...(wantLogprobs ? { logprobs: req.logprobs! } : {}),
  });
  const timer = new RequestTimer();
  const live = await startChoices(model, genReq, 1);
  cancelOnAbort(request.signal, () => live);
  const generation = live[0]!;
  const id = `cmpl-superfluid-${ctx.nextId()}`;
  const created = Math.floor(Date.now() / 1000);
  const echo = req.echo ? req.prompt : "";
  const logprobs = wantLogprobs ? new LegacyLogprobs(model, echo.length) : undefined;
  const stream = choiceText(model.tokenizer, generation, { stops: [] });
  const usage = (completion: number, cached: number) => ({
    prompt_tokens: prompt.length,
    completion_tokens: completion,
    total_tokens: prompt.length + completion,
    prompt_tokens_details: { cached_tokens: cached },
  });
  const record = (d: ChoiceDelta) => {
    timer.tokenDelivered();
    for (const l of d.logprobs ?? []) logprobs?.add(l.token, l.logprob);
  };
  const base = { id, object: "text_completion", created, model: model.id };

  if (!req.stream) {
    let text = echo;
    let step = await stream.next();
    while (!step.done) {
      record(step.value);
      text += step.value.content + step.value.reasoning;
      step = await stream.next();
    }
    const end = step.value;
    logAccess({ status: 200, route: ROUTE, model: model.id, prompt: prompt.length, cached: end.cachedTokens, completion: end.completionTokens, finish: end.finishReason }, timer);
    return Response.json(
      {
        ...base,
        choices: [{ index: 0, text, logprobs: logprobs ? logprobs.since(0) : null, finish_reason: end.finishReason }],
        usage: usage(end.completionTokens, end.cachedTokens),
        superfluid: { warm: end.cachedTokens },
      },
      { headers: { "x-superfluid-warm": String(end.cachedTokens) } },
    );
  }

  return sseResponse(async (sink, signal) => {
    signal.addEventListener("abort", () => generation.cancel(), { once: true });
    const send = (text: string, lp: unknown, finish: string | null, extra: Record<string, unknown> = {}) =>
      sink.send({ ...base, choices: [{ index: 0, text, logprobs: lp, finish_reason: finish }], ...extra });
    if (echo) send(echo, null, null);
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
    logAccess({ status: 200, route: ROUTE, model: model.id, prompt: prompt.length, cached: end.cachedTokens, completion: end.completionTokens, finish: end.finishReason }, timer);
    send("", null, end.finishReason, { usage: usage(end.completionTokens, end.cachedTokens), superfluid: { warm: end.cachedTokens } });
  });
}
