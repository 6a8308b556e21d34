import { readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isReference, ModelNotFoundError, type ModelPath } from "../daemon/model-ref.ts";
import {
  fileOfNamed,
  type NamedModel,
  PullBoard,
  type PullPolicy,
  resolveNamed,
  resolveOrPull,
} from "../daemon/model-pull.ts";
import { describeToken, modelDirSources, sourceOf } from "../daemon/model-source.ts";
import { ModelRegistry, type ModelSource } from "../daemon/registry.ts";
import type { ServedModel } from "../daemon/served-model.ts";
import { ModelLoader } from "../daemon/model-loader.ts";
import { RequestError } from "../daemon/request-error.ts";
import { SessionStore } from "../session-log/store.ts";
import { FileStore } from "../files/store.ts";
import { ResponseStore } from "../response-store/store.ts";
import { ensureFixture } from "../fixtures/index.ts";
import { BatchService } from "../batches/service.ts";
import { createApp } from "../http/app.ts";
import { runBatchEmbedding, runBatchLine } from "../http/openai/batches.ts";
import type { ServerContext } from "../http/server-context.ts";
import { listen, type Listener } from "../http/listener.ts";
import { ServerMetrics } from "../http/metrics.ts";
import { SessionService } from "../session-api/service.ts";
import { sweepParkDir } from "../session-log/park-budget.ts";
import { mintToken, WebAuth } from "../web/auth.ts";
import { startWebListener, type WebListener } from "../web/listener.ts";
import { AllowedOrigins } from "../http/allowed-origins.ts";
import { isLoopbackName } from "../runtime/loopback.ts";
import { REPLICA_HEADER } from "../http/replica.ts";
import { RequestGate } from "../http/auth/gate.ts";
import { KeyRing } from "../http/auth/keyring.ts";
import { TokenBuckets } from "../http/rate-limit.ts";
import { cacheDir } from "../../ffi/paths.ts";
import { daemonYieldsWhileStreaming } from "../runtime/sched-policy.ts";
import { Unwind } from "../runtime/unwind.ts";
import { accessJson, formatAccess, setAccessSink } from "../http/access-log.ts";
import { Logger, routeConsole } from "../logging/logger.ts";
import { parseServeOptions, serveUsage, UsageError, type ServeOptions } from "./serve-options.ts";
import { StartupGate } from "./startup-gate.ts";
import { ServeTui } from "./tui.ts";
import { pullDisplay } from "./pull-progress.ts";

/** The model served when none is named: generated on first use, so the server always starts. */
export const BUILTIN_MODEL_ID = "tiny-chat";

/**
 * The window every model gets when several may be loaded and no sizing flag
 * is given (docs/cli.md#several-models): a fixed size, so the first model's
 * KV does not take the memory the next one loads into.
 */
export const SHARED_DEFAULT_CONTEXT = 8192;

/**
 * The built-in model's KV on default sizing flags: one shared pool of its
 * trained window (16 MiB), so any one conversation still gets the whole
 * 131,072 tokens. Per-lane buffers sized from free memory would be ten
 * windows (160 MiB), and clearing them was most of the start's time.
 */
export const BUILTIN_KV_POOL = 131_072;

/**
 * The models named, resolved to files (or to references still to pull, once the
 * listener is up), the first the default; the built-in model when none is named.
 * Its file is generated on first use, which takes a while on a first run ever,
 * so its path comes later (builtinSource).
 */
function resolveServed(options: ServeOptions, log: (line: string) => void): NamedModel[] | "builtin" {
  if (options.models.length > 0) return options.models.map((token) => resolveNamed(token, options.modelDirs));
  log(
    `superfluid: no model named; serving the built-in ${BUILTIN_MODEL_ID} (hand-set weights: every chat turn gets one fixed sentence; for smoke tests, not for answers)`,
  );
  return "builtin";
}

async function builtinModel(): Promise<ModelPath> {
  return { path: await ensureFixture("tiny-chat", join(cacheDir(), "models")), id: BUILTIN_MODEL_ID };
}

