// The Batches API's behaviour (docs/api/batches.md), behind its routes
// (src/http/openai/batches.ts): creating a batch from an uploaded file,
// reading and listing batches, cancelling one, and each batch's life from
// `validating` to its end, through the queue (queue.ts), the runner
// (runner.ts), the state on disk (state.ts) and the output files
// (output.ts). On open, batches a previous run left unfinished are taken up
// again in their original order.
//
// Each batch belongs to the scope of the key that created it
// (docs/api/security.md#scoping): its input file must be one that scope
// sees, its output files are that scope's, and to any other scope its id is
// unknown (404, as for an id never created).
import { existsSync } from "node:fs";
import { FilesQuotaError } from "../files/store.ts";
import { RequestError, invalidRequest } from "../daemon/request-error.ts";
import {
  addUsage,
  emptyUsage,
  failValidation,
  finish,
  newBatch,
  nowSec,
  startCancelling,
  startFinalizing,
  startProgress,
  TERMINAL,
  type Batch,
  type BatchError,
} from "./batch.ts";
import { batchLines, checkInputFile } from "./input.ts";
import { expiredLine, writeOutputFiles, type BatchFiles, type UnrunLines } from "./output.ts";
import { BatchQueue, DEFAULT_QUEUE_LIMITS, type QueueLimits } from "./queue.ts";
import { BatchRun, type LineExecutor, type StopReason } from "./runner.ts";
import { BatchState, type LineResult, type StoredBatch } from "./state.ts";

export const CHAT_ENDPOINT = "/v1/chat/completions";
export const EMBEDDINGS_ENDPOINT = "/v1/embeddings";
/** The one completion window OpenAI accepts. */
const WINDOW = "24h";
const WINDOW_SEC = 24 * 3600;
/** The longest a timer may be set for; a later expiry re-arms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export interface BatchServiceOptions {
  /** <sessions>/batches. */
  dir: string;
  files: BatchFiles;
  /** Runs one /v1/chat/completions line's body (on the default model, in the background class). */
  execute: LineExecutor;
  /** The served id the chat lines run on. */
  modelId: string;
  /** /v1/embeddings lines, when served: each runs on the model it names. Without it such batches are refused. */
  embeddings?: {
    execute: LineExecutor;
    /**
     * The served id a model name means (an alias's target), for the batch's `model`; the name itself when no model has
     * it.
     */
    modelOf: (name: string) => string;
  };
  limits?: QueueLimits;
  /** The completion window in seconds (24 h; shorter only in tests). */
  windowSec?: number;
  log?: (line: string) => void;
}

/** One batch and what running it needs. */
interface Entry {
  stored: StoredBatch;
  /** Indices of the lines with a recorded result. */
  done: Set<number>;
  run?: BatchRun;
  /** The first stop asked for (a cancel or the window's end) while it waits or runs. */
  stop?: StopReason;
  expiry?: ReturnType<typeof setTimeout>;
}

