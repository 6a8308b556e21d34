// The by-value bridge to libllama.
//
// bun:ffi cannot pass or return C structs by value, and a handful of libllama
// calls do exactly that (model/context/sampler-chain params, llama_batch).
// This file is compiled at run time by Bun's built-in TinyCC (bun:ffi `cc`) and
// linked against the libllama we located, so it needs no headers: the struct
// layouts below are written from llama.h of the pinned llama.cpp release
// (node-llama-cpp 3.21.1, llama.cpp release v0.4.0). ffi/abi.ts checks at load,
// through sf_abi_probe, that the library really has these layouts, and refuses
// it by name when it does not.
//
// It includes no header. Bun's `cc` rewrites TinyCC's own headers (stddef.h,
// stdbool.h, ...) in one shared temporary folder on every compile, so a
// compile in another process at the same moment (the daemon's prompt thread
// beside a starting worker) could read them half-written and fail on the C
// library's headers that include them. What the shim needs is declared here.
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned int uint32_t;
typedef __SIZE_TYPE__ size_t;
#define bool _Bool
#define true 1
#define false 0
#define NULL ((void *)0)
void *malloc(size_t size);
void free(void *ptr);
void abort(void);

typedef int32_t llama_token;
typedef int32_t llama_pos;
typedef int32_t llama_seq_id;

struct llama_model;
struct llama_context;
struct llama_sampler;

struct llama_model_params {
    void *devices;
    const void *tensor_buft_overrides;
    int32_t n_gpu_layers;
    int32_t split_mode;
    int32_t load_mode;
    int32_t lazy_mode;
    int32_t main_gpu;
    const float *tensor_split;
    void *progress_callback;
    void *progress_callback_user_data;
    const void *kv_overrides;
    bool vocab_only;
    bool check_tensors;
    bool use_extra_bufts;
    bool no_host;
    bool no_alloc;
    bool load_mtp;
};

struct llama_context_params {
    uint32_t n_ctx;
    uint32_t n_batch;
    uint32_t n_ubatch;
    uint32_t n_seq_max;
    uint32_t n_rs_seq;
    uint32_t n_outputs_max;
    uint32_t n_outputs_max_per_seq;
    int32_t n_threads;
    int32_t n_threads_batch;
    int32_t ctx_type;
    int32_t rope_scaling_type;
    int32_t pooling_type;
    int32_t attention_type;
    int32_t flash_attn_type;
    float rope_freq_base;
    float rope_freq_scale;
    float yarn_ext_factor;
    float yarn_attn_factor;
    float yarn_beta_fast;
    float yarn_beta_slow;
    uint32_t yarn_orig_ctx;
    float defrag_thold;
    void *cb_eval;
    void *cb_eval_user_data;
    int32_t type_k;
    int32_t type_v;
    void *abort_callback;
    void *abort_callback_data;
    bool embeddings;
    bool offload_kqv;
    bool no_perf;
    bool op_offload;
    bool swa_full;
    bool kv_unified;
    void *samplers;
    size_t n_samplers;
    struct llama_context *ctx_other;
};

struct llama_sampler_chain_params {
    bool no_perf;
};

typedef struct llama_batch {
    int32_t n_tokens;
    llama_token *token;
    float *embd;
    llama_pos *pos;
    int32_t *n_seq_id;
    llama_seq_id **seq_id;
    int8_t *logits;
} llama_batch;

struct llama_model_params llama_model_default_params(void);
struct llama_context_params llama_context_default_params(void);
struct llama_sampler_chain_params llama_sampler_chain_default_params(void);
struct llama_model *llama_model_load_from_file(const char *path, struct llama_model_params params);
struct llama_context *llama_init_from_model(struct llama_model *model, struct llama_context_params params);
struct llama_sampler *llama_sampler_chain_init(struct llama_sampler_chain_params params);
llama_batch llama_batch_init(int32_t n_tokens, int32_t embd, int32_t n_seq_max);
void llama_batch_free(llama_batch batch);
int32_t llama_decode(struct llama_context *ctx, llama_batch batch);
float *llama_get_logits_ith(struct llama_context *ctx, int32_t i);

typedef struct llama_token_data {
    llama_token id;
    float logit;
    float p;
} llama_token_data;

typedef struct llama_token_data_array {
    llama_token_data *data;
    size_t size;
    int64_t selected;
    bool sorted;
} llama_token_data_array;

