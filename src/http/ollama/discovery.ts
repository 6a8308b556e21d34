// Ollama's discovery routes (docs/api/ollama.md): /api/version, /api/tags,
// /api/ps and /api/show, in the shapes Ollama's clients read, and the 501
// for the model-management routes superfluid does not serve. /api/tags
// lists every known model, loaded or not (a --model-dir model not used yet,
// an unloaded one), /api/ps the loaded ones; /api/show describes any known
// model from its GGUF header. Nothing here loads a model or reaches the engine.
import { createHash } from "node:crypto";
import { version } from "../../../package.json";
import type { RegistryEntry, ModelRegistry } from "../../daemon/registry.ts";
import type { ServedModel } from "../../daemon/served-model.ts";
import type { SamplingDefaults } from "../../gguf/describe.ts";
import { invalidRequest, RequestError } from "../../daemon/request-error.ts";
import { templateReads } from "../../codec/index.ts";
import { modelFacts, type ModelFacts } from "./model-facts.ts";
import { withoutLatest } from "./model-name.ts";

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

/**
 * The facts of a known model, loaded or not. modelFacts reads only a
 * model's path, GGUF facts and load time, so a model not loaded is
 * described by a stand-in holding those (one per entry, which its cache
 * keys on), its load time being when it became known.
 */
const standIns = new WeakMap<RegistryEntry, ServedModel>();

function factsOf(entry: RegistryEntry): ModelFacts {
  if (entry.served) return modelFacts(entry.served);
  let standIn = standIns.get(entry);
  if (!standIn) {
    standIn = { path: entry.source.path, info: entry.source.info, loadedAt: entry.knownAt } as unknown as ServedModel;
    standIns.set(entry, standIn);
  }
  return modelFacts(standIn);
}

/** Ollama's `details` object. */
function details(entry: RegistryEntry) {
  const facts = factsOf(entry);
  const family = entry.source.info.architecture;
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
function listEntry(entry: RegistryEntry) {
  const facts = factsOf(entry);
  const name = ollamaName(entry.id);
  return {
    name,
    model: name,
    modified_at: facts.modifiedAt.toISOString(),
    size: facts.fileBytes,
    // No registry digest exists for a local file: a stable one from the id, as the spec says.
    digest: createHash("sha256").update(entry.id).digest("hex"),
    details: details(entry),
  };
}

export function listTags(registry: ModelRegistry) {
  return { models: registry.known().map(listEntry) };
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
      ...listEntry(registry.entry(model.id)!),
      // Ollama's ps size is the memory the model holds: the weights and the KV buffers.
      size: modelFacts(model).fileBytes + model.worker.info.kv.bytes,
      expires_at: new Date(model.loadedAt.getTime() + NEVER_UNLOADS_MS).toISOString(),
      // What the offload plan put on GPUs: the offloaded layers' weights and their KV (0 on the CPU).
      size_vram: model.deviceBytes,
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

/**
 * Ollama's capability names for what this model's requests can use. A model
 * not loaded has no tokenizer to test its tool wire and markers with: what
 * its header says (FIM tokens, a template reading the thinking switch).
 */
function capabilities(entry: RegistryEntry): string[] {
  const model = entry.served;
  const out = ["completion"];
  if (!model) {
    const { info } = entry.source;
    const template = info.chatTemplate ?? "";
    if (
      info.fimTokens.prefix !== undefined &&
      info.fimTokens.suffix !== undefined &&
      info.fimTokens.middle !== undefined
    )
      out.push("insert");
    if (templateReads(template, "enable_thinking") || templateReads(template, "reasoning_effort")) out.push("thinking");
    return out;
  }
  const dialect = model.dialect();
  if (model.toolDialect) out.push("tools");
  // A suffix runs on the model's own FIM tokens or on its --fim-model.
  if (model.fimTarget()) out.push("insert");
  if (dialect.enable_thinking || dialect.reasoning_effort || model.thinks) out.push("thinking");
  return out;
}

/**
 * The known model an Ollama name means (a served id, `id:latest` or an --alias), without loading it; else Ollama's 404.
 */
function knownModel(registry: ModelRegistry, name: unknown): RegistryEntry {
  if (typeof name !== "string" || name === "") throw invalidRequest("model is required", "model");
  const entry = registry.entry(name) ?? registry.entry(withoutLatest(name));
  if (!entry) throw new RequestError(404, `model '${name}' not found`, "model_not_found", "model");
  return entry;
}

/**
 * POST /api/show. `model` names the model (`name`, Ollama's older field, is
 * read when `model` is absent); `system`, `template`, `options` and `verbose`
 * change nothing: no Modelfile is applied, and long metadata arrays are
 * always left empty.
 */
export function showModel(registry: ModelRegistry, body: unknown) {
  if (body === null || typeof body !== "object" || Array.isArray(body))
    throw invalidRequest("the request body must be a JSON object");
  const fields = body as Record<string, unknown>;
  const entry = knownModel(registry, fields.model || fields.name);
  const facts = factsOf(entry);
  const { info } = entry.source;
  return {
    license: "",
    modelfile: "",
    parameters: parametersText(info.sampling),
    template: info.chatTemplate ?? "",
    details: details(entry),
    model_info: facts.modelInfo,
    capabilities: capabilities(entry),
    modified_at: facts.modifiedAt.toISOString(),
  };
}

/**
 * Ollama's model-store routes superfluid does not serve, with the methods Ollama serves them on (a blob check is a
 * HEAD, answered as a GET without its body). /api/pull is served (pull.ts) for Hugging Face names.
 */
export const NOT_SERVED_ROUTES: readonly { method: "GET" | "POST" | "DELETE"; path: string }[] = [
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
    `${route} is not served: superfluid serves the models it was started with and pulls Hugging Face models ` +
      "(/api/pull with hf.co/{org}/{repo}:{quant}); it does not push, create, copy or delete models",
    "not_implemented",
  );
}
