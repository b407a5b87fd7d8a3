/* The CPU side of an MoE layer: groups a batch's (token, expert) pairs by
 * expert, runs the experts the executor leaves on the CPU straight from the
 * quantized weights, and combines every pair's output with its routing
 * weight (moe/executor.h decides which experts run where). */
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

/* out[t] = sum_k weights[t][k] * expert_{ids[t][k]}(x[t]), expert(x) =
 * down(silu(gate x) * up x), in steps: group the pairs by expert; compute
 * the experts with on_cpu[e] (all when NULL) into their pairs' outputs, each
 * active expert as a small GEMM over its rows with activations quantized
 * once, the work of all experts spread over the pool; the caller fills the
 * other pairs' outputs (moe_pair_output); combine. */
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
