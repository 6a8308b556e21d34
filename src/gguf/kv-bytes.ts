// KV bytes a token takes, from a GGUF's metadata alone: what the fit check
// (src/daemon/fit-check.ts) and the offload plan (src/engine/offload.ts)
// know before any weight is loaded.
import { F16_KV, kvTypeBytes, type KvTypes } from "./kv-type.ts";
import type { GgufFile, GgufValue } from "./types.ts";

function num(v: GgufValue | undefined): number | undefined {
  if (typeof v === "number") return v;
  if (typeof v === "bigint") return Number(v);
  return undefined;
}

/**
 * KV bytes one token takes in every layer, K and V of the given types (f16
 * unless said), from the GGUF metadata alone (the same sum the worker makes
 * from the loaded model, src/engine/model.ts): per layer, a K row of KV heads
 * x key head size and a V row of KV heads x value head size, each in its
 * type's bytes. Per-layer head counts (an array) are summed layer by layer.
 */
export function kvBytesPerToken(file: GgufFile, types: KvTypes = F16_KV): number {
  const md = file.metadata;
  const arch = typeof md["general.architecture"] === "string" ? md["general.architecture"] : "";
  const key = (k: string) => md[`${arch}.${k}`];
  const layers = num(key("block_count")) ?? 0;
  const headsRaw = key("attention.head_count");
  const heads = Array.isArray(headsRaw) ? Math.max(0, ...headsRaw.map((h) => num(h) ?? 0)) : (num(headsRaw) ?? 0);
  const embedding = num(key("embedding_length")) ?? 0;
  const fallback = heads > 0 ? embedding / heads : 0;
  const headSize = (k: string) => {
    const n = num(key(`attention.${k}`));
    return n !== undefined && n > 0 ? n : fallback;
  };
  const kvRaw = key("attention.head_count_kv") ?? headsRaw;
  let bytes = 0;
  for (let l = 0; l < layers; l++) {
    const kvHeads = Array.isArray(kvRaw) ? (num(kvRaw[l]) ?? 0) : (num(kvRaw) ?? heads);
    bytes += kvRowBytes(kvHeads, headSize("key_length"), headSize("value_length"), types);
  }
  return bytes;
}

/** One layer's K and V rows for one token: KV heads x head size values, in each type's bytes. */
export function kvRowBytes(kvHeads: number, keySize: number, valueSize: number, types: KvTypes): number {
  return kvTypeBytes(types.k, kvHeads * keySize) + kvTypeBytes(types.v, kvHeads * valueSize);
}
