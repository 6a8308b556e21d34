// GGUF v3 writer. Metadata values carry an explicit type chosen by the caller
// (or a simple inferred one); tensors are F32, F16 or Q8_0, given either as a
// Float32Array, pre-encoded bytes, or a fill callback that is asked for the
// values chunk by chunk so multi-hundred-MB tensors never sit in memory.
// Output is a pure function of the spec: same spec, same bytes.

import { closeSync, fsyncSync, openSync, writeSync } from "node:fs";
import { encodedSize, encodeValues, Q8_0_BLOCK } from "./encode-tensor.ts";
import {
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_MAGIC,
  GgmlType,
  GgufValueType as T,
  SCALAR_TYPE_CODE,
  type GgufScalarTypeName,
} from "./types.ts";

type NumArray =
  | readonly number[]
  | Float32Array
  | Float64Array
  | Int8Array
  | Uint8Array
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array;
type BigArray = readonly (bigint | number)[] | BigInt64Array | BigUint64Array;

/** A metadata value with its GGUF type spelled out. */
export type TypedValue =
  | { type: "u8" | "i8" | "u16" | "i16" | "u32" | "i32" | "f32" | "f64"; value: number }
  | { type: "u64" | "i64"; value: number | bigint }
  | { type: "bool"; value: boolean }
  | { type: "string"; value: string }
  | {
      type:
        | "array<u8>"
        | "array<i8>"
        | "array<u16>"
        | "array<i16>"
        | "array<u32>"
        | "array<i32>"
        | "array<f32>"
        | "array<f64>";
      value: NumArray;
    }
  | { type: "array<u64>" | "array<i64>"; value: BigArray }
  | { type: "array<bool>"; value: readonly boolean[] }
  | { type: "array<string>"; value: readonly string[] };

/**
 * A metadata value: explicit ({type, value}) or a bare JS value whose type is
 * inferred: string → string; boolean → bool; safe integer → i32, else u32,
 * else i64; integer beyond 2^53 → f64; other number → f32; bigint → i64
 * (u64 when ≥ 2^63); string[] → array<string>; boolean[] → array<bool>;
 * number[] → array<i32> when all fit, else array<f32>.
 */
export type MetaValue =
  | TypedValue
  | string
  | boolean
  | number
  | bigint
  | readonly string[]
  | readonly boolean[]
  | readonly number[];

/** Called with consecutive chunks: fill `out` with elements [start, start + out.length). */
export type TensorFill = (out: Float32Array, start: number) => void;

export type WriterTensorType = "F32" | "F16" | "Q8_0";

export interface TensorSpec {
  name: string;
  /** Innermost-first, as stored in GGUF (token_embd is [n_embd, n_vocab]). */
  dims: readonly number[];
  type: WriterTensorType;
  /** Values (converted to `type`), pre-encoded bytes of `type`, or a chunked fill callback. */
  data: Float32Array | Uint8Array | TensorFill;
}

export interface GgufSpec {
  /** Insertion order is file order. */
  metadata: Record<string, MetaValue> | [string, MetaValue][];
  tensors: TensorSpec[];
  /** Data alignment (power of two); written as `general.alignment` unless already in metadata. Default 32. */
  alignment?: number;
}

const TYPE_CODE: Record<WriterTensorType, number> = { F32: GgmlType.F32, F16: GgmlType.F16, Q8_0: GgmlType.Q8_0 };
const FILL_CHUNK = 1 << 20; // elements per fill call (a multiple of the Q8_0 block)
const utf8 = new TextEncoder();

/** A growable little-endian byte buffer for the header. */
class ByteSink {
  buf = new Uint8Array(1 << 16);
  view = new DataView(this.buf.buffer);
  len = 0;

