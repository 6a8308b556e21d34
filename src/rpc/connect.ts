// A worker's RPC workers (--rpc), joined before the model is placed: each is
// asked over a plain socket first (src/rpc/probe.ts), since libllama's RPC
// client aborts the process when one cannot be reached; then its devices are
// registered and take layers like local GPUs (docs/guides/multi-machine.md).
import type { Device } from "../../ffi/devices.ts";
import { loadLlama } from "../../ffi/llama.ts";
import { addRpcServer, noRpcBackend, rpcBackendFile } from "../../ffi/rpc.ts";
import { usableRpcWorker } from "./probe.ts";

/** Registers every endpoint's devices in this process; throws a message naming the first that cannot serve. */
export async function connectRpcWorkers(endpoints: readonly string[]): Promise<Device[]> {
  const llama = loadLlama();
  if (!rpcBackendFile(llama)) throw new Error(noRpcBackend(llama));
  for (const endpoint of endpoints) await usableRpcWorker(endpoint);
  return endpoints.flatMap((endpoint) => addRpcServer(llama, endpoint));
}
