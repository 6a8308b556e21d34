// POST /api/generate (docs/api/ollama.md#generate), three ways:
// - templated (the default): `prompt` as the user turn after `system`,
//   through the model's chat template, as a chat is;
// - `raw`: the prompt tokenized as given (control-token text parsed), no
//   template;
// - with a non-empty `suffix`: fill-in-the-middle, run as /v1/completions
//   runs it (the --fim-model when set, the completion class, the per-client
//   bucket and start deadline, kept out of the session log).
// An empty prompt with nothing else preloads (one `load` record).
import type { ServedModel } from "../../daemon/served-model.ts";
import { QOS } from "../../engine/scheduler.ts";
import { ChoiceSet } from "../../pipeline/choice-set.ts";
import type { ChoiceOptions } from "../../pipeline/choice-stream.ts";
import { FIM_DEFAULT_MAX_TOKENS, fimMarkersOf, fimPrompt, fimTargetOf } from "../../pipeline/fim-prompt.ts";
import {
  checkContext,
  checkTextFits,
  fitWindow,
  generateRequest,
  type GenerationOptions,
} from "../../pipeline/engine-request.ts";
import { prepareChat, startChat } from "../../pipeline/prepare-chat.ts";
import { invalidRequest } from "../../daemon/request-error.ts";
import { RequestTimer } from "../access-log.ts";
import { replyResponse } from "../reply-runner.ts";
import { readJsonBody } from "../body.ts";
import { peerAddress } from "../listener.ts";
import { checkBatchInvariant, requestQos } from "../qos.ts";
import { chargeFimRequest } from "../rate-limit.ts";
import type { ServerContext } from "../server-context.ts";
import { CURL_BODIES } from "./envelope.ts";
import { loadedOllamaModel } from "./model-name.ts";
import { optionsPlan } from "./options.ts";
import { OLLAMA_WIRE, ollamaRenderer, preloaded } from "./reply.ts";
import { generateJobOf, refuseImages } from "./request.ts";
import { generateSchema, mergedOptions, parseOllama, type GenerateRequest } from "./schema.ts";

export const GENERATE_ROUTE = "/api/generate";

/** raw and suffix prompts are not templated, so what only a template could carry is refused. */
function refuseUntemplated(req: GenerateRequest, mode: "raw" | "suffix"): void {
  const refused: [string, unknown][] = [
    ["system", req.system],
    ["format", req.format],
    ["think", req.think],
    ["options.stop", mergedOptions(req).stop],
  ];
  for (const [field, value] of refused) {
    if (value !== undefined && value !== null && value !== "")
      throw invalidRequest(`${field} cannot be used with ${mode}: the prompt is not templated`, field);
  }
  refuseImages(req.images, "images");
}

export async function generate(ctx: ServerContext, request: Request): Promise<Response> {
  const timer = new RequestTimer();
  const req = parseOllama(generateSchema, await readJsonBody(request, CURL_BODIES));
  const model = await loadedOllamaModel(ctx.registry, req.model);
  const stream = req.stream ?? true;
  if (req.template)
    throw invalidRequest(
      "template: only the model's own template is used (send an empty template or none)",
      "template",
    );
  const suffix = req.suffix ?? "";
  if (!req.prompt && suffix === "" && !req.system && !(req.images && req.images.length > 0))
    return preloaded({ kind: "generate", name: req.model }, stream);
  checkBatchInvariant(ctx.qos, request);
  const reply = (on: ServedModel, promptTokens: number, choices: ChoiceSet, choice: ChoiceOptions) => {
    const plan = { route: GENERATE_ROUTE, model: on, promptTokens, choices, choice, timer };
    const renderer = ollamaRenderer({
      kind: "generate",
      name: req.model,
      model: on,
      promptTokens,
      logprobs: false,
      timer,
    });
    return replyResponse(ctx, request.signal, plan, renderer, OLLAMA_WIRE, stream);
  };
  if (suffix !== "") {
    const { choices, prompt, target } = await startFim(ctx, request, req, model, suffix);
    return reply(target, prompt, choices, { stops: [] });
  }
  const qos = requestQos(ctx.qos, request);
  if (req.raw) {
    refuseUntemplated(req, "raw");
    const text = req.prompt ?? "";
    checkTextFits(model, text.length, "prompt");
    const tokens = Array.from(await model.prompts.tokenize(text, { addSpecial: true, parseSpecial: true }));
    checkContext(model, tokens.length, "prompt");
    const options = optionsPlan(model, mergedOptions(req));
    const engineRequest = generateRequest(ctx, model, tokens, {
      sampling: options.sampling,
      maxTokens: options.maxTokens,
      qos,
    });
    fitWindow(options.window, tokens.length, engineRequest);
    return reply(model, tokens.length, new ChoiceSet(model, [engineRequest], 1, { durable: true }), { stops: [] });
  }
  checkTextFits(model, (req.prompt ?? "").length + (req.system ?? "").length, "prompt");
  const p = await prepareChat(ctx, model, generateJobOf(model, req, qos));
  return reply(model, p.prompt.length, startChat(p, 1), p.choice);
}

/** Fill-in-the-middle: the prompt before the cursor, the suffix after it. */
async function startFim(
  ctx: ServerContext,
  request: Request,
  req: GenerateRequest,
  model: ServedModel,
  suffix: string,
) {
  refuseUntemplated(req, "suffix");
  if (req.raw)
    throw invalidRequest("raw cannot be used with suffix: fill-in-the-middle frames the prompt itself", "raw");
  const target = fimTargetOf(model);
  const prefix = req.prompt ?? "";
  checkTextFits(target, prefix.length + suffix.length, "prompt");
  const prompt = await fimPrompt(target, fimMarkersOf(target.info.fimTokens)!, prefix, suffix, "psm");
  checkContext(target, prompt.length, "prompt");
  const options = optionsPlan(target, mergedOptions(req));
  const generation: GenerationOptions = {
    sampling: options.sampling,
    maxTokens: options.maxTokens,
    defaultMaxTokens: ctx.maxTokens ?? FIM_DEFAULT_MAX_TOKENS,
    qos: QOS.completion,
    ...(ctx.fim.deadlineMs > 0 ? { startBy: Date.now() + ctx.fim.deadlineMs } : {}),
  };
  const engineRequest = generateRequest(ctx, target, prompt, generation);
  fitWindow(options.window, prompt.length, engineRequest);
  // A request refused above takes nothing from the client's bucket.
  chargeFimRequest(ctx.fim.buckets, peerAddress(request));
  return { choices: new ChoiceSet(target, [engineRequest], 1, { durable: false }), prompt: prompt.length, target };
}
