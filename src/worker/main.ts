// `superfluid worker`: one model in its own process. It receives token ids and
// sampling specs from the daemon over IPC and answers with one message per tick.
// Exit codes: 0 clean close, 1 serving failure, 2 bad command line, 3 model did not load.
import { Engine, sequencesFor } from "../engine/engine.ts";
import { planKv, type KvPlan } from "../engine/kv-sizing.ts";
import { freeForKv, hostAvailableBytes } from "../engine/memory.ts";
import { LlamaModel } from "../engine/model.ts";
import { loadLlama } from "../../ffi/llama.ts";
import type { WorkerInfo, WorkerToDaemon } from "../engine/protocol.ts";
import { declaredPooling } from "../engine/embedder.ts";
import { resolveSpeculation, type ResolvedSpeculation } from "../engine/speculation-directive.ts";
import { draftIncompatibility } from "../engine/draft-model.ts";
import { parseWorkerArgs, UsageError, type WorkerArgs } from "./args.ts";
import { serveEmbeddings } from "./embed-mode.ts";
import { LoraAdapters } from "./lora.ts";
import { modelInfo } from "./model-info.ts";
import { serveLoop } from "./serve-loop.ts";
import { awaitStart } from "./standby.ts";
import { connectRpcWorkers } from "../rpc/connect.ts";
import { workerRunsNormally } from "../runtime/sched-policy.ts";

function send(message: WorkerToDaemon): void {
  process.send!(message);
}

function describe(
  args: WorkerArgs,
  model: LlamaModel,
  engine: Engine,
  plan: KvPlan,
  speculation: ResolvedSpeculation,
): WorkerInfo {
  const bytesPerToken = model.kvBytesPerToken(args.kvTypes);
  return {
    ...modelInfo(args, model),
    speculation: speculation.strategy,
    ...(speculation.reason ? { speculationNote: speculation.reason } : {}),
    lanes: args.maxBatch,
    sequences: engine.context.sequences,
    contextPerSequence: engine.window,
    kv: {
      layout: engine.context.shared ? "shared" : "per-lane",
      cells: engine.context.poolCells,
      bytes: engine.context.poolCells * bytesPerToken,
      bytesPerToken,
      typeK: args.kvTypes.k,
      typeV: args.kvTypes.v,
      summary: plan.summary,
    },
    prefillBudget: args.prefillBudget,
    capabilities: { generate: true, prefixCopy: true, embeddings: false, grammar: true },
  };
}

/**
 * The host tier's default bound (docs/design.md#host-tier): 60% of the host memory the
 * model and its context leave free, at most 8 GiB. Asked once the context
 * (its KV) exists; an mmapped model's pages count as available, so its
 * weights come off here too. The tier fills only as prefixes leave the pool.
 */
function defaultHostCacheBytes(model: LlamaModel): number {
  return Math.min(8 * 2 ** 30, Math.floor(0.6 * Math.max(0, hostAvailableBytes() - model.weightBytes)));
}

/**
 * Builds the engine on the planned KV layout (kv-sizing.ts). KV sized from
 * memory that llama.cpp cannot allocate gives way (docs/design.md#kv-layout): per-lane
 * buffers to a shared pool, a shared pool to half of it, down to one window.
 */
/** The draft model of `--speculate draft-model:PATH`, refused when its vocabulary is not the model's. */
function loadDraftModel(path: string, model: LlamaModel): LlamaModel {
  const draft = LlamaModel.load(path);
  const why = draftIncompatibility(model, draft);
  if (why === undefined) return draft;
  draft.free();
  throw new Error(`--speculate draft-model:${path}: it cannot draft for this model: ${why}`);
}

function buildEngine(
  args: WorkerArgs,
  model: LlamaModel,
  speculation: ResolvedSpeculation,
  draft?: LlamaModel,
): { engine: Engine; plan: KvPlan } {
  const facts = {
    lanes: args.maxBatch,
    trainedContext: model.trainedContext,
    bytesPerToken: model.kvBytesPerToken(args.kvTypes),
  };
  const free = () => freeForKv(model.llama, model.weightBytes, (model.offload?.devices.length ?? 0) > 0);
  const request = {
    ...(args.maxContext === undefined ? {} : { maxContext: args.maxContext }),
    ...(args.kvPool === undefined ? {} : { poolCells: args.kvPool }),
  };
  let plan = planKv(request, { ...facts, free });
  for (;;) {
    try {
      const engine = new Engine(model, {
        lanes: args.maxBatch,
        kvOffload: args.offload.kvOffload,
        kvTypes: args.kvTypes,
        cellsPerSequence: plan.cellsPerSequence,
        ...(plan.layout === "shared" ? { sharedCells: plan.poolCells, window: plan.window } : {}),
        threads: args.threads,
        prefillBudget: args.prefillBudget,
        hostCacheBytes: args.hostCacheBytes ?? (() => defaultHostCacheBytes(model)),
        pressureHigh: args.pressureHigh / 100,
        pressureLow: args.pressureLow / 100,
        pinBudgetPct: args.pinBudgetPct,
        ...(args.classLanes ? { classLanes: args.classLanes } : {}),
        ...(args.starvationTicks === undefined ? {} : { starvationTicks: args.starvationTicks }),
        ...(speculation.config ? { speculation: speculation.config } : {}),
        ...(draft ? { draftModel: draft } : {}),
      });
      return { engine, plan };
    } catch (err) {
      // Sized from memory but not allocatable: per-lane buffers give way to a shared pool, a shared pool is halved.
      if (args.kvPool !== undefined || args.maxContext !== undefined) throw err;
      if (plan.layout === "per-lane") {
        plan = planKv({ sharedOnly: true }, { ...facts, free });
        continue;
      }
      if (plan.poolCells <= plan.window) throw err;
      const cells = Math.max(plan.window, Math.floor(plan.poolCells / 2));
      plan = planKv(
        { poolCells: cells, poolReason: `half of ${plan.poolCells} cells, which llama.cpp could not allocate` },
        facts,
      );
    }
  }
}

