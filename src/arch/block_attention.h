/* Grouped-query attention with per-head q/k RMSNorm and NEOX RoPE:
 * q, k, v projections, q/k norm, rotation, KV cache store, causal softmax
 * attention over the cache, output projection. */
#ifndef MOEX_BLOCK_ATTENTION_H
#define MOEX_BLOCK_ATTENTION_H

#include "quant/matmul.h"

struct context;
struct layer_slice;

struct attn_weights {
    struct matrix wq;                  /* (n_head*head_dim, n_embd) */
    struct matrix wk, wv;              /* (n_head_kv*head_dim, n_embd) */
    struct matrix wo;                  /* (n_embd, n_head*head_dim) */
    const float *q_norm, *k_norm;      /* (head_dim) */
};

struct attn_shape {
    int n_embd, n_head, n_head_kv, head_dim;
    float rope_base, rms_eps;
};

/* Buffers for batches of n_batch tokens over a cache of n_ctx positions. */
struct attn_scratch;
struct attn_scratch *attn_scratch_new(const struct attn_shape *s, int n_batch, int n_ctx, int threads);
void attn_scratch_free(struct attn_scratch *s);

/* The rotation of positions pos0..pos0+n-1, once per batch for all layers. */
void attn_rope_prepare(struct attn_scratch *s, const struct attn_shape *shape, int pos0, int n);

/* out (n, n_embd) = attention of the normalised rows xn (n, n_embd) at
 * positions c->n_past.., storing their keys and values in kv. */
void attention(struct context *c, const struct attn_shape *shape, const struct attn_weights *w, struct attn_scratch *s,
               struct layer_slice *kv, int n, const float *xn, float *out);

#endif