/**
 * `--speculate draft-model:org/repo[:TAG]`: the draft model named by a reference, found in the --model-dir folders
 * or the Hugging Face cache, else pulled (docs/cli.md#pulling-models), so every worker is handed its file. Options
 * without one (a path, checked when parsed, or no draft model) come back as they are. A failed pull stops the start.
 */
async function withDraftModelFile(
  options: ServeOptions,
  pulling: (reference: string) => PullPolicy,
  log: (line: string) => void,
): Promise<ServeOptions> {
  const spec = options.speculation;
  if (spec?.directive !== "draft-model" || spec.draftModel === undefined || !isReference(spec.draftModel))
    return options;
  // A draft model has no use for a vision projector.
  const draft = await resolveOrPull(spec.draftModel, options.modelDirs, { ...pulling(spec.draftModel), mmproj: false });
  log(`superfluid: draft model ${spec.draftModel} is ${draft.path}`);
  return { ...options, speculation: { ...spec, draftModel: draft.path } };
}

export interface RunningServer {
  url: string;
  registry: ModelRegistry;
  /** The session log every generation of the first model is recorded in. */
  sessions: SessionStore;
  /** Where its log lines go (docs/cli.md#logging). */
  logger: Logger;
  /**
   * The drain a stop signal begins: readiness answers 503 `draining`, new generations 503 `server_draining` with
   * Retry-After, and the ones running get up to `timeoutMs` to finish (close() then stops what is left).
   */
  drain(timeoutMs: number): Promise<void>;
  close(): Promise<void>;
}

/** A test's way into the start (test/http/startup.test.ts). */
export interface StartSeams {
  /**
   * Called once the listener is up, before any model loads; the start waits for it. `startup.held`: requests waiting
   * for the start.
   */
  listening?(url: string, startup: { readonly held: number }): Promise<void> | void;
}

/**
 * Starts the server; its lines go to `log` when given (tests), else to the
 * logger the flags describe. `screen` is the TUI's log region: it takes the
 * lines stderr would, and JSON logs go to <sessions>/logs unless --log-dir.
 */
export async function startServer(
  options: ServeOptions,
  log?: (line: string) => void,
  screen?: (line: string) => void,
  seams: StartSeams = {},
): Promise<RunningServer> {
  const logDir = options.logDir ?? (screen ? join(options.sessions, "logs") : undefined);
  const logger = new Logger({
    ...(logDir === undefined ? {} : { logDir }),
    ...(options.logFile === undefined ? {} : { logFile: options.logFile }),
    ...(screen ? { screen } : {}),
    quiet: options.quiet,
  });
  const say = log ?? ((line: string) => logger.line(line));
  // A ready file left by an earlier run must not make a script take this start for done.
  if (options.readyFile !== undefined) rmSync(options.readyFile, { force: true });
  const unsink = setAccessSink((entry) => logger.access(formatAccess(entry, options.verbose), accessJson(entry)));
  const stopLogging = () => {
    unsink();
    logger.close();
  };
  // The session log first: a second server on the same directory, or a log
  // that fails its checksums, stops the start before any model is loaded.
  let sessions: SessionStore;
  try {
    sessions = await SessionStore.open(options.sessions, { cache: options.sessionsCache });
  } catch (err) {
    stopLogging();
    throw err;
  }
  try {
    const server = await startServing(options, sessions, say, logger, seams);
    const close = server.close;
    return { ...server, close: () => close().finally(stopLogging) };
  } catch (err) {
    await sessions.close();
    stopLogging();
    throw err;
  }
}

/** How long past the drain deadline the replies of cut generations have to write their ending. */
const CUT_REPLY_FLUSH_MS = 2000;

/**
 * A start step's failure, its message naming the address that would not listen; `reason` is what requests held
 * meanwhile are answered with.
 */
class ListenFailure extends Error {
  constructor(
    message: string,
    readonly reason: Error,
  ) {
    super(message);
  }
}

/**
 * The start in steps: the engine client (the registry and its loader), the app state, the listener, the models
 * named, the --web listener. Each step that opens something defers its undoing on one Unwind, so a failed start
 * closes everything opened so far, last first, in one place.
 */
