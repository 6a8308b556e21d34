// Model lookup in the HTTP layer's terms: an unknown id is OpenAI's 404.
// The synchronous lookups answer a known model that is not loaded with 503
// `model_loading` (and start its load: ModelRegistry.find); the async one
// waits for the load (docs/api/openai.md#loading-and-unloading-models).
import type { RegistryEntry, ModelRegistry } from "../daemon/registry.ts";
import type { ServedModel } from "../daemon/served-model.ts";
import { RequestError } from "../daemon/request-error.ts";

const unknownModel = (id: string) => new RequestError(404, `The model '${id}' does not exist`, null, "model");

export function modelOr404(registry: ModelRegistry, id: string): ServedModel {
  const model = registry.find(id);
  if (!model) throw unknownModel(id);
  return model;
}

/** The model a request names, loaded first when it is known but not loaded. */
export async function loadedOr404(registry: ModelRegistry, id: string): Promise<ServedModel> {
  const model = await registry.resolve(id);
  if (!model) throw unknownModel(id);
  return model;
}

/** A known model, loaded or not (describing one never loads it). */
export function knownOr404(registry: ModelRegistry, id: string): RegistryEntry {
  const entry = registry.entry(id);
  if (!entry) throw unknownModel(id);
  return entry;
}

/** The model a request names, or the default one when it names none. */
export function namedOrDefault(registry: ModelRegistry, id: string | null | undefined): ServedModel {
  if (id) return modelOr404(registry, id);
  const model = registry.default;
  if (!model) throw new RequestError(503, "no model is loaded");
  return model;
}
