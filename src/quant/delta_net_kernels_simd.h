/* The SIMD delta-net kernels, written once over a small vector vocabulary
 * that each ISA file defines before including this (include only from
 * delta_net_kernels_avx2.c, _avx512.c, _neon.c):
 *   VF, VL (floats per vector), GEMM_C (vectors per row of a gemm tile),
 *   V_LOAD, V_STORE, V_SET1, V_ZERO, V_ADD, V_SUB, V_MUL, V_DIV, V_MAX,
 *   V_FMA(a, b, c) = a b + c, V_FNMA(a, b, c) = c - a b, V_ROUND (to nearest),
 *   V_LDEXP(y, f) = y 2^f for integral f, V_NEG_ABS(x) = -|x|,
 *   V_SEL_GE0(x, a, b) = x >= 0 ? a : b, V_HSUM (sum of the lanes).
 * Columns past the last whole vector run in scalar code. */
#ifndef MOEX_DELTA_NET_KERNELS_SIMD_H
#define MOEX_DELTA_NET_KERNELS_SIMD_H

#include "quant/delta_net_kernels.h"
#include "quant/exp_neg_coef.h"

#include <math.h>

#define DN_INLINE static inline __attribute__((always_inline))

/* exp(x) for x <= 0 (Cephes' expf: a degree-6 polynomial after x = n ln2 + r);
 * inputs below -87 give ~1e-38 instead of 0. */
DN_INLINE VF v_exp_neg(VF x) {
    x = V_MAX(x, V_SET1(EXPN_MIN));
    const VF fx = V_ROUND(V_MUL(x, V_SET1(EXPN_LOG2E)));
    x = V_FNMA(fx, V_SET1(EXPN_LN2_HI), x);
    x = V_FNMA(fx, V_SET1(EXPN_LN2_LO), x);
    VF y = V_SET1(EXPN_P0);
    y = V_FMA(y, x, V_SET1(EXPN_P1));
    y = V_FMA(y, x, V_SET1(EXPN_P2));
    y = V_FMA(y, x, V_SET1(EXPN_P3));
    y = V_FMA(y, x, V_SET1(EXPN_P4));
    y = V_FMA(y, x, V_SET1(EXPN_P5));
    y = V_FMA(y, V_MUL(x, x), V_ADD(x, V_SET1(1.0f)));
    return V_LDEXP(y, fx);
}

/* x sigmoid(x), the sigmoid from e = exp(-|x|): 1 / (1 + e) or e / (1 + e). */
DN_INLINE VF v_silu(VF x) {
    const VF one = V_SET1(1.0f), e = v_exp_neg(V_NEG_ABS(x));
    return V_MUL(x, V_DIV(V_SEL_GE0(x, one, e), V_ADD(one, e)));
}

static float silu1(float x) { return x / (1.0f + expf(-x)); }

