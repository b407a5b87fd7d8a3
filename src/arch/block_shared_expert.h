/* The shared expert of Qwen2-MoE and Qwen3.5-MoE: a dense SwiGLU FFN that
 * every token goes through, scaled per token by sigmoid(gate . x) and added
 * to the routed experts' sum. */
#ifndef MOEX_BLOCK_SHARED_EXPERT_H
#define MOEX_BLOCK_SHARED_EXPERT_H

#include "arch/block_ffn.h"

struct context;

struct shared_expert {
    struct ffn_weights ffn;            /* (n_ff_shexp, n_embd) gate and up, (n_embd, n_ff_shexp) down */
    struct matrix gate_inp;            /* (1, n_embd) */
};

struct shared_expert_scratch;
struct shared_expert_scratch *shared_expert_scratch_new(int n_ff, int n_embd, int n_batch);
void shared_expert_scratch_free(struct shared_expert_scratch *s);

/* out (n, n_embd) += sigmoid(gate_inp . xn) * ffn(xn) for the normalised
 * rows xn (n, n_embd). */
void shared_expert_add(struct context *c, const struct shared_expert *w, struct shared_expert_scratch *s,
                       const float *xn, int n, float *out);

#endif
