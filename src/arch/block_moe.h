/* The MoE FFN: router (gate_inp matmul, softmax or sigmoid gating, optional
 * selection bias, top-k, optional renormalisation and scale), then the
 * expert executor computes the chosen experts' weighted sum. */
#ifndef MOEX_BLOCK_MOE_H
#define MOEX_BLOCK_MOE_H

#include "quant/matmul.h"

#include <stdbool.h>
#include <stdint.h>

struct context;
struct model;
struct moe_layer_desc;

enum moe_gating {
    MOE_GATING_SOFTMAX = 0,   /* p = softmax(logits) over the experts */
    MOE_GATING_SIGMOID,       /* p = sigmoid(logit) per expert */
};

struct moe_router {
    struct matrix gate_inp;         /* (n_expert, n_embd) */
    const float *selection_bias;    /* (n_expert) added to p for choosing only (exp_probs_b); NULL: none */
    enum moe_gating gating;
    bool renormalise;               /* the chosen weights are divided by their sum */
    float weight_scale;             /* the weights are multiplied by it; 0 means 1 */
};

/* Binds layer l's ffn_gate_inp into r->gate_inp and its expert stacks
 * (ffn_gate_exps, ffn_up_exps, ffn_down_exps) as MoE layer moe_index
 * (m->moe_layers[moe_index], shape from m->hp). 0, or -1 with moex_error(). */
int moe_bind(struct model *m, struct moe_router *r, int layer, int moe_index);

/* Buffers for batches of n_batch tokens through layers of this shape. */
struct moe_block_scratch;
struct moe_block_scratch *moe_block_scratch_new(const struct moe_layer_desc *shape, int n_batch);
void moe_block_scratch_free(struct moe_block_scratch *s);

/* From router logits (n, n_expert), overwritten with p: the top_k experts
 * of each token (ids, in order of choice) and their weights (n, top_k). */
void moe_route(const struct moe_router *r, int n_expert, int top_k, float *logits, int n, int32_t *ids, float *w);

/* out (n, n_embd) = the MoE FFN of normalised rows xn (n, n_embd) through
 * MoE layer moe_layer (an index into c->m->moe). */
void moe_ffn(struct context *c, const struct moe_router *r, int moe_layer, struct moe_block_scratch *s, const float *xn,
             int n, float *out);
/* moe_ffn of xn = rms_norm(x += add, norm) (the residual before the FFN
 * and its norm), done in the router's pass over the tokens, each item its
 * own tokens' rows (--ops counts it as the router's); out may be add. */
void moe_ffn_norm(struct context *c, const struct moe_router *r, int moe_layer, struct moe_block_scratch *s, float *x,
                  const float *add, const float *norm, float eps, float *xn, int n, float *out);

#endif
