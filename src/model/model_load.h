/* Binding helpers for architectures (src/arch/): hyper-parameters read with
 * their GGUF type checked and their value range validated, products of them
 * checked in 64 bits, tensors found by name with their type and shape
 * checked. Every error names the file and the key or tensor; keys are given
 * without the "ARCH." prefix. All return 0 (or a pointer) on success and -1
 * (or NULL) with moex_error(). */
#ifndef MOEX_MODEL_LOAD_H
#define MOEX_MODEL_LOAD_H

#include "model/model.h"

#include "core/error.h"

#include <stdbool.h>
#include <stdint.h>

struct gguf_tensor;

/* The largest size of any dimension, and of any product of hyper-parameters
 * that the forward pass indexes with int. */
#define MODEL_DIM_MAX (1 << 24)
/* The most experts a MoE layer may have (llama.cpp allows 512): batch x
 * top-k pairs must fit in int. */
#define MODEL_EXPERTS_MAX 4096

/* ARCH.key as an integer in [lo, hi]: required. */
int model_get_int(const struct model *m, const char *key, int64_t lo, int64_t hi, int *out);
/* The same when present; def when absent. A key of another type is an error. */
int model_get_int_or(const struct model *m, const char *key, int64_t lo, int64_t hi, int def, int *out);
/* ARCH.key stored as f32 (an integer or string is an error), finite and in
 * (lo, hi]; def when absent. */
int model_get_float_or(const struct model *m, const char *key, float lo, float hi, float def, float *out);
/* ARCH.key as an array of n integers in [lo, hi] (an integer scalar is
 * repeated n times, as llama.cpp reads per-layer keys); required. */
int model_get_int_array(const struct model *m, const char *key, int64_t lo, int64_t hi, int n, int *out);
/* *out = a * b, computed in 64 bits; more than hi is an error naming what
 * ("head_count x key_length"). */
int model_product(const struct model *m, const char *what, int64_t a, int64_t b, int64_t hi, int *out);

/* Tensor names are printf formats ("blk.%d.attn_q.weight", l). */
/* Whether the file has the tensor. */
bool model_has_tensor(const struct model *m, const char *fmt, ...) MOEX_PRINTF(2, 3);
/* An F32 vector of n values. */
const float *model_want_vector(struct model *m, int64_t n, const char *fmt, ...) MOEX_PRINTF(3, 4);
/* An F32 array of ne1 rows of ne0 values read as plain floats (a conv
 * kernel), not a matmul weight: it is not registered as a matrix. */
const float *model_want_floats(struct model *m, int64_t ne0, int64_t ne1, const char *fmt, ...) MOEX_PRINTF(4, 5);
/* A 2-D weight of rows x cols (ne = [cols, rows]) of a type moex computes with. */
int model_want_matrix(struct model *m, struct matrix *out, int64_t cols, int64_t rows, const char *fmt, ...)
    MOEX_PRINTF(5, 6);
/* A stack of n_expert weights of rows x cols each (ne = [cols, rows, n_expert]). */
int model_want_experts(struct model *m, struct matrix *out, int64_t cols, int64_t rows, int64_t n_expert,
                       const char *fmt, ...) MOEX_PRINTF(6, 7);

/* The checks every attention + MoE architecture here shares: query heads a
 * multiple of KV heads (at most 64 per KV head), top-k <= experts, an even
 * key_length <= 1024 and value_length equal to it. */
int model_check_attention_moe(const struct model *m);

/* The MoE layers' descriptions, n of them (m->moe_layers, m->moe). */
int model_alloc_moe(struct model *m, int n);

/* Describes a bound dense matmul to the executor (m->moe.dense), so that it
 * is placed as experts are: layer -1 for the lm head. Layers past
 * hp.n_layers (never evaluated: Qwen3.5's MTP block) are not described. */
int model_describe_dense(struct model *m, enum dense_kind kind, int layer, const struct matrix *w);

#endif
