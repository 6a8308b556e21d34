// Loads and frees the served models for the registry (src/daemon/registry.ts): the fit check, each model's session
// log, the --fim-model beside the first, progress on the terminal. `superfluid serve` (src/cli/serve.ts) makes one
// from its flags.
import { join } from "node:path";
import { describeCpu } from "../../ffi/cpu-variant.ts";
import type { ClassLanes } from "../engine/scheduler.ts";
import type { FreeMemory } from "../engine/memory.ts";
import type { GpuLayers, OffloadRequest, SplitMode } from "../engine/offload.ts";
import type { SpeculationSettings } from "../engine/speculation-directive.ts";
import { describeModel, readGguf, type GgufFile } from "../gguf/index.ts";
import { describeKvTypes, type KvTypes } from "../gguf/kv-type.ts";
import { parseReference } from "../hub/reference.ts";
import { checkRpcWorkers } from "../rpc/connect.ts";
import { formatBytes } from "../runtime/byte-size.ts";
import { SessionStore } from "../session-log/store.ts";
import { checkFit, freeMemoryBeforeLoad, type KvSizing } from "./fit-check.ts";
import { showLoadProgress } from "./load-progress.ts";
import { resolveOrPull, type PullPolicy } from "./model-pull.ts";
import type { ModelSource } from "./registry.ts";
import { RequestError } from "./request-error.ts";
import { ServedModel } from "./served-model.ts";

/** What the serve flags (src/cli/serve-options.ts) tell the loader: the flags of the same names. */
export interface LoadSettings {
  maxBatch: number;
  kvPool?: number;
  kvTypes: KvTypes;
  threads: number;
  noGpu: boolean;
  gpuLayers: GpuLayers;
  splitMode: SplitMode;
  kvOffload: boolean;
  device?: string[];
  tensorSplit?: number[];
  rpc?: string[];
  prefillBudget: number;
  starvationTicks: number;
  classLanes?: ClassLanes;
  hostCacheMb?: number;
  pressureHigh: number;
  pressureLow: number;
  pinBudgetPct: number;
  speculation?: SpeculationSettings;
  /** --sessions: every model but the first keeps its session log under <sessions>/models/<id>/. */
  sessions: string;
  sessionsCache: boolean;
  /** Under the TUI, load progress goes to the log as plain lines. */
  tui: boolean;
  modelDirs: string[];
  fimModel?: string;
  fimMaxBatch: number;
  fimMaxContext?: number;
}

/**
 * --fim-model: a fill-in-the-middle model in its own worker, with its own
 * lanes (--fim-max-batch) and window (--fim-max-context, default
 * min(the main window, 8192)). It is not a served model of its own: FIM
 * requests to the served model run on it, and it keeps no session log.
 */
async function loadFimModel(
  options: LoadSettings,
  mainWindow: number,
  log: (line: string) => void,
  pulling: PullPolicy,
): Promise<ServedModel> {
  const resolved = await resolveOrPull(options.fimModel!, options.modelDirs, pulling);
  const maxContext = options.fimMaxContext ?? Math.min(mainWindow, 8192);
  log(
    `superfluid: loading FIM model ${resolved.id} from ${resolved.path} (${options.fimMaxBatch} lanes x ${maxContext} tokens) ...`,
  );
  const fim = await ServedModel.load({
    id: resolved.id,
    model: resolved.path,
    maxBatch: options.fimMaxBatch,
    maxContext,
    threads: options.threads,
    offload: offloadRequestOf(options),
    prefillBudget: options.prefillBudget,
    starvationTicks: options.starvationTicks,
    ...(options.hostCacheMb === undefined ? {} : { hostCacheMb: options.hostCacheMb }),
    pressureHigh: options.pressureHigh,
    pressureLow: options.pressureLow,
    ...(options.speculation ? { speculation: options.speculation } : {}),
  });
  logSpeculation(options, fim, log);
  if (!fim.hasFimTokens) {
    await fim.close();
    throw new Error(
      `--fim-model ${options.fimModel}: ${resolved.id} has no fill-in-the-middle tokens (prefix, suffix and middle)`,
    );
  }
  return fim;
}

