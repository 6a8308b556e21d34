// The daemon's side of a worker: spawn it, wait for its handshake, send it
// requests and cancels, route each tick's events to the right generation, and
// survive its death: every in-flight generation fails with WorkerCrashedError,
// a new worker is started, and the next request works. With a journal (the
// session log), every event is recorded and made durable before it reaches
// the generation's reader.
import type { KvTypes } from "../gguf/kv-type.ts";
import { offloadFlags, type OffloadRequest } from "../engine/offload.ts";
import type { Subprocess } from "bun";
import { randomUUID } from "node:crypto";
import type { EngineSnapshot, FinishEvent, GenerateRequest } from "../engine/jobs.ts";
import type { TokenLogprob } from "../engine/logprobs.ts";
import type { ClassLanes } from "../engine/scheduler.ts";
import { speculationFlags, type SpeculationSettings } from "../engine/speculation-directive.ts";
import {
  PROTOCOL_VERSION,
  type DaemonToWorker,
  type LoraAdapterInfo,
  type LoraMessage,
  type WorkerInfo,
  type WorkerToDaemon,
} from "../engine/protocol.ts";
import { RequestError } from "./request-error.ts";
import type { GenerationJournal } from "../session-log/journal.ts";
import { BurstGather } from "./burst-gather.ts";
import { Channel } from "./channel.ts";
import { trackGeneration, type GenerationTrack } from "../runtime/sched-policy.ts";
import { WorkerTally } from "./metrics-tally.ts";
import { selfCommand } from "./self-command.ts";
import { claimStandbyWorker } from "./standby-worker.ts";

export interface WorkerOptions {
  model: string;
  maxBatch?: number;
  /** Tokens per conversation in per-lane buffers; "auto" or unset = sized from free memory (kv-sizing.ts). */
  maxContext?: number | "auto";
  /** Cells of a shared KV pool (--kv-pool). */
  kvPool?: number;
  /** The KV's element types (--kv-bits, --cache-type-k/-v); undefined = f16. */
  kvTypes?: KvTypes;
  threads?: number;
  /** --gpu-layers and the rest (src/engine/offload.ts); undefined = the worker's defaults. */
  offload?: OffloadRequest;
  prefillBudget?: number;
  /** Host-tier megabytes for prefixes that leave the KV pool (0 = none; default: the worker's). */
  hostCacheMb?: number;
  /** Pressure watermarks, percent of the pool's cells. */
  pressureHigh?: number;
  pressureLow?: number;
  /**
   * Percent of the pool's cells pinned prompt prefixes may hold (--pin-budget-pct; 0 = pins protect nothing; default:
   * the worker's, 50).
   */
  pinBudgetPct?: number;
  /** Lane caps per class (--class-lanes). */
  classLanes?: ClassLanes;
  /** Queue-aging period in ticks (--starvation-ticks). */
  starvationTicks?: number;
  /** --speculate and its tuning; absent = plain decoding (WorkerInfo.speculation says what the worker runs). */
  speculation?: SpeculationSettings;
  /** How long a worker may take to load its model and answer. */
  startTimeoutMs?: number;
  /** Where generations are recorded before their events are delivered (the session log). */
  journal?: GenerationJournal;
}

/** The scheduling settings a worker was started with (see WorkerClient.schedule). */
export interface WorkerSchedule {
  classLanes: ClassLanes;
  prefillBudget: number | undefined;
  starvationTicks: number | undefined;
}

/** The session log could not record a generation's events: they are never delivered. */
export class JournalError extends Error {
  readonly code = "session_log_failed";
  constructor(cause: Error) {
    super(`the session log could not be written (${cause.message}); the generation was stopped`, { cause });
    this.name = "JournalError";
  }
}

export type GenerationEvent =
  | { type: "admitted"; cachedTokens: number }
  | { type: "tokens"; tokens: number[]; logprobs?: TokenLogprob[] }
  | ({ type: "finished" } & Omit<FinishEvent, "id">);

/** A whole generation: its tokens and how it ended. */
export interface GenerationResult extends Omit<FinishEvent, "id"> {
  tokens: number[];
  /** One entry per token when logprobs were asked for. */
  logprobs?: TokenLogprob[];
}