async function startServing(
  options: ServeOptions,
  sessions: SessionStore,
  log: (line: string) => void,
  logger: Logger,
  seams: StartSeams,
): Promise<RunningServer> {
  logRecovery(sessions, log);
  const resolved = checkServed(options, log);
  const primaryId = resolved === "builtin" ? BUILTIN_MODEL_ID : resolved[0]!.id;
  const unwind = new Unwind();
  const started = await unwind.guard(async () => {
    const engine = engineClient(options, log);
    unwind.defer(() => engine.registry.close());
    const state = await appState(options, engine, primaryId, log, unwind);
    const { listener, url } = await openListener(options, state.startup);
    unwind.defer(() => listener.close());
    // Requests held meanwhile get their answer before the listener closes under them.
    unwind.defer((err) => state.startup.failed(err instanceof ListenFailure ? err.reason : err));
    await seams.listening?.(url, state.startup);
    await loadServed(options, resolved, primaryId, sessions, engine, log);
    if (options.readyFile !== undefined) writeReadyFile(options.readyFile, url);
    const web = options.web ? openWebListener(options, options.web, sessions, state, log) : undefined;
    return { engine, state, listener, url, web };
  });
  return serving(options, started, sessions, log, logger);
}

function logRecovery(sessions: SessionStore, log: (line: string) => void): void {
  const r = sessions.recovered;
  log(
    `superfluid: session log ${sessions.path} (epoch ${sessions.epoch}; ${r.sessions} sessions, ${r.records} records replayed` +
      (r.truncatedBytes > 0 ? `; a torn last record of ${r.truncatedBytes} bytes was cut off` : "") +
      ")",
  );
}

/** The models named (resolveServed), refused before anything opens when two share an id or --rpc can't serve them. */
function checkServed(options: ServeOptions, log: (line: string) => void): NamedModel[] | "builtin" {
  const resolved = resolveServed(options, log);
  if (resolved !== "builtin") {
    const ids = resolved.map((m) => m.id);
    const twice = ids.find((id, i) => ids.indexOf(id) !== i);
    if (twice !== undefined) throw new Error(`two models named have the id '${twice}'; name each model once`);
  }
  // An RPC worker serves one client at a time: a second model's worker would wait on it forever.
  if (
    options.rpc &&
    ((resolved !== "builtin" && resolved.length > 1) || options.modelDirs.length > 0 || options.fimModel)
  )
    throw new Error(
      "--rpc serves one model: name one, without --model-dir or --fim-model (an RPC worker serves one client)",
    );
  return resolved;
}

/** The registry, the pulls it and the start run, and the loader it loads with (set once the window is known). */
interface EngineClient {
  registry: ModelRegistry;
  pulls: PullBoard;
  /** `fit`: a pull for a load runs the load's fit check before its first byte (ModelLoader.fitBeforePull). */
  pulling(reference: string, fit?: boolean): PullPolicy;
  useLoader(loader: ModelLoader): void;
}

function engineClient(options: ServeOptions, log: (line: string) => void): EngineClient {
  // A reference found nowhere locally is pulled (docs/cli.md#pulling-models): its progress goes to
  // the log (a bar on a terminal without the TUI) and to /health while the server starts.
  const pulls = new PullBoard();
  const pulling = (reference: string, fit = false): PullPolicy => {
    const display = pullDisplay("superfluid: ", log, options.tui ? false : undefined);
    const board = pulls.track(reference);
    return {
      offline: options.offline,
      mmproj: options.mmproj,
      progress: (event) => {
        board(event);
        display.event(event);
      },
      ...(fit && loader ? { beforeDownload: loader.fitBeforePull(reference) } : {}),
    };
  };
  // The loader's window depends on how many models may be loaded, known once the
  // --model-dir folders are read (after the listener starts): set there.
  let loader: ModelLoader | undefined;
  const registry = new ModelRegistry({
    load: (source) => loader!.load(source),
    close: (model) => loader!.close(model),
    describe: (token) => describeToken(token, options.modelDirs, pulling(token, true)),
  });
  return { registry, pulls, pulling, useLoader: (l) => (loader = l) };
}

