// `superfluid check [--model PATH]`: can this machine run the engine? Opens
// libllama (locating it, compiling the shim, checking the C API) and, with a
// model, loads its vocabulary only (no weights). It names the processor and the
// ggml CPU variant chosen for it (SUPERFLUID_CPU_VARIANT pins one). Exit 0 when
// it works, else 1.
import { describeCpu } from "../../ffi/cpu-variant.ts";
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