/** The worker died (or was killed) while this request was in flight. */
export class WorkerCrashedError extends Error {
  readonly code = "worker_crashed";
  constructor(
    readonly detail: string,
    /**
     * What the client is told when the worker was stopped on purpose (a drain or an unload whose grace ran out):
     * that refusal, not a failure of the engine.
     */
    readonly stopped?: RequestError,
  ) {
    super(`the engine worker stopped while generating (${detail}); it has been restarted`);
    this.name = "WorkerCrashedError";
  }
}

/** The worker could not be started (bad model, bad library, ...). */
export class WorkerStartError extends Error {
  readonly code = "worker_start_failed";
  constructor(
    message: string,
    /** What it needs is elsewhere and gone (an RPC worker): a 503 that passes when it returns, not a failure here. */
    readonly away = false,
  ) {
    super(message);
    this.name = "WorkerStartError";
  }
}

/** The worker did not answer a stats request (for /slots) in time. */
export class WorkerStatsTimeoutError extends Error {
  constructor() {
    super("the worker did not answer a stats request");
    this.name = "WorkerStatsTimeoutError";
  }
}

export class Generation implements AsyncIterable<GenerationEvent> {
  readonly events = new Channel<GenerationEvent>(() => this.track?.ended());
  /** The worker has given it a lane; before that a dead worker's replacement can take it over. */
  admitted = false;
  /** The caller cancelled it (a replacement worker must not start it again). */
  cancelRequested = false;
  /** false: kept out of the session log (fill-in-the-middle). */
  durable = true;
  /** performance.now() when it was sent to a worker, and when it got a lane (estimated: WorkerClient.onTick). */
  queuedAt = performance.now();
  admittedAt?: number;
  private firstTokenSeen = false;
  private markPrefilled!: () => void;
  /** Settles once the prompt is prefilled (first token, or the end): sibling choices can then share its KV. */
  readonly prefilled = new Promise<void>((resolve) => (this.markPrefilled = resolve));

  constructor(
    readonly id: string,
    /** The message that starts it, kept to resend when the worker dies before admitting it. */
    readonly job: Extract<DaemonToWorker, { type: "generate" }>,
    private readonly onCancel: (id: string) => void,
    /**
     * Told of its first token and its end: the daemon's scheduling policy follows them (src/runtime/sched-policy.ts).
     */
    private readonly track?: GenerationTrack,
  ) {}

  /** The first token's time from admission in seconds, once; undefined afterwards (and before admission). */
  takeFirstToken(now: number): number | undefined {
    if (this.firstTokenSeen || this.admittedAt === undefined) return undefined;
    this.firstTokenSeen = true;
    return (now - this.admittedAt) / 1000;
  }

  /** Called by the client on the first token or the end. */
  notePrefilled(): void {
    this.markPrefilled();
    this.track?.firstToken();
  }

  /** Stops generation at the next tick; the stream ends with reason "cancelled". */
  cancel(): void {
    if (this.events.closed) return;
    this.cancelRequested = true;
    this.onCancel(this.id);
  }

  [Symbol.asyncIterator](): AsyncIterator<GenerationEvent> {
    return this.events[Symbol.asyncIterator]();
  }

  /** Reads the whole generation. */
  async result(): Promise<GenerationResult> {
    const tokens: number[] = [];
    let logprobs: TokenLogprob[] | undefined;
    for await (const event of this) {
      if (event.type === "tokens") {
        tokens.push(...event.tokens);
        if (event.logprobs) (logprobs ??= []).push(...event.logprobs);
      } else if (event.type === "finished") {
        const { type: _, ...finish } = event;
        return { tokens, ...(logprobs ? { logprobs } : {}), ...finish };
      }
    }
    throw new WorkerCrashedError("stream ended without a finish");
  }
}

/** The worker's pooled vectors for one embed request, inputs in order (raw: not normalised). */
export interface EmbedResult {
  vectors: Float32Array[];
  dimensions: number;
}

/** Vectors packed by the worker (embed-mode.ts) as base64 float32s, back to one array per input. */
function unpackVectors(data: string, dimensions: number): Float32Array[] {
  const bytes = Buffer.from(data, "base64");
  // A fresh copy: Buffer's pool offset need not be 4-byte aligned.
  const all = new Float32Array(new Uint8Array(bytes).buffer);
  const vectors: Float32Array[] = [];
  for (let at = 0; at + dimensions <= all.length; at += dimensions) vectors.push(all.subarray(at, at + dimensions));
  return vectors;
}