/** What the routes run on: the stores, the batches, the request gate, the app behind its startup gate. */
interface AppState {
  ctx: ServerContext;
  /** Read by `ctx`: the server is starting (requests wait) or draining (new generations are refused). */
  phase: { starting: boolean; draining: boolean };
  files: FileStore;
  batches: BatchService;
  metrics: ServerMetrics;
  origins: AllowedOrigins;
  startup: StartupGate;
  /** The first model named, loaded again first if it was unloaded: batch chat lines and the session API run on it. */
  primaryModel(): Promise<ServedModel>;
}

async function appState(
  options: ServeOptions,
  engine: EngineClient,
  primaryId: string,
  log: (line: string) => void,
  unwind: Unwind,
): Promise<AppState> {
  const { registry, pulls, pulling } = engine;
  const responses = ResponseStore.open(join(options.sessions, "responses"));
  const files = await FileStore.open(join(options.sessions, "files"), {
    ...(options.filesMaxBytes === undefined ? {} : { maxBytes: options.filesMaxBytes }),
    ...(options.filesExpirySec === undefined ? {} : { expirySec: options.filesExpirySec }),
    sweepSec: options.filesSweepSec,
  });
  unwind.defer(() => files.close());
  let counter = 0;
  const primaryModel = async () => {
    const model = await registry.resolve(primaryId);
    if (!model) throw new RequestError(503, `model '${primaryId}' is not served`, "model_not_found");
    return model;
  };
  // Batch lines run through their route's handler in process (on `ctx`, set
  // below before start() lets any line run): chat lines on the first model,
  // embedding lines on the model each names; the batches on disk are known from here.
  const batches = BatchService.open({
    dir: join(options.sessions, "batches"),
    files,
    modelId: primaryId,
    execute: async (body, signal) => runBatchLine(ctx, await primaryModel(), body, signal),
    embeddings: {
      execute: (body, signal) => runBatchEmbedding(ctx, body, signal),
      modelOf: (name) => registry.entry(name)?.id ?? name,
    },
    log,
  });
  const phase = { starting: true, draining: false };
  const ctx: ServerContext = {
    starting: () => phase.starting,
    draining: () => phase.draining,
    pulling: () => pulls.active(),
    // No fit check for /api/pull: pulling is not loading (the model may be meant for another machine, or loaded
    // later with a smaller window or after another model is unloaded); the load that follows is checked then.
    pullPolicy: (reference) => pulling(reference),
    registry,
    operatorSampling: options.sampling,
    ...(options.specMaxTemperature === undefined ? {} : { specMaxTemperature: options.specMaxTemperature }),
    maxTokens: options.maxTokens,
    qos: {
      defaultQos: options.defaultQos,
      honourHeader: options.qosHeader,
      allowBatchInvariant: options.allowBatchInvariant,
    },
    keepaliveSec: options.nonstreamKeepalive,
    fim: {
      deadlineMs: options.completionDeadlineMs,
      buckets: new TokenBuckets(options.completionRate, options.completionBurst),
    },
    files,
    responses,
    batches,
    nextId: () => ++counter,
  };
  const keys = new KeyRing(options.apiKeys, options.policyKeys);
  const gate = new RequestGate(keys, options.rateLimitRpm, undefined, options.publicMetrics);
  const metrics = new ServerMetrics(registry, gate);
  // One list for the Origin check and CORS; --web-origin's origins have always been let in here too.
  const origins = new AllowedOrigins([...options.allowOrigins, ...options.webOrigins]);
  const app = createApp(
    ctx,
    { bind: options.host, authenticated: keys.enabled, origins, hosts: options.allowHosts },
    gate,
    metrics,
  );
  const startup = new StartupGate(app);
  return { ctx, phase, files, batches, metrics, origins, startup, primaryModel };
}

