// Opens libllama through bun:ffi: the functions we call directly, plus the
// by-value shim (shim.c) compiled by Bun's TinyCC and linked to the same library.
import { cc, dlopen, type Pointer } from "bun:ffi";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, symlinkSync, writeFileSync } from "node:fs";
import { threadId } from "node:worker_threads";
import { basename, dirname, join } from "node:path";
import shimSourcePath from "./shim.c" with { type: "file" };
import { ABI_PROBE_SLOTS, identifyRelease, LlamaAbiError, type LlamaRelease } from "./abi.ts";
import {
  backendName,
  chooseCpuVariant,
  cpuModel,
  cpuVariantFiles,
  otherBackendFiles,
  type CpuInfo,
} from "./cpu-variant.ts";
import { gpuBackendSkip } from "./gpu-presence.ts";
import { locateLibrary, type LibraryLocation } from "./locate.ts";
import { cacheDir } from "./paths.ts";

const llamaSymbols = {
  llama_backend_init: { args: [], returns: "void" },
  llama_model_free: { args: ["ptr"], returns: "void" },
  llama_free: { args: ["ptr"], returns: "void" },
  llama_model_get_vocab: { args: ["ptr"], returns: "ptr" },
  llama_model_n_embd: { args: ["ptr"], returns: "i32" },
  llama_model_n_ctx_train: { args: ["ptr"], returns: "i32" },
  llama_model_n_layer: { args: ["ptr"], returns: "i32" },
  llama_model_n_head: { args: ["ptr"], returns: "i32" },
  llama_model_n_head_kv: { args: ["ptr"], returns: "i32" },
  llama_model_size: { args: ["ptr"], returns: "u64" },
  llama_model_meta_val_str: { args: ["ptr", "ptr", "ptr", "u64"], returns: "i32" },
  llama_model_chat_template: { args: ["ptr", "ptr"], returns: "ptr" },
  llama_n_ctx: { args: ["ptr"], returns: "u32" },
  llama_n_ctx_seq: { args: ["ptr"], returns: "u32" },
  llama_n_batch: { args: ["ptr"], returns: "u32" },
  llama_n_ubatch: { args: ["ptr"], returns: "u32" },
  llama_n_seq_max: { args: ["ptr"], returns: "u32" },
  llama_set_n_threads: { args: ["ptr", "i32", "i32"], returns: "void" },
  llama_attach_threadpool: { args: ["ptr", "ptr", "ptr"], returns: "void" },
  llama_detach_threadpool: { args: ["ptr"], returns: "void" },
  llama_get_memory: { args: ["ptr"], returns: "ptr" },
  llama_memory_clear: { args: ["ptr", "bool"], returns: "void" },
  llama_memory_seq_rm: { args: ["ptr", "i32", "i32", "i32"], returns: "bool" },
  llama_memory_seq_cp: { args: ["ptr", "i32", "i32", "i32", "i32"], returns: "void" },
  llama_memory_seq_pos_max: { args: ["ptr", "i32"], returns: "i32" },
  llama_get_logits_ith: { args: ["ptr", "i32"], returns: "ptr" },
  llama_get_embeddings_seq: { args: ["ptr", "i32"], returns: "ptr" },
  // Embedding models (src/engine/embedder.ts): the pooling a context applies, a reranker's score count.
  llama_pooling_type: { args: ["ptr"], returns: "i32" },
  llama_model_n_cls_out: { args: ["ptr"], returns: "u32" },
  // Whether a rejected speculative draft can be cut off a model's memory (src/engine/speculation-directive.ts).
  llama_model_is_recurrent: { args: ["ptr"], returns: "bool" },
  llama_model_is_hybrid: { args: ["ptr"], returns: "bool" },
  llama_model_n_swa: { args: ["ptr"], returns: "i32" },
  llama_state_seq_get_size: { args: ["ptr", "i32"], returns: "u64" },
  llama_state_seq_get_data: { args: ["ptr", "ptr", "u64", "i32"], returns: "u64" },
  llama_state_seq_set_data: { args: ["ptr", "ptr", "u64", "i32"], returns: "u64" },
  llama_vocab_n_tokens: { args: ["ptr"], returns: "i32" },
  llama_vocab_bos: { args: ["ptr"], returns: "i32" },
  llama_vocab_eos: { args: ["ptr"], returns: "i32" },
  llama_vocab_eot: { args: ["ptr"], returns: "i32" },
  llama_vocab_is_eog: { args: ["ptr", "i32"], returns: "bool" },
  llama_vocab_get_add_bos: { args: ["ptr"], returns: "bool" },
  llama_vocab_get_attr: { args: ["ptr", "i32"], returns: "i32" },
  llama_tokenize: { args: ["ptr", "ptr", "i32", "ptr", "i32", "bool", "bool"], returns: "i32" },
  llama_token_to_piece: { args: ["ptr", "i32", "ptr", "i32", "i32", "bool"], returns: "i32" },
  llama_sampler_chain_add: { args: ["ptr", "ptr"], returns: "void" },
  llama_sampler_chain_remove: { args: ["ptr", "i32"], returns: "ptr" },
  llama_sampler_init_greedy: { args: [], returns: "ptr" },
  llama_sampler_init_dist: { args: ["u32"], returns: "ptr" },
  llama_sampler_init_top_k: { args: ["i32"], returns: "ptr" },
  llama_sampler_init_top_p: { args: ["f32", "u64"], returns: "ptr" },
  llama_sampler_init_min_p: { args: ["f32", "u64"], returns: "ptr" },
  llama_sampler_init_temp: { args: ["f32"], returns: "ptr" },
  llama_sampler_init_penalties: { args: ["i32", "i32", "f32", "f32", "f32"], returns: "ptr" },
  llama_sampler_init_logit_bias: { args: ["i32", "i32", "ptr"], returns: "ptr" },
  llama_sampler_init_grammar: { args: ["ptr", "ptr", "ptr"], returns: "ptr" },
  llama_sampler_init_grammar_lazy_patterns: { args: ["ptr", "ptr", "ptr", "ptr", "u64", "ptr", "u64"], returns: "ptr" },
  llama_sampler_sample: { args: ["ptr", "ptr", "i32"], returns: "i32" },
  llama_sampler_accept: { args: ["ptr", "i32"], returns: "void" },
  llama_sampler_apply: { args: ["ptr", "ptr"], returns: "void" },
  llama_sampler_reset: { args: ["ptr"], returns: "void" },
  llama_sampler_free: { args: ["ptr"], returns: "void" },
  // LoRA adapters (src/worker/lora.ts): loaded against the model, applied to a
  // context as one set (adapters, count, scales); this library has the
  // set-at-once call, not the older per-adapter llama_set_adapter_lora.
  llama_adapter_lora_init: { args: ["ptr", "ptr"], returns: "ptr" },
  llama_adapter_lora_free: { args: ["ptr"], returns: "void" },
  llama_set_adapters_lora: { args: ["ptr", "ptr", "u64", "ptr"], returns: "i32" },
} as const;