/**
 * The request asked a model for what its worker does not do (a chat model asked to embed, an embedding model to
 * generate).
 */
function unsupportedModel(message: string): RequestError {
  return new RequestError(400, message, "unsupported_model", "model");
}

/**
 * Respawns in a row with no successful tick before we stop retrying until the next request
 * (docs/design.md#worker-failure).
 */
const MAX_IDLE_RESPAWNS = 3;

export class WorkerClient {
  info!: WorkerInfo;
  /** Times a dead worker has been replaced (superfluid_worker_respawns_total). */
  respawns = 0;
  /** What /metrics reads: counters kept across respawns, cold admissions, FIM results, TTFT (docs/api/metrics.md). */
  readonly tally = new WorkerTally();
  /**
   * The daemon's share of each tick, summed in milliseconds: handling the
   * tick message (grouping, journal records), the wait for the journal's
   * sync before delivery (overlapping the worker's next decode), and the
   * delivery itself (streams woken). bench/tick-profile.ts reads it in /slots.
   */
  readonly tickProfile = { ticks: 0, onTickMs: 0, durableWaitMs: 0, deliverMs: 0 };
  /** performance.now() of the last tick report: a tick that admits starts no earlier (TTFT from admission). */
  private lastTickAt = 0;
  private proc?: Subprocess;
  private ready?: Promise<void>;
  private readonly inflight = new Map<string, Generation>();
  private closing = false;
  /** Requests running under hold() (an embedding request's tokenizing and vectors). */
  private held = 0;
  /** Set once the model is being unloaded (retire): what a request starting now is told. */
  private refusal?: () => RequestError;
  private respawnsSinceTick = 0;
  private readonly pendingStats = new Map<string, (answer: { snapshot: EngineSnapshot; at: number }) => void>();
  /** Embed requests sent and not yet answered. */
  private readonly pendingEmbeds = new Map<
    string,
    { resolve: (result: EmbedResult) => void; reject: (err: Error) => void }
  >();
  /** LoRA admin messages sent and not yet answered. */
  private readonly pendingLora = new Map<
    string,
    { resolve: (adapters: LoraAdapterInfo[]) => void; reject: (err: Error) => void }
  >();
  /**
   * The LoRA adapters loaded (docs/api/lora.md), as the worker last confirmed
   * them: a replacement worker loads them again before it takes a request.
   */
  private adapters: LoraAdapterInfo[] = [];
  private nextAdapterId = 0;
  /** Deliveries wait here, in arrival order, for the journal to make their events durable. */
  private delivery: Promise<void> = Promise.resolve();
  /** Generations held for the prompts being prepared beside them (./burst-gather.ts). */
  private readonly gather = new BurstGather<DaemonToWorker>((message) => this.transmit(message));
  /** How many prompts of this model are being rendered or tokenized (set by gatherWhile). */
  private preparing: () => number = () => 0;

  private constructor(private readonly opts: WorkerOptions) {}

  static async start(opts: WorkerOptions): Promise<WorkerClient> {
    const client = new WorkerClient(opts);
    try {
      await client.spawn();
    } catch (err) {
      client.closing = true; // no respawns for a worker that never started
      client.proc?.kill("SIGKILL");
      throw err;
    }
    return client;
  }

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  /**
   * Work an unload waits for (registry drain) and the idle timeout counts as use: generations, embed jobs, held
   * requests.
   */
  get inflightCount(): number {
    return this.inflight.size + this.pendingEmbeds.size + this.held;
  }

  /**
   * The model is being unloaded: hold() refuses new requests with `refusal`
   * (503 `model_unloading`), and embed jobs the worker never answers end
   * with it too. Requests already held run on; the unload waits for them.
   */
  retire(refusal: () => RequestError): void {
    this.refusal = refusal;
  }