/** The offload the serve flags ask of every model's worker (docs/cli.md#gpu-offload-flags). */
function offloadRequestOf(o: LoadSettings): OffloadRequest {
  return {
    gpuLayers: o.noGpu ? 0 : o.gpuLayers,
    splitMode: o.splitMode,
    kvOffload: o.kvOffload,
    ...(o.device === undefined ? {} : { devices: o.device }),
    ...(o.tensorSplit === undefined ? {} : { tensorSplit: o.tensorSplit }),
    ...(o.rpc === undefined ? {} : { rpc: o.rpc }),
  };
}

/**
 * Free memory with the RPC workers' devices counted in (--rpc): each is asked over a plain socket
 * (src/rpc/probe.ts), and one that cannot serve (unreachable, another protocol, busy with another client) stops the
 * load naming it. The startup log names each worker's devices.
 */
async function withRpcWorkers(
  local: FreeMemory,
  endpoints: readonly string[],
  log: (line: string) => void,
): Promise<FreeMemory> {
  let remote = 0;
  for (const worker of await checkRpcWorkers(endpoints)) {
    const free = worker.devices.reduce((a, d) => a + d.freeBytes, 0);
    remote += free;
    log(
      `superfluid: RPC worker ${worker.endpoint}: protocol ${worker.version}, ${worker.devices.length} device(s), ${formatBytes(free)} free`,
    );
  }
  return {
    bytes: local.bytes + remote,
    where: local.where === "host" ? "host and RPC workers" : "device and RPC workers",
  };
}

/**
 * The strategy a model's worker resolved --speculate to, once per model when speculation was asked for
 * (docs/cli.md#speculative-decoding).
 */
function logSpeculation(options: LoadSettings, model: ServedModel, log: (line: string) => void): void {
  if (!options.speculation) return;
  const info = model.worker.info;
  log(`superfluid: speculation: ${info.speculation}${info.speculationNote ? ` (${info.speculationNote})` : ""}`);
}

/**
 * A served id as one folder name under <sessions>/models/: `/` as `--` (the Hugging Face cache's way), nothing that
 * climbs out.
 */
