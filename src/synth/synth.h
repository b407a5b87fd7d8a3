/* Synthetic models (qwen3moe; other architectures through synth_arch.h's
 * writers, chosen by synth_params.arch): GGUF files of any shape that llama.cpp and moex
 * load, with random but well-scaled weights and a router built so that expert
 * popularity follows a Zipf law per layer and consecutive tokens share
 * experts the way trained MoE routers do (docs/synth.md says how). Files are
 * streamed to disk (a 17 GB model needs little memory) and are the same bytes
 * for the same parameters, whatever the thread count. */
#ifndef MOEX_SYNTH_H
#define MOEX_SYNTH_H

#include "moex_tools.h"

#include <stdbool.h>
#include <stdint.h>

enum synth_type {
    SYNTH_F16 = 0,
    SYNTH_Q8_0,
    SYNTH_Q4_K,
    SYNTH_Q6_K,
    SYNTH_Q4_K_M,   /* llama.cpp's Q4_K_M mix of Q4_K, Q5_K, Q6_K and Q8_0 */
    SYNTH_TYPE_COUNT,
};

struct synth_params {
    const char *arch;         /* general.architecture; NULL = "qwen3moe" */
    int n_layers, n_embd;
    int n_head, n_head_kv, head_dim;
    int n_expert, n_expert_used, n_ff_exp;
    int n_ff;                 /* dense FFN width of the leading dense layers (lfm2moe) */
    int n_dense;              /* leading layers with a dense FFN instead of experts (lfm2moe) */
    uint64_t attention_layers;/* hybrids (lfm2moe): bit l set = layer l is attention, the others
                                 short convolutions; bits at or past n_layers are ignored */
    int n_vocab;              /* 0: the vocabulary's own size; else cut or padded to this */
    int n_ctx;                /* context_length written to the file */
    float rope_base, rms_eps;
    /* qwen35moe: gated delta-net layers except every attn_interval-th; the
     * first n_rot dims of a head rotate; a shared expert of n_ff_shexp. */
    int attn_interval, n_rot;
    int ssm_conv, ssm_state, ssm_k_heads, ssm_v_heads;
    int n_ff_shexp;
    enum synth_type type;
    double skew;              /* Zipf exponent of per-layer expert popularity; 0 = uniform */
    double locality;          /* 0..1: share of the router's variation that moves slowly
                                 along the sequence (0 = each token routes independently) */
    uint64_t seed;
    const char *vocab_from;   /* GGUF whose tokenizer.* keys are copied; NULL = built-in */
    const char *name;         /* general.name; NULL = "moex-synth" */
    int n_threads;            /* 0 = one per core */
    /* Progress of the tensor data written: done of total bytes; NULL: none. */
    void (*progress)(void *user, const char *label, uint64_t done, uint64_t total);
    void *progress_user;
};

#define SYNTH_DEFAULT_SKEW MOEX_SYNTH_DEFAULT_SKEW
#define SYNTH_DEFAULT_LOCALITY MOEX_SYNTH_DEFAULT_LOCALITY

/* Fills p with a preset ("tiny", "small", "q30b", "q30b-l8", or one of
 * another architecture's) and the defaults of everything else, p->arch
 * included. -1 with moex_error() for an unknown name. */
int synth_preset(const char *name, struct synth_params *p);
/* Writes "qwen3moe, ..." (the architectures synth writes) into out. */
void synth_arch_names(char *out, int size);
/* "tiny, small, ...": every preset of every architecture. */
void synth_preset_names(char *out, int size);
/* One line per preset (name and what it is), for --help. */
const char *synth_presets_help(void);
/* The preset --arch ARCH starts from, or NULL for an unknown architecture. */
const char *synth_arch_default_preset(const char *arch);
/* "f16", "q8_0", "q4_k", "q6_k", "q4_k_m"; -1 if unknown. */
int synth_parse_type(const char *s, enum synth_type *t);
const char *synth_type_name(enum synth_type t);
/* llama.cpp's general.file_type for t. */
uint32_t synth_file_type(enum synth_type t);

/* The ggml type a tensor gets: name is the GGUF tensor name ("blk.3.attn_v.weight"),
 * ne0 its row length. Norms and the router are F32. f16, q8_0 and q6_k give
 * the types llama-quantize gives for that file type (Q6_K keeps attn_k/attn_v
 * of 8-expert models in Q8_0), q4_k_m follows llama.cpp's Q4_K_M mix, q4_k is
 * Q4_K throughout (for kernel tests; no llama.cpp file type is exactly that).
 * Rows whose length the chosen type cannot tile fall back as llama-quantize's
 * do: Q4_K to Q5_0, Q5_K to Q5_1, others to Q8_0, then F16. */
uint32_t synth_tensor_type(const struct synth_params *p, const char *name, int64_t ne0);

/* Checks the shape (positive sizes, head_dim even, top-k <= experts, ...).
 * 0, or -1 with moex_error(). */
int synth_check(const struct synth_params *p);

/* Writes the model to path. 0, or -1 with moex_error(); a partly written
 * file is removed. */
int synth_write(const struct synth_params *p, const char *path);

#endif
