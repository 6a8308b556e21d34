// Ollama's discovery routes (docs/api/ollama.md): /api/version, /api/tags,
// /api/ps and /api/show, in the shapes Ollama's clients read, and the 501
// for the model-management routes superfluid does not serve. Every served
// model is loaded (there are no unloaded models yet), so /api/tags and
// /api/ps list the same models; nothing here reaches the engine.
import { createHash } from "node:crypto";
import { version } from "../../../package.json";
import type { ModelRegistry } from "../../daemon/registry.ts";
import type { ServedModel } from "../../daemon/served-model.ts";
import type { SamplingDefaults } from "../../gguf/describe.ts";
import { invalidRequest, RequestError } from "../../pipeline/request-error.ts";
import { modelFacts } from "./model-facts.ts";
import { ollamaModel } from "./model-name.ts";

export function ollamaVersion() {
  return { version, server: "superfluid", compatibility: "ollama-inference" };
}

/**
 * The name a model is listed under: the served id with Ollama's default tag,
 * `tiny-chat:latest`, as Ollama lists every model with its tag and clients
 * match names in that form (a client told "llama3" looks for
 * "llama3:latest"). Requests may send either; an id that already ends in a
 * tag is listed as it is.
 */
export function ollamaName(id: string): string {
  const last = id.slice(id.lastIndexOf("/") + 1);
  return last.includes(":") ? id : `${id}:latest`;
}

/** Ollama's `details` object. */
function details(model: ServedModel) {
  const facts = modelFacts(model);
  const family = model.info.architecture;
  return {
    parent_model: "",
    format: "gguf",
    family,
    families: family ? [family] : [],
    parameter_size: facts.parameterSize,
    quantization_level: facts.quantization,
  };
}

/** The fields /api/tags and /api/ps share. */
function listEntry(model: ServedModel) {
  const facts = modelFacts(model);
  const name = ollamaName(model.id);
  return {
    name,
    model: name,
    modified_at: facts.modifiedAt.toISOString(),
    size: facts.fileBytes,
    // No registry digest exists for a local file: a stable one from the id, as the spec says.
    digest: createHash("sha256").update(model.id).digest("hex"),
    details: details(model),
  };
}

export function listTags(registry: ModelRegistry) {
  return { models: registry.all().map(listEntry) };
}

/**
 * Go's longest time.Duration in milliseconds (2^63 - 1 ns, about 292 years):
 * Ollama turns `keep_alive: -1` into it, so a model that never unloads
 * expires that far after it was loaded, which `ollama ps` shows as
 * "Forever". A zero time would read as already expired to a client that
 * compares it with now.
 */
const NEVER_UNLOADS_MS = 9_223_372_036_854;

export function listRunning(registry: ModelRegistry) {
  return {
    models: registry.all().map((model) => ({
      ...listEntry(model),
      // Ollama's ps size is the memory the model holds: the weights and the KV buffers.
      size: modelFacts(model).fileBytes + model.worker.info.kv.bytes,
      expires_at: new Date(model.loadedAt.getTime() + NEVER_UNLOADS_MS).toISOString(),
      // The worker does not report where llama.cpp placed the weights, so none are counted as on a GPU.
      size_vram: 0,
      context_length: model.contextWindow,
    })),
  };
}

/** The GGUF's published sampling defaults the server applies, as Ollama option names. */
const PARAMETER_NAMES: [keyof SamplingDefaults, string][] = [
  ["temperature", "temperature"],
  ["topK", "top_k"],
  ["topP", "top_p"],
  ["minP", "min_p"],
  ["penaltyRepeat", "repeat_penalty"],
];

/** Ollama's `parameters` text: one `name value` line per default, the name padded as Ollama pads it. */
function parametersText(sampling: SamplingDefaults): string {
  return PARAMETER_NAMES.filter(([field]) => sampling[field] !== undefined)
    .map(([field, name]) => `${name.padEnd(30)} ${sampling[field]}`)
    .join("\n");
}

/** Ollama's capability names for what this model's requests can use. */
function capabilities(model: ServedModel): string[] {
  const dialect = model.dialect();
  const out = ["completion"];
  if (model.toolDialect) out.push("tools");
  // A suffix runs on the model's own FIM tokens or on its --fim-model.
  if (model.fimTarget()) out.push("insert");
  if (dialect.enable_thinking || dialect.reasoning_effort || model.thinks) out.push("thinking");
  return out;
}

/**
 * POST /api/show. `model` names the model (`name`, Ollama's older field, is
 * read when `model` is absent); `system`, `template`, `options` and `verbose`
 * change nothing: no Modelfile is applied, and long metadata arrays are
 * always left empty.
 */
export function showModel(registry: ModelRegistry, body: unknown) {
  if (body === null || typeof body !== "object" || Array.isArray(body)) throw invalidRequest("the request body must be a JSON object");
  const fields = body as Record<string, unknown>;
  const model = ollamaModel(registry, fields.model || fields.name);
  const facts = modelFacts(model);
  return {
    license: "",
    modelfile: "",
    parameters: parametersText(model.info.sampling),
    template: model.info.chatTemplate ?? "",
    details: details(model),
    model_info: facts.modelInfo,
    capabilities: capabilities(model),
    modified_at: facts.modifiedAt.toISOString(),
  };
}

/** Ollama's model-management routes: superfluid serves the models it was started with. */
/** The model-store routes, with the methods Ollama serves them on (a blob check is a HEAD, answered as a GET without its body). */
export const NOT_SERVED_ROUTES: readonly { method: "GET" | "POST" | "DELETE"; path: string }[] = [
  { method: "POST", path: "/api/pull" },
  { method: "POST", path: "/api/push" },
  { method: "POST", path: "/api/create" },
  { method: "POST", path: "/api/copy" },
  { method: "DELETE", path: "/api/delete" },
  { method: "POST", path: "/api/blobs/*" },
  { method: "GET", path: "/api/blobs/*" },
];

export function notServed(route: string): RequestError {
  return new RequestError(
    501,
    `${route} is not served: superfluid serves the models it was started with; it does not pull, push, create, copy or delete models ` +
      "(start it with the model file or a local reference)",
    "not_implemented",
  );
}