export interface BatchList {
  object: "list";
  data: Batch[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** OpenAI's metadata: at most 16 pairs, keys up to 64 characters, string values up to 512. */
function metadataOf(raw: unknown): Record<string, string> | null {
  if (raw === undefined || raw === null) return null;
  if (!isObject(raw)) throw invalidRequest("metadata must be an object of string values", "metadata");
  const entries = Object.entries(raw);
  if (entries.length > 16)
    throw invalidRequest(`metadata has ${entries.length} keys; at most 16 are allowed`, "metadata");
  for (const [key, value] of entries) {
    if (key.length > 64)
      throw invalidRequest(`metadata key '${key.slice(0, 64)}...' is longer than 64 characters`, "metadata");
    if (typeof value !== "string") throw invalidRequest(`metadata.${key} must be a string`, `metadata.${key}`);
    if (value.length > 512) throw invalidRequest(`metadata.${key} is longer than 512 characters`, `metadata.${key}`);
  }
  return raw as Record<string, string>;
}

/** The endpoint a batch runs: the chat route by default, the embeddings route when this service runs it. */
function endpointOf(raw: unknown, embeddings: boolean): string {
  if (raw === undefined || raw === null || raw === CHAT_ENDPOINT) return CHAT_ENDPOINT;
  if (raw === EMBEDDINGS_ENDPOINT && embeddings) return EMBEDDINGS_ENDPOINT;
  const served = embeddings ? `'${CHAT_ENDPOINT}' or '${EMBEDDINGS_ENDPOINT}'` : `'${CHAT_ENDPOINT}'`;
  throw invalidRequest(`endpoint must be ${served}, not ${JSON.stringify(raw)}`, "endpoint", "unsupported_endpoint");
}

/** The `model` the first request of a checked input file names, when a string. */
async function firstLineModel(path: string): Promise<string | undefined> {
  // Leaving the loop closes the file after its first request.
  for await (const line of batchLines(path)) return typeof line.body.model === "string" ? line.body.model : undefined;
  return undefined;
}

/** A line of an endpoint this server no longer runs: a 400 in OpenAI's envelope, as the route would answer. */
const unservedEndpoint =
  (endpoint: string): LineExecutor =>
  async () => ({
    status: 400,
    body: {
      error: {
        message: `this server does not run ${endpoint} batch lines`,
        type: "invalid_request_error",
        param: null,
        code: "unsupported_endpoint",
      },
    },
  });

export class BatchService {
  private readonly entries = new Map<string, Entry>();
  private readonly queue: BatchQueue;
  private readonly windowSec: number;
  private readonly log: (line: string) => void;
  /** Every batch's life in progress (running, finishing), awaited by stop(). */
  private readonly active = new Set<Promise<void>>();
  private nextSeq = 1;
  private stopping = false;

  private constructor(
    private readonly state: BatchState,
    private readonly opts: BatchServiceOptions,
  ) {
    this.queue = new BatchQueue(
      opts.limits ?? DEFAULT_QUEUE_LIMITS,
      (id) => void this.track(this.runBatch(this.entries.get(id)!)),
    );
    this.windowSec = opts.windowSec ?? WINDOW_SEC;
    this.log = opts.log ?? ((line) => console.error(line));
  }

  /** Opens the state under `opts.dir`: every batch on disk is known (and listed) from here on; start() runs them. */
  static open(opts: BatchServiceOptions): BatchService {
    const service = new BatchService(BatchState.open(opts.dir), opts);
    for (const stored of service.state.loadAll(service.log)) {
      const b = stored.batch;
      const e: Entry = { stored, done: new Set() };
      service.entries.set(b.id, e);
      service.nextSeq = Math.max(service.nextSeq, stored.seq + 1);
      if (TERMINAL.has(b.status)) continue;
      // Counts and usage are rebuilt from the results on disk: the record is rewritten only when the status moves.
      b.request_counts.completed = 0;
      b.request_counts.failed = 0;
      b.usage = emptyUsage();
      service.state.scanResults(b.id, (r) => service.count(e, r));
    }
    service.state.sweepInputs((id) => {
      const b = service.entries.get(id)?.stored.batch;
      return b !== undefined && !TERMINAL.has(b.status);
    });
    return service;
  }

  /**
   * Takes up every batch a previous run left unfinished, in creation order (once, when the server is ready to run
   * them).
   */
  start(): void {
    let resumed = 0;
    const unfinished = [...this.entries.values()]
      .filter((e) => !TERMINAL.has(e.stored.batch.status))
      .sort((a, b) => a.stored.seq - b.stored.seq);
    for (const e of unfinished) {
      const b = e.stored.batch;
      resumed++;
      if (b.status === "cancelling") void this.track(this.finishStopped(e, "cancelled"));
      else if (nowSec() >= b.expires_at) void this.track(this.finishStopped(e, "expired"));
      else {
        this.armExpiry(e);
        this.queue.enqueue(b.id);
      }
    }
    if (resumed > 0)
      this.log(`superfluid: batches: ${resumed} unfinished batch${resumed === 1 ? "" : "es"} taken up again`);
  }

  /** POST /v1/batches, by a request of scope `owner`. */
  async create(body: unknown, owner?: string): Promise<Batch> {
    if (!isObject(body)) throw invalidRequest("request body must be a JSON object");
    const { input_file_id: fileId, completion_window: window } = body;
    if (fileId === undefined || fileId === null)
      throw invalidRequest(
        "you must provide an input_file_id parameter",
        "input_file_id",
        "missing_required_parameter",
      );
    if (typeof fileId !== "string") throw invalidRequest("input_file_id must be a string", "input_file_id");
    const endpoint = endpointOf(body.endpoint, this.opts.embeddings !== undefined);
    if (window !== undefined && window !== null && window !== WINDOW)
      throw invalidRequest(`completion_window must be '${WINDOW}'`, "completion_window");
    const metadata = metadataOf(body.metadata);
    this.refuseWhenFull();
    const file = this.opts.files.get(fileId, owner);
    if (!file) throw new RequestError(404, `No such File object: ${fileId}`, "file_not_found", "input_file_id");
    if (file.purpose !== "batch")
      throw invalidRequest(
        `the file ${fileId} has purpose '${file.purpose}'; a batch's input file must be uploaded with purpose 'batch'`,
        "input_file_id",
      );
    // The batch's own copy, checked and later run: the upload may go meanwhile.
    let staged: string | undefined = await this.state
      .stageInput(this.opts.files.contentPath(fileId))
      .catch((err: NodeJS.ErrnoException) => {
        if (err.code === "ENOENT")
          throw new RequestError(404, `No such File object: ${fileId}`, "file_not_found", "input_file_id");
        throw err;
      });
    try {
      const check = await checkInputFile(staged, endpoint);
      if (this.stopping) throw new RequestError(503, "the server is shutting down", "server_shutting_down");
      const b = newBatch({
        inputFileId: fileId,
        endpoint,
        completionWindow: WINDOW,
        windowSec: this.windowSec,
        metadata,
        model: await this.modelOf(endpoint, check.ok ? staged : undefined),
        total: check.ok ? check.total : 0,
      });
      const e: Entry = {
        stored: { seq: this.nextSeq++, batch: b, ...(owner === undefined ? {} : { owner }) },
        done: new Set(),
      };
      if (!check.ok) {
        failValidation(b, check.errors);
        this.saveNew(e);
        this.entries.set(b.id, e);
        return b;
      }
      await this.state.commitInput(staged, b.id);
      staged = undefined;
      try {
        // Checking the file yielded the event loop: the line may have filled, or the server begun to stop, meanwhile.
        this.refuseWhenFull();
        if (this.stopping) throw new RequestError(503, "the server is shutting down", "server_shutting_down");
        this.saveNew(e);
      } catch (err) {
        await this.state.removeInput(b.id);
        throw err;
      }
      this.entries.set(b.id, e);
      this.armExpiry(e);
      this.queue.enqueue(b.id);
      return b;
    } finally {
      if (staged !== undefined) await this.state.discardInput(staged);
    }
  }

  /**
   * The served id a new batch shows as its `model`: the default model for chat
   * lines (they all run on it), the model the first line names for embedding
   * lines (each runs on the model it names, normally all the same one), or
   * "" when the file failed its check or its first line names none.
   */
  private async modelOf(endpoint: string, checked: string | undefined): Promise<string> {
    if (endpoint !== EMBEDDINGS_ENDPOINT || !this.opts.embeddings) return this.opts.modelId;
    const named = checked === undefined ? undefined : await firstLineModel(checked);
    return named === undefined ? "" : this.opts.embeddings.modelOf(named);
  }

  /**
   * A new batch's first save: one that fails is not created (500), since nothing would run or list it after a restart.
   */
  private saveNew(e: Entry): void {
    try {
      this.state.save(e.stored);
    } catch (err) {
      this.log(
        `superfluid: batch ${e.stored.batch.id}: its state could not be written, so it was not created: ${(err as Error).message}`,
      );
      // The message names no path: the error's own may, and it stays in the server log.
      throw new RequestError(500, "the batch could not be written to disk, so it was not created", "batch_not_saved");
    }
  }

  private refuseWhenFull(): void {
    if (!this.queue.full) return;
    throw new RequestError(
      429,
      `${this.queue.waiting} batches are already waiting for one of ${this.queue.limits.running} running slots; try again once some have finished`,
      "batch_queue_full",
    );
  }

  /** The batch `id` when the scope `owner` sees it (it created it), else a 404 as for an id never created. */
  private visible(id: string, owner: string | undefined): Entry {
    const e = this.entries.get(id);
    if (!e || e.stored.owner !== owner)
      throw new RequestError(404, `No batch found with id '${id}'`, "batch_not_found", "batch_id");
    return e;
  }

  /** GET /v1/batches/{id}. */
  get(id: string, owner?: string): Batch {
    return this.visible(id, owner).stored.batch;
  }

  /**
   * GET /v1/batches: the scope `owner`'s batches, newest first, `limit` (1-100, default 20) after its batch `after`.
   */
  list(query: { limit?: string | null; after?: string | null }, owner?: string): BatchList {
    let limit = 20;
    if (query.limit !== undefined && query.limit !== null) {
      limit = Number(query.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 100)
        throw invalidRequest("limit must be an integer from 1 to 100", "limit");
    }
    const all = [...this.entries.values()]
      .filter((e) => e.stored.owner === owner)
      .sort((a, b) => b.stored.seq - a.stored.seq)
      .map((e) => e.stored.batch);
    let from = 0;
    if (query.after) {
      const at = all.findIndex((b) => b.id === query.after);
      if (at < 0) throw new RequestError(404, `No batch found with id '${query.after}'`, "batch_not_found", "after");
      from = at + 1;
    }
    const data = all.slice(from, from + limit);
    return {
      object: "list",
      data,
      first_id: data[0]?.id ?? null,
      last_id: data.at(-1)?.id ?? null,
      has_more: from + limit < all.length,
    };
  }

  /**
   * POST /v1/batches/{id}/cancel. A waiting batch is cancelled at once; a
   * running one goes `cancelling`, its request in flight is aborted, and it
   * ends `cancelled` with what ran so far in its files.
   */
  async cancel(id: string, owner?: string): Promise<Batch> {
    const e = this.visible(id, owner);
    const b = e.stored.batch;
    if (b.status === "cancelling" || b.status === "cancelled") return b;
    if (TERMINAL.has(b.status) || b.status === "finalizing") {
      throw new RequestError(409, `Cannot cancel a batch with status '${b.status}'`, "batch_not_cancellable");
    }
    startCancelling(b);
    this.save(e);
    e.stop ??= "cancel";
    if (this.queue.remove(id)) await this.track(this.finishStopped(e, "cancelled"));
    else e.run?.stop("cancel");
    return b;
  }

  /**
   * Stops every batch between or within lines (the line in flight is aborted and not recorded) and waits for them;
   * their state on disk resumes them on the next open.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    for (const e of this.entries.values()) {
      clearTimeout(e.expiry);
      e.run?.stop("shutdown");
    }
    while (this.active.size > 0) await Promise.allSettled([...this.active]);
  }

  private track(p: Promise<void>): Promise<void> {
    this.active.add(p);
    const forget = () => void this.active.delete(p);
    p.then(forget, forget);
    return p;
  }

  /** Saves a batch that has moved; false (logged) when it could not be written. */
  private save(e: Entry): boolean {
    try {
      this.state.save(e.stored);
      return true;
    } catch (err) {
      this.log(`superfluid: batch ${e.stored.batch.id}: its state could not be written: ${(err as Error).message}`);
      return false;
    }
  }

  /**
   * Saves a batch that has ended, then drops its copy of the input. The copy
   * stays when the save failed: the batch may be taken up again on the next
   * start, and would need it.
   */
  private async saveEnd(e: Entry): Promise<void> {
    clearTimeout(e.expiry);
    if (this.save(e)) await this.state.removeInput(e.stored.batch.id);
  }

  private count(e: Entry, r: LineResult): void {
    if (e.done.has(r.i)) return;
    e.done.add(r.i);
    const b = e.stored.batch;
    if (r.ok) {
      b.request_counts.completed++;
      addUsage(b, (r.out.response?.body as { usage?: unknown } | null)?.usage);
    } else b.request_counts.failed++;
  }

  private armExpiry(e: Entry): void {
    clearTimeout(e.expiry);
    const ms = e.stored.batch.expires_at * 1000 - Date.now();
    e.expiry = setTimeout(
      () => (ms > MAX_TIMER_MS ? this.armExpiry(e) : this.expire(e)),
      Math.max(0, Math.min(ms, MAX_TIMER_MS)),
    );
    (e.expiry as { unref?: () => void }).unref?.();
  }

  /**
   * The completion window has passed: a waiting batch ends at once, a running one after its request in flight is
   * aborted.
   */
  private expire(e: Entry): void {
    const b = e.stored.batch;
    if (this.stopping || TERMINAL.has(b.status) || b.status === "finalizing") return;
    e.stop ??= "expire";
    if (this.queue.remove(b.id)) void this.track(this.finishStopped(e, "expired"));
    else e.run?.stop("expire");
  }

  /** The copy of its input file a batch runs from; undefined when it is missing (removed by hand). */
  private inputOf(b: Batch): string | undefined {
    const path = this.state.inputPath(b.id);
    return existsSync(path) ? path : undefined;
  }

  /** A batch in its slot: its lines, then its files, then its last status; leaves the slot however it ends. */
  private async runBatch(e: Entry): Promise<void> {
    const b = e.stored.batch;
    try {
      if (this.stopping) return;
      if (b.status !== "finalizing") {
        const input = this.inputOf(b);
        if (input === undefined) {
          failValidation(b, [
            {
              code: "file_not_found",
              message: `this batch's copy of its input file ${b.input_file_id} is missing`,
              param: "input_file_id",
              line: null,
            },
          ]);
          return await this.saveEnd(e);
        }
        if (b.status === "validating") {
          startProgress(b);
          this.save(e);
        }
        const log = await this.state.openResults(b.id);
        const execute = b.endpoint === EMBEDDINGS_ENDPOINT ? this.opts.embeddings?.execute : this.opts.execute;
        // Batches for the embeddings route stay on disk if a later start serves none: they fail every line rather than
        // the batch.
        const run = new BatchRun(
          batchLines(input, (i) => e.done.has(i)),
          log,
          execute ?? unservedEndpoint(b.endpoint),
          (r) => this.count(e, r),
        );
        e.run = run;
        if (this.stopping) run.stop("shutdown");
        else if (e.stop) run.stop(e.stop);
        let end: Awaited<ReturnType<BatchRun["run"]>>;
        try {
          end = await run.run();
        } finally {
          e.run = undefined;
          await log.close();
        }
        if (end === "shutdown") return;
        if (end !== "done") return await this.finishStopped(e, end === "cancel" ? "cancelled" : "expired");
        startFinalizing(b);
        this.save(e);
      }
      if (b.status === "finalizing") {
        finish(
          b,
          "completed",
          await writeOutputFiles(this.opts.files, this.state, { id: b.id, owner: e.stored.owner }, b.request_counts),
        );
        await this.saveEnd(e);
      }
    } catch (err) {
      await this.fail(e, err);
    } finally {
      this.queue.done(b.id);
    }
  }

  /**
   * A cancelled or expired batch's end: what ran goes to its files (an expired one's unrun lines as `batch_expired`
   * errors).
   */
  private async finishStopped(e: Entry, status: "cancelled" | "expired"): Promise<void> {
    const b = e.stored.batch;
    try {
      const input = status === "expired" ? this.inputOf(b) : undefined;
      // Streamed from the input when the error file is written, never held.
      const unrun: UnrunLines | undefined =
        input === undefined
          ? undefined
          : {
              count: b.request_counts.total - e.done.size,
              lines: async function* () {
                for await (const line of batchLines(input, (i) => e.done.has(i))) yield expiredLine(line);
              },
            };
      finish(
        b,
        status,
        await writeOutputFiles(
          this.opts.files,
          this.state,
          { id: b.id, owner: e.stored.owner },
          b.request_counts,
          unrun,
        ),
      );
      await this.saveEnd(e);
    } catch (err) {
      await this.fail(e, err);
    }
  }

  /** The batch cannot go on (its state or output files could not be written): it fails, saying why. */
  private async fail(e: Entry, err: unknown): Promise<void> {
    const b = e.stored.batch;
    this.log(`superfluid: batch ${b.id} failed: ${(err as Error)?.message ?? String(err)}`);
    b.status = "failed";
    b.failed_at = nowSec();
    // The quota's message names no path; other failures' messages may, so they stay in the server log.
    const error: BatchError =
      err instanceof FilesQuotaError
        ? {
            code: "files_quota_exceeded",
            message: `the output files do not fit: ${err.message} (--files-max-bytes)`,
            param: null,
            line: null,
          }
        : {
            code: "batch_failed",
            message: "the server could not record this batch's results",
            param: null,
            line: null,
          };
    b.errors = { object: "list", data: [error] };
    await this.saveEnd(e);
  }
}