void llama_sampler_apply(struct llama_sampler *smpl, llama_token_data_array *cur_p);
void llama_sampler_accept(struct llama_sampler *smpl, llama_token token);
void llama_log_set(void (*callback)(int level, const char *text, void *user_data), void *user_data);

// Writes the library's default parameter values, read through our layouts, into
// `out` (32 doubles). ffi/abi.ts compares them with the values this release is
// known to return: a field that moved shows up as a wrong value.
void sf_abi_probe(double *out) {
    struct llama_model_params m = llama_model_default_params();
    struct llama_context_params c = llama_context_default_params();
    out[0] = m.n_gpu_layers;
    out[1] = m.split_mode;
    out[2] = m.main_gpu;
    out[3] = m.tensor_split == NULL;
    out[4] = m.kv_overrides == NULL;
    out[5] = m.vocab_only;
    out[6] = m.use_extra_bufts;
    out[7] = m.load_mtp;
    out[8] = c.n_ctx;
    out[9] = c.n_batch;
    out[10] = c.n_ubatch;
    out[11] = c.n_seq_max;
    out[12] = c.n_outputs_max_per_seq;
    out[13] = c.yarn_ext_factor;
    out[14] = c.defrag_thold;
    out[15] = c.type_k;
    out[16] = c.type_v;
    out[17] = c.cb_eval == NULL;
    out[18] = c.embeddings;
    out[19] = c.offload_kqv;
    out[20] = c.no_perf;
    out[21] = c.op_offload;
    out[22] = c.swa_full;
    out[23] = c.kv_unified;
    out[24] = (double)c.n_samplers;
    out[25] = c.ctx_other == NULL;
    out[26] = c.flash_attn_type;
}

static void sf_log_discard(int level, const char *text, void *user_data) {
    (void)level; (void)text; (void)user_data;
}

void sf_log_quiet(void) {
    llama_log_set(sf_log_discard, NULL);
}

struct llama_model *sf_model_load(const char *path, int32_t n_gpu_layers, bool vocab_only) {
    struct llama_model_params p = llama_model_default_params();
    p.n_gpu_layers = n_gpu_layers;
    p.vocab_only = vocab_only;
    return llama_model_load_from_file(path, p);
}

// Weights with the offload the fit check planned (src/engine/offload.ts):
// `devices` is a NULL-terminated array of ggml devices (NULL: every device
// llama.cpp registered), `tensor_split` one share per device (NULL: by free
// memory), `split_mode` llama_split_mode (0 none, 1 layer, 2 row).
struct llama_model *sf_model_load_offload(const char *path, int32_t n_gpu_layers, int32_t split_mode,
                                          int32_t main_gpu, const float *tensor_split, void *devices) {
    struct llama_model_params p = llama_model_default_params();
    p.n_gpu_layers = n_gpu_layers;
    p.split_mode = split_mode;
    p.main_gpu = main_gpu;
    p.tensor_split = tensor_split;
    p.devices = devices;
    return llama_model_load_from_file(path, p);
}

// n_seq_max sequences, each with its own KV buffer (kv_unified = false) unless
// `unified` is asked for: see docs/design.md#kv-layout (one buffer per sequence).
// type_k / type_v: the KV cache's ggml types (f16 = 1; a quantized V needs
// flash attention, which stays on llama.cpp's automatic choice).
struct llama_context *sf_context_new(struct llama_model *model, uint32_t n_ctx, uint32_t n_batch,
                                     uint32_t n_ubatch, uint32_t n_seq_max, int32_t n_threads,
                                     bool embeddings, int32_t pooling_type, bool unified, bool offload_kqv,
                                     int32_t type_k, int32_t type_v) {
    struct llama_context_params p = llama_context_default_params();
    p.n_ctx = n_ctx;
    p.n_batch = n_batch;
    p.n_ubatch = n_ubatch;
    p.n_seq_max = n_seq_max;
    p.n_threads = n_threads;
    p.n_threads_batch = n_threads;
    p.embeddings = embeddings;
    p.pooling_type = pooling_type;
    p.kv_unified = unified;
    p.offload_kqv = offload_kqv;
    p.type_k = type_k;
    p.type_v = type_v;
    p.no_perf = true;
    return llama_init_from_model(model, p);
}

struct llama_sampler *sf_sampler_chain_new(void) {
    struct llama_sampler_chain_params p = llama_sampler_chain_default_params();
    p.no_perf = true;
    return llama_sampler_chain_init(p);
}