export async function runWorker(argv: string[]): Promise<number> {
  if (!process.send) {
    console.error("superfluid worker is started by `superfluid serve`, over IPC");
    return 2;
  }
  // Started by a SCHED_BATCH daemon: decode threads run under the normal policy (src/runtime/sched-policy.ts).
  workerRunsNormally();
  if (argv[0] === "--standby") {
    const claimed = await awaitStart({ gpu: argv[1] !== "--no-gpu" });
    if (!claimed) return 0;
    argv = claimed;
  }
  let args: WorkerArgs;
  try {
    args = parseWorkerArgs(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`superfluid worker: ${err.message}`);
    return 2;
  }
  let model: LlamaModel;
  let engine: Engine;
  let plan: KvPlan;
  let speculation: ResolvedSpeculation;
  let draft: LlamaModel | undefined;
  try {
    // The KV the worker will ask for, so that --gpu-layers auto leaves it room: explicit sizes as given,
    // else the smallest auto pool (one window of min(trained, 4096) per sequence).
    const kvCells = (trained: number) =>
      args.kvPool ?? (args.maxContext ?? Math.min(trained, 4096)) * sequencesFor(args.maxBatch);
    // RPC workers' devices join the local ones first, so the placement sees them.
    if (args.offload.rpc) {
      try {
        await connectRpcWorkers(args.offload.rpc);
      } catch (err) {
        send({ type: "fatal", message: (err as Error).message, away: true });
        return 3;
      }
    }
    // --no-gpu or --gpu-layers 0 (every layer on the CPU, no device named): no GPU backend is loaded
    // (ffi/gpu-presence.ts), as the standby worker was told (src/daemon/standby-worker.ts cpuOnlyAsked).
    loadLlama(process.env, { gpu: args.offload.gpuLayers !== 0 || args.offload.devices !== undefined });
    model = LlamaModel.loadPlaced(args.model, args.offload, kvCells);
  } catch (err) {
    send({ type: "fatal", message: (err as Error).message });
    return 3;
  }
  // A model whose GGUF declares pooling is an embedding model: it embeds and never generates.
  if (declaredPooling(model) !== "none") return serveEmbeddings(args, model, send);
  try {
    // A model that cannot cut a rejected draft off its KV refuses prompt-lookup here, before any KV is allocated.
    speculation = resolveSpeculation(args.speculation, model.memoryKind());
    if (speculation.config?.strategy === "draft-model") draft = loadDraftModel(args.speculation!.draftModel!, model);
    ({ engine, plan } = buildEngine(args, model, speculation, draft));
  } catch (err) {
    send({ type: "fatal", message: (err as Error).message });
    return 3;
  }

  const adapters = new LoraAdapters(model, engine);
  return serveLoop(
    {
      onMessage(message) {
        if (message.type === "generate") engine.submit(message);
        else if (message.type === "lora-load" || message.type === "lora-unload" || message.type === "lora-scale") {
          try {
            send({ type: "lora", id: message.id, adapters: adapters.handle(message) });
          } catch (err) {
            send({ type: "lora-failed", id: message.id, error: (err as Error).message });
          }
        } else if (message.type === "cancel") engine.cancel(message.id);
        else if (message.type === "stats")
          send({ type: "stats", id: message.id, snapshot: engine.snapshot(), at: Date.now() });
      },
      hasWork: () => engine.hasWork(),
      idle: () => engine.context.pauseThreads(),
      step() {
        const events = engine.tick();
        if (events.admitted.length + events.tokens.length + events.finished.length > 0)
          send({ type: "tick", ...events });
      },
      close() {
        engine.close();
        draft?.free();
        model.free();
      },
    },
    describe(args, model, engine, plan, speculation),
    send,
  );
}
