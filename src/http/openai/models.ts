// GET /v1/models and /v1/models/{model} (docs/api/openai.md#models): every
// known model, loaded or not; describing one never loads it. Ids may contain '/'.
import type { RegistryEntry, ModelRegistry } from "../../daemon/registry.ts";
import type { ServedModel } from "../../daemon/served-model.ts";
import type { SamplingDefaults } from "../../gguf/describe.ts";

/** The --alias names that map to this model (exact names and `*` patterns). */
function aliasesOf(registry: ModelRegistry, id: string): string[] {
  return registry.aliases.filter((a) => a.target === id).map((a) => a.name);
}

/**
 * The GGUF's own sampling defaults (`general.sampling.*`), under their request field names; one it does not publish is
 * left out.
 */
export function publishedSampling(sampling: SamplingDefaults) {
  const out: Record<string, number> = {};
  const names: [keyof SamplingDefaults, string][] = [
    ["temperature", "temperature"],
    ["topK", "top_k"],
    ["topP", "top_p"],
    ["minP", "min_p"],
    ["penaltyRepeat", "repeat_penalty"],
    ["penaltyLastN", "repeat_last_n"],
  ];
  for (const [field, name] of names) {
    const value = sampling[field];
    if (typeof value === "number") out[name] = value;
  }
  return out;
}

/** A loaded model's object. */
export function modelObject(registry: ModelRegistry, model: ServedModel) {
  return {
    id: model.id,
    aliases: aliasesOf(registry, model.id),
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
      // Its element types (--kv-bits, -ctk/-ctv) and the bytes a token takes in them.
      kv_type_k: model.worker.info.kv.typeK,
      kv_type_v: model.worker.info.kv.typeV,
      kv_bytes_per_token: model.worker.info.kv.bytesPerToken,
      // The speculative decoding its worker runs (--speculate, per model: auto may resolve to off).
      speculation: model.worker.info.speculation,
    },
    architecture: { input_modalities: ["text"] },
    runtime: model.runtime,
    capabilities: capabilitiesOf(model),
    sampling_defaults: publishedSampling(model.info.sampling),
  };
}

/**
 * Any known model's object: a loaded one in full; one not loaded (a
 * --model-dir model not used yet, or an unloaded one) with what its GGUF
 * header says. Its window is not known until a worker sizes its KV, so
 * `meta.n_ctx` is null; `runtime` and `capabilities` come with a load.
 */
export function entryObject(registry: ModelRegistry, entry: RegistryEntry) {
  const served = entry.state === "loaded" ? entry.served : undefined;
  if (served) return modelObject(registry, served);
  const { info } = entry.source;
  return {
    id: entry.id,
    aliases: aliasesOf(registry, entry.id),
    object: "model",
    created: Math.floor(entry.knownAt.getTime() / 1000),
    owned_by: "superfluid",
    loaded: false,
    status: entry.state,
    meta: { n_ctx: null, n_ctx_train: info.contextLength ?? null, n_vocab: info.vocabSize },
    architecture: { input_modalities: ["text"] },
    sampling_defaults: publishedSampling(info.sampling),
  };
}

/** What a loaded model serves: each leaf true or a string saying why not (docs/api/openai.md#models). */
export function capabilitiesOf(model: ServedModel) {
  const { capabilities, embedding } = model.worker.info;
  return {
    descriptor_version: 1,
    generate: capabilities.generate || "this model declares a pooling type: it embeds, it does not generate",
    embeddings: capabilities.embeddings || "this model declares no pooling: it generates, it does not embed",
    ...(embedding
      ? {
          embedding: {
            pooling: embedding.pooling,
            dimensions: embedding.dimensions,
            max_input_tokens: embedding.maxInputTokens,
          },
        }
      : {}),
    media: "the llamacpp runtime has no media path",
    dialect: model.dialect(),
  };
}

export function listModels(registry: ModelRegistry) {
  return { object: "list", data: registry.known().map((e) => entryObject(registry, e)) };
}
