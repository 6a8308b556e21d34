// ggml's RPC backend through its registry (docs/guides/multi-machine.md), as
// llama.cpp's own tools reach it under GGML_BACKEND_DL: the "RPC" registry's
// ggml_backend_rpc_add_server makes a remote worker's devices local devices
// (RPC0, RPC1, ... described by their endpoint), and
// ggml_backend_rpc_start_server turns this process into such a worker.
//
// Where the backend comes from: beside libllama (the release's linux-x64),
// SUPERFLUID_RPC_BACKEND, or what `bun build.ts --rpc-backend` recorded for
// the installed prebuilt. A backend built apart from libllama asks for
// libggml-base.so.0; it is loaded from a folder of its own where that name is
// a link to the libggml-base this process runs, so both share one ggml.
import { CFunction, ptr, type Pointer } from "bun:ffi";
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, readdirSync, readFileSync, renameSync } from "node:fs";
import { join } from "node:path";
import type { Device } from "./devices.ts";
import { cstr, type Llama, linkOnce, type NativeHandle } from "./llama.ts";
import { cacheDir } from "./paths.ts";
import { RPC_BACKEND_RECORD, type RpcBackendRecord } from "./rpc-backend-record.ts";

export const RPC_BACKEND_FILE = "libggml-rpc.so";

/** The RPC backend file this process would load, or undefined when there is none for its libllama. */
export function rpcBackendFile(llama: Llama, env = process.env): string | undefined {
  if (env.SUPERFLUID_RPC_BACKEND)
    return existsSync(env.SUPERFLUID_RPC_BACKEND) ? env.SUPERFLUID_RPC_BACKEND : undefined;
  const beside = join(llama.location.dir, RPC_BACKEND_FILE);
  if (existsSync(beside)) return beside;
  try {
    const record = JSON.parse(readFileSync(join(cacheDir(env), RPC_BACKEND_RECORD), "utf8")) as RpcBackendRecord;
    if (record.llamaDir === llama.location.dir && existsSync(record.backend)) return record.backend;
  } catch {
    // no record: not built for running from source
  }
  return undefined;
}

/** Why this process has no RPC backend, for the refusal of --rpc and rpc-worker. */
export function noRpcBackend(llama: Llama): string {
  return (
    `this build has no RPC backend (no ${RPC_BACKEND_FILE} beside ${llama.location.llama}): the linux-x64 release ` +
    "carries it; running from source, build it with `bun build.ts --rpc-backend`"
  );
}

/** The RPC registry, loading the backend when it is not loaded yet; undefined when there is none. */
function rpcRegistry(llama: Llama, env = process.env): Pointer | undefined {
  const name = cstr("RPC");
  const loaded = pointerOrNone(llama.ggml.ggml_backend_reg_by_name(name));
  if (loaded) return loaded;
  const file = rpcBackendFile(llama, env);
  if (!file) return undefined;
  return pointerOrNone(llama.ggml.ggml_backend_load(cstr(loadableCopy(file, llama.location.dir))));
}

/** A "ptr" return as a pointer; NULL (and bun:ffi's bigint form, never a real pointer here) as none. */
function pointerOrNone(p: NativeHandle): Pointer | undefined {
  return p === null || typeof p === "bigint" || p === 0 ? undefined : p;
}

/**
 * `file` where the dynamic loader finds this process's libggml-base under the name the backend needs: itself when
 * it sits beside libllama, else a copy in a cache folder beside a link to the running one.
 */
function loadableCopy(file: string, llamaDir: string): string {
  if (file === join(llamaDir, RPC_BACKEND_FILE)) return file;
  const base = readdirSync(llamaDir).find((f) => /^libggml-base(\.v[\d.]+)?\.so(\.\d+)*$/.test(f));
  if (!base) throw new Error(`no libggml-base beside ${llamaDir}`);
  const key = createHash("sha256").update(`${file}\n${llamaDir}`).digest("hex").slice(0, 16);
  const dir = join(cacheDir(), `rpc-${key}`);
  const copy = join(dir, RPC_BACKEND_FILE);
  if (!existsSync(copy)) {
    for (const name of ["libggml-base.so.0", "libggml-base.so"]) linkOnce(join(llamaDir, base), join(dir, name));
    // Copied, not linked: the loader looks for the backend's dependencies beside the path it was given.
    const partial = `${copy}.${process.pid}.tmp`;
    copyFileSync(file, partial);
    renameSync(partial, copy);
  }
  return copy;
}

/** A function the RPC registry exports, by name. */
function rpcFunction(llama: Llama, reg: Pointer, name: string): Pointer {
  const fn = pointerOrNone(llama.ggml.ggml_backend_reg_get_proc_address(reg, cstr(name)));
  if (!fn) throw new Error(`ggml's RPC backend exports no ${name}`);
  return fn;
}

/**
 * Registers an RPC worker: its devices join this process's device list (the model's placement sees them). Call
 * only once probeRpcWorker has had its HELLO answered: ggml's client aborts the process on a failed connection.
 */
export function addRpcServer(llama: Llama, endpoint: string): void {
  const reg = rpcRegistry(llama);
  if (!reg) throw new Error(noRpcBackend(llama));
  const add = CFunction({ ptr: rpcFunction(llama, reg, "ggml_backend_rpc_add_server"), args: ["ptr"], returns: "ptr" });
  const remote = add(cstr(endpoint)) as Pointer | null;
  if (!remote) throw new Error(`the RPC worker at ${endpoint} reported no device`);
  llama.ggml.ggml_backend_register(remote);
}

/**
 * Serves this process's `devices` to RPC clients on `endpoint` (HOST:PORT): never returns while it serves (one
 * client at a time; there is no stop call, the process is ended instead). Returns only when it could not start.
 */
export function startRpcServer(
  llama: Llama,
  endpoint: string,
  cache: string | undefined,
  threads: number,
  devices: Device[],
): void {
  const reg = rpcRegistry(llama);
  if (!reg) throw new Error(noRpcBackend(llama));
  const start = CFunction({
    ptr: rpcFunction(llama, reg, "ggml_backend_rpc_start_server"),
    args: ["ptr", "ptr", "u64", "u64", "ptr"],
    returns: "void",
  });
  const handles = new BigUint64Array(devices.map((d) => BigInt(Number(d.handle))));
  const endpointText = cstr(endpoint);
  const cacheText = cache === undefined ? null : cstr(cache);
  start(endpointText, cacheText, BigInt(threads), BigInt(devices.length), ptr(handles));
}
