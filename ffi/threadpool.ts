// A persistent ggml CPU threadpool for one context. Without one, ggml starts
// and joins its compute threads on every llama_decode; with one (as
// llama-bench does) the threads stay, and a token's decode does not pay for
// thread start-up. The CPU backend is loaded at run time, so its threadpool
// functions are reached through the backend registry.
import { CFunction, dlopen, type Pointer } from "bun:ffi";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { cstr, handle, type Llama } from "./llama.ts";

/**
 * sizeof(struct ggml_threadpool_params): bool cpumask[512]; int n_threads, prio; uint32 poll; bool strict_cpu, paused
 * (padded).
 */
const PARAMS_SIZE = 528;

interface ThreadpoolApi {
  create(nThreads: number): Pointer;
  free(pool: Pointer): void;
  /**
   * Puts the pool's threads to sleep until the next decode (which wakes
   * them by itself). Between decodes ggml's threads poll for work, 1024 x 128
   * x `poll` (50) rounds, about 125 ms of a full core on a 2-core EPYC after
   * a burst's last decode: CPU taken from whatever runs next. A no-op where
   * the backend does not offer it.
   */
  pause(pool: Pointer): void;
  /** Whether pause() reaches ggml_threadpool_pause in this library. */
  canPause: boolean;
}

let api: ThreadpoolApi | undefined;

function openThreadpoolApi(llama: Llama): ThreadpoolApi {
  const base = readdirSync(llama.location.dir).find((f) => /^(lib)?ggml-base(\.\d+)*\.(so|dylib|dll)(\.\d+)*$/.test(f));
  if (!base) throw new Error(`no libggml-base beside ${llama.location.llama}`);
  const ggmlBase = dlopen(join(llama.location.dir, base), {
    ggml_threadpool_params_init: { args: ["ptr", "i32"], returns: "void" },
    ggml_backend_reg_get_proc_address: { args: ["ptr", "ptr"], returns: "ptr" },
  }).symbols;
  const ggml = dlopen(llama.location.ggml, { ggml_backend_reg_by_name: { args: ["ptr"], returns: "ptr" } }).symbols;
  const cpu = handle(ggml.ggml_backend_reg_by_name(cstr("CPU")), "CPU backend");
  const fn = (name: string) => handle(ggmlBase.ggml_backend_reg_get_proc_address(cpu, cstr(name)), name);
  const threadpoolNew = CFunction({ ptr: fn("ggml_threadpool_new"), args: ["ptr"], returns: "ptr" });
  const threadpoolFree = CFunction({ ptr: fn("ggml_threadpool_free"), args: ["ptr"], returns: "void" });
  const threadpoolPause = pauseFunction(llama);
  return {
    create(nThreads) {
      const params = new Uint8Array(PARAMS_SIZE);
      ggmlBase.ggml_threadpool_params_init(params, nThreads);
      return handle(threadpoolNew(params) as Pointer | null, "ggml threadpool");
    },
    free(pool) {
      threadpoolFree(pool);
    },
    pause(pool) {
      threadpoolPause?.(pool);
    },
    canPause: threadpoolPause !== undefined,
  };
}

/**
 * ggml_threadpool_pause, which the CPU backend exports but does not list in
 * its registry: looked up in the CPU variant's own library (already loaded;
 * dlopen finds the same copy), else a single libggml-cpu beside it, else
 * libggml itself (a build whose CPU backend is linked in).
 */
function pauseFunction(llama: Llama): ((pool: Pointer) => void) | undefined {
  const single = readdirSync(llama.location.dir).find((f) => /^(lib)?ggml-cpu\.(so|dylib|dll)$/.test(f));
  for (const path of [llama.cpu?.library, single && join(llama.location.dir, single), llama.location.ggml]) {
    if (!path) continue;
    try {
      const lib = dlopen(path, { ggml_threadpool_pause: { args: ["ptr"], returns: "void" } });
      return (pool) => lib.symbols.ggml_threadpool_pause(pool);
    } catch {} // not exported there
  }
  return undefined;
}

export function threadpoolApi(llama: Llama): ThreadpoolApi {
  api ??= openThreadpoolApi(llama);
  return api;
}
