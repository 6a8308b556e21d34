// ggml's own vectorized softmax kernel, borrowed for sampling
// (docs/design.md#sampling-chain): ggml_vec_soft_max_f32(n, y, x, max)
// writes y[i] = exp(x[i] - max) with the CPU variant's SIMD exp (AVX2,
// AVX-512, NEON) and returns the sum, about 20 times faster than a scalar
// exp over a 150k vocabulary. The CPU backend libraries export it on Linux
// and macOS; Windows DLLs export only ggml's public API, and there (or in a
// build whose CPU backend is linked in) sampling uses a JavaScript loop.
import { dlopen } from "bun:ffi";
import { readdirSync } from "node:fs";
import { join } from "node:path";

/** `out[i] = exp(x[i] - max)` for i < n; returns the sum. */
export type VectorExpSum = (n: number, out: Float32Array, x: Float32Array, max: number) => number;

const SINGLE_CPU_BACKEND = /^(?:lib)?ggml-cpu\.(?:so|dylib|dll)$/;

/**
 * The kernel from the CPU backend that decodes (`library`: the chosen
 * variant's file; null: look for the single CPU backend beside libllama in
 * `dir`), or undefined where no such file exports it.
 */
export function openVectorExpSum(library: string | null, dir: string): VectorExpSum | undefined {
  const candidates = library ? [library] : singleCpuBackend(dir);
  for (const path of candidates) {
    try {
      const lib = dlopen(path, { ggml_vec_soft_max_f32: { args: ["i32", "ptr", "ptr", "f32"], returns: "f64" } });
      const softMax = lib.symbols.ggml_vec_soft_max_f32;
      return (n, out, x, max) => (n === 0 ? 0 : softMax(n, out, x, max));
    } catch {
      // Not exported here: the caller falls back to JavaScript.
    }
  }
  return undefined;
}

function singleCpuBackend(dir: string): string[] {
  try {
    return readdirSync(dir)
      .filter((f) => SINGLE_CPU_BACKEND.test(f))
      .map((f) => join(dir, f));
  } catch {
    return [];
  }
}
