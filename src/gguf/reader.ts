// GGUF metadata reader: header, KV section and tensor infos only, never the
// weights. Supports GGUF v2 and v3 (little-endian). v1 (32-bit counts) and
// big-endian files are rejected with a clear error.
//
// Value decoding: see `GgufValue` in types.ts (u64/i64 become `number` when
// safe, else `bigint`; arrays become JS arrays).

import { ChunkedFile, GgufFormatError, NeedMoreBytes } from "./chunked-file.ts";
import {
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_MAGIC,
  GgufValueType as T,
  SCALAR_TYPE_NAME,
  tensorByteSize,
  type GgufFile,
  type GgufTensorInfo,
  type GgufTypeName,
  type GgufValue,
} from "./types.ts";

export { GgufFormatError, NeedMoreBytes } from "./chunked-file.ts";
export { describeModel } from "./describe.ts";
export type { ModelInfo } from "./describe.ts";
export type { GgufFile, GgufTensorInfo, GgufValue } from "./types.ts";

const GGML_MAX_DIMS = 4;
const MAX_ARRAY_NESTING = 4;

/** Smallest encoded size of one value of a type, used to bound array counts by the file size. */
function minValueSize(type: number): number {
  switch (type) {
    case T.UINT8:
    case T.INT8:
    case T.BOOL:
      return 1;
    case T.UINT16:
    case T.INT16:
      return 2;
    case T.UINT32:
    case T.INT32:
    case T.FLOAT32:
      return 4;
    case T.UINT64:
    case T.INT64:
    case T.FLOAT64:
      return 8;
    case T.STRING:
      return 8; // length prefix
    case T.ARRAY:
      return 12; // element type + count
    default:
      return 1;
  }
}

function safeBig(v: bigint): number | bigint {
  return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
}

function readScalar(f: ChunkedFile, type: number, key: string): GgufValue {
  switch (type) {
    case T.UINT8:
      return f.u8(key);
    case T.INT8:
      return f.i8(key);
    case T.UINT16:
      return f.u16(key);
    case T.INT16:
      return f.i16(key);
    case T.UINT32:
      return f.u32(key);
    case T.INT32:
      return f.i32(key);
    case T.FLOAT32:
      return f.f32(key);
    case T.FLOAT64:
      return f.f64(key);
    case T.UINT64:
      return safeBig(f.u64(key));
    case T.INT64:
      return safeBig(f.i64(key));
    case T.BOOL:
      return f.u8(key) !== 0; // lenient: any non-zero byte is true
    case T.STRING:
      return f.string(key);
    default:
      return f.fail(`unknown value type ${type} for "${key}"`, f.pos - 4);
  }
}

function readValue(
  f: ChunkedFile,
  type: number,
  key: string,
  depth: number,
): { value: GgufValue; typeName: GgufTypeName } {
  if (type !== T.ARRAY) {
    const value = readScalar(f, type, key);
    return { value, typeName: SCALAR_TYPE_NAME[type]! };
  }
  if (depth >= MAX_ARRAY_NESTING) f.fail(`arrays nested deeper than ${MAX_ARRAY_NESTING} in "${key}"`);
  const elemAt = f.pos;
  const elemType = f.u32(`${key} array element type`);
  if (elemType > T.FLOAT64) f.fail(`unknown array element type ${elemType} for "${key}"`, elemAt);
  const n = f.count(`${key} array length`, Math.floor((f.remaining - 8) / minValueSize(elemType)));
  const out: GgufValue[] = new Array(n);
  for (let i = 0; i < n; i++) out[i] = readValue(f, elemType, key, depth + 1).value;
  const typeName: GgufTypeName = elemType === T.ARRAY ? "array<array>" : `array<${SCALAR_TYPE_NAME[elemType]!}>`;
  return { value: out, typeName };
}

