// The C API contract superfluid was written against, checked when the library
// is opened: a library built from another llama.cpp whose functions or struct
// layouts differ is refused by name instead of crashing later.

/** Release of llama.cpp whose llama.h the shim's layouts follow. */
export const TESTED_LLAMA_RELEASE = "v0.4.0 (node-llama-cpp 3.21.1)";

/**
 * Default parameter values as read through the shim's struct layouts
 * (index = slot written by sf_abi_probe in shim.c).
 */
const EXPECTED_DEFAULTS: { slot: number; field: string; value: number }[] = [
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

export const ABI_PROBE_SLOTS = 32;

/** Returns the fields whose defaults disagree with the tested release (empty when the layouts match). */
export function abiMismatches(probe: Float64Array): string[] {
  return EXPECTED_DEFAULTS.filter((e) => probe[e.slot] !== e.value).map(
    (e) => `${e.field} (expected ${e.value}, read ${probe[e.slot]})`,
  );
}

export class LlamaAbiError extends Error {
  constructor(library: string, detail: string) {
    super(
      `libllama at ${library} does not match the C API superfluid was built for (llama.cpp ${TESTED_LLAMA_RELEASE}): ${detail}`,
    );
    this.name = "LlamaAbiError";
  }
}