const shimSymbols = {
  sf_abi_probe: { args: ["ptr"], returns: "void" },
  sf_log_quiet: { args: [], returns: "void" },
  sf_model_load: { args: ["ptr", "i32", "bool"], returns: "ptr" },
  sf_model_load_offload: { args: ["ptr", "i32", "i32", "i32", "ptr", "ptr"], returns: "ptr" },
  sf_context_new: {
    args: ["ptr", "u32", "u32", "u32", "u32", "i32", "bool", "i32", "bool", "bool", "i32", "i32"],
    returns: "ptr",
  },
  sf_sampler_chain_new: { args: [], returns: "ptr" },
  sf_batch_new: { args: ["i32"], returns: "ptr" },
  sf_batch_free: { args: ["ptr"], returns: "void" },
  sf_decode: { args: ["ptr", "ptr", "i32", "ptr", "ptr", "ptr", "ptr"], returns: "i32" },
  sf_grammar_candidates: { args: ["ptr", "i32", "ptr", "ptr", "i32", "ptr", "ptr"], returns: "i32" },
  sf_grammar_allows: { args: ["ptr", "i32"], returns: "bool" },
} as const;

const ggmlSymbols = {
  ggml_backend_load_all_from_path: { args: ["ptr"], returns: "void" },
  ggml_backend_load: { args: ["ptr"], returns: "ptr" },
  // The devices llama.cpp offloads to, and their free memory (KV pool sizing).
  ggml_backend_dev_count: { args: [], returns: "u64" },
  ggml_backend_dev_get: { args: ["u64"], returns: "ptr" },
  ggml_backend_dev_type: { args: ["ptr"], returns: "i32" },
  ggml_backend_dev_memory: { args: ["ptr", "ptr", "ptr"], returns: "void" },
  // Names for `superfluid check --devices`, the startup log and /v1/models (ffi/devices.ts).
  ggml_backend_dev_name: { args: ["ptr"], returns: "cstring" },
  ggml_backend_dev_description: { args: ["ptr"], returns: "cstring" },
  // ggml's RPC backend, reached through its registry as llama.cpp's own tools do (ffi/rpc.ts).
  ggml_backend_reg_by_name: { args: ["ptr"], returns: "ptr" },
  ggml_backend_reg_get_proc_address: { args: ["ptr", "ptr"], returns: "ptr" },
  ggml_backend_register: { args: ["ptr"], returns: "void" },
} as const;

