// Model lookup in the HTTP layer's terms: an unknown id is OpenAI's 404.
import type { ModelRegistry } from "../daemon/registry.ts";
import type { ServedModel } from "../daemon/served-model.ts";
import { RequestError } from "./errors.ts";

export function modelOr404(registry: ModelRegistry, id: string): ServedModel {
  const model = registry.find(id);
  if (!model) throw new RequestError(404, `The model '${id}' does not exist`, null, "model");
  return model;
}

/** The model a request names, or the default one when it names none. */
export function namedOrDefault(registry: ModelRegistry, id: string | null | undefined): ServedModel {
  if (id) return modelOr404(registry, id);
  const model = registry.default;
  if (!model) throw new RequestError(503, "no model is loaded");
  return model;
}
