/* The dense SwiGLU FFN: down(silu(gate x) * up x). */
#ifndef MOEX_BLOCK_FFN_H
#define MOEX_BLOCK_FFN_H

#include "moe/moe_layers.h"
#include "quant/matmul.h"

struct context;

struct ffn_weights {
    struct matrix gate, up;            /* (n_ff, n_embd) */
    struct matrix down;                /* (n_embd, n_ff) */
};

/* Describes gate, up and down to the executor as `kind` of layer l. */
struct model;
int ffn_describe(struct model *m, const struct ffn_weights *w, enum dense_kind kind, int layer);

/* Buffers for batches of n_batch tokens through an FFN of width n_ff. */
struct ffn_scratch;
struct ffn_scratch *ffn_scratch_new(int n_ff, int n_batch);
void ffn_scratch_free(struct ffn_scratch *s);

/* out (n, n_embd) = the FFN of the normalised rows xn (n, n_embd). */
void ffn_swiglu(struct context *c, const struct ffn_weights *w, struct ffn_scratch *s, const float *xn, int n,
                float *out);

#endif
