// The models this daemon knows, by served id, loaded or not
// (docs/api/openai.md#models): the ones named at startup, every GGUF under a
// --model-dir, and any path POST /v1/models/load was given. A known model
// that is not loaded loads on the first request naming it (one load however
// many requests arrive meanwhile), and an unloaded one stays known. The
// default model is the first loaded at startup, then the last one
// /v1/models/load loaded.
//
// Aliases (--alias NAME=ID, docs/cli.md#model-lookup-and-sampling-flags) let
// clients that send their own model names (a coding agent's `claude-...`)
// reach a known model: an exact name, or a pattern with `*` wildcards.
//
// Loading, closing and describing a path are the server's business
// (src/cli/serve.ts: the fit check, the session log, progress on the
// terminal); the registry only decides when, and keeps one of each at a time.
import type { GgufFile, ModelInfo } from "../gguf/index.ts";
import { RequestError } from "./request-error.ts";
import type { ServedModel } from "./served-model.ts";

export interface ModelAlias {
  /** The name clients send; `*` matches any run of characters. */
  name: string;
  /** The served id it maps to. */
  target: string;
}

/** A model the server can load: its served id, its GGUF file and what the file's header says. */
export interface ModelSource {
  id: string;
  path: string;
  info: ModelInfo;
  /** The parsed GGUF header, when it was read to know the model (the fit check reads its metadata). */
  file?: GgufFile;
}

/** What the server does for the registry; without them the registry serves only the models added to it. */
export interface ModelHooks {
  /** Loads a known model (fit check, worker, session log); rejects with a RequestError when it cannot. */
  load(source: ModelSource): Promise<ServedModel>;
  /** Frees a loaded model: its worker, prompt thread and its own session log. */
  close(model: ServedModel): Promise<void>;
  /** A path or reference given to POST /v1/models/load, as a source (its GGUF header read). */
  describe(token: string): Promise<ModelSource>;
}

export type ModelState = "loaded" | "loading" | "unloading" | "unloaded";

/** One known model and where it stands. */
export class RegistryEntry {
  served?: ServedModel;
  loading?: Promise<ServedModel>;
  unloading?: Promise<void>;
  /**
   * Why the last load started by a synchronous lookup failed: the next such lookup is told, the one after tries again.
   */
  failure?: Error;
  /** Last time a request named it (ms since the epoch): the idle timeout counts from here. */
  lastUsed = Date.now();
  /** When it became known: the `created` of its listing until it loads. */
  readonly knownAt = new Date();

  constructor(readonly source: ModelSource) {}

  get id(): string {
    return this.source.id;
  }

  get state(): ModelState {
    if (this.unloading) return "unloading";
    if (this.served) return "loaded";
    return this.loading ? "loading" : "unloaded";
  }
}

/** Options of an unload. */
export interface UnloadOptions {
  /**
   * How long generations already running may take to finish before the
   * worker is stopped under them (they then end with a typed error).
   */
  graceMs?: number;
}

/** Generations running on a model being unloaded get this long to finish on their own. */
export const UNLOAD_GRACE_MS = 30_000;

/** Seconds a client is told to wait (Retry-After) for a model that is loading. */
const LOADING_RETRY_SEC = 2;

/** A `*` pattern as an anchored regular expression (every other character literal). */
function patternOf(name: string): RegExp {
  const literal = name.split("*").map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"));
  return new RegExp(`^${literal.join(".*")}$`, "s");
}

export class ModelRegistry {
  private readonly entries = new Map<string, RegistryEntry>();
  private readonly aliasList: (ModelAlias & { pattern: RegExp })[] = [];
  private defaultId?: string;
  private idleTimer?: ReturnType<typeof setInterval>;
  private closed = false;

  constructor(private readonly hooks?: ModelHooks) {}

  /** A model loaded by the caller (at startup); the first becomes the default. */
  add(model: ServedModel): void {
    const entry = this.entries.get(model.id) ?? new RegistryEntry({ id: model.id, path: model.path, info: model.info });
    entry.served = model;
    this.entries.set(model.id, entry);
    this.defaultId ??= model.id;
  }

  /** Makes a model known without loading it; a model already known keeps its entry. */
  know(source: ModelSource): RegistryEntry {
    let entry = this.entries.get(source.id);
    if (!entry) {
      entry = new RegistryEntry(source);
      this.entries.set(source.id, entry);
    }
    return entry;
  }

  /** Maps `name` to the served id `target`. Exact names win over patterns; patterns are tried in the order added. */
  alias(name: string, target: string): void {
    this.aliasList.push({ name, target, pattern: patternOf(name) });
  }

  get aliases(): readonly ModelAlias[] {
    return this.aliasList.map(({ name, target }) => ({ name, target }));
  }

