/* The expert executor: given a batch's activations and its routing, returns
 * the weighted sum of the chosen experts' outputs. This is the seam where
 * device placement plugs in; today every expert runs on the CPU. */
#ifndef MOEX_EXPERTS_H
#define MOEX_EXPERTS_H

#include "quant/matmul.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct threadpool;

/* One MoE layer's expert weights. */
struct expert_layer {
    const struct matrix *gate, *up, *down; /* stacks: n_expert * (n_ff or n_embd) rows */
    int n_expert, n_ff, n_embd;
};

struct moe_scratch;

/* Scratch for batches of up to max_tokens tokens with top_k experts each;
 * allocated once per context. NULL when out of memory. */
struct moe_scratch *moe_scratch_new(const struct expert_layer *shape, int max_tokens, int top_k);
void moe_scratch_free(struct moe_scratch *s);

/* out[t] = sum_k weights[t][k] * expert_{ids[t][k]}(x[t]) for t < n_tokens,
 * expert(x) = down(silu(gate x) * up x). Rows are grouped by expert and every
 * active expert runs as a small GEMM over its rows, with activations
 * quantized once; the work of all experts is spread over the pool. */
void moe_experts_cpu(struct threadpool *pool, const struct expert_layer *layer, struct moe_scratch *s,
                     const float *x /* (n_tokens, n_embd) */, int n_tokens, int top_k,
                     const int32_t *ids /* (n_tokens, top_k) */, const float *weights /* (n_tokens, top_k) */,
                     float *out /* (n_tokens, n_embd) */);

/* The same in steps, for an executor that sends some experts elsewhere:
 * group the pairs by expert; compute the experts with on_cpu[e] (all when
 * NULL) into their pairs' outputs; the caller fills the other pairs'
 * outputs (moe_pair_output); combine. */
void moe_group(struct moe_scratch *s, int n_tokens, int top_k, const int32_t *ids);
void moe_compute_cpu(struct threadpool *pool, const struct expert_layer *layer, struct moe_scratch *s, const float *x,
                     const bool *on_cpu);
void moe_combine(const struct moe_scratch *s, const float *weights, float *out);
/* After moe_group: rows of an expert, its first pair (its pairs are
 * consecutive), the token of a pair, and a pair's output row (n_embd). */
int moe_expert_rows(const struct moe_scratch *s, int expert);
int moe_expert_first_pair(const struct moe_scratch *s, int expert);
int moe_pair_token(const struct moe_scratch *s, int pair);
float *moe_pair_output(struct moe_scratch *s, int pair);

#endif
