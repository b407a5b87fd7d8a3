/* RMSNorm: y = x / sqrt(mean(x^2) + eps) * w. */
#ifndef MOEX_BLOCK_NORM_H
#define MOEX_BLOCK_NORM_H

#include "quant/quant.h"

#include <stddef.h>
#include <stdint.h>

struct threadpool;

/* n values; y may be x. */
void rms_norm(const float *x, const float *w, float *y, int n, float eps);
/* rows rows of n values, consecutive. */
void rms_norm_rows(const float *x, const float *w, float *y, int rows, int n, float eps);
/* y[i] += x[i] for i < n: a residual connection. */
void add_residual(float *y, const float *x, int64_t n);
/* Per row of n values, over the pool: x += add (add NULL: nothing), then
 * y = rms_norm(x, w) (w NULL: nothing) -- a residual connection and the
 * next block's norm in one pass, the same values as the two calls. */
void residual_norm_rows(struct threadpool *pool, float *x, const float *add, const float *w, float *y, int rows, int n,
                        float eps);
/* The same, and (w set, yq not NULL) each normalised row quantized into yq
 * as activations of type act, for the next matmuls, while it is in cache.
 * Returns yq's row stride (0 without yq). */
size_t residual_norm_quantize_rows(struct threadpool *pool, float *x, const float *add, const float *w, float *y,
                                   int rows, int n, float eps, enum qtype act, void *yq);

#endif
