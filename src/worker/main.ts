// `superfluid worker`: one model in its own process. It receives token ids and
// sampling specs from the daemon over IPC and answers with one message per tick.
// Exit codes: 0 clean close, 1 serving failure, 2 bad command line, 3 model did not load.
import { freemem } from "node:os";
import { Engine } from "../engine/engine.ts";
import { LlamaModel } from "../engine/model.ts";
import { PROTOCOL_VERSION, type DaemonToWorker, type WorkerInfo, type WorkerToDaemon } from "../engine/protocol.ts";
import { parseWorkerArgs, UsageError, type WorkerArgs } from "./args.ts";

function send(message: WorkerToDaemon): void {
  process.send!(message);
}

function describe(args: WorkerArgs, model: LlamaModel, engine: Engine): WorkerInfo {
  const v = model.vocabInfo;
  return {
    protocol: PROTOCOL_VERSION,
    model: args.model,
    lanes: args.maxBatch,
    sequences: engine.context.sequences,
    contextPerSequence: engine.context.cellsPerSequence,
    trainedContext: model.trainedContext,
    embeddingLength: model.embeddingLength,
    threads: args.threads,
    prefillBudget: args.prefillBudget,
    vocab: { size: v.size, bos: v.bos, eos: v.eos, eot: v.eot, addBos: v.addBos, eog: v.eog },
    capabilities: { generate: true, prefixCopy: true, embeddings: false, grammar: true },
    library: { path: model.llama.location.llama, source: model.llama.location.source },
  };
}

/**
 * The host tier's default bound (features.md 2.2): 60% of the memory the
 * model leaves free, at most 8 GiB. Measured after the model is loaded, before
 * the context takes its share, so the context's KV is counted as free here;
 * the tier fills only as prefixes leave the pool.
 */
function defaultHostCacheBytes(): number {
  return Math.min(8 * 2 ** 30, Math.floor(0.6 * freemem()));
}

export async function runWorker(argv: string[]): Promise<number> {
  if (!process.send) {
    console.error("superfluid worker is started by `superfluid serve`, over IPC");
    return 2;
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
  try {
    model = LlamaModel.load(args.model);
    engine = new Engine(model, {
      lanes: args.maxBatch,
      cellsPerSequence: args.maxContext,
      threads: args.threads,
      prefillBudget: args.prefillBudget,
      hostCacheBytes: args.hostCacheBytes ?? defaultHostCacheBytes(),
      pressureHigh: args.pressureHigh / 100,
      pressureLow: args.pressureLow / 100,
      ...(args.classLanes ? { classLanes: args.classLanes } : {}),
      ...(args.starvationTicks === undefined ? {} : { starvationTicks: args.starvationTicks }),
    });
  } catch (err) {
    send({ type: "fatal", message: (err as Error).message });
    return 3;
  }

  let wake: (() => void) | undefined;
  let closing = false;
  process.on("message", (message: DaemonToWorker) => {
    if (message.type === "generate") engine.submit(message);
    else if (message.type === "cancel") engine.cancel(message.id);
    else if (message.type === "stats") send({ type: "stats", id: message.id, snapshot: engine.snapshot(), at: Date.now() });
    else if (message.type === "shutdown") closing = true;
    wake?.();
  });
  // The daemon going away (its IPC channel closing) ends the worker too.
  process.on("disconnect", () => {
    closing = true;
    wake?.();
  });
  send({ type: "ready", info: describe(args, model, engine) });

  try {
    while (!closing) {
      if (!engine.hasWork()) {
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        continue;
      }
      const events = engine.tick();
      if (events.admitted.length + events.tokens.length + events.finished.length > 0) send({ type: "tick", ...events });
      // Let IPC messages (new requests, cancels) in between ticks.
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  } catch (err) {
    send({ type: "fatal", message: (err as Error).stack ?? String(err) });
    return 1;
  }
  engine.close();
  model.free();
  return 0;
}