// A batch lives on the heap so JavaScript holds one pointer to it.
llama_batch *sf_batch_new(int32_t capacity) {
    llama_batch *b = malloc(sizeof(llama_batch));
    if (!b) return NULL;
    *b = llama_batch_init(capacity, 0, 1);
    return b;
}

void sf_batch_free(llama_batch *b) {
    if (!b) return;
    llama_batch_free(*b);
    free(b);
}

// Fills the batch from flat arrays (one sequence id per token) and decodes it.
// Returns llama_decode's status.
int32_t sf_decode(struct llama_context *ctx, llama_batch *b, int32_t n, const llama_token *tokens,
                  const llama_pos *pos, const llama_seq_id *seq, const int8_t *logits) {
    for (int32_t i = 0; i < n; i++) {
        b->token[i] = tokens[i];
        b->pos[i] = pos[i];
        b->n_seq_id[i] = 1;
        b->seq_id[i][0] = seq[i];
        b->logits[i] = logits[i];
    }
    b->n_tokens = n;
    return llama_decode(ctx, *b);
}


// The grammar sampler bans a token by setting its logit to -INFINITY.
#define SF_BANNED(logit) ((logit) < -1e30f)

// Whether the grammar accepts `token` next: the grammar sampler applied to a
// one-candidate array (cheap, whatever the vocabulary size).
bool sf_grammar_allows(struct llama_sampler *grammar, llama_token token) {
    llama_token_data single = { token, 1.0f, 0.0f };
    llama_token_data_array one = { &single, 1, -1, false };
    llama_sampler_apply(grammar, &one);
    return !SF_BANNED(single.logit);
}

// The grammar's slow path: the tokens the grammar allows next, compacted to
// the front of `scratch` (id and logit of each, in id order); the caller
// draws among them (src/engine/sampling.ts). Returns how many; 0 when the
// grammar allows nothing, -1 when there are no logits.
//
// Most of the vocabulary is ruled out before the grammar sees it. Whatever the
// grammar allows next is a viable prefix, and so is every prefix of it: a
// token can only be allowed if its first byte is, and a token starting with a
// space only if the space plus its second byte is. So the grammar is first
// asked about one probe token per ASCII byte b (`probe_token[b]`: a token that
// is exactly b) and per " b" (`probe_token[128 + b]`), -1 where the vocabulary
// has none; tokens whose key (`prefix_key[t]`: b, or 128 + b after a space;
// -1 for tokens always checked: special, empty, non-ASCII) was refused are
// left out. Exact: nothing the grammar would allow is dropped.
int32_t sf_grammar_candidates(struct llama_context *ctx, int32_t i, struct llama_sampler *grammar,
                              llama_token_data *scratch, int32_t n_vocab, const int16_t *prefix_key,
                              const int32_t *probe_token) {
    const float *logits = llama_get_logits_ith(ctx, i);
    if (!logits) return -1;
    llama_token_data probe[256];
    int32_t probe_key[256];
    size_t n_probe = 0;
    for (int32_t key = 0; key < 256; key++) {
        if (probe_token[key] < 0) continue;
        probe[n_probe].id = probe_token[key];
        probe[n_probe].logit = 1.0f;
        probe[n_probe].p = 0.0f;
        probe_key[n_probe++] = key;
    }
    bool key_allowed[256];
    for (int32_t key = 0; key < 256; key++) key_allowed[key] = true;
    llama_token_data_array probes = { probe, n_probe, -1, false };
    llama_sampler_apply(grammar, &probes);
    for (size_t k = 0; k < n_probe; k++) key_allowed[probe_key[k]] = !SF_BANNED(probe[k].logit);
    size_t n = 0;
    for (int32_t t = 0; t < n_vocab; t++) {
        int16_t key = prefix_key[t];
        if (key >= 0 && !key_allowed[key]) continue;
        scratch[n].id = t;
        scratch[n].logit = logits[t];
        scratch[n].p = 0.0f;
        n++;
    }
    llama_token_data_array all = { scratch, n, -1, false };
    llama_sampler_apply(grammar, &all);
    int32_t kept = 0;
    for (size_t k = 0; k < all.size; k++) {
        if (SF_BANNED(all.data[k].logit)) continue;
        scratch[kept++] = all.data[k];
    }
    return kept;
}
