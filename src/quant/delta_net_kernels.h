/* The inner loops of the gated delta net (block_delta_net.c runs them), per
 * ISA. Matrices are row-major with a leading dimension (ld*) in floats. */
#ifndef MOEX_DELTA_NET_KERNELS_H
#define MOEX_DELTA_NET_KERNELS_H

#include "quant/quant.h"

#include <stddef.h>

/* The longest causal convolution the kernels take (ssm.conv_kernel). */
#define DELTA_NET_MAX_KERNEL 64

struct delta_net_kernels {
    /* y (rows, n) += a (rows, k) . x (k, n): the products with the state
     * and inside a chunk, where the block's time goes. Each element of y is
     * computed by the same operations whatever rows is and wherever the
     * element lies in y (its column's place in the vectors depends on n
     * only). */
    void (*gemm)(float *y, size_t ldy, const float *a, size_t lda, const float *x, size_t ldx, int rows, int k,
                 int n);
    /* a . b over n floats: the key products inside a chunk. */
    float (*dot)(const float *a, const float *b, int n);
    /* out[t][c] = silu(sum_j w[c K + j] in_j(t)[c]) for t < n, c < width:
     * in_j(t) is x row t-K+1+j, or before the batch state row K-1+t-K+1+j
     * (the last K-1 inputs, oldest first). w: (width, K). */
    void (*conv_silu)(const float *x, size_t ldx, const float *state, size_t ldstate, int n, int width, int K,
                      const float *w, float *out, size_t ldout);
    /* x = RMSNorm(x) * w * silu(z) over one row of len floats. */
    void (*gated_norm)(float *x, const float *z, const float *w, int len, float eps);
};

/* The kernels of the ISA the quantized kernels run on (quant_active_isa). */
const struct delta_net_kernels *delta_net_kernels(void);
/* One ISA's kernels; NULL where that ISA has none or cannot run here. */
const struct delta_net_kernels *delta_net_kernels_isa(enum isa isa);
extern const struct delta_net_kernels delta_net_kernels_avx2, delta_net_kernels_avx512, delta_net_kernels_neon;

#endif
