// The C API contract superfluid was written against, checked when the library
// is opened: a library built from another llama.cpp whose functions or struct
// layouts differ is refused by name instead of crashing later.
//
// Each llama.cpp release a platform package ships is listed with what shows it:
// the default parameter values read through the shim's struct layouts (a field
// that moved reads a wrong value) and the functions that tell it apart from the
// other known releases. Every release also has to have every function
// ffi/llama.ts opens (dlopen refuses a missing one by name).

/** One default value read through the shim's layouts (slot = index written by sf_abi_probe in shim.c). */
interface ProbeValue {
  slot: number;
  field: string;
  value: number;
}

export interface LlamaRelease {
  /** llama.cpp's release tag, as node-llama-cpp's build metadata records it. */
  tag: string;
  /** The @node-llama-cpp/<platform> version that ships it. */
  nodeLlamaCpp: string;
  /** What its default parameters read as through the shim's layouts. */
  defaults: readonly ProbeValue[];
  /** Functions it exports that the other known releases do not, and ones they export that it lacks. */
  functions: { readonly present: readonly string[]; readonly absent: readonly string[] };
}

// llama.cpp v0.4.0's llama.h, the layouts shim.c spells out.
const V040_DEFAULTS: readonly ProbeValue[] = [
  { slot: 0, field: "llama_model_params.n_gpu_layers", value: -1 },
  { slot: 1, field: "llama_model_params.split_mode", value: 1 },
  { slot: 2, field: "llama_model_params.main_gpu", value: 0 },
  { slot: 3, field: "llama_model_params.tensor_split", value: 1 },
  { slot: 4, field: "llama_model_params.kv_overrides", value: 1 },
  { slot: 5, field: "llama_model_params.vocab_only", value: 0 },
  { slot: 6, field: "llama_model_params.use_extra_bufts", value: 1 },
  { slot: 7, field: "llama_model_params.load_mtp", value: 0 },
  { slot: 8, field: "llama_context_params.n_ctx", value: 512 },
  { slot: 9, field: "llama_context_params.n_batch", value: 2048 },
  { slot: 10, field: "llama_context_params.n_ubatch", value: 512 },
  { slot: 11, field: "llama_context_params.n_seq_max", value: 1 },
  { slot: 12, field: "llama_context_params.n_outputs_max_per_seq", value: 1 },
  { slot: 13, field: "llama_context_params.yarn_ext_factor", value: -1 },
  { slot: 14, field: "llama_context_params.defrag_thold", value: -1 },
  { slot: 15, field: "llama_context_params.type_k", value: 1 },
  { slot: 16, field: "llama_context_params.type_v", value: 1 },
  { slot: 17, field: "llama_context_params.cb_eval", value: 1 },
  { slot: 18, field: "llama_context_params.embeddings", value: 0 },
  { slot: 19, field: "llama_context_params.offload_kqv", value: 1 },
  { slot: 20, field: "llama_context_params.no_perf", value: 1 },
  { slot: 21, field: "llama_context_params.op_offload", value: 1 },
  { slot: 22, field: "llama_context_params.swa_full", value: 1 },
  { slot: 23, field: "llama_context_params.kv_unified", value: 0 },
  { slot: 24, field: "llama_context_params.n_samplers", value: 0 },
  { slot: 25, field: "llama_context_params.ctx_other", value: 1 },
  { slot: 26, field: "llama_context_params.flash_attn_type", value: -1 },
];

/**
 * The releases the binding knows, oldest first. v0.5.0 (node-llama-cpp 3.22.1,
 * the Linux packages) kept v0.4.0's struct layouts: its default-parameter and
 * batch functions compile to the same stores, and it reads the same defaults;
 * it added llama_adapter_lora_init_from_file_ptr.
 */
export const KNOWN_LLAMA_RELEASES: readonly LlamaRelease[] = [
  {
    tag: "v0.4.0",
    nodeLlamaCpp: "3.21.1",
    defaults: V040_DEFAULTS,
    functions: { present: [], absent: ["llama_adapter_lora_init_from_file_ptr"] },
  },
  {
    tag: "v0.5.0",
    nodeLlamaCpp: "3.22.1",
    defaults: V040_DEFAULTS,
    functions: { present: ["llama_adapter_lora_init_from_file_ptr"], absent: [] },
  },
];

/** How a release is named in messages and in /v1/models' runtime. */
export function releaseLabel(r: LlamaRelease): string {
  return `${r.tag} (node-llama-cpp ${r.nodeLlamaCpp})`;
}

/** The releases whose C API the binding checks for, as one phrase. */
export const TESTED_LLAMA_RELEASE = KNOWN_LLAMA_RELEASES.map(releaseLabel).join(" or ");

export const ABI_PROBE_SLOTS = 32;

/** The fields whose defaults disagree with a release's (empty when the layouts match). */
export function abiMismatches(probe: Float64Array, release: LlamaRelease = KNOWN_LLAMA_RELEASES[0]!): string[] {
  return release.defaults
    .filter((e) => probe[e.slot] !== e.value)
    .map((e) => `${e.field} (expected ${e.value}, read ${probe[e.slot]})`);
}

export type ReleaseMatch = { release: LlamaRelease } | { release: null; detail: string };

/**
 * The known release a library is, from its probe and which functions it
 * exports; when none matches, why, against the release it came closest to
 * (its functions first, then the fewest layout mismatches).
 */
export function identifyRelease(probe: Float64Array, exports: (name: string) => boolean): ReleaseMatch {
  let closest: { release: LlamaRelease; functions: string[]; layout: string[] } | undefined;
  for (const release of KNOWN_LLAMA_RELEASES) {
    const functions = [
      ...release.functions.present.filter((f) => !exports(f)).map((f) => `${f} is missing`),
      ...release.functions.absent.filter((f) => exports(f)).map((f) => `${f} is exported`),
    ];
    const layout = abiMismatches(probe, release);
    if (functions.length === 0 && layout.length === 0) return { release };
    const worse = (a: typeof closest & {}) =>
      a.functions.length !== functions.length ? a.functions.length > functions.length : a.layout.length > layout.length;
    if (!closest || worse(closest)) closest = { release, functions, layout };
  }
  const c = closest!;
  const parts = [
    ...(c.layout.length > 0 ? [`struct layout differs at ${c.layout.join(", ")}`] : []),
    ...(c.functions.length > 0 ? [`functions differ: ${c.functions.join(", ")}`] : []),
  ];
  return { release: null, detail: `closest known release ${releaseLabel(c.release)}: ${parts.join("; ")}` };
}

export class LlamaAbiError extends Error {
  constructor(library: string, detail: string) {
    super(
      `libllama at ${library} does not match the C API superfluid was built for (llama.cpp ${TESTED_LLAMA_RELEASE}): ${detail}`,
    );
    this.name = "LlamaAbiError";
  }
}
