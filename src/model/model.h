/* A loaded qwen3moe model: hyper-parameters and weights bound in place from
 * the mapped GGUF file, plus the evaluation context (KV cache, scratch). */
#ifndef MOEX_MODEL_H
#define MOEX_MODEL_H

#include "model/matmul.h"

#include <stdbool.h>
#include <stdint.h>

struct gguf_file;
struct threadpool;
struct tokenizer;
struct moe_executor;

struct model_hparams {
    int n_layers;
    int n_embd;          /* model dimension */
    int n_head, n_head_kv, head_dim;
    int n_expert, n_expert_used, n_ff_exp;
    int n_vocab;
    int n_ctx_train;
    float rope_base;
    float rms_eps;
};

struct layer_weights {
    const float *attn_norm;            /* (n_embd) */
    struct matrix wq;                  /* (n_head*head_dim, n_embd) */
    struct matrix wk, wv;              /* (n_head_kv*head_dim, n_embd) */
    struct matrix wo;                  /* (n_embd, n_head*head_dim) */
    const float *q_norm, *k_norm;      /* (head_dim) */
    const float *ffn_norm;             /* (n_embd) */
    struct matrix gate_inp;            /* router: (n_expert, n_embd) */
    struct matrix gate_exps, up_exps;  /* per expert (n_ff_exp, n_embd): expert e's rows start at e*rows */
    struct matrix down_exps;           /* per expert (n_embd, n_ff_exp) */
};

struct model {
    struct gguf_file *file;
    struct model_hparams hp;
    struct matrix token_embd;          /* (n_vocab, n_embd) */
    const float *output_norm;          /* (n_embd) */
    struct matrix output;              /* (n_vocab, n_embd); the embedding when tied */
    struct layer_weights *layers;      /* (n_layers) */
    struct tokenizer *tok;             /* NULL when the file has no tokenizer */
    uint64_t n_params, weight_bytes;
    char *name;                        /* general.name or the file name */
    struct model_copies *copies;       /* weights repacked for this CPU (model_interleave) */
};

/* Loads and validates path. NULL with moex_error() naming the file and, for
 * a bad tensor, the tensor. */
struct model *model_load(const char *path);
void model_free(struct model *m);
/* Gives the Q4_K matrices a copy in the CPU's interleaved layout (struct
 * matrix r16) where this machine has a kernel for it (quant traits'
 * gemm_r16), once per model; the copies replace the mapped pages in memory.
 * MOEX_INTERLEAVE=0 turns it off. -1 (moex_error) when out of memory. */
int model_interleave(struct model *m, struct threadpool *pool);
void model_interleave_free(struct model *m);
/* One expert's slice of an expert stack (rows of expert e only). */
struct matrix expert_matrix(const struct matrix *stack, int rows_per_expert, int e);

/* Called after each layer's routing with the batch's top-k choices. */
typedef void (*route_observer_fn)(void *user, int layer, int n_tokens, int top_k,
                                  const int32_t *expert_ids /* (n_tokens, top_k) */,
                                  const float *weights /* (n_tokens, top_k) */);

enum kv_type { KV_F16 = 0, KV_F32 = 1 };

struct moe_exec_options;
struct moe_executor;

struct context_params {
    int n_ctx;            /* KV cache length; 0 = min(4096, trained) */
    int n_batch;          /* most tokens per eval call; 0 = 512 */
    enum kv_type kv_type;
    struct threadpool *pool;
    const struct moe_exec_options *experts; /* where experts run; NULL: the CPU */
};

struct context;

struct context *context_new(struct model *m, const struct context_params *p);
void context_free(struct context *c);
/* Evaluates n tokens at positions n_past.. as one batch and advances n_past.
 * logits: (n, n_vocab) when all_logits, else (n_vocab) for the last token;
 * may be NULL. Batches longer than n_batch are split. -1 on error. */
int context_eval(struct context *c, const int32_t *tokens, int n, float *logits, bool all_logits);
int context_n_past(const struct context *c);
int context_n_ctx(const struct context *c);
/* Forgets positions >= n_past (e.g. 0 to start over). */
void context_truncate(struct context *c, int n_past);
void context_set_route_observer(struct context *c, route_observer_fn fn, void *user);
struct model *context_model(struct context *c);
/* The expert executor (counters, device notes). */
struct moe_executor *context_executor(struct context *c);

/* Where the time goes, accumulated over evals (nanoseconds). */
struct op_times {
    int64_t attn_matmul, attention, router, experts, lm_head, other;
};
const struct op_times *context_op_times(const struct context *c);
void context_reset_op_times(struct context *c);

#endif
