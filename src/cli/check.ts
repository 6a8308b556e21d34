// `superfluid check [--model PATH] [--devices]`: can this machine run the
// engine? Opens libllama (locating it, compiling the shim, checking the C API)
// and, with a model, loads its vocabulary only (no weights). It names the
// processor and the ggml CPU variant chosen for it (SUPERFLUID_CPU_VARIANT pins
// one); --devices lists every device the backends registered, GPUs first, with
// their memory. Exit 0 when it works, else 1.
import { describeCpu } from "../../ffi/cpu-variant.ts";
import { listDevices } from "../../ffi/devices.ts";
import { loadLlama } from "../../ffi/llama.ts";
import { LlamaModel } from "../engine/model.ts";

export function runCheck(argv: string[]): number {
  const i = argv.indexOf("--model");
  const modelPath = i >= 0 ? argv[i + 1] : undefined;
  try {
    const t0 = performance.now();
    const llama = loadLlama();
    console.log(
      `libllama: ${llama.location.llama} (${llama.location.source}, llama.cpp ${llama.release.tag}), opened in ${(performance.now() - t0).toFixed(0)} ms`,
    );
    console.log(`cpu: ${describeCpu(llama.cpu!)}`);
    if (argv.includes("--devices")) {
      const gib = (n: number) => `${(n / 2 ** 30).toFixed(1)} GiB`;
      const devices = listDevices(llama);
      for (const f of llama.unloadedBackends) console.log(`backend ${f.file} did not load: ${f.reason}`);
      console.log(`devices: ${devices.length}`);
      for (const d of devices)
        console.log(`  ${d.name}: ${d.type}, ${d.description}, ${gib(d.freeBytes)} free of ${gib(d.totalBytes)}`);
      if (!devices.some((d) => d.type === "gpu" || d.type === "igpu"))
        console.log(
          "  no GPU: this build's backends found none (a Vulkan or CUDA build and its driver are needed; docs/install.md)",
        );
    }
    if (modelPath) {
      const model = LlamaModel.load(modelPath, { vocabOnly: true });
      console.log(`model: ${modelPath}: vocabulary of ${model.vocabInfo.size} tokens`);
      model.free();
    }
    return 0;
  } catch (err) {
    console.error(`superfluid check: ${(err as Error).message}`);
    return 1;
  }
}
