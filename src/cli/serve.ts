// `superfluid serve`: resolve the model, start its worker, listen.
import { join } from "node:path";
import { ModelNotFoundError, resolveModel, type ResolvedModel } from "../daemon/model-ref.ts";
import { ModelRegistry } from "../daemon/registry.ts";
import { ServedModel } from "../daemon/served-model.ts";
import { SessionStore } from "../sessions/store.ts";
import { FileStore } from "../files/store.ts";
import { ResponseStore } from "../responses/store.ts";
import { ensureFixture } from "../fixtures/index.ts";
import { BatchService } from "../batches/service.ts";
import { createApp } from "../http/app.ts";
import { runBatchLine } from "../http/openai/batches.ts";
import type { ServerContext } from "../http/server-context.ts";
import { listen, type Listener } from "../http/listener.ts";
import { isLoopbackName } from "../http/origin-guard.ts";
import { TokenBuckets } from "../http/rate-limit.ts";
import { cacheDir } from "../../ffi/paths.ts";
import { parseServeOptions, SERVE_USAGE, UsageError, type ServeOptions } from "./serve-options.ts";

/** The model served when none is named: generated on first use, so the server always starts. */
export const BUILTIN_MODEL_ID = "tiny-chat";

async function resolveServed(options: ServeOptions, log: (line: string) => void): Promise<ResolvedModel> {
  if (options.models.length > 0) return resolveModel(options.models[0]!, options.modelDirs);
  log(`superfluid: no model named; serving the built-in ${BUILTIN_MODEL_ID} (hand-set weights: every chat turn gets one fixed sentence; for smoke tests, not for answers)`);
  return { path: await ensureFixture("tiny-chat", join(cacheDir(), "models")), id: BUILTIN_MODEL_ID };
}

/**
 * --fim-model: a fill-in-the-middle model in its own worker, with its own
 * lanes (--fim-max-batch) and window (--fim-max-context, default
 * min(the main window, 8192)). It is not a served model of its own: FIM
 * requests to the served model run on it, and it keeps no session log.
 */
async function loadFimModel(options: ServeOptions, mainWindow: number, log: (line: string) => void): Promise<ServedModel> {
  const resolved = await resolveModel(options.fimModel!, options.modelDirs);
  const maxContext = options.fimMaxContext ?? Math.min(mainWindow, 8192);
  log(`superfluid: loading FIM model ${resolved.id} from ${resolved.path} (${options.fimMaxBatch} lanes x ${maxContext} tokens) ...`);
  const fim = await ServedModel.load({
    id: resolved.id,
    model: resolved.path,
    maxBatch: options.fimMaxBatch,
    maxContext,
    threads: options.threads,
    prefillBudget: options.prefillBudget,
    starvationTicks: options.starvationTicks,
    ...(options.hostCacheMb === undefined ? {} : { hostCacheMb: options.hostCacheMb }),
    pressureHigh: options.pressureHigh,
    pressureLow: options.pressureLow,
  });
  if (!fim.hasFimTokens) {
    await fim.close();
    throw new Error(`--fim-model ${options.fimModel}: ${resolved.id} has no fill-in-the-middle tokens (prefix, suffix and middle)`);
  }
  return fim;
}

export interface RunningServer {
  url: string;
  registry: ModelRegistry;
  /** The session log every generation is recorded in. */
  sessions: SessionStore;
  close(): Promise<void>;
}

export async function startServer(options: ServeOptions, log: (line: string) => void = (l) => console.error(l)): Promise<RunningServer> {
  // The session log first: a second server on the same directory, or a log
  // that fails its checksums, stops the start before any model is loaded.
  const sessions = await SessionStore.open(options.sessions, { cache: options.sessionsCache });
  try {
    return await startServing(options, sessions, log);
  } catch (err) {
    await sessions.close();
    throw err;
  }
}

