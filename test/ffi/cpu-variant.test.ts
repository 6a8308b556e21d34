// The ggml CPU variant: superfluid chooses it as ggml's loader would (the
// highest score), names it, and loads the one SUPERFLUID_CPU_VARIANT pins,
// refusing by name one the folder lacks or this CPU cannot run.
import { afterAll, describe, expect, test } from "bun:test";
import { dlopen } from "bun:ffi";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chooseCpuVariant, cpuModel, cpuVariantFiles, otherBackendFiles } from "../../ffi/cpu-variant.ts";
import { loadLlama } from "../../ffi/llama.ts";

const dir = loadLlama().location.dir;
const variants = cpuVariantFiles(dir);
const scores = new Map(
  variants.map((v) => {
    const lib = dlopen(v.path, { ggml_backend_score: { args: [], returns: "i32" } });
    const score = lib.symbols.ggml_backend_score();
    lib.close();
    return [v.name, score];
  }),
);
const runnable = variants.filter((v) => scores.get(v.name)! > 0);
const unrunnable = variants.find((v) => scores.get(v.name) === 0);
/** The pin an AVX2 x86-64 machine always runs: what CI's second engine run uses. */
const haswell = runnable.find((v) => v.name === "haswell");

/** What a fresh process says it loaded, and the library ggml itself reports loading. */
async function childLoad(env: Record<string, string>): Promise<{ code: number; out: string; err: string }> {
  const script = `import { loadLlama } from ${JSON.stringify(new URL("../../ffi/llama.ts", import.meta.url).pathname)};
const l = loadLlama(); console.log(JSON.stringify(l.cpu));`;
  const child = Bun.spawn([process.execPath, "-e", script], {
    env: { ...process.env, SUPERFLUID_CPU_VARIANT: "", ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited,
  ]);
  return { code, out, err };
}

describe("library folders, by file name", () => {
  const folder = mkdtempSync(join(tmpdir(), "sf-variants-"));
  afterAll(() => rmSync(folder, { recursive: true, force: true }));
  for (const f of [
    "libggml-base.so",
    "libggml-cpu-haswell.so",
    "libggml-cpu-armv8.2_1.so",
    "ggml-cpu-zen4.dll",
    "libggml-vulkan.so",
    "libggml-zz.so",
    "libggml-cuda.so",
    "libggml-blas.so",
    "libggml.so",
    "libllama.so",
  ]) {
    writeFileSync(join(folder, f), "");
  }

  test("CPU variants are named by what follows ggml-cpu- (arm64's carry dots), on every platform's file names", () => {
    expect(cpuVariantFiles(folder).map((v) => v.name)).toEqual(["zen4", "armv8.2_1", "haswell"]);
  });

  test("the other backends come in ggml's own order (llama.cpp numbers devices in it), unknown ones after", () => {
    expect(otherBackendFiles(folder).map((f) => f.slice(folder.length + 1))).toEqual([
      "libggml-blas.so",
      "libggml-cuda.so",
      "libggml-vulkan.so",
      "libggml-zz.so",
    ]);
  });
});

describe.skipIf(variants.length === 0)("CPU variants (a library with one file per instruction-set level)", () => {
  test("unpinned, the choice is the variant of highest score, and the processor is named", () => {
    const choice = chooseCpuVariant(dir, undefined)!;
    choice.close();
    const best = Math.max(...scores.values());
    expect(scores.get(choice.name)).toBe(best);
    expect(choice.pinned).toBe(false);
    expect(cpuModel().length).toBeGreaterThan(0);
  });

  test("a variant the folder lacks is refused, naming the ones it has", () => {
    expect(() => chooseCpuVariant(dir, "no-such-cpu")).toThrow(
      `SUPERFLUID_CPU_VARIANT=no-such-cpu: no such CPU variant in ${dir} (${variants.map((v) => v.name).join(", ")})`,
    );
  });

  test.skipIf(unrunnable === undefined)("a variant this CPU cannot run is refused by name, not loaded", () => {
    expect(() => chooseCpuVariant(dir, unrunnable!.name)).toThrow(`the ${unrunnable!.name} variant needs`);
  });

  test("the other backends to load are neither the base nor a CPU variant", () => {
    for (const f of otherBackendFiles(dir)) expect(f).not.toMatch(/ggml-(base|cpu)/);
  });

  test.skipIf(haswell === undefined)("pinned, ggml loads that variant: its own log names the file", async () => {
    const r = await childLoad({ SUPERFLUID_CPU_VARIANT: "haswell", SUPERFLUID_LLAMA_LOG: "1" });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out.trim().split("\n").at(-1)!)).toEqual({
      model: cpuModel(),
      variant: "haswell",
      library: haswell!.path,
      pinned: true,
    });
    const loaded = r.err.split("\n").filter((l) => l.includes("loaded CPU backend from"));
    expect(loaded).toHaveLength(1);
    expect(loaded[0]).toContain(haswell!.path);
  });

  test("unpinned, one CPU backend is loaded: the chosen one", async () => {
    const r = await childLoad({ SUPERFLUID_LLAMA_LOG: "1" });
    expect(r.code).toBe(0);
    const cpu = JSON.parse(r.out.trim().split("\n").at(-1)!);
    expect(cpu.pinned).toBe(false);
    expect(scores.get(cpu.variant)).toBe(Math.max(...scores.values()));
    const loaded = r.err.split("\n").filter((l) => l.includes("loaded CPU backend from"));
    expect(loaded).toEqual([expect.stringContaining(variants.find((v) => v.name === cpu.variant)!.path)]);
  });
});

describe("the remembered choice", () => {
  const cache = mkdtempSync(join(tmpdir(), "sf-variant-cache-"));
  afterAll(() => rmSync(cache, { recursive: true, force: true }));

  test("a second choice reads the cache and agrees with scoring; a stale or broken cache is scored again", () => {
    const scored = chooseCpuVariant(dir, undefined);
    scored?.close();
    const first = chooseCpuVariant(dir, undefined, cache);
    first?.close();
    expect(first?.name).toBe(scored?.name);
    const files = readdirSync(cache);
    if (!scored) return;
    expect(files.length).toBe(1);
    const saved = JSON.parse(readFileSync(join(cache, files[0]!), "utf8")) as { key: string; name: string };
    expect(saved.name).toBe(scored.name);
    const second = chooseCpuVariant(dir, undefined, cache);
    second?.close();
    expect(second?.name).toBe(scored.name);
    // A remembered variant under another key (another CPU, other files) is not believed.
    writeFileSync(join(cache, files[0]!), JSON.stringify({ key: "other", name: "x64" }));
    const rescored = chooseCpuVariant(dir, undefined, cache);
    rescored?.close();
    expect(rescored?.name).toBe(scored.name);
    writeFileSync(join(cache, files[0]!), "not json");
    const again = chooseCpuVariant(dir, undefined, cache);
    again?.close();
    expect(again?.name).toBe(scored.name);
  });
});