async function openListener(options: ServeOptions, startup: StartupGate): Promise<{ listener: Listener; url: string }> {
  let listener: Listener;
  try {
    // The listener starts before any model loads (docs/cli.md#startup-and-shutdown):
    // /health answers 503 `loading` from the first moment, every other request
    // waits for the startup to finish. Our reader enforces the 100 MiB body
    // limit while streaming (413 in OpenAI's envelope). No idle timeout: a long
    // non-streamed generation sends nothing until it is done. No port sharing:
    // a second server on a port in use must fail, not split the traffic.
    listener = await listen(startup.handler, options.host, options.port, {
      replyHeaders: { [REPLICA_HEADER]: options.replicaId },
    });
  } catch (err) {
    throw new ListenFailure(
      `cannot listen on ${options.host}:${options.port}: ${(err as Error).message}`,
      err as Error,
    );
  }
  const host = options.host.includes(":") ? `[${options.host}]` : options.host;
  return { listener, url: `http://${host}:${listener.port}` };
}

/**
 * The models named known and loaded, the --model-dir ones known, the aliases set. The window each model gets depends
 * on how many may be loaded, known from the names and the --model-dir folders before any reference is pulled: the
 * loader exists before the pulls, whose fit check it runs.
 */
async function loadServed(
  options: ServeOptions,
  resolved: NamedModel[] | "builtin",
  primaryId: string,
  sessions: SessionStore,
  engine: EngineClient,
  log: (line: string) => void,
): Promise<void> {
  const { registry, pulling } = engine;
  const namedIds = resolved === "builtin" ? [BUILTIN_MODEL_ID] : resolved.map((m) => m.id);
  const fromDirs = await modelDirSources(options.modelDirs, new Set(namedIds), log);
  const several = namedIds.length > 1 || fromDirs.length > 0;
  const maxContext =
    options.maxContext ?? (several && options.kvPool === undefined ? SHARED_DEFAULT_CONTEXT : undefined);
  if (maxContext !== options.maxContext)
    log(
      `superfluid: several models may be loaded: each gets a window of ${maxContext} tokens (set --max-context to change it)`,
    );
  const builtinPool = resolved === "builtin" && maxContext === undefined && options.kvPool === undefined;
  if (builtinPool) {
    log(
      `superfluid: the built-in model's lanes share one KV pool of its whole window (--kv-pool ${BUILTIN_KV_POOL} unless --max-context or --kv-pool is given): it starts sooner than with a buffer per lane`,
    );
  }
  // The draft model's reference, if one was named, becomes its file before any worker is handed it.
  const served = await withDraftModelFile(options, pulling, log);
  engine.useLoader(
    new ModelLoader(
      builtinPool ? { ...served, kvPool: BUILTIN_KV_POOL } : served,
      sessions,
      primaryId,
      maxContext,
      log,
      pulling,
    ),
  );
  const named: ModelSource[] = [];
  for (const model of resolved === "builtin" ? [await builtinModel()] : resolved)
    named.push(await sourceOf("reference" in model ? await fileOfNamed(model, pulling(model.reference, true)) : model));
  for (const source of [...named, ...fromDirs]) registry.know(source);
  if (fromDirs.length > 0)
    log(
      `superfluid: ${fromDirs.length} more models known from --model-dir, loaded on first use: ${fromDirs.map((s) => s.id).join(", ")}`,
    );
  const unserved = options.aliases.find((a) => !registry.known().some((e) => e.id === a.target));
  if (unserved)
    throw new Error(
      `--alias ${unserved.name}=${unserved.target}: no served model has the id '${unserved.target}' (served: ${registry
        .known()
        .map((e) => e.id)
        .join(", ")})`,
    );
  for (const alias of options.aliases) registry.alias(alias.name, alias.target);
  try {
    // One at a time, so each fit check sees the memory the previous model took.
    for (const source of named) await registry.resolve(source.id);
  } catch (err) {
    throw err instanceof RequestError ? new Error(err.message) : err;
  }
}

function openWebListener(
  options: ServeOptions,
  address: { host: string; port: number },
  sessions: SessionStore,
  state: AppState,
  log: (line: string) => void,
): WebListener {
  try {
    return startSessionListener(options, address, sessions, state.primaryModel, state.metrics, log);
  } catch (err) {
    throw new ListenFailure(
      `cannot listen on ${address.host}:${address.port} (--web): ${(err as Error).message}`,
      err as Error,
    );
  }
}