async function startServing(options: ServeOptions, sessions: SessionStore, log: (line: string) => void): Promise<RunningServer> {
  const r = sessions.recovered;
  log(
    `superfluid: session log ${sessions.path} (epoch ${sessions.epoch}; ${r.sessions} sessions, ${r.records} records replayed` +
      (r.truncatedBytes > 0 ? `; a torn last record of ${r.truncatedBytes} bytes was cut off` : "") +
      ")",
  );
  const resolved = await resolveServed(options, log);
  const unserved = options.aliases.find((a) => a.target !== resolved.id);
  if (unserved) throw new Error(`--alias ${unserved.name}=${unserved.target}: no served model has the id '${unserved.target}' (served: ${resolved.id})`);
  const sizing = options.kvPool !== undefined ? `a shared KV pool of ${options.kvPool} cells` : options.maxContext !== undefined ? `${options.maxContext} tokens each` : "KV sized from free memory";
  log(`superfluid: loading ${resolved.id} from ${resolved.path} (${options.maxBatch} lanes, ${sizing}, ${options.threads} threads) ...`);
  const started = performance.now();
  const model = await ServedModel.load({
    id: resolved.id,
    model: resolved.path,
    maxBatch: options.maxBatch,
    ...(options.maxContext === undefined ? {} : { maxContext: options.maxContext }),
    ...(options.kvPool === undefined ? {} : { kvPool: options.kvPool }),
    threads: options.threads,
    prefillBudget: options.prefillBudget,
    starvationTicks: options.starvationTicks,
    ...(options.classLanes ? { classLanes: options.classLanes } : {}),
    ...(options.hostCacheMb === undefined ? {} : { hostCacheMb: options.hostCacheMb }),
    pressureHigh: options.pressureHigh,
    pressureLow: options.pressureLow,
    pinBudgetPct: options.pinBudgetPct,
    sessions,
  });
  log(`superfluid: ${resolved.id} ready in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  log(`superfluid: ${model.worker.info.kv.summary}`);
  const registry = new ModelRegistry();
  registry.add(model);
  for (const alias of options.aliases) registry.alias(alias.name, alias.target);
  if (options.fimModel !== undefined) {
    try {
      model.fimModel = await loadFimModel(options, model.contextWindow, log);
    } catch (err) {
      await registry.close();
      throw err;
    }
  }
  let files: FileStore;
  let responses: ResponseStore;
  try {
    responses = ResponseStore.open(join(options.sessions, "responses"));
    files = await FileStore.open(join(options.sessions, "files"), {
      ...(options.filesMaxBytes === undefined ? {} : { maxBytes: options.filesMaxBytes }),
      ...(options.filesExpirySec === undefined ? {} : { expirySec: options.filesExpirySec }),
      sweepSec: options.filesSweepSec,
    });
  } catch (err) {
    await registry.close();
    throw err;
  }
  let counter = 0;
  const loopback = isLoopbackName(options.host);
  // Batch lines run through the chat route's handler in process (on `ctx`, set
  // below before start() lets any line run); the batches on disk are known from here.
  const batches = BatchService.open({ dir: join(options.sessions, "batches"), files, modelId: model.id, execute: (body, signal) => runBatchLine(ctx, model, body, signal), log });
  const ctx: ServerContext = {
    registry,
    operatorSampling: options.sampling,
    maxTokens: options.maxTokens,
    qos: { defaultQos: options.defaultQos, honourHeader: options.qosHeader, allowBatchInvariant: options.allowBatchInvariant },
    keepaliveSec: options.nonstreamKeepalive,
    fim: { deadlineMs: options.completionDeadlineMs, buckets: new TokenBuckets(options.completionRate, options.completionBurst) },
    files,
    responses,
    batches,
    nextId: () => ++counter,
  };
  const app = createApp(ctx, { bind: options.host, authenticated: false });
  let listener: Listener;
  try {
    // Our reader enforces the 100 MiB body limit while streaming (413 in OpenAI's
    // envelope). No idle timeout: a long non-streamed generation sends nothing
    // until it is done. No port sharing: a second server on a port in use must
    // fail, not split the traffic.
    listener = await listen(app, options.host, options.port);
  } catch (err) {
    files.close();
    await registry.close();
    await sessions.close();
    throw new Error(`cannot listen on ${options.host}:${options.port}: ${(err as Error).message}`);
  }
  const host = options.host.includes(":") ? `[${options.host}]` : options.host;
  const url = `http://${host}:${listener.port}`;
  log(
    loopback
      ? "superfluid: authentication is off (loopback only)"
      : "superfluid: WARNING this server has no authentication yet: anyone who can reach this port can use the API. Keep it on a loopback address (--host 127.0.0.1 or ::1).",
  );
  log(`superfluid: serving ${resolved.id} at ${url}/v1`);
  batches.start();
  return {
    url,
    registry,
    sessions,
    close: async () => {
      await listener.close();
      // Lines in flight are aborted, not failed: the batches resume on the next start.
      await batches.stop();
      files.close();
      await registry.close();
      // What is still buffered belongs to generations the stop cut off, none of it
      // delivered: a log that cannot take it (disk full) is reported, and the stop goes on.
      await sessions.close().catch((err: Error) => log(`superfluid: the session log could not take its last records: ${err.message}`));
    },
  };
}

export async function runServe(argv: string[]): Promise<number> {
  let options;
  try {
    options = parseServeOptions(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`superfluid serve: ${err.message}`);
    return 2;
  }
  if (options === "help") {
    console.log(SERVE_USAGE);
    return 0;
  }
  let server: RunningServer;
  try {
    server = await startServer(options);
  } catch (err) {
    console.error(`superfluid serve: ${err instanceof ModelNotFoundError ? err.message : (err as Error).message}`);
    return 1;
  }
  // SIGINT and SIGTERM exit at once (docs/cli.md#startup-and-shutdown), taking the workers down first.
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  await server.close();
  return 0;
}