  private reserve(n: number): number {
    if (this.len + n > this.buf.length) {
      let cap = this.buf.length * 2;
      while (cap < this.len + n) cap *= 2;
      const next = new Uint8Array(cap);
      next.set(this.buf.subarray(0, this.len));
      this.buf = next;
      this.view = new DataView(next.buffer);
    }
    const at = this.len;
    this.len += n;
    return at;
  }
  u8(v: number) {
    const o = this.reserve(1);
    this.view.setUint8(o, v);
  }
  i8(v: number) {
    const o = this.reserve(1);
    this.view.setInt8(o, v);
  }
  u16(v: number) {
    const o = this.reserve(2);
    this.view.setUint16(o, v, true);
  }
  i16(v: number) {
    const o = this.reserve(2);
    this.view.setInt16(o, v, true);
  }
  u32(v: number) {
    const o = this.reserve(4);
    this.view.setUint32(o, v, true);
  }
  i32(v: number) {
    const o = this.reserve(4);
    this.view.setInt32(o, v, true);
  }
  f32(v: number) {
    const o = this.reserve(4);
    this.view.setFloat32(o, v, true);
  }
  f64(v: number) {
    const o = this.reserve(8);
    this.view.setFloat64(o, v, true);
  }
  u64(v: bigint) {
    const o = this.reserve(8);
    this.view.setBigUint64(o, v, true);
  }
  i64(v: bigint) {
    const o = this.reserve(8);
    this.view.setBigInt64(o, v, true);
  }
  bytes(b: Uint8Array) {
    const o = this.reserve(b.length);
    this.buf.set(b, o);
  }
  string(s: string) {
    const b = utf8.encode(s);
    this.u64(BigInt(b.length));
    this.bytes(b);
  }
  padTo(alignment: number) {
    const pad = (alignment - (this.len % alignment)) % alignment;
    this.reserve(pad);
  }
  result(): Uint8Array {
    return this.buf.slice(0, this.len);
  }
}

function checkInt(key: string, type: string, v: number, min: number, max: number): number {
  if (!Number.isInteger(v) || v < min || v > max)
    throw new RangeError(`gguf writer: "${key}" value ${v} does not fit ${type}`);
  return v;
}

function checkFloat(key: string, v: unknown): number {
  if (typeof v !== "number") throw new TypeError(`gguf writer: "${key}" float value must be a number`);
  return v;
}

function checkBig(key: string, type: "u64" | "i64", v: number | bigint): bigint {
  if (typeof v === "number" && !Number.isSafeInteger(v))
    throw new RangeError(`gguf writer: "${key}" value ${v} is not a safe integer; pass a bigint`);
  const b = BigInt(v);
  const ok = type === "u64" ? b >= 0n && b < 1n << 64n : b >= -(1n << 63n) && b < 1n << 63n;
  if (!ok) throw new RangeError(`gguf writer: "${key}" value ${b} does not fit ${type}`);
  return b;
}

function writeScalar(out: ByteSink, key: string, type: GgufScalarTypeName, v: unknown): void {
  switch (type) {
    case "u8":
      return out.u8(checkInt(key, type, v as number, 0, 0xff));
    case "i8":
      return out.i8(checkInt(key, type, v as number, -0x80, 0x7f));
    case "u16":
      return out.u16(checkInt(key, type, v as number, 0, 0xffff));
    case "i16":
      return out.i16(checkInt(key, type, v as number, -0x8000, 0x7fff));
    case "u32":
      return out.u32(checkInt(key, type, v as number, 0, 0xffffffff));
    case "i32":
      return out.i32(checkInt(key, type, v as number, -0x80000000, 0x7fffffff));
    case "u64":
      return out.u64(checkBig(key, type, v as number | bigint));
    case "i64":
      return out.i64(checkBig(key, type, v as number | bigint));
    case "f32":
      return out.f32(checkFloat(key, v));
    case "f64":
      return out.f64(checkFloat(key, v));
    case "bool":
      if (typeof v !== "boolean") throw new TypeError(`gguf writer: "${key}" bool value must be a boolean`);
      return out.u8(v ? 1 : 0);
    case "string":
      if (typeof v !== "string") throw new TypeError(`gguf writer: "${key}" string value must be a string`);
      return out.string(v);
  }
}

/** Smallest of i32 / u32 / i64 that holds a safe integer. */
function inferIntType(v: number): "i32" | "u32" | "i64" {
  if (v >= -(2 ** 31) && v < 2 ** 31) return "i32";
  if (v >= 0 && v < 2 ** 32) return "u32";
  return "i64";
}