function openLlama(path: string) {
  return dlopen(path, llamaSymbols).symbols;
}
function compileShim(loc: LibraryLocation) {
  // TinyCC cannot read files embedded in a compiled binary ($bunfs), so the
  // source is always written to a real folder first (keyed by its hash).
  const source = readFileSync(shimSourcePath);
  const hash = createHash("sha256").update(source).digest("hex").slice(0, 16);
  const dir = join(cacheDir(), "shim");
  const file = join(dir, `shim-${hash}.c`);
  if (!existsSync(file)) {
    // Written aside and renamed into place: another process may compile it the moment it exists.
    mkdirSync(dir, { recursive: true });
    const partial = `${file}.${process.pid}.${threadId}.tmp`;
    writeFileSync(partial, source);
    renameSync(partial, file);
  }
  const link = linkableLibrary(loc.llama, dir);
  const libc = libcLinkDir(dir);
  return cc({
    source: file,
    library: [link.name],
    flags: [`-L${link.dir}`, ...(libc ? [`-L${libc}`] : [])],
    symbols: shimSymbols,
  }).symbols;
}

/** The C library this process runs on (glibc's libc.so.6), read from /proc/self/maps; undefined off Linux. */
export function runningLibc(maps = "/proc/self/maps"): string | undefined {
  if (process.platform !== "linux") return undefined;
  let text: string;
  try {
    text = readFileSync(maps, "utf8");
  } catch {
    return undefined;
  }
  for (const line of text.split("\n")) {
    const path = line.slice(line.indexOf("/"));
    if (line.includes("/") && /\/libc(\.so\.6|-[\d.]+\.so)$/.test(path)) return path;
  }
  return undefined;
}

/**
 * A folder whose `libc.so` is the running libc.so.6. TinyCC links every
 * program with `-lc`, which needs `libc.so`: on a development machine the
 * linker script of libc6-dev, absent from slim and distroless images, where
 * the shim would not compile and the server not start. A link to the library
 * already in the process serves the same symbols (the shim calls malloc and
 * free only). Searched before the system's folders: the same library either way.
 */
export function libcLinkDir(cache: string, libc = runningLibc()): string | undefined {
  if (!libc) return undefined;
  const dir = join(cache, `libc-${createHash("sha256").update(libc).digest("hex").slice(0, 16)}`);
  linkOnce(libc, join(dir, "libc.so"));
  return dir;
}

/**
 * TinyCC links `-lNAME` as libNAME.so (or .dylib): a library file named
 * otherwise (libllama.so.0) is linked through a symlink with that name.
 */
function linkableLibrary(path: string, cache: string): { dir: string; name: string } {
  const file = basename(path);
  const plain = /^lib(.+)\.(so|dylib)$/.exec(file);
  if (plain) return { dir: dirname(path), name: plain[1]! };
  if (process.platform === "win32") return { dir: dirname(path), name: file.replace(/\.dll$/, "") };
  const ext = process.platform === "darwin" ? "dylib" : "so";
  const dir = join(cache, `link-${createHash("sha256").update(path).digest("hex").slice(0, 16)}`);
  linkOnce(path, join(dir, `libllama.${ext}`));
  return { dir, name: "llama" };
}

