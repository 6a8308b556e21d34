// `superfluid check [--model PATH] [--devices] [--rpc HOST:PORT,...]`: can this machine run the
// engine? Opens libllama (locating it, compiling the shim, checking the C API)
// and, with a model, loads its vocabulary only (no weights). It names the
// processor and the ggml CPU variant chosen for it (SUPERFLUID_CPU_VARIANT pins
// one); --devices lists every device the backends registered, GPUs first, with
// their memory; --rpc asks each RPC worker for its protocol and devices
// (over a plain socket, src/rpc/probe.ts). Exit 0 when it works, else 1.
import { describeCpu } from "../../ffi/cpu-variant.ts";
import { listDevices } from "../../ffi/devices.ts";
import { loadLlama } from "../../ffi/llama.ts";
import { noRpcBackend, rpcBackendFile } from "../../ffi/rpc.ts";
import { parseEndpointList } from "../rpc/endpoint.ts";
import { usableRpcWorker } from "../rpc/probe.ts";
import { templateWires } from "../daemon/template-wires.ts";
import { LlamaModel } from "../engine/model.ts";
import { describeModel, kvBytesPerToken, readGguf } from "../gguf/index.ts";
import { formatBytes } from "../runtime/byte-size.ts";
import { KV_BITS } from "../gguf/kv-type.ts";

export async function runCheck(argv: string[]): Promise<number> {
  const i = argv.indexOf("--model");
  const modelPath = i >= 0 ? argv[i + 1] : undefined;
  const r = argv.indexOf("--rpc");
  try {
    const t0 = performance.now();
    const llama = loadLlama();
    console.log(
      `libllama: ${llama.location.llama} (${llama.location.source}, llama.cpp ${llama.release.tag}), opened in ${(performance.now() - t0).toFixed(0)} ms`,
    );
    console.log(`cpu: ${describeCpu(llama.cpu!)}`);
    const gib = (n: number) => `${(n / 2 ** 30).toFixed(1)} GiB`;
    if (argv.includes("--devices")) {
      const devices = listDevices(llama);
      for (const f of llama.unloadedBackends)
        console.log(`backend ${f.file} ${f.skipped ? f.reason : `did not load: ${f.reason}`}`);
      console.log(`devices: ${devices.length}`);
      for (const d of devices)
        console.log(`  ${d.name}: ${d.type}, ${d.description}, ${gib(d.freeBytes)} free of ${gib(d.totalBytes)}`);
      if (!devices.some((d) => d.type === "gpu" || d.type === "igpu"))
        console.log(
          "  no GPU: this build's backends found none (a Vulkan or CUDA build and its driver are needed; docs/install.md)",
        );
    }
    if (r >= 0) {
      const endpoints = parseEndpointList(argv[r + 1] ?? "");
      console.log(rpcBackendFile(llama) ? `rpc backend: ${rpcBackendFile(llama)}` : `rpc: ${noRpcBackend(llama)}`);
      let unusable = 0;
      for (const endpoint of endpoints) {
        try {
          const found = await usableRpcWorker(endpoint);
          const memory = found.devices.map((d, n) => `device ${n}: ${gib(d.freeBytes)} free of ${gib(d.totalBytes)}`);
          console.log(`  ${endpoint}: protocol ${found.version}; ${memory.join("; ")}`);
        } catch (err) {
          unusable++;
          console.log(`  ${(err as Error).message}`);
        }
      }
      if (unusable > 0 || !rpcBackendFile(llama)) return 1;
    }
    if (modelPath) {
      const model = LlamaModel.load(modelPath, { vocabOnly: true });
      try {
        console.log(`model: ${modelPath}: vocabulary of ${model.vocabInfo.size} tokens`);
        const file = await readGguf(modelPath);
        const info = describeModel(file);
        const perToken = (bits: string) => formatBytes(kvBytesPerToken(file, KV_BITS[bits]));
        console.log(`  KV a token: ${perToken("16")} f16, ${perToken("8")} q8_0, ${perToken("4")} q4_0 (--kv-bits)`);
        const { toolDialect: wire, reasoningMarkers: markers } = templateWires(info, model);
        console.log(`  tool-call wire: ${wire?.name ?? "none (the template shows no tools)"}`);
        console.log(`  reasoning: ${markers ? `${markers.open} … ${markers.close}` : "none"}`);
      } finally {
        model.free();
      }
    }
    return 0;
  } catch (err) {
    console.error(`superfluid check: ${(err as Error).message}`);
    return 1;
  }
}
