// One runner for every family's chat route (docs/design.md#adding-an-api-family).
// A family is a translator: it parses its request into the neutral chat job
// and renders the choices' deltas on its wire. The runner owns what happens
// in between, in the same order for every family: the body read, the list
// limits, the family's parse (the model it names loaded), the request's QoS
// class and batch-invariance check, the job, prepareChat, starting the
// choices, and the reply (reply-runner.ts).
import type { ServedModel } from "../daemon/served-model.ts";
import type { QosClass } from "../engine/scheduler.ts";
import type { ChatJob } from "../pipeline/chat-job.ts";
import type { GenerationDefaults } from "../pipeline/engine-request.ts";
import { prepareChat, startChat, type PreparedChat } from "../pipeline/prepare-chat.ts";
import { RequestTimer } from "./access-log.ts";
import { readJsonBody } from "./body.ts";
import { checkListLengths } from "./chat-limits.ts";
import type { JsonReply } from "./keepalive.ts";
import { checkBatchInvariant, requestQos } from "./qos.ts";
import { replyResponse, runWholeReply, type ReplyRenderer, type ReplyWire } from "./reply-runner.ts";
import type { ServerContext } from "./server-context.ts";

/** A family's request, validated, and the model it runs on. */
export interface ParsedChat {
  model: ServedModel;
  stream: boolean;
  /**
   * Ends what the request holds (the Responses API's pin on the stored turn it continues); called once the reply is
   * over or failed.
   */
  release?(): void;
}

/** One reply as the family writes it: its renderer, and its id for the access log. */
export interface ChatReply {
  renderer: ReplyRenderer;
  id?: string;
}

/** An API family's chat route: a parser and a renderer. */
export interface ChatFamily<P extends ParsedChat> extends ReplyWire {
  route: string;
  /** The body as JSON; readJsonBody by default (Ollama also reads curl's form bodies). */
  readBody?(request: Request): Promise<unknown>;
  /** The body validated and its model loaded; a Response ends the request there (Ollama's preload). */
  parse(ctx: ServerContext, body: unknown, request: Request): Promise<P | Response>;
  /**
   * The neutral job: everything the engine request needs (breakpoints, a
   * smaller window) is in it. `defaults` are the operator's (the server
   * context), or a Batches line's own.
   */
  job(ctx: ServerContext, parsed: P, qos: QosClass, defaults: GenerationDefaults): ChatJob | Promise<ChatJob>;
  /** How this reply is written, once its prompt is prepared. */
  reply(ctx: ServerContext, parsed: P, prepared: PreparedChat, timer: RequestTimer): ChatReply;
}

/** Serves one chat request through `family`. */
export async function runChat<P extends ParsedChat>(
  ctx: ServerContext,
  request: Request,
  family: ChatFamily<P>,
): Promise<Response> {
  const timer = new RequestTimer();
  const body = await (family.readBody ?? readJsonBody)(request);
  checkListLengths(ctx.registry, body);
  const parsed = await family.parse(ctx, body, request);
  if (parsed instanceof Response) return parsed;
  try {
    const qos = requestQos(ctx.qos, request);
    checkBatchInvariant(ctx.qos, request);
    const prepared = await prepareChat(ctx, parsed.model, await family.job(ctx, parsed, qos, ctx));
    const { renderer, id } = family.reply(ctx, parsed, prepared, timer);
    // A stream carries one choice.
    const choices = startChat(prepared, parsed.stream ? 1 : prepared.job.n);
    const plan = {
      ...planOf(prepared, timer, family.route, id),
      choices,
      ...(parsed.release ? { settled: parsed.release } : {}),
    };
    return await replyResponse(ctx, request.signal, plan, renderer, family, parsed.stream);
  } catch (err) {
    parsed.release?.();
    throw err;
  }
}

/** How a parsed request runs in process, outside any HTTP request (the Batches API's lines, docs/api/batches.md). */
export interface WholeChatOptions {
  qos: QosClass;
  /** Aborting it cancels the generation; the reply then ends as a cancelled one does. */
  signal: AbortSignal;
  /** Sampling defaults and reply cap in place of the operator's flags. */
  defaults?: GenerationDefaults;
}

/** A parsed request run to its whole reply, every choice of it. */
export async function runWholeChat<P extends ParsedChat>(
  ctx: ServerContext,
  family: ChatFamily<P>,
  parsed: P,
  opts: WholeChatOptions,
): Promise<JsonReply> {
  const timer = new RequestTimer();
  const defaults = opts.defaults ?? ctx;
  const prepared = await prepareChat(defaults, parsed.model, await family.job(ctx, parsed, opts.qos, defaults));
  const { renderer, id } = family.reply(ctx, parsed, prepared, timer);
  const plan = { ...planOf(prepared, timer, family.route, id), choices: startChat(prepared) };
  return runWholeReply(opts.signal, plan, renderer);
}

function planOf(prepared: PreparedChat, timer: RequestTimer, route: string, id: string | undefined) {
  return {
    route,
    model: prepared.model,
    promptTokens: prepared.prompt.length,
    ...(id ? { id } : {}),
    choice: prepared.choice,
    timer,
  };
}
