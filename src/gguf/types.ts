// Shared GGUF vocabulary: the on-disk value type codes, the JS shapes values are
// decoded into, and the ggml tensor type table. Facts about the format only.

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
export const GGUF_DEFAULT_ALIGNMENT = 32;

/** Value type codes as stored in the KV section. */
export const GgufValueType = {
  UINT8: 0,
  INT8: 1,
  UINT16: 2,
  INT16: 3,
  UINT32: 4,
  INT32: 5,
  FLOAT32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  UINT64: 10,
  INT64: 11,
  FLOAT64: 12,
} as const;

/** Short names callers use to pick a value type explicitly (reader reports these too). */
export type GgufScalarTypeName =
  | "u8"
  | "i8"
  | "u16"
  | "i16"
  | "u32"
  | "i32"
  | "u64"
  | "i64"
  | "f32"
  | "f64"
  | "bool"
  | "string";
export type GgufTypeName = GgufScalarTypeName | `array<${GgufScalarTypeName}>` | "array<array>";

export const SCALAR_TYPE_CODE: Record<GgufScalarTypeName, number> = {
  u8: 0,
  i8: 1,
  u16: 2,
  i16: 3,
  u32: 4,
  i32: 5,
  f32: 6,
  bool: 7,
  string: 8,
  u64: 10,
  i64: 11,
  f64: 12,
};

export const SCALAR_TYPE_NAME: Record<number, GgufScalarTypeName> = Object.fromEntries(
  Object.entries(SCALAR_TYPE_CODE).map(([name, code]) => [code, name as GgufScalarTypeName]),
);

/**
 * A decoded metadata value.
 * 64-bit integers (u64/i64) decode to `number` when they fit in a safe integer
 * (the common case: token ids, lengths, counts) and to `bigint` otherwise, so
 * callers can use plain arithmetic without losing precision silently.
 * Arrays decode to plain JS arrays; nested arrays are allowed by the format.
 */
export type GgufScalar = number | bigint | boolean | string;
export type GgufValue = GgufScalar | GgufValue[];

export interface GgufTensorInfo {
  name: string;
  /** Dimensions innermost-first, as stored (ne[0] is the row length). */
  dims: number[];
  /** ggml type code (0 = F32, 1 = F16, 8 = Q8_0, ...). */
  type: number;
  /** Byte offset relative to `GgufFile.dataOffset` (a safe integer `number`). */
  offset: number;
  /** Byte size of the tensor data when the ggml type is known, else undefined. */
  nbytes?: number;
}

export interface GgufFile {
  version: number;
  metadata: Record<string, GgufValue>;
  /** The stored type of each metadata key (e.g. "u32", "array<string>"). */
  types: Record<string, GgufTypeName>;
  tensors: GgufTensorInfo[];
  alignment: number;
  /** Absolute byte offset of the tensor data section (aligned). */
  dataOffset: number;
  /** Size of the file in bytes. */
  fileSize: number;
}

/** ggml tensor types: name, elements per block and bytes per block. */
export interface GgmlTypeInfo {
  name: string;
  blockSize: number;
  typeSize: number;
}

export const GGML_TYPES: Record<number, GgmlTypeInfo> = {
  0: { name: "F32", blockSize: 1, typeSize: 4 },
  1: { name: "F16", blockSize: 1, typeSize: 2 },
  2: { name: "Q4_0", blockSize: 32, typeSize: 18 },
  3: { name: "Q4_1", blockSize: 32, typeSize: 20 },
  6: { name: "Q5_0", blockSize: 32, typeSize: 22 },
  7: { name: "Q5_1", blockSize: 32, typeSize: 24 },
  8: { name: "Q8_0", blockSize: 32, typeSize: 34 },
  9: { name: "Q8_1", blockSize: 32, typeSize: 36 },
  10: { name: "Q2_K", blockSize: 256, typeSize: 84 },
  11: { name: "Q3_K", blockSize: 256, typeSize: 110 },
  12: { name: "Q4_K", blockSize: 256, typeSize: 144 },
  13: { name: "Q5_K", blockSize: 256, typeSize: 176 },
  14: { name: "Q6_K", blockSize: 256, typeSize: 210 },
  15: { name: "Q8_K", blockSize: 256, typeSize: 292 },
  16: { name: "IQ2_XXS", blockSize: 256, typeSize: 66 },
  17: { name: "IQ2_XS", blockSize: 256, typeSize: 74 },
  18: { name: "IQ3_XXS", blockSize: 256, typeSize: 98 },
  19: { name: "IQ1_S", blockSize: 256, typeSize: 50 },
  20: { name: "IQ4_NL", blockSize: 32, typeSize: 18 },
  21: { name: "IQ3_S", blockSize: 256, typeSize: 110 },
  22: { name: "IQ2_S", blockSize: 256, typeSize: 82 },
  23: { name: "IQ4_XS", blockSize: 256, typeSize: 136 },
  24: { name: "I8", blockSize: 1, typeSize: 1 },
  25: { name: "I16", blockSize: 1, typeSize: 2 },
  26: { name: "I32", blockSize: 1, typeSize: 4 },
  27: { name: "I64", blockSize: 1, typeSize: 8 },
  28: { name: "F64", blockSize: 1, typeSize: 8 },
  29: { name: "IQ1_M", blockSize: 256, typeSize: 56 },
  30: { name: "BF16", blockSize: 1, typeSize: 2 },
  34: { name: "TQ1_0", blockSize: 256, typeSize: 54 },
  35: { name: "TQ2_0", blockSize: 256, typeSize: 66 },
  39: { name: "MXFP4", blockSize: 32, typeSize: 17 },
};

export const GgmlType = { F32: 0, F16: 1, Q8_0: 8 } as const;

/** Byte size of a tensor of `type` with `dims`, or undefined for unknown types / partial blocks. */
export function tensorByteSize(type: number, dims: readonly number[]): number | undefined {
  const info = GGML_TYPES[type];
  if (!info || dims.length === 0) return undefined;
  const rowLen = dims[0]!;
  if (rowLen % info.blockSize !== 0) return undefined;
  let rows = 1;
  for (let i = 1; i < dims.length; i++) rows *= dims[i]!;
  return (rowLen / info.blockSize) * info.typeSize * rows;
}