  /** Whether models can be loaded and unloaded while serving (a server wires the hooks; a bare registry cannot). */
  get dynamic(): boolean {
    return this.hooks !== undefined;
  }

  /** The default model: the one requests naming none run on; undefined while none is loaded. */
  get default(): ServedModel | undefined {
    const chosen = this.defaultId === undefined ? undefined : this.entries.get(this.defaultId);
    if (chosen?.served && !chosen.unloading) return chosen.served;
    return this.all()[0];
  }

  /** Loaded models (not those being unloaded), the default first. */
  all(): ServedModel[] {
    const loaded = [...this.entries.values()].filter((e) => e.served && !e.unloading).map((e) => e.served!);
    const first = loaded.findIndex((m) => m.id === this.defaultId);
    if (first > 0) loaded.unshift(...loaded.splice(first, 1));
    return loaded;
  }

  /** Every known model, loaded or not, in the order they became known. */
  known(): RegistryEntry[] {
    return [...this.entries.values()];
  }

  /** The known model a name means: a served id, else an alias's target. */
  entry(name: string): RegistryEntry | undefined {
    const known = this.entries.get(name);
    if (known) return known;
    const exact = this.aliasList.find((a) => !a.name.includes("*") && a.name === name);
    const alias = exact ?? this.aliasList.find((a) => a.pattern.test(name));
    return alias && this.entries.get(alias.target);
  }

  /**
   * The loaded model a request names, synchronously (the routes' one lookup).
   * Undefined for a name no model has. A known model that is not loaded
   * starts loading here and the request is answered 503 `model_loading` with
   * Retry-After (resolve() waits instead); one being unloaded is 503
   * `model_unloading`.
   */
  find(name: string): ServedModel | undefined {
    const entry = this.entry(name);
    if (!entry) return undefined;
    entry.lastUsed = Date.now();
    if (entry.unloading) throw unloadingError(entry.id);
    if (entry.served) return entry.served;
    if (!this.hooks) return undefined;
    const failure = entry.failure;
    if (failure && !entry.loading) {
      entry.failure = undefined;
      throw failure instanceof RequestError
        ? failure
        : new RequestError(500, `model '${entry.id}' did not load: ${failure.message}`, "model_load_failed", "model");
    }
    this.ensureLoaded(entry).catch((err: Error) => {
      entry.failure = err;
    });
    throw new RequestError(503, `model '${entry.id}' is loading; retry shortly`, "model_loading", "model", {
      "retry-after": String(LOADING_RETRY_SEC),
    });
  }

  /**
   * The model a request names, loaded first when it is known but not loaded
   * (waiting for a load already under way, or for an unload to finish).
   * Undefined for a name no model has.
   */
  async resolve(name: string): Promise<ServedModel | undefined> {
    const entry = this.entry(name);
    if (!entry) return undefined;
    entry.lastUsed = Date.now();
    return this.loadEntry(entry);
  }

  /** Loads a known model (or waits for it) and makes it the default: POST /v1/models/load. */
  async loadAsDefault(name: string): Promise<ServedModel> {
    if (!this.hooks)
      throw new RequestError(400, "dynamic model loading is not enabled on this server", "unsupported_runtime");
    const entry = this.entry(name) ?? this.know(await this.hooks.describe(name));
    entry.lastUsed = Date.now();
    const model = await this.loadEntry(entry);
    this.defaultId = entry.id;
    return model;
  }

  /**
   * Unloads a loaded model: requests stop reaching it at once (503
   * `model_unloading` while it drains, then it loads again on demand),
   * generations already running get `graceMs` to finish, then the worker is
   * stopped. The default moves to another loaded model. The last loaded
   * model cannot be unloaded.
   */
  async unload(name: string, opts: UnloadOptions = {}): Promise<RegistryEntry> {
    const entry = this.entry(name);
    if (!entry) throw new RequestError(404, `The model '${name}' does not exist`, "model_not_found", "id");
    if (entry.unloading) {
      await entry.unloading;
      return entry;
    }
    if (entry.loading && !entry.served) await entry.loading.catch(() => undefined);
    const model = entry.served;
    if (!model) throw new RequestError(400, `model '${entry.id}' is not loaded`, "model_not_loaded", "id");
    if (!this.hooks)
      throw new RequestError(400, "dynamic model loading is not enabled on this server", "unsupported_runtime");
    if (this.all().length <= 1)
      throw new RequestError(
        400,
        `model '${entry.id}' is the last loaded model and cannot be unloaded`,
        "last_model",
        "id",
      );
    if (this.defaultId === entry.id) this.defaultId = this.all().find((m) => m !== model)?.id;
    const hooks = this.hooks;
    entry.unloading = (async () => {
      try {
        await drain(model, opts.graceMs ?? UNLOAD_GRACE_MS);
        await hooks.close(model);
      } finally {
        entry.served = undefined;
        entry.unloading = undefined;
      }
    })();
    await entry.unloading;
    return entry;
  }

