/* A loaded model: its architecture (a row of src/arch/arch_table.c), the
 * generic hyper-parameters, what each layer keeps between batches, the
 * weights its architecture bound in place from the mapped GGUF file, and the
 * MoE layers as the expert executor sees them. model/context.h evaluates it;
 * model/model_load.h has the binding helpers architectures use. */
#ifndef MOEX_MODEL_H
#define MOEX_MODEL_H

#include "moe/moe_layers.h"
#include "quant/matmul.h"

#include <stdbool.h>
#include <stdint.h>

struct arch;
struct gguf_file;
struct tokenizer;

/* What a layer mixes its tokens with, and so what state it keeps. */
enum layer_kind {
    LAYER_ATTENTION = 0,   /* KV cache */
    LAYER_SHORTCONV,       /* convolution state of the last L-1 inputs */
    LAYER_DELTANET,        /* convolution state + per-head recurrent state */
    LAYER_KINDS,
};
const char *layer_kind_name(enum layer_kind k);

/* A layer's state between batches, as its architecture declares it. */
struct layer_state {
    enum layer_kind kind;
    int64_t kv_k, kv_v;          /* KV cache elements per position: keys, values (0: no cache) */
    int64_t conv_floats;         /* convolution state */
    int64_t recurrent_floats;    /* recurrent state (delta net: per head its state and its current chunk) */
};

/* Hyper-parameters every architecture has; an architecture keeps its own
 * extra ones with its weights. Products of them fit in int (checked). */
struct model_hparams {
    int n_layers;        /* layers evaluated */
    int n_embd;          /* model dimension */
    int n_head, n_head_kv, head_dim, value_dim;   /* attention (key_length, value_length) */
    int n_expert, n_expert_used, n_ff_exp;         /* MoE layers */
    int n_ff;            /* dense FFN layers; 0 when there are none */
    int n_vocab;
    int n_ctx_train;
    float rope_base;
    float rms_eps;
};

struct model {
    const struct arch *arch;
    struct gguf_file *file;
    struct model_hparams hp;
    struct layer_state *state;         /* (n_layers) */
    struct matrix token_embd;          /* (n_vocab, n_embd) */
    const float *output_norm;          /* (n_embd) */
    struct matrix output;              /* (n_vocab, n_embd); the embedding when tied */
    void *weights;                     /* the architecture's per-layer weights (its own struct; freed with free) */
    struct moe_layer_desc *moe_layers; /* (moe.n_layers) */
    struct moe_model_desc moe;         /* the MoE layers and dense matmuls, for the executor */
    struct dense_desc *dense;          /* (n_dense) the dense matmuls described (moe.dense) */
    int n_dense, cap_dense;
    struct matrix **matrices;          /* (n_matrices) every 2-D weight bound (the embedding too):
                                          scratch sizing, CPU-layout copies; expert stacks: moe_layers */
    int n_matrices, cap_matrices;
    struct tokenizer *tok;             /* NULL when the file has no tokenizer */
    uint64_t n_params, weight_bytes;
    char *name;                        /* general.name or the file name */
    struct model_copies *copies;       /* weights repacked for this CPU (model_interleave) */
    bool plain_rows;                   /* no interleaved copies: the file's rows only (set before
                                          the first context; moex_model_params.no_interleave) */
};

/* Loads and validates path. NULL with moex_error() naming the file and, for
 * a bad tensor or key, the tensor or key. */
struct model *model_load(const char *path);
/* Only the tokenizer (and the name): no architecture, no weights, so a
 * GGUF without tensors loads. NULL with moex_error() when it has no tokenizer. */
struct model *model_load_vocab(const char *path);
void model_free(struct model *m);

/* Gives the Q4_K and Q6_K matrices (dense ones, expert stacks, lm head) a
 * copy in the CPU's interleaved layout (struct matrix r16) where this
 * machine has a kernel for it (quant traits' gemm_r16), once per model:
 * mapped from the pack file at pack_path (may be NULL) for the matrices it
 * holds in this machine's variant, verified; the others repacked, the
 * copies replacing the mapped pages in memory. A pack file that does not
 * fit is not used (the report says why). Nothing when m->plain_rows.
 * -1 (moex_error) when out of memory. */
struct threadpool;
struct packfile_shared;
int model_interleave(struct model *m, struct threadpool *pool, const struct packfile_shared *pack);
void model_interleave_free(struct model *m);
/* Bytes of the interleaved copies made so far. */
uint64_t model_interleaved_bytes(const struct model *m);

struct model_interleave_report {
    char path[1024];       /* the pack file asked for; "" when none */
    int targets;           /* matrices in the interleaved layout */
    int mapped, repacked;  /* of them: mapped from the pack file, repacked at load */
    uint64_t mapped_bytes;
    int missing;           /* not in the pack file (or there of another shape) */
    int other_variant;     /* there in another layout variant (file_variant) than this machine's */
    uint32_t file_variant;
    bool refused;          /* the file was not used: message says why */
    char message[768];
};
/* NULL before model_interleave (or with m->plain_rows). */
const struct model_interleave_report *model_interleave_report(const struct model *m);

/* Whether any layer keeps recurrent (non-KV) state. */
bool model_is_recurrent(const struct model *m);

#include "model/context.h"

#endif
