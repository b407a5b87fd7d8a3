/* silu(g) * u over a row, 8 lanes at a time, for the x86 kernels: each
 * includes this with its own expf8 (glibc's expf steps, quant_impl.h), so
 * every lane gives silu_mul_row_scalar's bits. */
#ifndef MOEX_QUANT_SILU_X86_H
#define MOEX_QUANT_SILU_X86_H

#include "quant/quant_impl.h"

#include <immintrin.h>

static inline __attribute__((always_inline)) void silu_mul_row_x86(float *g, const float *u, int64_t n,
                                                                   __m256 (*expf8)(__m256)) {
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f), limit = _mm256_set1_ps(88.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 gv = _mm256_loadu_ps(g + i), x = _mm256_xor_ps(gv, sign);
        /* |x| >= 88 or NaN: overflow, underflow and NaN as libm has them */
        if (_mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, x), limit, _CMP_NLT_UQ))) {
            silu_mul_row_scalar(g + i, u + i, 8);
            continue;
        }
        const __m256 e = expf8(x);
        _mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
    }
    silu_mul_row_scalar(g + i, u + i, n - i);
}

#endif
