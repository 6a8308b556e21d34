// The model an Ollama request names: a served id, `id:latest` (Ollama's
// default tag), or an --alias. Anything else is Ollama's 404.
import type { ModelRegistry } from "../../daemon/registry.ts";
import type { ServedModel } from "../../daemon/served-model.ts";
import { invalidRequest, RequestError } from "../../daemon/request-error.ts";

/** The name without Ollama's default `:latest` tag. */
export function withoutLatest(name: string): string {
  return name.endsWith(":latest") ? name.slice(0, -":latest".length) : name;
}

/** The model an Ollama request names, loaded first when it is known but not loaded. */
export async function loadedOllamaModel(registry: ModelRegistry, name: unknown): Promise<ServedModel> {
  if (typeof name !== "string" || name === "") throw invalidRequest("model is required", "model");
  const model = (await registry.resolve(name)) ?? (await registry.resolve(withoutLatest(name)));
  if (!model) throw new RequestError(404, `model '${name}' not found`, "model_not_found", "model");
  return model;
}
