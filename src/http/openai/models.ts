// GET /v1/models and /v1/models/{model} (docs/api/openai.md#models). Ids may contain '/'.
import type { ModelRegistry } from "../../daemon/registry.ts";
import type { ServedModel } from "../../daemon/served-model.ts";

/** The --alias names that map to this model (exact names and `*` patterns). */
function aliasesOf(registry: ModelRegistry, model: ServedModel): string[] {
  return registry.aliases.filter((a) => a.target === model.id).map((a) => a.name);
}

export function modelObject(registry: ModelRegistry, model: ServedModel) {
  return {
    id: model.id,
    aliases: aliasesOf(registry, model),
    object: "model",
    created: Math.floor(model.loadedAt.getTime() / 1000),
    owned_by: "superfluid",
    loaded: true,
    meta: {
      n_ctx: model.contextWindow,
      n_ctx_train: model.info.contextLength ?? null,
      n_vocab: model.worker.info.vocab.size,
      // The KV pool the window draws from: one buffer per sequence, or one pool shared by all.
      kv_layout: model.worker.info.kv.layout,
      kv_cells: model.worker.info.kv.cells,
    },
    architecture: { input_modalities: ["text"] },
    runtime: { id: model.runtime.id, version: model.runtime.version },
    capabilities: capabilitiesOf(model),
  };
}

/** The runtime's capability record: each leaf true or why not. */
export function capabilitiesOf(model: ServedModel) {
  return {
    descriptor_version: 1,
    generate: true,
    embeddings: "the llamacpp runtime serves no embeddings",
    media: "the llamacpp runtime has no media path",
    dialect: model.dialect(),
  };
}

export function listModels(registry: ModelRegistry) {
  return { object: "list", data: registry.all().map((m) => modelObject(registry, m)) };
}
