/* 256-bit attention kernel pieces that attn_kernels_avx2.c and
 * attn_kernels_avx512.c share (each compiles them with its own flags): the
 * exp, a panel of 8 query columns against 8 keys, and the online softmax
 * and the f16 weights, which run 8 columns per vector in both (their cost
 * is small next to the two products). Include only from those files. */
#ifndef MOEX_ATTN_KERNELS_X86_H
#define MOEX_ATTN_KERNELS_X86_H

#include "quant/exp_neg_coef.h"

#include <immintrin.h>
#include <math.h>
#include <stddef.h>

#define ATTN_INLINE static inline __attribute__((always_inline))

/* exp(x) for x <= 0 (Cephes' expf: a degree-6 polynomial after x = n ln2 + r),
 * within 2 ulp of libm; inputs below -87 give ~1e-38 instead of 0. */
ATTN_INLINE __m256 attn_exp_neg(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(EXPN_MIN));
    const __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(EXPN_LOG2E)),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(EXPN_LN2_HI), x);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(EXPN_LN2_LO), x);
    __m256 y = _mm256_set1_ps(EXPN_P0);
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(EXPN_P1));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(EXPN_P2));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(EXPN_P3));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(EXPN_P4));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(EXPN_P5));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

/* s rows 0..7, columns c0..c0+7 = keys k (8 rows of hd) times qt's columns. */
ATTN_INLINE void attn_scores_panel8(const float *qt, int mp, int hd, const float *k, int c0, float *s) {
    __m256 acc[8];
    for (int r = 0; r < 8; r++) acc[r] = _mm256_setzero_ps();
    for (int d = 0; d < hd; d++) {
        const __m256 q = _mm256_loadu_ps(qt + (size_t)d * mp + c0);
        for (int r = 0; r < 8; r++) acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(k[(size_t)r * hd + d]), q, acc[r]);
    }
    for (int r = 0; r < 8; r++) _mm256_storeu_ps(s + (size_t)r * mp + c0, acc[r]);
}

/* The online softmax of attn_kernels.h, 8 columns per vector, columns
 * c_begin..mp-1; with write 0 (its stats) s stays as it was. */
ATTN_INLINE void attn_softmax8_body(float *s, int n_keys, int mp, float scale, int masked0, int step, float *max,
                                    float *sum, float *alpha, int c_begin, const int write) {
    const __m256 sc = _mm256_set1_ps(scale), ninf = _mm256_set1_ps(-INFINITY);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int c0 = c_begin; c0 < mp; c0 += 8) {
        const __m256i col = _mm256_add_epi32(lane, _mm256_set1_epi32(c0));
        /* no row of the block hides any of these columns */
        const int open = c0 >= masked0 + (n_keys - 1) * step;
        const __m256 old = _mm256_loadu_ps(max + c0);
        __m256 m = old;
        for (int j = 0; j < n_keys; j++) {
            float *sj = s + (size_t)j * mp + c0;
            __m256 v = _mm256_mul_ps(_mm256_loadu_ps(sj), sc);
            if (write) _mm256_storeu_ps(sj, v);
            if (!open) {
                const __m256i seen = _mm256_cmpgt_epi32(col, _mm256_set1_epi32(masked0 + j * step - 1));
                v = _mm256_blendv_ps(ninf, v, _mm256_castsi256_ps(seen));
            }
            m = _mm256_max_ps(m, v);
        }
        __m256 block = _mm256_setzero_ps();
        for (int j = 0; j < n_keys; j++) {
            float *sj = s + (size_t)j * mp + c0;
            const __m256 sv = _mm256_loadu_ps(sj);
            __m256 p = attn_exp_neg(_mm256_sub_ps(write ? sv : _mm256_mul_ps(sv, sc), m));
            if (!open) {
                const __m256i seen = _mm256_cmpgt_epi32(col, _mm256_set1_epi32(masked0 + j * step - 1));
                p = _mm256_and_ps(p, _mm256_castsi256_ps(seen));
            }
            if (write) _mm256_storeu_ps(sj, p);
            block = _mm256_add_ps(block, p);
        }
        const __m256 none = _mm256_cmp_ps(m, ninf, _CMP_EQ_OQ);
        const __m256 a = _mm256_blendv_ps(attn_exp_neg(_mm256_sub_ps(old, m)), _mm256_set1_ps(1.0f), none);
        _mm256_storeu_ps(alpha + c0, a);
        _mm256_storeu_ps(sum + c0, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(sum + c0), a), block));
        _mm256_storeu_ps(max + c0, m);
    }
}

static inline void attn_softmax8(float *s, int n_keys, int mp, float scale, int masked0, int step, float *max,
                                 float *sum, float *alpha) {
    attn_softmax8_body(s, n_keys, mp, scale, masked0, step, max, sum, alpha, 0, 1);
}

static inline void attn_stats8(float *s, int n_keys, int mp, float scale, int masked0, int step, float *max,
                               float *sum, float *alpha) {
    attn_softmax8_body(s, n_keys, mp, scale, masked0, step, max, sum, alpha, 0, 0);
}

/* The f16 weights of attn_kernels.h, 8 columns per vector, columns c_begin..mp-1. */
ATTN_INLINE void attn_weights8_body(float *s, int n_keys, int mp, float scale, int masked0, int step,
                                    const float *max, const float *inv_sum, int c_begin) {
    const __m256 sc = _mm256_set1_ps(scale);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int c0 = c_begin; c0 < mp; c0 += 8) {
        const __m256i col = _mm256_add_epi32(lane, _mm256_set1_epi32(c0));
        const int open = c0 >= masked0 + (n_keys - 1) * step;
        const __m256 m = _mm256_loadu_ps(max + c0), inv = _mm256_loadu_ps(inv_sum + c0);
        for (int j = 0; j < n_keys; j++) {
            float *sj = s + (size_t)j * mp + c0;
            __m256 p = _mm256_mul_ps(attn_exp_neg(_mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(sj), sc), m)), inv);
            p = _mm256_cvtph_ps(_mm256_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            if (!open) {
                const __m256i seen = _mm256_cmpgt_epi32(col, _mm256_set1_epi32(masked0 + j * step - 1));
                p = _mm256_and_ps(p, _mm256_castsi256_ps(seen));
            }
            _mm256_storeu_ps(sj, p);
        }
    }
}

static inline void attn_weights8(float *s, int n_keys, int mp, float scale, int masked0, int step,
                                 const float *max, const float *inv_sum) {
    attn_weights8_body(s, n_keys, mp, scale, masked0, step, max, inv_sum, 0);
}

#endif