  /**
   * --idle-timeout: every sec/4, unloads a model other than the default that
   * has had no request in flight and none named it for `sec` seconds.
   */
  startIdleTimeout(sec: number, log: (line: string) => void = () => {}): void {
    if (sec <= 0 || !this.hooks) return;
    this.idleTimer = setInterval(
      () => {
        const now = Date.now();
        const defaultModel = this.default;
        for (const entry of this.entries.values()) {
          const model = entry.served;
          if (!model || entry.unloading || entry.loading || model === defaultModel) continue;
          // A generation still running keeps it in use, however long ago it started.
          if (model.worker.inflightCount > 0) entry.lastUsed = now;
          if (now - entry.lastUsed < sec * 1000) continue;
          log(`superfluid: unloading ${entry.id}: idle for ${sec} s (--idle-timeout)`);
          this.unload(entry.id).catch((err: Error) => log(`superfluid: could not unload ${entry.id}: ${err.message}`));
        }
      },
      Math.max(50, (sec * 1000) / 4),
    );
    this.idleTimer.unref?.();
  }

  /**
   * The server's stop (docs/cli.md#startup-and-shutdown): every loaded model drains as an unload does, new
   * requests refused with `refusal`, running ones given `graceMs`; close() then stops the workers.
   */
  async drainAll(graceMs: number, refusal: () => RequestError): Promise<void> {
    await Promise.all(this.all().map((model) => drain(model, graceMs, refusal)));
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.idleTimer) clearInterval(this.idleTimer);
    const entries = [...this.entries.values()];
    // Loads under way finish first, so their workers are closed too.
    await Promise.all(entries.map((e) => e.loading?.catch(() => undefined)));
    await Promise.all(entries.map((e) => e.unloading?.catch(() => undefined)));
    const models = entries.filter((e) => e.served).map((e) => e.served!);
    for (const e of entries) e.served = undefined;
    await Promise.all(models.map((m) => (this.hooks ? this.hooks.close(m) : m.close())));
  }

  private async loadEntry(entry: RegistryEntry): Promise<ServedModel> {
    // An unload under way finishes before the model loads again.
    while (entry.unloading) await entry.unloading.catch(() => undefined);
    if (entry.served) return entry.served;
    if (!this.hooks)
      throw new RequestError(400, "dynamic model loading is not enabled on this server", "unsupported_runtime");
    return this.ensureLoaded(entry);
  }

  /** One load per model at a time: every request for it waits on the same promise. */
  private ensureLoaded(entry: RegistryEntry): Promise<ServedModel> {
    if (entry.served) return Promise.resolve(entry.served);
    if (this.closed)
      return Promise.reject(new RequestError(503, "the server is shutting down", "server_shutting_down"));
    entry.loading ??= this.hooks!.load(entry.source)
      .then(async (model) => {
        if (this.closed) {
          // The server stopped while this model loaded: nobody will serve it.
          await this.hooks!.close(model);
          throw new RequestError(503, "the server is shutting down", "server_shutting_down");
        }
        entry.served = model;
        entry.failure = undefined;
        this.defaultId ??= entry.id;
        return model;
      })
      .finally(() => {
        entry.loading = undefined;
      });
    return entry.loading;
  }
}

function unloadingError(id: string): RequestError {
  return new RequestError(
    503,
    `model '${id}' is being unloaded; it loads again on the next request once the unload is done`,
    "model_unloading",
    "model",
    {
      "retry-after": String(LOADING_RETRY_SEC),
    },
  );
}

/**
 * Waits for the model's generations and embedding requests to finish, at most `graceMs`; then stops
 * them: its worker is killed, so each generation that had a lane ends with
 * the typed `worker_crashed` error (its session ends in the log as crashed;
 * the client is told the refusal, e.g. 503 `server_draining`),
 * each embed job it had with 503 `model_unloading` (WorkerClient.retire),
 * while the ones still queued are run by the worker's replacement, which the
 * close then stops once they are done.
 */
async function drain(
  model: ServedModel,
  graceMs: number,
  refusal: () => RequestError = () => unloadingError(model.id),
): Promise<void> {
  model.retire(refusal);
  // Embedding requests (held on the worker) are refused from now on too; those already running are waited for below.
  model.worker.retire(refusal);
  let deadline = Date.now() + graceMs;
  while (model.worker.inflightCount > 0) {
    if (Date.now() >= deadline) {
      const pid = model.worker.pid;
      if (pid !== undefined) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // already gone
        }
      }
      deadline = Date.now() + Math.max(graceMs, 1000);
    }
    await Bun.sleep(20);
  }
}