/** Makes `link` a symlink to `target` unless it is there already (another process may make it at the same moment). */
export function linkOnce(target: string, link: string): void {
  if (existsSync(link)) return;
  mkdirSync(dirname(link), { recursive: true });
  try {
    symlinkSync(target, link);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  }
}

export type LlamaApi = ReturnType<typeof openLlama>;
export type LlamaShim = ReturnType<typeof compileShim>;
export type GgmlApi = ReturnType<typeof openGgml>;

function openGgml(path: string) {
  return dlopen(path, ggmlSymbols).symbols;
}

export interface Llama {
  api: LlamaApi;
  shim: LlamaShim;
  /** libggml: backend loading and the device registry. */
  ggml: GgmlApi;
  location: LibraryLocation;
  /** The known llama.cpp release it was identified as (ffi/abi.ts). */
  release: LlamaRelease;
  /**
   * The processor, and the CPU backend variant loaded for it (variant null:
   * the build has one CPU backend); undefined until the backends are loaded.
   */
  cpu?: CpuInfo;
  /**
   * GPU backends beside libllama that did not load, with the loader's reason (a CUDA build on a machine
   * without the toolkit: `libcudart.so.13: cannot open shared object file`); empty until the backends are loaded.
   */
  unloadedBackends: BackendFailure[];
}

export interface BackendFailure {
  /** The backend's file name (libggml-cuda.so). */
  file: string;
  reason: string;
  /**
   * Left unloaded on purpose (--no-gpu, or no GPU device node for Vulkan: ffi/gpu-presence.ts), not failed: the
   * startup log does not name it, `check --devices` and an unknown --device do.
   */
  skipped?: boolean;
}

/** Whether the library exports a function (one that tells releases apart; ffi/abi.ts). */
function exportsFunction(path: string, name: string): boolean {
  try {
    dlopen(path, { [name]: { args: [], returns: "void" } }).close();
    return true;
  } catch {
    return false;
  }
}

let opened: Llama | undefined;

/** C string for bun:ffi: a NUL-terminated UTF-8 buffer (keep it referenced while the call runs). */
export function cstr(text: string): Buffer {
  return Buffer.from(`${text}\0`, "utf8");
}

/**
 * Opens libllama once per process: locates it, opens its functions (a missing
 * function is refused by name), compiles the shim, checks the struct layouts,
 * silences llama.cpp's logging unless SUPERFLUID_LLAMA_LOG=1, and loads the
 * ggml backends that sit beside it. `backends: false` leaves the backends
 * for later (a later call that wants them loads them): reading a vocabulary
 * needs none, so the daemon and its prompt thread do not load and score
 * every CPU variant, which only a worker decodes on. `gpu: false` (--no-gpu)
 * leaves every GPU backend unloaded; the first call that loads the backends decides.
 */
export function loadLlama(env = process.env, opts: { backends?: boolean; gpu?: boolean } = {}): Llama {
  opened ??= openLibrary(env);
  if (opts.backends !== false && !opened.cpu)
    opened.cpu = loadBackends(opened.ggml, opened.location.dir, env, opened.unloadedBackends, opts.gpu !== false);
  return opened;
}

let located: LibraryLocation | undefined;

/**
 * Where libllama is, without opening it (the library this process opens or has opened): what the daemon's fit
 * check needs to tell a CPU-only build, before a vocabulary load opens the library and compiles the shim.
 */
export function libraryLocation(env = process.env): LibraryLocation {
  if (opened) return opened.location;
  located ??= locateLibrary(env);
  return located;
}