  /**
   * Runs one request's work on this worker (an embedding request: its
   * tokenizing on the prompt thread, then its vectors) counted in
   * inflightCount, so an unload lets it finish before it stops the worker
   * and the prompt thread under it. Once retired, new work is refused, and a
   * held request that still fails for want of the model (its worker stopped
   * when the unload's grace ran out) gets the same 503, not a 500.
   */
  async hold<T>(work: () => Promise<T>): Promise<T> {
    if (this.refusal) throw this.refusal();
    this.held++;
    try {
      return await work();
    } catch (err) {
      // Read afresh: the unload may have begun while the work ran.
      const refusal = this.refusal as (() => RequestError) | undefined;
      if (refusal && !(err instanceof RequestError && err.status < 500)) throw refusal();
      throw err;
    } finally {
      this.held--;
    }
  }

  /**
   * The scheduling settings the worker was started with, as configured (for
   * /slots): lane caps per class, the prefill budget (0 = adaptive) and the
   * aging period; undefined where the worker's own default applies.
   */
  get schedule(): WorkerSchedule {
    const { classLanes, prefillBudget, starvationTicks } = this.opts;
    return { classLanes: { ...classLanes }, prefillBudget, starvationTicks };
  }

  /** Why the journal (the session log) cannot be written, while it cannot; null otherwise. */
  get journalFailure(): Error | null {
    return this.opts.journal?.failure ?? null;
  }

  /**
   * Starts a generation; `durable: false` keeps it out of the journal (FIM
   * completions, docs/api/openai.md#fill-in-the-middle). `journaled: false`
   * (a session-API generation) is durable but recorded by its caller, into
   * the session it continues (src/session-api/generate.ts): its tokens are
   * still delivered only after a journal flush.
   */
  generate(req: GenerateRequest, opts: { durable?: boolean; journaled?: boolean } = {}): Generation {
    if (this.info && !this.info.capabilities.generate) {
      throw unsupportedModel(
        `this model is an embedding model: it serves /v1/embeddings and /v1/rerank, not text generation`,
      );
    }
    const id = randomUUID();
    const job = { type: "generate" as const, ...req, id, ignoreEos: req.ignoreEos ?? false };
    if (opts.durable !== false && opts.journaled !== false) {
      try {
        this.opts.journal?.begin(id, job);
      } catch (err) {
        throw new JournalError(err as Error);
      }
    }
    const generation = new Generation(
      id,
      job,
      (gid) => this.sendWhenReady({ type: "cancel", id: gid }),
      trackGeneration(),
    );
    generation.durable = opts.durable !== false;
    this.inflight.set(id, generation);
    this.sendWhenReady(job);
    // The prompt's record is written and synced now, while the worker prefills, rather than
    // with the first token's: the first delivery then waits only for that token's own sync.
    // Nothing to deliver; a failure fails the generations in flight as any tick's would.
    if (generation.durable && this.opts.journal) this.afterDurable(() => undefined, []);
    return generation;
  }