/** The start done: requests let through, the serving lines logged, and the running server's drain and close. */
function serving(
  options: ServeOptions,
  started: { engine: EngineClient; state: AppState; listener: Listener; url: string; web: WebListener | undefined },
  sessions: SessionStore,
  log: (line: string) => void,
  logger: Logger,
): RunningServer {
  const { state, listener, url, web } = started;
  const { registry } = started.engine;
  const { batches, files } = state;
  state.phase.starting = false;
  state.startup.ready();
  log(authLine(options, isLoopbackName(options.host)));
  for (const line of originLines(state.origins)) log(line);
  log(
    `superfluid: serving ${registry
      .all()
      .map((m) => m.id)
      .join(", ")} at ${url}/v1`,
  );
  registry.startIdleTimeout(options.idleTimeoutSec, log);
  batches.start();
  return {
    url,
    registry,
    sessions,
    logger,
    drain: async (timeoutMs) => {
      state.phase.draining = true;
      const refusal = () =>
        new RequestError(
          503,
          "the server is shutting down; send the request to another replica",
          "server_draining",
          null,
          {
            "retry-after": "5",
          },
        );
      // The generations and embedding requests already running finish, and their replies are written out whole;
      // what is left at the deadline is cut (the drain stops a worker past it, close() the rest).
      const deadline = Date.now() + timeoutMs;
      await registry.drainAll(timeoutMs, refusal);
      // A generation cut at the deadline still ends its reply with the refusal (a stream's error frame): those
      // are written out before the listener closes, a moment past the deadline at most.
      const flushed = Math.max(deadline, Date.now()) + CUT_REPLY_FLUSH_MS;
      while (listener.replies() > 0 && Date.now() < flushed) await Bun.sleep(20);
    },
    close: async () => {
      // Scripts waiting on the ready file must not take a stopped server for a running one
      // (removed only while it is ours: a newer server may have written it since).
      if (options.readyFile !== undefined) removeOwnReadyFile(options.readyFile, url);
      await web?.close();
      await listener.close();
      // Lines in flight are aborted, not failed: the batches resume on the next start.
      await batches.stop();
      files.close();
      await registry.close();
      // What is still buffered belongs to generations the stop cut off, none of it
      // delivered: a log that cannot take it (disk full) is reported, and the stop goes on.
      await sessions
        .close()
        .catch((err: Error) => log(`superfluid: the session log could not take its last records: ${err.message}`));
    },
  };
}

/**
 * --web: the session API's listener (docs/api/sessions.md) on the first
 * model's session log, with a token minted for this start. The URL printed
 * carries the token in its fragment, which a browser never sends to a server:
 * the chat page reads it from there.
 */
function startSessionListener(
  options: ServeOptions,
  address: { host: string; port: number },
  sessions: SessionStore,
  model: () => Promise<ServedModel>,
  metrics: ServerMetrics,
  log: (line: string) => void,
): WebListener {
  const park = options.park ? join(options.sessions, "park") : undefined;
  const budget = options.parkBudgetGb * 1024 ** 3;
  const service = new SessionService({
    store: sessions,
    model,
    defaults: {
      operatorSampling: options.sampling,
      ...(options.maxTokens === undefined ? {} : { maxTokens: options.maxTokens }),
    },
    ...(park ? { park: { dir: park, sweep: () => void sweepParkDir(park, budget) } } : {}),
    completionBuckets: new TokenBuckets(options.completionRate, options.completionBurst),
    metricsText: () => metrics.scrape(),
  });
  const { token, path } = mintToken(options.sessions);
  const web = startWebListener({
    host: address.host,
    port: address.port,
    service,
    auth: (port) => new WebAuth(token, options.webOrigins, port),
  });
  log(`superfluid: session API at ${web.url}/web (token in ${path}); chat page: ${web.url}/#token=${token}`);
  return web;
}

/**
 * --ready-file: the URL, written to a temporary file beside PATH and renamed
 * over it, so a script that sees the file sees all of it.
 */
