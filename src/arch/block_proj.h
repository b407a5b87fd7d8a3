/* Several projections of the same input rows (q, k and v; a delta net's four
 * inputs): the input is quantized once per activation type the weights want
 * (Q4_K and Q6_K both take Q8_K), not once per matrix. */
#ifndef MOEX_BLOCK_PROJ_H
#define MOEX_BLOCK_PROJ_H

#include "quant/matmul.h"

struct context;

/* y[i] (n, w[i]->rows) = x (n, cols) . w[i]^T for i < k, with c->act as the
 * quantized input. */
void project_rows(struct context *c, const struct matrix *const *w, float *const *y, int k, const float *x, int n);

#endif
