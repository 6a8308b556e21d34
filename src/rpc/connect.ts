// A server's RPC workers (--rpc): asked over a plain socket first
// (src/rpc/probe.ts), since libllama's RPC client aborts the process when one
// cannot be reached; then, in the model's engine process, registered so that
// their devices take layers like local GPUs (docs/guides/multi-machine.md).
import { loadLlama } from "../../ffi/llama.ts";
import { addRpcServer, noRpcBackend, rpcBackendFile } from "../../ffi/rpc.ts";
import { type RemoteDevice, usableRpcWorker } from "./probe.ts";

export interface RpcWorkerFacts {
  endpoint: string;
  version: string;
  devices: RemoteDevice[];
}

/**
 * Each worker's protocol and devices, once this build is known to have the RPC backend and every worker to serve
 * it; throws a message naming what is missing or the first worker that cannot.
 */
export async function checkRpcWorkers(endpoints: readonly string[]): Promise<RpcWorkerFacts[]> {
  const llama = loadLlama(process.env, { backends: false });
  if (!rpcBackendFile(llama)) throw new Error(noRpcBackend(llama));
  const found: RpcWorkerFacts[] = [];
  for (const endpoint of endpoints) found.push({ endpoint, ...(await usableRpcWorker(endpoint)) });
  return found;
}

/** Checks every worker, then registers its devices in this process (the model's placement sees them). */
export async function connectRpcWorkers(endpoints: readonly string[]): Promise<void> {
  await checkRpcWorkers(endpoints);
  const llama = loadLlama();
  for (const endpoint of endpoints) addRpcServer(llama, endpoint);
}
