// What every bench prints about the machine its numbers came from: the
// processor's model and the ggml CPU variant each side decodes on (their
// kernels differ in speed and in rounding), and a llama.cpp folder pinned to
// one CPU variant, so that llama-server runs the same kernels as a pinned
// superfluid (SUPERFLUID_CPU_VARIANT).
import { copyFileSync, mkdirSync, readdirSync, statSync, symlinkSync } from "node:fs";
import { join, resolve } from "node:path";
import { chooseCpuVariant, cpuModel, cpuVariantFiles } from "../ffi/cpu-variant.ts";

/** The variant ggml's loader picks in `dir` (or the pinned one, checked); null for a build with one CPU backend. */
export function variantIn(dir: string, pin?: string): string | null {
  const choice = chooseCpuVariant(dir, pin);
  choice?.close();
  return choice?.name ?? null;
}

/** One line naming the machine: "cpu: AMD EPYC 9B14 (2 cores)". */
export function machineLine(): string {
  return `cpu: ${cpuModel()} (${navigator.hardwareConcurrency} logical cores)`;
}

/**
 * A copy of llama.cpp's folder `dir` in `scratch` that holds one CPU variant:
 * the programs copied (ggml looks for backends beside the running program,
 * and a symlinked program resolves to its real folder), every other file
 * linked, and the CPU variants other than `variant` left out. The programs'
 * rpath is $ORIGIN, so they find the linked libraries there.
 */
export function pinnedLlamaDir(folder: string, variant: string, scratch: string): string {
  const dir = resolve(folder); // the links must hold from the copy's own folder
  variantIn(dir, variant); // refuses a variant the folder lacks or the CPU cannot run
  const others = new Set(
    cpuVariantFiles(dir)
      .filter((v) => v.name !== variant)
      .map((v) => v.path),
  );
  const out = join(scratch, `llama-${variant}`);
  mkdirSync(out, { recursive: true });
  for (const file of readdirSync(dir)) {
    const path = join(dir, file);
    if (others.has(path)) continue;
    const info = statSync(path);
    const executable = info.isFile() && !/\.so(\.\d+)*$/.test(file) && (info.mode & 0o111) !== 0;
    if (executable) copyFileSync(path, join(out, file));
    else symlinkSync(path, join(out, file));
  }
  return out;
}