export function sessionsFolderOf(id: string): string {
  const name = id.replace(/\//g, "--").replace(/[^\w.-]/g, "_");
  return /^\.+$/.test(name) ? `_${name}` : name;
}

/**
 * Loads and frees models for the registry: the fit check, the session log
 * (the first model named uses <sessions>/ itself, every other one
 * <sessions>/models/<id>/ of its own), the --fim-model beside the first,
 * and progress on the terminal.
 */
export class ModelLoader {
  /** Session logs this loader opened, by the model using them (the first model's is the server's own). */
  private readonly stores = new Map<ServedModel, SessionStore>();

  constructor(
    private readonly options: LoadSettings,
    private readonly sessions: SessionStore,
    private readonly primaryId: string,
    private readonly maxContext: number | undefined,
    private readonly log: (line: string) => void,
    private readonly pulling: (reference: string) => PullPolicy,
  ) {}

  /** How the worker will size a model's KV: what the serve flags decide. */
  private sizing(): KvSizing {
    const o = this.options;
    return {
      lanes: o.maxBatch,
      ...(this.maxContext === undefined ? {} : { maxContext: this.maxContext }),
      ...(o.kvPool === undefined ? {} : { kvPool: o.kvPool }),
      kvTypes: o.kvTypes,
    };
  }

  /** The memory a model would load into now, RPC workers' devices counted in (each named in `log`). */
  private async freeForLoad(log: (line: string) => void): Promise<FreeMemory> {
    const o = this.options;
    const local = await freeMemoryBeforeLoad(!o.noGpu && o.gpuLayers !== 0, o.device);
    return o.rpc ? await withRpcWorkers(local, o.rpc, log) : local;
  }

  /**
   * The fit check `load` runs, run by a pull of `reference` before its first byte (docs/cli.md#pulling-models) on
   * the GGUF header read off the Hub and the weights' bytes the Hub lists: the same figures, so a model that would
   * be refused once downloaded is refused before it is (ModelTooLargeError: exit 1 at start, 507 on demand).
   */
  fitBeforePull(reference: string): (header: GgufFile, weightBytes: number) => Promise<void> {
    return async (header, weightBytes) => {
      // The RPC workers were named when the start probed them; this probe stays quiet.
      const free = await this.freeForLoad(() => {});
      const trained = describeModel(header).contextLength ?? 0;
      checkFit(parseReference(reference).repo, weightBytes, header, trained, this.sizing(), free, reference);
    };
  }

  async load(source: ModelSource): Promise<ServedModel> {
    const o = this.options;
    const file = source.file ?? (await readGguf(source.path));
    const free = await this.freeForLoad(this.log);
    const fit = checkFit(source.id, source.path, file, source.info.contextLength ?? 0, this.sizing(), free);
    const primary = source.id === this.primaryId;
    const sizing =
      o.kvPool !== undefined
        ? `a shared KV pool of ${o.kvPool} cells`
        : this.maxContext !== undefined
          ? `${this.maxContext} tokens each`
          : "KV sized from free memory";
    this.log(
      `superfluid: loading ${source.id} from ${source.path} (${o.maxBatch} lanes, ${sizing}, KV ${describeKvTypes(o.kvTypes)}, ${o.threads} threads; ` +
        `needs ${formatBytes(fit.weightBytes + fit.kvBytes)} of ${formatBytes(fit.free.bytes)} free) ...`,
    );
    const store = primary
      ? this.sessions
      : await SessionStore.open(join(o.sessions, "models", sessionsFolderOf(source.id)), { cache: o.sessionsCache });
    const started = performance.now();
    // Under the TUI the bar would draw over the screen: plain lines into its log instead.
    const progress = showLoadProgress(source.id, source.path, fit.weightBytes, this.log, o.tui ? false : undefined);
    let model: ServedModel;
    try {
      model = await ServedModel.load({
        id: source.id,
        model: source.path,
        maxBatch: o.maxBatch,
        ...(this.maxContext === undefined ? {} : { maxContext: this.maxContext }),
        ...(o.kvPool === undefined ? {} : { kvPool: o.kvPool }),
        kvTypes: o.kvTypes,
        threads: o.threads,
        offload: offloadRequestOf(o),
        prefillBudget: o.prefillBudget,
        starvationTicks: o.starvationTicks,
        ...(o.classLanes ? { classLanes: o.classLanes } : {}),
        ...(o.hostCacheMb === undefined ? {} : { hostCacheMb: o.hostCacheMb }),
        pressureHigh: o.pressureHigh,
        pressureLow: o.pressureLow,
        pinBudgetPct: o.pinBudgetPct,
        ...(o.speculation ? { speculation: o.speculation } : {}),
        sessions: store,
      });
    } catch (err) {
      if (!primary) await store.close().catch(() => undefined);
      throw err instanceof RequestError
        ? err
        : new RequestError(
            500,
            `model '${source.id}' did not load: ${(err as Error).message}`,
            "model_load_failed",
            "model",
          );
    } finally {
      progress.done();
    }
    if (!primary) this.stores.set(model, store);
    this.log(
      `superfluid: ${source.id} ready in ${((performance.now() - started) / 1000).toFixed(1)} s` +
        (primary ? "" : ` (session log ${store.path})`),
    );
    this.log(
      `superfluid: decoding on ${describeCpu(model.worker.info.library.cpu)}, ${model.worker.info.threads} threads`,
    );
    this.log(`superfluid: ${model.worker.info.kv.summary}`);
    // Only where a GPU could take part: a CPU-only build's log stays as it was.
    const info = model.worker.info;
    // A backend left unloaded on purpose (--no-gpu, no GPU device node: ffi/gpu-presence.ts) is no failure to name.
    for (const f of info.unloadedBackends.filter((f) => !f.skipped))
      this.log(`superfluid: the GPU backend ${f.file} did not load (${f.reason}); its devices are not used`);
    if (info.offload) this.log(`superfluid: ${info.offload.summary}`);
    logSpeculation(o, model, this.log);
    if (primary && o.fimModel !== undefined) {
      try {
        model.fimModel = await loadFimModel(o, model.contextWindow, this.log, this.pulling(o.fimModel!));
      } catch (err) {
        await this.close(model);
        throw err;
      }
    }
    return model;
  }

  async close(model: ServedModel): Promise<void> {
    await model.close();
    const store = this.stores.get(model);
    this.stores.delete(model);
    // What is still buffered belongs to generations the unload cut off, none of it delivered.
    await store
      ?.close()
      .catch((err: Error) =>
        this.log(`superfluid: the session log of ${model.id} could not take its last records: ${err.message}`),
      );
  }
}
