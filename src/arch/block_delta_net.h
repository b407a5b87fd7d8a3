/* Gated delta net (Qwen3-Next / Qwen3.5 linear attention). Per value head h,
 * with key head h % n_k_heads and a state S of head_dim x head_dim:
 *     S = exp(g) S;   S += beta (v - S k) k^T;   o = S q / sqrt(head_dim)
 * computed in chunks of DELTA_NET_CHUNK tokens aligned to the sequence's
 * start (the updates of a chunk solved at once as a triangular system, its
 * products with the state shared by the chunk's tokens), a pass that ends
 * inside a chunk keeping that chunk's tokens so far in the state: one
 * arithmetic for prefill and decode, so that a sequence's outputs do not
 * depend on how its tokens were split into passes, bit for bit. */
#ifndef MOEX_BLOCK_DELTA_NET_H
#define MOEX_BLOCK_DELTA_NET_H

#include "quant/matmul.h"

#include <stddef.h>
#include <stdint.h>

struct context;
struct delta_net_kernels;
struct threadpool;

struct delta_net_dims {
    int n_k_heads, n_v_heads; /* n_v_heads is a multiple of n_k_heads */
    int head_dim;             /* keys and values alike */
};

/* One batch of n tokens of a sequence, at its positions pos0..pos0+n-1. */
struct delta_net_io {
    int n, pos0;
    const float *q, *k;   /* (n, n_k_heads, head_dim), L2-normalised */
    const float *v;       /* (n, n_v_heads, head_dim) */
    const float *g;       /* (n, n_v_heads) log decay, <= 0 */
    const float *beta;    /* (n, n_v_heads) write strength, in (0, 1) */
    float *state;         /* (n_v_heads, delta_net_head_floats) at position pos0, updated; zero at position 0 */
    float *out;           /* (n, n_v_heads, head_dim) */
};

/* Chunk length. Its triangular solve and within-chunk products grow with
 * the square of it; with the earlier scalar axpy loops 16 was near the best
 * (one head, 512 tokens, head_dim 128, x86: recurrent 1.34 ms, chunked
 * 1.46 ms at 8, 1.50 at 16, 2.16 at 64). Changing it changes the results
 * (in the last bits) and the state's layout. */
#define DELTA_NET_CHUNK 16
/* The largest head_dim (ssm.state_size) the block takes. */
#define DELTA_NET_MAX_DIM 1024

/* Floats of one value head's state: S (head_dim key x head_dim value, at
 * the start of the current chunk, key-major: S[m][i]), then the current
 * chunk's tokens so far (position % DELTA_NET_CHUNK of them): their keys
 * and updates (DELTA_NET_CHUNK x head_dim each) and log decays. At a
 * position that is a multiple of DELTA_NET_CHUNK, S is the whole state. */
size_t delta_net_head_floats(const struct delta_net_dims *d);

/* Floats of scratch delta_net_head needs. */
size_t delta_net_head_scratch(const struct delta_net_dims *d);
/* Value head `head` of the batch, with one ISA's kernels
 * (delta_net_kernels.h; the run functions take the active ISA's). */
void delta_net_head(const struct delta_net_kernels *kern, const struct delta_net_dims *d,
                    const struct delta_net_io *io, int head, float *scratch);

/* Floats of scratch delta_net_run needs with `threads` threads. */
size_t delta_net_run_scratch(const struct delta_net_dims *d, int threads);
/* Every head over the pool. */
void delta_net_run(struct threadpool *pool, const struct delta_net_dims *d, const struct delta_net_io *io,
                   float *scratch);
/* The same for n_io batches (each its own state: sequences), in one job. */
void delta_net_run_many(struct threadpool *pool, const struct delta_net_dims *d, const struct delta_net_io *io,
                        int n_io, float *scratch);

/* The layer's inputs, in order. */

/* Causal depthwise convolution over time, then SiLU: for each channel c,
 * out[t] = silu(sum_j w[c][j] x[t - K + 1 + j]), where inputs before the
 * batch come from conv_state (the last K-1 inputs, oldest first), which is
 * then advanced. x, out: (n, channels); w: (channels, K);
 * conv_state: (K-1, channels). */
void delta_net_conv_silu(const float *x, int n, int channels, int K, const float *w, float *conv_state,
                         float *out);

/* v / max(|v|, eps) over each of the n rows of len floats. */
void l2_norm_rows(float *v, int n, int len, float eps);

/* Per token and value head: g = softplus(alpha + dt_bias) * a (a = -exp(A_log),
 * stored negative) and beta = sigmoid(b), both in place. alpha, b: (n, n_v_heads). */
void delta_net_gates(float *alpha, float *b, int n, int n_v_heads, const float *dt_bias, const float *a);

/* The output norm gated by z: o = RMSNorm(o) * w * silu(z) over each of the n
 * rows of len floats (one row per token and head). */
void gated_rms_norm_rows(float *o, const float *z, const float *w, int n, int len, float eps);

/* The whole linear-attention layer (Qwen3.5's gated delta net), from the
 * normalised input to the output projection:
 *   qkv = conv_silu(W_qkv x); q, k L2-normalised; z = W_z x;
 *   g = softplus(W_alpha x + dt_bias) * a; beta = sigmoid(W_beta x);
 *   o = delta_net(q, k, v, g, beta); out = W_out (RMSNorm(o) * norm * silu(z)). */

struct delta_net_weights {
    struct matrix qkv;                 /* (2 n_k_heads D + n_v_heads D, n_embd): q, k, v rows in that order */
    struct matrix z;                   /* (n_v_heads D, n_embd): the output gate */
    struct matrix beta, alpha;         /* (n_v_heads, n_embd) */
    struct matrix conv;                /* (channels, conv_kernel), F32 */
    const float *dt_bias, *a;          /* (n_v_heads); a = -exp(A_log) */
    const float *norm;                 /* (head_dim) */
    struct matrix out;                 /* (n_embd, n_v_heads D) */
};

struct delta_net_shape {
    struct delta_net_dims dims;
    int conv_kernel;
    float eps;                         /* of the L2 norms and the gated RMSNorm */
};

/* Floats of a layer's state: convolution, then recurrent. */
int64_t delta_net_conv_floats(const struct delta_net_shape *s);
int64_t delta_net_state_floats(const struct delta_net_shape *s);

struct delta_net_scratch;
struct delta_net_scratch *delta_net_scratch_new(const struct delta_net_shape *s, int n_batch, int threads);
void delta_net_scratch_free(struct delta_net_scratch *s);

/* out (n, n_embd) for the normalised rows xn (n, n_embd) of the context's
 * pass: the projections over all rows, the convolution and the delta rule
 * over each run (c->runs), advancing its sequence's state of model layer
 * `layer` (conv, recurrent). */
void delta_net_layer(struct context *c, const struct delta_net_shape *sh, const struct delta_net_weights *w,
                     struct delta_net_scratch *s, int layer, int n, const float *xn, float *out);

#endif
