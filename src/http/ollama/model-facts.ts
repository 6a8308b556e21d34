// What Ollama's discovery routes say about a served model beyond what the
// server keeps for serving it: the file's size and time, the parameter count
// and the GGUF metadata as Ollama's `model_info`. Read once per model from
// the GGUF header (metadata and tensor infos, never weights: the shards of a
// split model too) and kept, so discovery loads nothing and never reaches
// the engine.
import { statSync } from "node:fs";
import type { ServedModel } from "../../daemon/served-model.ts";
import { fileTypeName } from "../../gguf/file-types.ts";
import { readGgufSync, type GgufFile, type GgufValue } from "../../gguf/index.ts";

export type JsonValue = string | number | boolean | JsonValue[];

export interface ModelFacts {
  /** The model's file size in bytes (all shards of a split model). */
  fileBytes: number;
  /** The file's modification time: what Ollama's `modified_at` means (when the model was put on disk). */
  modifiedAt: Date;
  /** Ollama's `parameter_size`: "8.0B", "494.03M", "150K"; "" when unknown. */
  parameterSize: string;
  /** Ollama's `quantization_level`, from `general.file_type` ("Q4_K_M"); "" when unknown. */
  quantization: string;
  /** Ollama's `model_info`: the GGUF metadata, long arrays emptied. */
  modelInfo: Record<string, JsonValue>;
}

/**
 * Arrays longer than this are sent empty, as Ollama does unless asked for
 * `verbose`: the vocabulary, merges and token types are megabytes of JSON
 * no discovery client reads.
 */
export const MAX_INFO_ARRAY = 5;

/** Keys Ollama leaves out of model_info: the name is in `details`, the template in `template`. */
const OMITTED_KEYS = new Set(["general.name", "tokenizer.chat_template"]);

const SPLIT_NAME = /-(\d{5})-of-(\d{5})\.gguf$/i;

const cache = new WeakMap<ServedModel, ModelFacts>();

export function modelFacts(model: ServedModel): ModelFacts {
  let facts = cache.get(model);
  if (!facts) {
    facts = readFacts(model);
    cache.set(model, facts);
  }
  return facts;
}

/**
 * Reads the facts of models now, at startup, so that no discovery request
 * holds the event loop for the header read (~0.1-0.2 s for a
 * 150k-token vocabulary, which the reader decodes whole).
 */
export function warmModelFacts(models: readonly ServedModel[]): void {
  for (const model of models) modelFacts(model);
}

function readFacts(model: ServedModel): ModelFacts {
  const quantization = fileTypeName(model.info.fileType) ?? "";
  let file: GgufFile;
  let shards: string[];
  try {
    file = readGgufSync(model.path);
    shards = shardPaths(model.path, file);
  } catch {
    // The file went away or changed after it was loaded: what the served model itself knows.
    return {
      fileBytes: 0,
      modifiedAt: model.loadedAt,
      parameterSize: "",
      quantization,
      modelInfo: { "general.architecture": model.info.architecture },
    };
  }
  let fileBytes = 0;
  let parameters = 0;
  let modifiedAt = model.loadedAt;
  for (const [i, path] of shards.entries()) {
    const st = statSync(path, { throwIfNoEntry: false });
    if (st) fileBytes += st.size;
    if (i === 0 && st) modifiedAt = st.mtime;
    const tensors = i === 0 ? file.tensors : safeTensors(path);
    for (const t of tensors) parameters += t.dims.reduce((a, b) => a * b, 1);
  }
  const sizeLabel = file.metadata["general.size_label"];
  const modelInfo = infoOf(file, parameters);
  return {
    fileBytes,
    modifiedAt,
    parameterSize: parameters > 0 ? humanCount(parameters) : typeof sizeLabel === "string" ? sizeLabel : "",
    quantization,
    modelInfo,
  };
}

/** Every shard of a split model (`-00001-of-00003.gguf`, ...), or just the one file. */
function shardPaths(path: string, file: GgufFile): string[] {
  const m = SPLIT_NAME.exec(path);
  const count = Number(file.metadata["split.count"] ?? (m ? m[2] : 1));
  if (!m || !(count > 1)) return [path];
  const stem = path.slice(0, m.index);
  return Array.from({ length: count }, (_, i) => `${stem}-${String(i + 1).padStart(5, "0")}-of-${m[2]}.gguf`);
}

function safeTensors(path: string): GgufFile["tensors"] {
  try {
    return readGgufSync(path).tensors;
  } catch {
    return [];
  }
}

/** The metadata by key, with the parameter count Ollama adds (counted from the tensors) when the file has none. */
function infoOf(file: GgufFile, parameters: number): Record<string, JsonValue> {
  const entries: [string, JsonValue][] = Object.entries(file.metadata)
    .filter(([key]) => !OMITTED_KEYS.has(key))
    .map(([key, value]) => [key, jsonOf(value, file.types[key]?.includes("f32") ?? false)]);
  if (parameters > 0 && file.metadata["general.parameter_count"] === undefined)
    entries.push(["general.parameter_count", parameters]);
  entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return Object.fromEntries(entries);
}

/**
 * A metadata value as JSON: 64-bit integers past 2^53 as the nearest number,
 * 32-bit floats in their shortest form (1e-5, not 0.000009999999747378752),
 * long arrays empty.
 */
function jsonOf(v: GgufValue, f32: boolean): JsonValue {
  if (typeof v === "bigint") return Number(v);
  if (typeof v === "number" && f32) return shortestF32(v);
  if (Array.isArray(v)) return v.length > MAX_INFO_ARRAY ? [] : v.map((e) => jsonOf(e, f32));
  return v;
}

/** The number with the fewest digits that is the same 32-bit float. */
function shortestF32(v: number): number {
  if (!Number.isFinite(v)) return v;
  for (let digits = 1; digits < 9; digits++) {
    const candidate = Number(v.toPrecision(digits));
    if (Math.fround(candidate) === v) return candidate;
  }
  return v;
}

/**
 * A parameter count the way Ollama prints one: billions with one decimal
 * ("8.0B"), millions with two ("494.03M"), thousands with none ("150K"), a
 * whole number of any unit with no decimals.
 */
export function humanCount(n: number): string {
  const units: [number, string, number][] = [
    [1e12, "T", 1],
    [1e9, "B", 1],
    [1e6, "M", 2],
    [1e3, "K", 0],
  ];
  for (const [scale, suffix, decimals] of units) {
    if (n < scale) continue;
    const value = n / scale;
    return `${Number.isInteger(value) ? String(value) : value.toFixed(decimals)}${suffix}`;
  }
  return String(n);
}