function writeReadyFile(path: string, url: string): void {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${url}\n`);
  renameSync(tmp, path);
}

function removeOwnReadyFile(path: string, url: string): void {
  try {
    if (readFileSync(path, "utf8") === `${url}\n`) rmSync(path, { force: true });
  } catch {
    // Gone already.
  }
}

/**
 * What the startup log says about keys: the warning of docs/api/security.md#keys when the port is open to the network
 * without one.
 */
function authLine(options: ServeOptions, loopback: boolean): string {
  if (options.policyKeys.length > 0) {
    const global = options.apiKeys.length > 0 ? ` and ${options.apiKeys.length} global --api-key` : "";
    return `superfluid: authentication is on: ${options.policyKeys.length} policy keys (${options.policyKeys.map((k) => k.name).join(", ")})${global}`;
  }
  if (options.apiKeys.length > 0)
    return `superfluid: authentication is on (--api-key, ${options.apiKeys.length} key${options.apiKeys.length > 1 ? "s" : ""})`;
  if (loopback) return "superfluid: authentication is off (listening on loopback only)";
  return "superfluid: WARNING --api-key not set. Authentication is OFF — anyone who can reach this port can use the API. Bind loopback or set --api-key.";
}

/** What the startup log says about the page origins let in besides this machine's, loudly when any site is. */
function originLines(origins: AllowedOrigins): string[] {
  const extra = origins.extra;
  if (extra.length === 0) return [];
  const lines = [`superfluid: browser pages from ${extra.join(", ")} may call this server (CORS)`];
  if (origins.anySite)
    lines.push(
      "superfluid: WARNING --allow-origin lets pages from ANY web site call this server from their visitors' " +
        "browsers; only the key stands between them and the API.",
    );
  return lines;
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
  if (options === "help" || options === "help-all") {
    console.log(serveUsage(options === "help-all"));
    return 0;
  }
  // While tokens stream, the daemon's wakeups stop preempting decode threads (src/runtime/sched-policy.ts).
  daemonYieldsWhileStreaming();
  const tui = options.tui ? new ServeTui() : undefined;
  tui?.start();
  // SIGINT and SIGTERM stop the server (docs/cli.md#startup-and-shutdown) with status 0, heard from
  // the start on, since the listener answers before the models have loaded. During the start
  // (a large model may take minutes) the process exits at once: nothing has been served, and
  // each worker stops when its daemon's channel closes. Once started, workers go down first.
  // q in the TUI does the same.
  let started = false;
  const stop = new Promise<void>((resolve) => {
    const onSignal = () => {
      if (started) return resolve();
      tui?.stop();
      console.error("superfluid serve: stopped while starting");
      process.exit(0);
    };
    process.once("SIGINT", onSignal);
    process.once("SIGTERM", onSignal);
    if (tui) void tui.quit.then(onSignal);
  });
  let server: RunningServer;
  try {
    server = await startServer(options, undefined, tui?.line);
    started = true;
  } catch (err) {
    // The terminal back first, so the reason is left on it.
    tui?.stop();
    console.error(`superfluid serve: ${err instanceof ModelNotFoundError ? err.message : (err as Error).message}`);
    return 1;
  }
  tui?.watch(server.url);
  // Under --log-file, --log-dir or the TUI (whose screen stderr would scribble over), what other modules report with
  // console.error lands in the log too.
  const unrouteConsole =
    options.logFile !== undefined || options.logDir !== undefined || tui ? routeConsole(server.logger) : () => {};
  await stop;
  // A second signal during the drain stops at once.
  const again = new Promise<void>((resolve) => {
    process.once("SIGINT", () => resolve());
    process.once("SIGTERM", () => resolve());
  });
  const log = tui?.line ?? ((line: string) => console.error(line));
  log(`superfluid: draining: new requests get 503, running ones have up to ${options.drainTimeout} s to finish ...`);
  await Promise.race([server.drain(options.drainTimeout * 1000), again]);
  tui?.line("superfluid: stopping ...");
  await server.close();
  unrouteConsole();
  tui?.stop();
  return 0;
}
