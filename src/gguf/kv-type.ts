// The KV cache's element types: llama.cpp takes the K and V types per
// context (llama_context_params.type_k / type_v, ggml_type ids). f16 is the
// default; q8_0 halves the bytes a token takes and q4_0 quarters them, at a
// small cost in quality (bench/README.md#quantized-kv-benchkv-typests). A quantized V needs
// flash attention (llama.cpp refuses the context otherwise).

/** The types llama-server's --cache-type-k/-v accept: ggml id, bytes per block, elements per block. */
export const KV_TYPES = {
  f32: { ggml: 0, bytes: 4, block: 1 },
  f16: { ggml: 1, bytes: 2, block: 1 },
  bf16: { ggml: 30, bytes: 2, block: 1 },
  q8_0: { ggml: 8, bytes: 34, block: 32 },
  q4_0: { ggml: 2, bytes: 18, block: 32 },
  q4_1: { ggml: 3, bytes: 20, block: 32 },
  iq4_nl: { ggml: 20, bytes: 18, block: 32 },
  q5_0: { ggml: 6, bytes: 22, block: 32 },
  q5_1: { ggml: 7, bytes: 24, block: 32 },
} as const;

export type KvTypeName = keyof typeof KV_TYPES;

export interface KvTypes {
  k: KvTypeName;
  v: KvTypeName;
}

export const F16_KV: KvTypes = { k: "f16", v: "f16" };

export const isKvType = (name: string): name is KvTypeName => Object.hasOwn(KV_TYPES, name);

/** A quantized type: stored in blocks of 32, so head sizes must be multiples of 32. */
export const isQuantized = (t: KvTypeName): boolean => KV_TYPES[t].block > 1;

/** Bytes `elements` values take in type `t` (whole blocks). */
export function kvTypeBytes(t: KvTypeName, elements: number): number {
  const { bytes, block } = KV_TYPES[t];
  return Math.ceil(elements / block) * bytes;
}

/** --kv-bits as the spec names it: 0 (auto: f16), 16, 8 (q8_0), 4 (q4_0), 84 (K q8_0, V q4_0). */
export const KV_BITS: Record<string, KvTypes> = {
  "0": F16_KV,
  "16": F16_KV,
  "8": { k: "q8_0", v: "q8_0" },
  "4": { k: "q4_0", v: "q4_0" },
  "84": { k: "q8_0", v: "q4_0" },
};

/** How the types read in logs and errors: `q8_0` when K and V agree, else `K q8_0, V q4_0`. */
export function describeKvTypes(t: KvTypes): string {
  return t.k === t.v ? t.k : `K ${t.k}, V ${t.v}`;
}
