/* Gated delta net (Qwen3-Next / Qwen3.5 linear attention). Per value head h,
 * with key head h % n_k_heads and a state S of head_dim x head_dim:
 *     S = exp(g) S;   S += beta (v - S k) k^T;   o = S q / sqrt(head_dim)
 * in two forms of the same recurrence: token by token (decode) and chunked
 * (prefill: the updates of a chunk solved at once as a triangular system, so
 * the state is read once per chunk instead of once per token). */
#ifndef MOEX_BLOCK_DELTA_NET_H
#define MOEX_BLOCK_DELTA_NET_H

#include <stddef.h>

struct threadpool;

struct delta_net_dims {
    int n_k_heads, n_v_heads; /* n_v_heads is a multiple of n_k_heads */
    int head_dim;             /* keys and values alike */
};

/* One batch of n tokens. */
struct delta_net_io {
    int n;
    const float *q, *k;   /* (n, n_k_heads, head_dim), L2-normalised */
    const float *v;       /* (n, n_v_heads, head_dim) */
    const float *g;       /* (n, n_v_heads) log decay, <= 0 */
    const float *beta;    /* (n, n_v_heads) write strength, in (0, 1) */
    float *state;         /* (n_v_heads, head_dim value, head_dim key), updated */
    float *out;           /* (n, n_v_heads, head_dim) */
};

/* Chunk length of the chunked form (prefill). */
#define DELTA_NET_CHUNK 64

/* Value head `head` of the batch, one token at a time. */
void delta_net_recurrent(const struct delta_net_dims *d, const struct delta_net_io *io, int head);

/* Floats of scratch delta_net_chunked needs for one head. */
size_t delta_net_chunk_scratch(const struct delta_net_dims *d, int chunk);
/* The same result in chunks of `chunk` tokens (the last one may be shorter). */
void delta_net_chunked(const struct delta_net_dims *d, const struct delta_net_io *io, int head, int chunk,
                       float *scratch);

/* Floats of scratch delta_net_run needs with `threads` threads. */
size_t delta_net_run_scratch(const struct delta_net_dims *d, int threads);
/* Every head over the pool: the recurrent form for a single token, the
 * chunked form for longer batches. */
void delta_net_run(struct threadpool *pool, const struct delta_net_dims *d, const struct delta_net_io *io,
                   float *scratch);

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

#endif
