/* LFM2's short convolution block (a gated depthwise causal convolution over
 * time, in place of attention in most LFM2 layers):
 *
 *   B, C, x = chunks of in_proj(h), in that order     (each n_embd wide)
 *   y       = C * conv(B * x)                         conv: per channel, kernel l_cache
 *   out     = out_proj(y)
 *
 * conv is causal: the output at time t reads B*x at t-(l_cache-1) .. t, so a
 * layer carries the last l_cache-1 values of B*x from one batch to the next
 * (its conv state; zero at the start of a sequence). */
#ifndef MOEX_ARCH_BLOCK_SHORTCONV_H
#define MOEX_ARCH_BLOCK_SHORTCONV_H

#include "quant/matmul.h"

struct context;

/* Longest kernel the block takes (LFM2 uses 3); a longer one is refused at load. */
#define SHORTCONV_MAX_L_CACHE 16

struct shortconv_weights {
    struct matrix in_proj;   /* (3*n_embd, n_embd): rows of B, then C, then x */
    const float *kernel;     /* (n_embd, l_cache): channel c's taps, oldest first */
    struct matrix out_proj;  /* (n_embd, n_embd) */
    int l_cache;             /* kernel length; the state holds l_cache-1 tokens */
};

/* Floats of conv state one layer keeps: (l_cache-1, n_embd). */
size_t shortconv_state_floats(int n_embd, int l_cache);

/* The gated convolution on in_proj's output for n consecutive tokens.
 * bcx: (n, 3*n_embd), rows of [B | C | x]. state: (l_cache-1, n_embd),
 * oldest token first; read, then advanced by n tokens. y: (n, n_embd). A
 * batch of n tokens gives exactly the result of n calls with one token each. */
void shortconv_mix(const float *bcx, int n, int n_embd, const float *kernel, int l_cache,
                   float *state, float *y);

/* The whole block for n tokens: out (n, n_embd) from the normalised input
 * h (n, n_embd). bcx: scratch (n, 3*n_embd); y: scratch (n, n_embd). The
 * projections go through the executor's placement (block_proj.h), on the
 * CPU with c->act as their scratch. */
void shortconv_forward(struct context *c, const struct shortconv_weights *w, const float *h, int n, int n_embd,
                       float *state, float *bcx, float *y, float *out);

#endif
