// What every kind of worker reports about its model in its `ready` message
// (the parts of WorkerInfo that come from the model file and the command
// line, not from how the worker uses it): the generation and the embedding
// workers add their lanes, KV and capabilities to these.
import type { LlamaModel } from "../engine/model.ts";
import { PROTOCOL_VERSION, type WorkerInfo } from "../engine/protocol.ts";
import type { WorkerArgs } from "./args.ts";

export function modelInfo(
  args: WorkerArgs,
  model: LlamaModel,
): Pick<
  WorkerInfo,
  | "protocol"
  | "model"
  | "trainedContext"
  | "embeddingLength"
  | "threads"
  | "vocab"
  | "library"
  | "speculation"
  | "offload"
  | "devices"
  | "unloadedBackends"
> {
  const v = model.vocabInfo;
  return {
    protocol: PROTOCOL_VERSION,
    model: args.model,
    trainedContext: model.trainedContext,
    embeddingLength: model.embeddingLength,
    threads: args.threads,
    vocab: { size: v.size, bos: v.bos, eos: v.eos, eot: v.eot, addBos: v.addBos, eog: v.eog },
    library: { path: model.llama.location.llama, source: model.llama.location.source, cpu: model.llama.cpu! },
    offload: model.offload ?? null,
    devices: model.devices,
    unloadedBackends: model.llama.unloadedBackends,
    // A generation worker says what it resolved --speculate to; an embedding worker never drafts.
    speculation: "off",
  };
}