/** Normalise a bare JS value to a TypedValue. */
export function inferValue(key: string, v: MetaValue): TypedValue {
  if (typeof v === "object" && v !== null && !Array.isArray(v) && "type" in v) return v as TypedValue;
  if (typeof v === "string") return { type: "string", value: v };
  if (typeof v === "boolean") return { type: "bool", value: v };
  if (typeof v === "bigint") return { type: v < 1n << 63n ? "i64" : "u64", value: v };
  if (typeof v === "number") {
    if (Number.isSafeInteger(v)) return { type: inferIntType(v), value: v } as TypedValue;
    if (Number.isInteger(v)) return { type: "f64", value: v }; // beyond 2^53: a float anyway
    return { type: "f32", value: v };
  }
  if (Array.isArray(v)) {
    const arr = v as readonly unknown[];
    if (arr.every((x) => typeof x === "string")) return { type: "array<string>", value: arr as string[] };
    if (arr.every((x) => typeof x === "boolean")) return { type: "array<bool>", value: arr as boolean[] };
    if (arr.every((x) => typeof x === "number")) {
      const nums = arr as number[];
      const ints = nums.every((x) => Number.isInteger(x) && x >= -(2 ** 31) && x < 2 ** 31);
      return ints ? { type: "array<i32>", value: nums } : { type: "array<f32>", value: nums };
    }
  }
  throw new TypeError(`gguf writer: cannot infer a GGUF type for "${key}"; pass {type, value}`);
}

function writeKv(out: ByteSink, key: string, raw: MetaValue): void {
  const tv = inferValue(key, raw);
  out.string(key);
  const m = /^array<(.+)>$/.exec(tv.type);
  if (!m) {
    const code = SCALAR_TYPE_CODE[tv.type as GgufScalarTypeName];
    if (code === undefined) throw new TypeError(`gguf writer: unknown type "${tv.type}" for "${key}"`);
    out.u32(code);
    writeScalar(out, key, tv.type as GgufScalarTypeName, tv.value);
    return;
  }
  const elem = m[1] as GgufScalarTypeName;
  const code = SCALAR_TYPE_CODE[elem];
  if (code === undefined) throw new TypeError(`gguf writer: unknown array element type "${elem}" for "${key}"`);
  const items = tv.value as ArrayLike<unknown>;
  out.u32(T.ARRAY);
  out.u32(code);
  out.u64(BigInt(items.length));
  for (let i = 0; i < items.length; i++) writeScalar(out, key, elem, items[i]);
}

interface PlannedTensor {
  spec: TensorSpec;
  typeCode: number;
  elements: number;
  nbytes: number;
  offset: number;
}

export interface GgufLayout {
  /** Header, KV section, tensor infos and padding up to the data section. */
  header: Uint8Array;
  tensors: PlannedTensor[];
  alignment: number;
  /** Total file size in bytes. */
  totalSize: number;
}

function alignUp(n: number, a: number): number {
  return Math.ceil(n / a) * a;
}