  /**
   * Pooled vectors of token-id inputs (each within info.embedding.maxInputTokens),
   * all in one job: the worker packs inputs of every queued job into shared
   * decodes. Not journaled (nothing is generated). An aborted signal drops the
   * job if it is still queued. Refused (400 unsupported_model) on a worker that
   * does not embed.
   */
  embed(inputs: number[][], signal?: AbortSignal): Promise<EmbedResult> {
    if (this.info && !this.info.capabilities.embeddings) {
      return Promise.reject(
        unsupportedModel(`this model does not embed: its GGUF declares no pooling type (not an embedding model)`),
      );
    }
    const id = randomUUID();
    return new Promise<EmbedResult>((resolve, reject) => {
      const onAbort = () => {
        if (!this.pendingEmbeds.delete(id)) return;
        this.sendWhenReady({ type: "cancel", id });
        reject(signal!.reason instanceof Error ? signal!.reason : new Error("embedding request aborted"));
      };
      this.pendingEmbeds.set(id, {
        resolve: (result) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(result);
        },
        reject: (err) => {
          signal?.removeEventListener("abort", onAbort);
          reject(err);
        },
      });
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      this.sendWhenReady({ type: "embed", id, inputs });
    });
  }

  /** The LoRA adapters loaded, in id order. */
  get loraAdapters(): LoraAdapterInfo[] {
    return this.adapters.map((a) => ({ ...a }));
  }

  /**
   * Loads a LoRA adapter (a GGUF path) at `scale`; it applies to requests
   * submitted after the answer. Resolves with the adapters now loaded; a file
   * libllama refuses is a 400.
   */
  loadLora(path: string, scale: number): Promise<LoraAdapterInfo[]> {
    return this.lora({ type: "lora-load", id: randomUUID(), adapter: { id: this.nextAdapterId++, path, scale } });
  }

  /** Unloads an adapter by id (404 when none has it). */
  unloadLora(id: number): Promise<LoraAdapterInfo[]> {
    if (!this.adapters.some((a) => a.id === id))
      return Promise.reject(
        new RequestError(404, `no LoRA adapter with id ${id} is loaded`, "adapter_not_found", "id"),
      );
    return this.lora({ type: "lora-unload", id: randomUUID(), adapter: id });
  }

  /** Sets loaded adapters' scales (404 naming the first id no adapter has). */
  scaleLora(scales: { id: number; scale: number }[]): Promise<LoraAdapterInfo[]> {
    const unknown = scales.find((s) => !this.adapters.some((a) => a.id === s.id));
    if (unknown)
      return Promise.reject(
        new RequestError(404, `no LoRA adapter with id ${unknown.id} is loaded`, "adapter_not_found", "id"),
      );
    return this.lora({ type: "lora-scale", id: randomUUID(), scales });
  }

  private lora(message: LoraMessage): Promise<LoraAdapterInfo[]> {
    if (this.info && !this.info.capabilities.generate) {
      return Promise.reject(
        unsupportedModel("this model is an embedding model: LoRA adapters apply to text generation only"),
      );
    }
    return new Promise<LoraAdapterInfo[]>((resolve, reject) => {
      this.pendingLora.set(message.id, {
        resolve: (adapters) => {
          this.adapters = adapters;
          resolve(adapters.map((a) => ({ ...a })));
        },
        reject,
      });
      this.sendWhenReady(message);
    });
  }

  private settleLora(message: Extract<WorkerToDaemon, { type: "lora" | "lora-failed" }>): void {
    const pending = this.pendingLora.get(message.id);
    if (!pending) return;
    this.pendingLora.delete(message.id);
    if (message.type === "lora") pending.resolve(message.adapters);
    else pending.reject(new RequestError(400, message.error, "invalid_adapter"));
  }

  /**
   * A replacement worker loads the adapters its predecessor had, before any
   * request reaches it (IPC keeps order). One it can no longer load (the file
   * went away) is dropped from the list.
   */
  private restoreAdapters(proc: Subprocess): void {
    for (const adapter of this.adapters) {
      const id = randomUUID();
      this.pendingLora.set(id, {
        resolve: () => {},
        reject: (err) => {
          console.error(
            `superfluid: LoRA adapter ${adapter.id} (${adapter.path}) could not be loaded again after a worker restart: ${err.message}`,
          );
          this.adapters = this.adapters.filter((a) => a.id !== adapter.id);
        },
      });
      proc.send({ type: "lora-load", id, adapter } satisfies DaemonToWorker);
    }
  }

  /** The engine's live snapshot (lanes, KV, rates), for /slots. */
  stats(): Promise<{ snapshot: EngineSnapshot; at: number }> {
    const id = randomUUID();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pendingStats.delete(id);
        reject(new WorkerStatsTimeoutError());
      }, 5000);
      this.pendingStats.set(id, (answer) => {
        clearTimeout(timer);
        resolve(answer);
      });
      this.sendWhenReady({ type: "stats", id });
    });
  }

  async close(): Promise<void> {
    this.closing = true;
    this.gather.release();
    const proc = this.proc;
    if (!proc || proc.exitCode !== null) return;
    try {
      proc.send({ type: "shutdown" } satisfies DaemonToWorker);
    } catch {
      // already gone
    }
    const timer = setTimeout(() => proc.kill("SIGKILL"), 3000);
    await proc.exited;
    clearTimeout(timer);
  }

  /**
   * Lets a generation sent to an idle worker wait, a few milliseconds at most,
   * for the `preparing()` prompts to join it in one prefill tick
   * (docs/design.md#burst-gathering).
   */
  gatherWhile(preparing: () => number): void {
    this.preparing = preparing;
  }

  private sendWhenReady(message: DaemonToWorker): void {
    if (message.type === "generate") {
      // Idle: nothing in flight but this generation and those held with it.
      const idle = this.inflight.size - 1 <= this.gather.size;
      if (this.gather.offer(message, idle, this.preparing(), this.info?.lanes ?? 1)) return;
    }
    // Whatever else is sent (a cancel above all) goes after the generations held before it.
    if (this.gather.size > 0) this.gather.release();
    this.transmit(message);
  }

  private transmit(message: DaemonToWorker): void {
    if (!this.ready) this.ready = this.spawn(); // stopped retrying earlier; a new request tries again
    const proc = this.proc;
    this.ready
      .then(() => this.proc!.send(message))
      .catch((err: Error) => {
        if (message.type === "embed") return this.settleEmbed(message.id, err);
        if (message.type === "lora-load" || message.type === "lora-unload" || message.type === "lora-scale") {
          const pending = this.pendingLora.get(message.id);
          this.pendingLora.delete(message.id);
          return pending?.reject(err);
        }
        if (message.type !== "generate") return;
        // Sent into a worker that died, or one already replaced: onExit hands the
        // request to the replacement (or fails it when it gives up).
        if (proc !== this.proc) return;
        if (proc && (proc.killed || proc.exitCode !== null || proc.signalCode !== null)) return;
        this.failOne(message.id, err);
      });
  }

  private spawn(): Promise<void> {
    const o = this.opts;
    const args = ["worker", "--model", o.model];
    if (o.maxBatch) args.push("--max-batch", String(o.maxBatch));
    if (o.maxContext) args.push("--max-context", String(o.maxContext));
    if (o.kvPool) args.push("--kv-pool", String(o.kvPool));
    if (o.kvTypes) args.push("--cache-type-k", o.kvTypes.k, "--cache-type-v", o.kvTypes.v);
    if (o.threads) args.push("--threads", String(o.threads));
    if (o.prefillBudget !== undefined) args.push("--prefill-budget", String(o.prefillBudget));
    if (o.hostCacheMb !== undefined) args.push("--host-cache-mb", String(o.hostCacheMb));
    if (o.pressureHigh !== undefined) args.push("--pressure-high", String(o.pressureHigh));
    if (o.pressureLow !== undefined) args.push("--pressure-low", String(o.pressureLow));
    if (o.pinBudgetPct !== undefined) args.push("--pin-budget-pct", String(o.pinBudgetPct));
    if (o.classLanes && Object.keys(o.classLanes).length > 0) {
      args.push(
        "--class-lanes",
        Object.entries(o.classLanes)
          .map(([name, n]) => `${name}=${n}`)
          .join(","),
      );
    }
    if (o.starvationTicks !== undefined) args.push("--starvation-ticks", String(o.starvationTicks));
    if (o.speculation) args.push(...speculationFlags(o.speculation));
    if (o.offload) args.push(...offloadFlags(o.offload));
    let settle!: { resolve: () => void; reject: (e: Error) => void };
    const started = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
    // A worker that does not answer in time is killed, so onExit replaces it (or gives up).
    const timer = setTimeout(() => {
      settle.reject(
        new WorkerStartError(`worker for ${o.model} did not become ready within ${o.startTimeoutMs ?? 120000} ms`),
      );
      proc.kill("SIGKILL");
    }, o.startTimeoutMs ?? 120000);
    const onMessage = (message: WorkerToDaemon) => {
      if (message.type === "ready") {
        if (message.info.protocol !== PROTOCOL_VERSION) {
          settle.reject(
            new WorkerStartError(`worker speaks protocol ${message.info.protocol}, daemon ${PROTOCOL_VERSION}`),
          );
          proc.kill("SIGKILL");
          return;
        }
        this.info = message.info;
        this.restoreAdapters(proc);
        settle.resolve();
      } else if (message.type === "fatal") {
        settle.reject(
          message.away
            ? new WorkerStartError(message.message, true)
            : new WorkerStartError(`worker for ${o.model} failed: ${message.message}`),
        );
      } else if (message.type === "tick") {
        this.onTick(message);
      } else if (message.type === "stats") {
        if (proc.exitCode === null && proc.signalCode === null) this.tally.seen(message.snapshot);
        this.pendingStats.get(message.id)?.({ snapshot: message.snapshot, at: message.at });
        this.pendingStats.delete(message.id);
      } else if (message.type === "embedded") {
        this.respawnsSinceTick = 0;
        this.settleEmbed(message.id, {
          vectors: unpackVectors(message.data, message.dimensions),
          dimensions: message.dimensions,
        });
      } else if (message.type === "embed-failed") {
        this.settleEmbed(message.id, new RequestError(500, `embedding failed: ${message.error}`));
      } else if (message.type === "lora" || message.type === "lora-failed") {
        this.settleLora(message);
      }
    };
    // The worker `serve` started ahead (standby-worker.ts) when it is still there.
    const proc =
      claimStandbyWorker(args.slice(1), onMessage) ??
      // The environment as it is now (Bun.spawn alone passes the one the process started with):
      // it carries what the daemon set since, SUPERFLUID_SCHED_RESET among it (src/runtime/sched-policy.ts).
      Bun.spawn(selfCommand(...args), {
        stdio: ["ignore", "inherit", "inherit"],
        serialization: "json",
        ipc: onMessage,
        env: { ...process.env },
      });
    this.proc = proc;
    proc.exited.then((code) => {
      clearTimeout(timer);
      settle.reject(new WorkerStartError(`worker for ${o.model} exited with code ${code} before it was ready`));
      if (this.proc === proc) this.onExit(proc, code);
    });
    this.ready = started.finally(() => clearTimeout(timer));
    return this.ready;
  }

  /**
   * Runs `deliver` once everything journaled so far is durable, after every
   * earlier delivery. Without a journal it runs at once.
   */
  private afterDurable(deliver: () => void, carried: Generation[]): void {
    const journal = this.opts.journal;
    if (!journal) return deliver();
    const durable = journal.flush();
    this.delivery = this.delivery
      .then(() => durable.then(deliver))
      .catch((err: Error) => {
        // The generations this delivery would have ended are out of `inflight` already.
        const error = new JournalError(err);
        for (const generation of carried) {
          generation.events.fail(error);
          generation.notePrefilled();
        }
        this.failEverything(error);
      });
  }

  /**
   * A journal flush failed: the events it carried are lost, and the journal ended
   * every open session with it, so every generation in flight ends with the error
   * and the worker drops them. Generations started later try the journal again.
   */
  private failEverything(error: Error): void {
    for (const [id, generation] of [...this.inflight]) {
      this.inflight.delete(id);
      generation.events.fail(error);
      generation.notePrefilled();
      this.sendWhenReady({ type: "cancel", id });
    }
  }

  private onTick(events: Extract<WorkerToDaemon, { type: "tick" }>): void {
    this.respawnsSinceTick = 0;
    const journal = this.opts.journal;
    // The worker ticks back to back while it has work, so the tick that admitted
    // a request began at the previous report, or when the request reached an idle worker.
    const now = performance.now();
    const tickBegan = this.lastTickAt;
    this.lastTickAt = now;
    const admitted: [Generation, number][] = [];
    for (const a of events.admitted) {
      const generation = this.inflight.get(a.id);
      if (!generation) continue;
      generation.admitted = true;
      generation.admittedAt = Math.max(generation.queuedAt, tickBegan);
      this.tally.admitted(a.cachedTokens);
      admitted.push([generation, a.cachedTokens]);
    }
    // Group this tick's tokens per request, keeping order.
    const perRequest = new Map<string, { tokens: number[]; logprobs?: TokenLogprob[] }>();
    for (const [id, token, logprob] of events.tokens) {
      let entry = perRequest.get(id);
      if (!entry) perRequest.set(id, (entry = { tokens: [] }));
      entry.tokens.push(token);
      if (logprob) (entry.logprobs ??= []).push(logprob);
    }
    const tokens: [Generation, { tokens: number[]; logprobs?: TokenLogprob[] }][] = [];
    for (const [id, entry] of perRequest) {
      const generation = this.inflight.get(id);
      if (!generation) continue;
      journal?.tokens(id, entry.tokens);
      tokens.push([generation, entry]);
      const ttft = generation.takeFirstToken(now);
      if (ttft !== undefined) this.tally.firstToken(ttft);
    }
    const finished: [Generation, FinishEvent][] = [];
    for (const f of events.finished) {
      const generation = this.inflight.get(f.id);
      if (!generation) continue;
      this.inflight.delete(f.id);
      journal?.end(f.id, f.reason, generation.job);
      this.tally.finished(f.reason, !generation.durable);
      finished.push([generation, f]);
    }
    const profile = this.tickProfile;
    const handled = performance.now();
    profile.ticks++;
    profile.onTickMs += handled - now;
    this.afterDurable(
      () => {
        const delivering = performance.now();
        profile.durableWaitMs += delivering - handled;
        for (const [generation, cachedTokens] of admitted) generation.events.push({ type: "admitted", cachedTokens });
        for (const [generation, entry] of tokens) {
          generation.events.push({ type: "tokens", ...entry });
          generation.notePrefilled();
        }
        for (const [generation, f] of finished) this.deliverFinish(generation, f);
        profile.deliverMs += performance.now() - delivering;
      },
      finished.map(([generation]) => generation),
    );
  }

  /** Delivers a finish and closes the generation's stream. */
  private deliverFinish(generation: Generation, f: FinishEvent): void {
    const { id: _, ...rest } = f;
    generation.events.push({ type: "finished", ...rest });
    generation.events.close();
    generation.notePrefilled();
  }

  private finishOne(f: FinishEvent): void {
    const generation = this.inflight.get(f.id);
    if (!generation) return;
    this.inflight.delete(f.id);
    this.opts.journal?.end(f.id, f.reason, generation.job);
    this.afterDurable(() => this.deliverFinish(generation, f), [generation]);
  }

  private failOne(id: string, error: Error): void {
    const generation = this.inflight.get(id);
    if (!generation) return;
    this.inflight.delete(id);
    this.opts.journal?.end(id, error instanceof WorkerCrashedError ? "crashed" : "error", generation.job);
    this.afterDurable(() => {
      generation.events.fail(error);
      generation.notePrefilled();
    }, [generation]);
  }

  /** Answers one embed request with its vectors or an error. */
  private settleEmbed(id: string, outcome: EmbedResult | Error): void {
    const pending = this.pendingEmbeds.get(id);
    if (!pending) return;
    this.pendingEmbeds.delete(id);
    if (outcome instanceof Error) pending.reject(outcome);
    else pending.resolve(outcome);
  }

  private onExit(proc: Subprocess, code: number | null): void {
    const detail = proc.signalCode ? `killed by ${proc.signalCode}` : `exit code ${code}`;
    this.tally.workerGone();
    // Held generations never reached it: they are among those the next worker is sent below.
    this.gather.drop();
    // Embed requests are cheap to repeat and hold no stream: they fail, and the client retries
    // (told so with a 503 when the worker was stopped on purpose: an unload, a shutdown).
    const embedError = () =>
      this.refusal?.() ??
      (this.closing
        ? new RequestError(503, "the server is shutting down", "server_shutting_down")
        : new WorkerCrashedError(detail));
    for (const id of [...this.pendingEmbeds.keys()]) this.settleEmbed(id, embedError());
    // An adapter change the dead worker never answered is not known to have happened.
    for (const [id, pending] of [...this.pendingLora]) {
      this.pendingLora.delete(id);
      pending.reject(new WorkerCrashedError(detail));
    }
    if (this.closing) return;
    this.respawns++;
    this.respawnsSinceTick++;
    const giveUp = this.respawnsSinceTick > MAX_IDLE_RESPAWNS;
    // Requests that had a lane lose their stream; those still waiting for one
    // never started, so the new worker takes them over.
    const waiting: Generation[] = [];
    // Stopped on purpose (the grace of a drain or an unload ran out): a cut generation is told why.
    const refusal = this.refusal?.();
    const stopped =
      refusal &&
      new RequestError(
        refusal.status,
        `the generation was cut when the grace period ran out: ${refusal.message}`,
        refusal.code,
        null,
        refusal.headers,
      );
    for (const [id, generation] of [...this.inflight]) {
      if (generation.admitted || giveUp) this.failOne(id, new WorkerCrashedError(detail, stopped));
      else waiting.push(generation);
    }
    if (giveUp) {
      this.ready = undefined; // the next request starts a worker again
      return;
    }
    this.spawn().catch(() => {
      // A failed restart is retried by onExit or by the next request.
    });
    for (const generation of waiting) {
      generation.queuedAt = performance.now();
      if (!generation.cancelRequested) this.sendWhenReady(generation.job);
      else
        this.finishOne({
          id: generation.id,
          reason: "cancelled",
          promptTokens: generation.job.prompt.length,
          cachedTokens: 0,
          completionTokens: 0,
        });
    }
  }
}
