// `superfluid rpc-worker` (docs/cli.md#rpc-worker, docs/guides/multi-machine.md):
// this machine's devices offered to a `superfluid serve --rpc` elsewhere,
// through llama.cpp's RPC server (ggml_backend_rpc_start_server). It serves
// one client at a time and has no stop call: the process is the worker, and
// ends by signal. llama.cpp calls its RPC server a proof of concept, with no
// authentication and a history of memory-safety reports: it listens on
// loopback unless --allow-network says otherwise, and then warns.
import { type Device, listDevices } from "../../ffi/devices.ts";
import { loadLlama } from "../../ffi/llama.ts";
import { noRpcBackend, rpcBackendFile, startRpcServer } from "../../ffi/rpc.ts";
import { physicalCores } from "../engine/threads.ts";
import { DEFAULT_RPC_LISTEN, parseEndpoint } from "../rpc/endpoint.ts";
import { isLoopbackName } from "../runtime/loopback.ts";
import { RPC_PROTOCOL } from "../rpc/probe.ts";
import { FlagError, parseFlags } from "./flags.ts";

export const RPC_WORKER_USAGE = `usage: superfluid rpc-worker [--listen HOST:PORT] [--threads N] [--device NAME[,NAME...]]
                            [--cache DIR] [--allow-network]

Offers this machine's devices to \`superfluid serve --rpc HOST:PORT\` on another
(llama.cpp's RPC server, protocol ${RPC_PROTOCOL}; the server must speak the same).

  --listen HOST:PORT   where to listen (default ${DEFAULT_RPC_LISTEN}); a non-loopback
                       address needs --allow-network
  --threads N          compute threads on the CPU device (default: physical cores,
                       at most the cgroup's CPU quota)
  --device NAMES       the devices to offer (\`superfluid check --devices\` names them;
                       default: every GPU, else the CPU)
  --cache DIR          keep tensors the server sent here, so a restart of the server
                       loads the model from this disk instead of over the network
  --allow-network      listen beyond loopback (read the warning it prints)`;

/** Printed once when the worker listens beyond loopback. */
export const NETWORK_WARNING =
  "superfluid rpc-worker: WARNING llama.cpp's RPC server is a proof of concept with no authentication " +
  "and a history of memory-safety reports: anyone who can reach this port can run code on this machine's " +
  "devices and may take it over. Listen only on a private network or a tunnel (WireGuard, SSH), never the internet.";

export const MEMORY_REFUSAL =
  "--memory is not supported: llama.cpp's RPC server offers what its devices report and has no limit of its own; " +
  "give this worker less from the server with --tensor-split";

export interface RpcWorkerOptions {
  listen: string;
  threads: number;
  devices?: string[];
  cache?: string;
  allowNetwork: boolean;
}

/** The options, or the usage error to print (exit 2). */
export function parseRpcWorkerArgs(argv: string[]): RpcWorkerOptions | { error: string } | { help: true } {
  let parsed: ReturnType<typeof parseFlags>;
  try {
    parsed = parseFlags(argv, {
      listen: { value: true },
      threads: { value: true },
      device: { value: true },
      cache: { value: true },
      memory: { value: true },
      "allow-network": {},
      help: { aliases: ["h"] },
    });
  } catch (err) {
    if (err instanceof FlagError) return { error: err.message };
    throw err;
  }
  if (parsed.switches.has("help")) return { help: true };
  if (parsed.values.has("memory")) return { error: MEMORY_REFUSAL };
  if (parsed.positional.length > 0) return { error: `unexpected argument '${parsed.positional[0]}'` };
  const listen = parsed.values.get("listen")?.[0] ?? DEFAULT_RPC_LISTEN;
  let host: string;
  try {
    ({ host } = parseEndpoint(listen));
  } catch (err) {
    return { error: `--listen: ${(err as Error).message}` };
  }
  const allowNetwork = parsed.switches.has("allow-network");
  if (!isLoopbackName(host) && !allowNetwork)
    return {
      error:
        `--listen ${listen} is not a loopback address: llama.cpp's RPC server has no authentication. ` +
        "Add --allow-network to listen there anyway (on a private network or a tunnel only)",
    };
  const threadsGiven = parsed.values.get("threads")?.[0];
  const threads = threadsGiven === undefined ? physicalCores() : Number(threadsGiven);
  if (!Number.isSafeInteger(threads) || threads < 1)
    return { error: `--threads takes a whole number ≥ 1, not '${threadsGiven}'` };
  const deviceList = parsed.values.get("device")?.[0];
  const cache = parsed.values.get("cache")?.[0];
  return {
    listen,
    threads,
    allowNetwork,
    ...(deviceList === undefined ? {} : { devices: deviceList.split(",").map((d) => d.trim()) }),
    ...(cache === undefined ? {} : { cache }),
  };
}

/** The devices offered: those named, else every GPU, else the CPU. */
export function offeredDevices(all: Device[], named?: string[]): Device[] {
  if (named) {
    const unknown = named.filter((n) => !all.some((d) => d.name === n));
    if (unknown.length > 0)
      throw new Error(`no device named ${unknown.join(", ")} here (there are: ${all.map((d) => d.name).join(", ")})`);
    return named.map((n) => all.find((d) => d.name === n)!);
  }
  const gpus = all.filter((d) => d.type === "gpu" || d.type === "igpu");
  return gpus.length > 0 ? gpus : all.filter((d) => d.type === "cpu");
}

export function runRpcWorker(argv: string[]): number {
  const opts = parseRpcWorkerArgs(argv);
  if ("help" in opts) {
    console.log(RPC_WORKER_USAGE);
    return 0;
  }
  if ("error" in opts) {
    console.error(`superfluid rpc-worker: ${opts.error}\n\n${RPC_WORKER_USAGE}`);
    return 2;
  }
  try {
    const llama = loadLlama();
    if (!rpcBackendFile(llama)) throw new Error(noRpcBackend(llama));
    const devices = offeredDevices(listDevices(llama), opts.devices);
    if (opts.allowNetwork && !isLoopbackName(parseEndpoint(opts.listen).host)) console.error(NETWORK_WARNING);
    const gib = (n: number) => `${(n / 2 ** 30).toFixed(1)} GiB`;
    console.error(
      `superfluid rpc-worker: protocol ${RPC_PROTOCOL} on ${opts.listen}, ${opts.threads} threads, ` +
        `offering ${devices.map((d) => `${d.name} (${d.description}, ${gib(d.freeBytes)} free)`).join(", ")}` +
        (opts.cache ? `; tensor cache ${opts.cache}` : ""),
    );
    // Blocks while it serves; it returns only when it could not start (llama.cpp printed why).
    startRpcServer(llama, opts.listen, opts.cache, opts.threads, devices);
    console.error(
      `superfluid rpc-worker: could not serve on ${opts.listen} (in use, or not an address of this machine)`,
    );
    return 1;
  } catch (err) {
    console.error(`superfluid rpc-worker: ${(err as Error).message}`);
    return 1;
  }
}
