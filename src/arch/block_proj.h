/* The forward pass's matmuls, through the executor's placement: each one
 * the executor was told about (moe/moe_layers.h's dense matmuls) runs on the
 * device when its rule says so, the others on the CPU's quantized kernels.
 * Several projections of the same input rows (q, k and v; a delta net's
 * four inputs) are one call: one submission on the device, and on the CPU
 * the input quantized once per activation type the weights want (Q4_K and
 * Q6_K both take Q8_K), not once per matrix. */
#ifndef MOEX_BLOCK_PROJ_H
#define MOEX_BLOCK_PROJ_H

#include "quant/matmul.h"

struct context;

/* y[i] (n, w[i]->rows) = x (n, cols) . w[i]^T for i < k (k <= 8), with c->act
 * as the quantized input. */
void project_rows(struct context *c, const struct matrix *const *w, float *const *y, int k, const float *x, int n);
/* project_rows whose x the caller quantized already into xq (when not
 * NULL: the one activation type all of w read, rows quant_row_size apart);
 * x stays the input of a device that takes some of them. */
void project_rows_preq(struct context *c, const struct matrix *const *w, float *const *y, int k, const float *x,
                       const void *xq, int n);
/* y (n, w->rows) = x (n, w->cols) . w^T: project_rows of one matrix. */
void dense_matmul(struct context *c, const struct matrix *w, const float *x, int n, float *y);
/* dense_matmul whose input x is already quantized into xq (w's activation
 * type, rows quant_row_size apart), for the CPU; x stays the input of a
 * device that takes the matmul. */
void dense_matmul_preq(struct context *c, const struct matrix *w, const float *x, const void *xq, int n, float *y);

#endif