function parse(f: ChunkedFile): GgufFile {
  if (f.size < 4) f.fail("too small to be a GGUF file");
  const magic = f.u32("magic");
  if (magic !== GGUF_MAGIC) f.fail(`not a GGUF file (magic 0x${magic.toString(16).padStart(8, "0")})`, 0);
  const version = f.u32("version");
  if (version === 1) f.fail("GGUF v1 is not supported (only v2 and v3)", 4);
  if (version === 0x02000000 || version === 0x03000000) f.fail("big-endian GGUF is not supported", 4);
  if (version !== 2 && version !== 3) f.fail(`unsupported GGUF version ${version}`, 4);

  // A tensor info is at least 8 (name len) + 4 (n_dims) + 4 (type) + 8 (offset) bytes;
  // a KV pair at least 8 (key len) + 4 (type) + 1 byte.
  const tensorCount = f.count("tensor count", Math.floor(f.remaining / 24));
  const kvCount = f.count("metadata count", Math.floor(f.remaining / 13));

  const metadata: Record<string, GgufValue> = {};
  const types: Record<string, GgufTypeName> = {};
  for (let i = 0; i < kvCount; i++) {
    const key = f.string(`metadata key #${i}`);
    const typeAt = f.pos;
    const type = f.u32(`type of "${key}"`);
    if (type > T.FLOAT64) f.fail(`unknown value type ${type} for "${key}"`, typeAt);
    const { value, typeName } = readValue(f, type, key, 0);
    if (Object.hasOwn(metadata, key)) f.fail(`duplicate metadata key "${key}"`, typeAt);
    metadata[key] = value;
    types[key] = typeName;
  }

  let alignment = GGUF_DEFAULT_ALIGNMENT;
  if (metadata["general.alignment"] !== undefined) {
    const a = metadata["general.alignment"];
    if (typeof a !== "number" || a <= 0 || (a & (a - 1)) !== 0)
      f.fail(`general.alignment ${String(a)} is not a power of two`);
    alignment = a;
  }

  const tensors: GgufTensorInfo[] = [];
  const names = new Set<string>();
  for (let i = 0; i < tensorCount; i++) {
    const at = f.pos;
    const name = f.string(`tensor #${i} name`);
    const nDims = f.u32(`tensor "${name}" n_dims`);
    if (nDims < 1 || nDims > GGML_MAX_DIMS)
      f.fail(`tensor "${name}" has ${nDims} dimensions (1..${GGML_MAX_DIMS} allowed)`, at);
    const dims: number[] = [];
    let elements = 1;
    for (let d = 0; d < nDims; d++) {
      const dim = f.count(`tensor "${name}" dim ${d}`, Number.MAX_SAFE_INTEGER);
      elements *= dim;
      if (!Number.isSafeInteger(elements)) f.fail(`tensor "${name}" has too many elements`, at);
      dims.push(dim);
    }
    const type = f.u32(`tensor "${name}" type`);
    const offset = f.count(`tensor "${name}" offset`, Number.MAX_SAFE_INTEGER);
    if (offset % alignment !== 0) f.fail(`tensor "${name}" offset ${offset} is not aligned to ${alignment}`, at);
    if (names.has(name)) f.fail(`duplicate tensor name "${name}"`, at);
    names.add(name);
    const nbytes = tensorByteSize(type, dims);
    tensors.push(nbytes === undefined ? { name, dims, type, offset } : { name, dims, type, offset, nbytes });
  }

  const dataOffset = Math.ceil(f.pos / alignment) * alignment;
  if (tensors.length > 0) {
    if (dataOffset > f.size) f.fail("truncated file: no tensor data section");
    const dataSize = f.size - dataOffset;
    for (const t of tensors) {
      const end = t.offset + (t.nbytes ?? 0);
      if (end > dataSize) {
        f.fail(`truncated file: tensor "${t.name}" data ends at ${dataOffset + end}, file has ${f.size} bytes`);
      }
    }
  }
  return { version, metadata, types, tensors, alignment, dataOffset, fileSize: f.size };
}

function parseChecked(f: ChunkedFile): GgufFile {
  try {
    return parse(f);
  } catch (e) {
    if (e instanceof GgufFormatError || e instanceof NeedMoreBytes) throw e;
    if (e instanceof RangeError) throw new GgufFormatError(`${f.path}: malformed GGUF (${e.message})`);
    throw e;
  } finally {
    f.close();
  }
}

/** Read the metadata and tensor infos of a GGUF file (synchronous). */
export function readGgufSync(path: string): GgufFile {
  return parseChecked(new ChunkedFile(path));
}

/**
 * The metadata and tensor infos of a GGUF file of `size` bytes from its first bytes alone (`bytes`, fetched with a
 * Range request): the same checks as readGgufSync, the file's size standing in for what is not at hand. Throws
 * NeedMoreBytes (its `end`: how far the file must be fetched) when the header goes on past `bytes`. `name` names the
 * file in messages.
 */
export function parseGgufPrefix(bytes: Uint8Array, size: number, name: string): GgufFile {
  return parseChecked(new ChunkedFile(name, { bytes, size }));
}

/** Read the metadata and tensor infos of a GGUF file without loading weights. */
export async function readGguf(path: string): Promise<GgufFile> {
  return readGgufSync(path);
}
