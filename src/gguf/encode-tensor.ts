// Encoders from float32 values to the on-disk bytes of F32, F16 and Q8_0
// tensors. Pure integer/float bit manipulation (no platform conversion
// routines) so the output bytes are identical on every machine.

import { GgmlType } from "./types.ts";

if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) {
  throw new Error("gguf writer: big-endian hosts are not supported");
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** IEEE half-precision bits of a float32 value, rounding to nearest even. */
export function f32ToF16Bits(value: number): number {
  f32[0] = value;
  return f32BitsToF16Bits(u32[0]!);
}

/** Same as f32ToF16Bits, from the float32 bit pattern (lets bulk encoders skip a copy). */
export function f32BitsToF16Bits(x: number): number {
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 : 0); // inf / NaN
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00; // too large: infinity
  if (e <= 0) {
    // Subnormal half (or zero): value = m * 2^-24.
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rem > halfway || (rem === halfway && (half & 1) === 1)) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  // A carry out of the mantissa correctly bumps the exponent (up to infinity).
  if (rem > 0x1000 || (rem === 0x1000 && (half & 1) === 1)) half++;
  return sign | half;
}

/** float32 value of IEEE half-precision bits. */
export function f16BitsToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

export const Q8_0_BLOCK = 32;
const Q8_0_BLOCK_BYTES = 34; // f16 scale + 32 int8

/** Bytes per element group for a supported writer type. */
export function encodedSize(type: number, elements: number): number {
  switch (type) {
    case GgmlType.F32:
      return elements * 4;
    case GgmlType.F16:
      return elements * 2;
    case GgmlType.Q8_0:
      return (elements / Q8_0_BLOCK) * Q8_0_BLOCK_BYTES;
    default:
      throw new Error(`gguf writer: tensor type ${type} is not supported (F32, F16, Q8_0 only)`);
  }
}

/** Encode `values` (a whole number of Q8_0 blocks for Q8_0) into a fresh byte array. */
export function encodeValues(type: number, values: Float32Array): Uint8Array {
  switch (type) {
    case GgmlType.F32:
      return new Uint8Array(values.buffer.slice(values.byteOffset, values.byteOffset + values.byteLength));
    case GgmlType.F16: {
      const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
      const out = new Uint16Array(values.length);
      for (let i = 0; i < values.length; i++) out[i] = f32BitsToF16Bits(bits[i]!);
      return new Uint8Array(out.buffer);
    }
    case GgmlType.Q8_0:
      return encodeQ8_0(values);
    default:
      throw new Error(`gguf writer: tensor type ${type} is not supported (F32, F16, Q8_0 only)`);
  }
}

/** ggml's reference Q8_0: per 32 values, scale d = max|x| / 127 (as f16), q = round(x / d). */
function encodeQ8_0(values: Float32Array): Uint8Array {
  if (values.length % Q8_0_BLOCK !== 0) throw new Error("gguf writer: Q8_0 data must be a multiple of 32 values");
  const blocks = values.length / Q8_0_BLOCK;
  const out = new Uint8Array(blocks * Q8_0_BLOCK_BYTES);
  const view = new DataView(out.buffer);
  for (let b = 0; b < blocks; b++) {
    const base = b * Q8_0_BLOCK;
    let amax = 0;
    for (let j = 0; j < Q8_0_BLOCK; j++) amax = Math.max(amax, Math.abs(values[base + j]!));
    const d = Math.fround(amax / 127);
    const id = d !== 0 ? 1 / d : 0;
    const o = b * Q8_0_BLOCK_BYTES;
    view.setUint16(o, f32ToF16Bits(d), true);
    for (let j = 0; j < Q8_0_BLOCK; j++) {
      const x = Math.fround(values[base + j]! * id);
      const q = Math.sign(x) * Math.floor(Math.abs(x) + 0.5); // roundf: halves away from zero
      view.setInt8(o + 2 + j, q);
    }
  }
  return out;
}