function openLibrary(env: NodeJS.ProcessEnv): Llama {
  const location = located ?? locateLibrary(env);
  let api: LlamaApi;
  try {
    api = openLlama(location.llama);
  } catch (err) {
    throw new LlamaAbiError(location.llama, `a function superfluid calls is missing (${(err as Error).message})`);
  }
  const shim = compileShim(location);
  const probe = new Float64Array(ABI_PROBE_SLOTS);
  shim.sf_abi_probe(probe);
  const match = identifyRelease(probe, (name) => exportsFunction(location.llama, name));
  if (!match.release) throw new LlamaAbiError(location.llama, match.detail);
  if (env.SUPERFLUID_LLAMA_LOG !== "1") shim.sf_log_quiet();
  let ggml: GgmlApi;
  try {
    ggml = openGgml(location.ggml);
  } catch (err) {
    throw new LlamaAbiError(location.ggml, `a function superfluid calls is missing (${(err as Error).message})`);
  }
  api.llama_backend_init();
  return { api, shim, ggml, location, release: match.release, unloadedBackends: [] };
}

/**
 * Whether the library folder holds only CPU backends (ggml's CPU variants
 * and nothing else that would load here: a Vulkan backend on a machine with
 * no GPU device node is not loaded, ffi/gpu-presence.ts): then no device but
 * the host takes layers, and the host's memory is the budget without loading
 * any backend to ask.
 */
export function cpuOnlyLibrary(dir: string, env = process.env): boolean {
  return (
    cpuVariantFiles(dir).length > 0 &&
    otherBackendFiles(dir).every((f) => gpuBackendSkip({ name: backendName(f), env, gpu: true }) !== undefined) &&
    !env.GGML_BACKEND_PATH
  );
}

/**
 * Loads the ggml backends beside libllama: the CPU variant chosen in
 * ffi/cpu-variant.ts and every other backend file, which is what
 * ggml_backend_load_all_from_path does with its own choice; a build without
 * CPU variants is left to ggml's loader.
 */
function loadBackends(
  ggml: GgmlApi,
  dir: string,
  env: NodeJS.ProcessEnv,
  failures: BackendFailure[],
  gpu: boolean,
): CpuInfo {
  const variant = chooseCpuVariant(dir, env.SUPERFLUID_CPU_VARIANT, join(cacheDir(env), "cpu-variant"));
  if (!variant) {
    ggml.ggml_backend_load_all_from_path(cstr(dir));
    return { model: cpuModel(), variant: null, library: null, pinned: false };
  }
  // In ggml's order, the CPU last (llama.cpp numbers devices in it). A backend that does
  // not load (no device for it here) is skipped, as ggml's own loader does.
  // A GPU backend that could register no device here (ffi/gpu-presence.ts) is not loaded at all.
  for (const other of otherBackendFiles(dir)) {
    const skip = gpuBackendSkip({ name: backendName(other), env, gpu });
    if (skip) failures.push({ file: basename(other), reason: skip, skipped: true });
    else if (!ggml.ggml_backend_load(cstr(other))) failures.push({ file: basename(other), reason: loadFailure(other) });
  }
  if (env.GGML_BACKEND_PATH) ggml.ggml_backend_load(cstr(env.GGML_BACKEND_PATH));
  if (!ggml.ggml_backend_load(cstr(variant.path))) {
    variant.close();
    throw new Error(`ggml could not load its CPU backend ${variant.path}`);
  }
  return { model: cpuModel(), variant: variant.name, library: variant.path, pinned: variant.pinned };
}

/**
 * Why a backend file does not load: ggml's loader only logs it (and llama.cpp's log is silenced), so the
 * file is opened once more here for the dynamic loader's own message (the library it lacks, a bad file).
 */
function loadFailure(path: string): string {
  try {
    // Every loadable ggml backend exports ggml_backend_init (what ggml_backend_load calls).
    dlopen(path, { ggml_backend_init: { args: [], returns: "ptr" } }).close();
    return "it loaded, but registered no backend (no device of its kind here)";
  } catch (err) {
    return (err as Error).message.replace(/^Failed to open library "[^"]*":\s*/, "");
  }
}

export type { Pointer };

/** bun:ffi types a "ptr" return as Pointer | bigint | null; libllama returns real pointers or NULL. */
export type NativeHandle = Pointer | bigint | null;

/** The pointer, or an error naming what libllama failed to give. */
export function handle(p: NativeHandle, what: string): Pointer {
  if (p === null || typeof p === "bigint" || p === 0) throw new Error(`libllama returned no ${what}`);
  return p;
}