/** Compute the header bytes and every tensor's offset. */
export function layoutGguf(spec: GgufSpec): GgufLayout {
  const entries = Array.isArray(spec.metadata) ? spec.metadata : Object.entries(spec.metadata);
  const keys = new Set<string>();
  for (const [k] of entries) {
    if (keys.has(k)) throw new Error(`gguf writer: duplicate metadata key "${k}"`);
    keys.add(k);
  }
  let alignment = spec.alignment ?? GGUF_DEFAULT_ALIGNMENT;
  const allEntries: [string, MetaValue][] = [...entries];
  const given = entries.find(([k]) => k === "general.alignment");
  if (given) {
    const v = inferValue("general.alignment", given[1]).value;
    if (spec.alignment !== undefined && v !== spec.alignment)
      throw new Error("gguf writer: alignment option and general.alignment disagree");
    alignment = Number(v);
  } else {
    allEntries.push(["general.alignment", { type: "u32", value: alignment }]);
  }
  if (!Number.isInteger(alignment) || alignment <= 0 || (alignment & (alignment - 1)) !== 0) {
    throw new Error(`gguf writer: alignment ${alignment} is not a power of two`);
  }

  const names = new Set<string>();
  let offset = 0;
  const tensors: PlannedTensor[] = spec.tensors.map((t) => {
    if (names.has(t.name)) throw new Error(`gguf writer: duplicate tensor "${t.name}"`);
    names.add(t.name);
    if (t.dims.length < 1 || t.dims.length > 4) throw new Error(`gguf writer: tensor "${t.name}" needs 1..4 dims`);
    const typeCode = TYPE_CODE[t.type];
    if (typeCode === undefined) throw new Error(`gguf writer: tensor "${t.name}" type ${t.type} not supported`);
    if (t.type === "Q8_0" && t.dims[0]! % Q8_0_BLOCK !== 0)
      throw new Error(`gguf writer: Q8_0 tensor "${t.name}" row length must be a multiple of 32`);
    const elements = t.dims.reduce((a, b) => a * b, 1);
    const nbytes = encodedSize(typeCode, elements);
    if (t.data instanceof Float32Array && t.data.length !== elements) {
      throw new Error(`gguf writer: tensor "${t.name}" has ${t.data.length} values, dims say ${elements}`);
    }
    if (t.data instanceof Uint8Array && t.data.length !== nbytes) {
      throw new Error(`gguf writer: tensor "${t.name}" has ${t.data.length} bytes, expected ${nbytes}`);
    }
    const planned = { spec: t, typeCode, elements, nbytes, offset };
    offset = alignUp(offset + nbytes, alignment);
    return planned;
  });

  const out = new ByteSink();
  out.u32(GGUF_MAGIC);
  out.u32(3);
  out.u64(BigInt(tensors.length));
  out.u64(BigInt(allEntries.length));
  for (const [k, v] of allEntries) writeKv(out, k, v);
  for (const t of tensors) {
    out.string(t.spec.name);
    out.u32(t.spec.dims.length);
    for (const d of t.spec.dims) out.u64(BigInt(d));
    out.u32(t.typeCode);
    out.u64(BigInt(t.offset));
  }
  out.padTo(alignment);
  const header = out.result();
  return { header, tensors, alignment, totalSize: header.length + offset };
}

/** Encoded bytes of one tensor, chunk by chunk, followed by alignment padding. */
function* tensorChunks(t: PlannedTensor, alignment: number): Generator<Uint8Array> {
  const data = t.spec.data;
  if (data instanceof Uint8Array) yield data;
  else if (data instanceof Float32Array) {
    for (let start = 0; start < t.elements; start += FILL_CHUNK) {
      yield encodeValues(t.typeCode, data.subarray(start, Math.min(t.elements, start + FILL_CHUNK)));
    }
  } else {
    const scratch = new Float32Array(Math.min(FILL_CHUNK, t.elements));
    for (let start = 0; start < t.elements; start += FILL_CHUNK) {
      const chunk = scratch.subarray(0, Math.min(FILL_CHUNK, t.elements - start));
      chunk.fill(0);
      data(chunk, start);
      yield encodeValues(t.typeCode, chunk);
    }
  }
  const pad = alignUp(t.nbytes, alignment) - t.nbytes;
  if (pad > 0) yield new Uint8Array(pad);
}

/** Serialise a whole GGUF file into memory (fine for small models). */
export function writeGgufBytes(spec: GgufSpec): Uint8Array {
  const layout = layoutGguf(spec);
  const out = new Uint8Array(layout.totalSize);
  out.set(layout.header, 0);
  let at = layout.header.length;
  for (const t of layout.tensors) {
    for (const chunk of tensorChunks(t, layout.alignment)) {
      out.set(chunk, at);
      at += chunk.length;
    }
  }
  if (at !== layout.totalSize) throw new Error(`gguf writer: internal size mismatch (${at} != ${layout.totalSize})`);
  return out;
}

/** Stream a GGUF file to `path` (overwrites). Memory use stays around one chunk. */
export async function writeGgufFile(spec: GgufSpec, path: string): Promise<number> {
  const layout = layoutGguf(spec);
  const fd = openSync(path, "w");
  try {
    const put = (b: Uint8Array) => {
      let done = 0;
      while (done < b.length) done += writeSync(fd, b, done, b.length - done);
    };
    put(layout.header);
    let written = layout.header.length;
    for (const t of layout.tensors) {
      for (const chunk of tensorChunks(t, layout.alignment)) {
        put(chunk);
        written += chunk.length;
      }
    }
    if (written !== layout.totalSize)
      throw new Error(`gguf writer: internal size mismatch (${written} != ${layout.totalSize})`);
    fsyncSync(fd);
    return written;
  } finally {
    closeSync(fd);
  }
}
