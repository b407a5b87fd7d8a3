/* Grouped-query attention with per-head q/k RMSNorm and NEOX RoPE:
 * q, k, v projections, q/k norm, rotation, KV cache store, causal softmax
 * attention over the cache, output projection. Options: partial rotary
 * (only the first n_rot dims of a head turn), IMRoPE sections for text
 * positions, and a per-head output gate (Qwen3.5). */
#ifndef MOEX_BLOCK_ATTENTION_H
#define MOEX_BLOCK_ATTENTION_H

#include "quant/matmul.h"

#include <stdbool.h>

struct context;
struct layer_slice;
struct model;

struct attn_weights {
    struct matrix wq;                  /* (n_head*head_dim, n_embd); with an output gate (2*n_head*head_dim,
                                        * n_embd): per head head_dim query rows, then head_dim gate rows */
    struct matrix wk, wv;              /* (n_head_kv*head_dim, n_embd) */
    struct matrix wo;                  /* (n_embd, n_head*head_dim) */
    const float *q_norm, *k_norm;      /* (head_dim) */
};

struct attn_shape {
    int n_embd, n_head, n_head_kv, head_dim;
    float rope_base, rms_eps;
    int n_rot;                         /* dims of a head that rotate, from the first; 0 = head_dim */
    /* IMRoPE (interleaved multi-axis RoPE) pairs per axis: time, height,
     * width, extra. Text positions put the position on the first three and
     * 0 on the extra axis, whose pairs do not turn. NULL: every pair turns. */
    const int *imrope_sections;        /* (4) */
    bool output_gate;                  /* out = attention * sigmoid(gate) before the output projection */
};

struct model_hparams;
/* The shape the model's hyper-parameters give (full rotary, no sections,
 * no output gate): an architecture sets the options it has on top. */
struct attn_shape attn_shape_of(const struct model_hparams *hp);

/* Binds layer l's attn_q, attn_k, attn_v, attn_output, attn_q_norm and
 * attn_k_norm for n_head_kv KV heads, shapes from m->hp. 0, or -1 with
 * moex_error() naming the tensor. */
int attn_bind(struct model *m, struct attn_weights *w, int layer, int n_head_kv);
/* Describes the four projections to the executor (attn_bind does it). */
int attn_describe(struct model *m, const struct attn_weights *w, int layer);

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

/* The same for a forward pass of the context: its projections over all n
 * rows at once, and each run (c->runs) against its own sequence's cache of
 * model layer `layer`, at that sequence's positions. */
void attention_layer(struct context *c, const struct attn_shape *shape, const struct attn_weights *w,
                     struct attn_scratch *s, int layer, int n, const float *xn, const void *xq, float *out);
/* The activation type q, k and v all read (xq of attention_layer: xn in
 * it, rows quant_row_size apart, in c->act or elsewhere; NULL: it
 * quantizes xn itself), or false when they want different ones. */
bool attn_input_type(const struct attn_weights *w, enum qtype *act);
/* x (n, n_embd) += add (NULL: nothing), xn = rms_norm(x, norm) over the
 * pool (norm NULL: none), and xn quantized into c->act for w's q, k and v
 * when w is set and they read one activation type: returns that for
 * attention_layer's xq, or NULL. */
const void *attn_input_norm(struct context *c, const struct attn_weights *w, float *x, const float *add,
                            const float *norm, float *xn, int n, int n_embd, float eps);
/* The rotation of every run of the context's pass at its positions. */
void attn_rope_prepare_runs(struct attn_scratch *s, const struct attn_shape *shape, const struct context *c);

#endif