/* Rows 0..R-1 of y, columns 0..C*VL-1, over all k. */
DN_INLINE void gemm_tile(float *y, size_t ldy, const float *a, size_t lda, const float *x, size_t ldx, int k,
                         const int R, const int C) {
    VF acc[4][GEMM_C];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = V_LOAD(y + r * ldy + c * VL);
    for (int m = 0; m < k; m++) {
        VF xv[GEMM_C];
        for (int c = 0; c < C; c++) xv[c] = V_LOAD(x + m * ldx + c * VL);
        for (int r = 0; r < R; r++) {
            const VF av = V_SET1(a[r * lda + m]);
            for (int c = 0; c < C; c++) acc[r][c] = V_FMA(av, xv[c], acc[r][c]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) V_STORE(y + r * ldy + c * VL, acc[r][c]);
}

DN_INLINE void gemm_rows(float *y, size_t ldy, const float *a, size_t lda, const float *x, size_t ldx, int k, int n,
                         const int R) {
    int i = 0;
    for (; i + GEMM_C * VL <= n; i += GEMM_C * VL) gemm_tile(y + i, ldy, a, lda, x + i, ldx, k, R, GEMM_C);
    for (; i + VL <= n; i += VL) gemm_tile(y + i, ldy, a, lda, x + i, ldx, k, R, 1);
    for (; i < n; i++)
        for (int r = 0; r < R; r++) {
            float s = y[r * ldy + i];
            for (int m = 0; m < k; m++) s = fmaf(a[r * lda + m], x[m * ldx + i], s); /* as the lanes do */
            y[r * ldy + i] = s;
        }
}

static void gemm(float *y, size_t ldy, const float *a, size_t lda, const float *x, size_t ldx, int rows, int k,
                 int n) {
    int r = 0;
    for (; r + 4 <= rows; r += 4) gemm_rows(y + r * ldy, ldy, a + r * lda, lda, x, ldx, k, n, 4);
    if (r + 2 <= rows) { /* a decode step's two rows (its update and its output): one pass over x */
        gemm_rows(y + r * ldy, ldy, a + r * lda, lda, x, ldx, k, n, 2);
        r += 2;
    }
    for (; r < rows; r++) gemm_rows(y + r * ldy, ldy, a + r * lda, lda, x, ldx, k, n, 1);
}

static float dot(const float *a, const float *b, int n) {
    VF acc = V_ZERO();
    int i = 0;
    for (; i + VL <= n; i += VL) acc = V_FMA(V_LOAD(a + i), V_LOAD(b + i), acc);
    float s = V_HSUM(acc);
    for (; i < n; i++) s = fmaf(a[i], b[i], s);
    return s;
}

static void conv_silu(const float *x, size_t ldx, const float *state, size_t ldstate, int n, int width, int K,
                      const float *w, float *out, size_t ldout) {
    const int past = K - 1;
    int c0 = 0;
    for (; c0 + VL <= width; c0 += VL) {
        /* The block's taps, transposed: tap j of its VL channels in one vector. */
        float taps[DELTA_NET_MAX_KERNEL][VL];
        for (int j = 0; j < K; j++)
            for (int l = 0; l < VL; l++) taps[j][l] = w[(size_t)(c0 + l) * K + j];
        for (int t = 0; t < n; t++) {
            VF s = V_ZERO();
            for (int j = 0; j < K; j++) {
                const int src = t - past + j;
                const float *in = src < 0 ? state + (size_t)(past + src) * ldstate : x + (size_t)src * ldx;
                s = V_FMA(V_LOAD(taps[j]), V_LOAD(in + c0), s);
            }
            V_STORE(out + (size_t)t * ldout + c0, v_silu(s));
        }
    }
    for (; c0 < width; c0++)
        for (int t = 0; t < n; t++) {
            float s = 0;
            for (int j = 0; j < K; j++) {
                const int src = t - past + j;
                s += w[(size_t)c0 * K + j] * (src < 0 ? state[(size_t)(past + src) * ldstate + c0] : x[(size_t)src * ldx + c0]);
            }
            out[(size_t)t * ldout + c0] = silu1(s);
        }
}

static void gated_norm(float *x, const float *z, const float *w, int len, float eps) {
    VF acc = V_ZERO();
    int i = 0;
    for (; i + VL <= len; i += VL) {
        const VF v = V_LOAD(x + i);
        acc = V_FMA(v, v, acc);
    }
    float sum = V_HSUM(acc);
    for (int r = i; r < len; r++) sum += x[r] * x[r];
    const float scale = 1.0f / sqrtf(sum / (float)len + eps);
    const VF sc = V_SET1(scale);
    for (i = 0; i + VL <= len; i += VL)
        V_STORE(x + i, V_MUL(V_MUL(V_MUL(V_LOAD(x + i), sc), V_LOAD(w + i)), v_silu(V_LOAD(z + i))));
    for (; i < len; i++) x[i] = (x[i] * scale) * w[i] * silu1(z[i]);
}

#define DELTA_NET_KERNELS { gemm, dot, conv_silu, gated_norm }

#endif
