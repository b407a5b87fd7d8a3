/* AVX-512 attention kernels: with 32 registers the score tile is 8 keys by
 * 32 query columns and the output tile 4 rows by 64 dims (16 accumulators
 * each); 8-column panels and the softmax run on the 256-bit code. */
#include "arch/attn_kernels.h"
#include "arch/attn_kernels_x86.h"

/* s rows 0..7, columns c0..c0+16*C-1. */
ATTN_INLINE void scores_panel(const float *qt, int mp, int hd, const float *k, int c0, float *s, const int C) {
    __m512 acc[8][2];
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < C; c++) acc[r][c] = _mm512_setzero_ps();
    for (int d = 0; d < hd; d++) {
        __m512 q[2];
        for (int c = 0; c < C; c++) q[c] = _mm512_loadu_ps(qt + (size_t)d * mp + c0 + 16 * c);
        for (int r = 0; r < 8; r++) {
            const __m512 kr = _mm512_set1_ps(k[(size_t)r * hd + d]);
            for (int c = 0; c < C; c++) acc[r][c] = _mm512_fmadd_ps(kr, q[c], acc[r][c]);
        }
    }
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < C; c++) _mm512_storeu_ps(s + (size_t)r * mp + c0 + 16 * c, acc[r][c]);
}

static void scores(const float *qt, int mp, int hd, const float *k, int n_keys, float *s) {
    for (int j0 = 0; j0 < n_keys; j0 += 8) {
        const float *kj = k + (size_t)j0 * hd;
        float *sj = s + (size_t)j0 * mp;
        int c0 = 0;
        for (; c0 + 32 <= mp; c0 += 32) scores_panel(qt, mp, hd, kj, c0, sj, 2);
        for (; c0 + 16 <= mp; c0 += 16) scores_panel(qt, mp, hd, kj, c0, sj, 1);
        for (; c0 < mp; c0 += 8) attn_scores_panel8(qt, mp, hd, kj, c0, sj);
    }
}

/* Output rows i0..i0+3, dims d0..d0+16*C-1, over every key. */
ATTN_INLINE void accumulate_tile(const float *s, int mp, int n_keys, const float *v, int hdp, const float *alpha,
                                 float *o, int i0, int d0, const int C) {
    __m512 acc[4][4];
    for (int r = 0; r < 4; r++) {
        const __m512 a = _mm512_set1_ps(alpha[i0 + r]);
        for (int c = 0; c < C; c++) acc[r][c] = _mm512_mul_ps(_mm512_loadu_ps(o + (size_t)(i0 + r) * hdp + d0 + 16 * c), a);
    }
    for (int j = 0; j < n_keys; j++) {
        __m512 vj[4];
        for (int c = 0; c < C; c++) vj[c] = _mm512_loadu_ps(v + (size_t)j * hdp + d0 + 16 * c);
        for (int r = 0; r < 4; r++) {
            const __m512 p = _mm512_set1_ps(s[(size_t)j * mp + i0 + r]);
            for (int c = 0; c < C; c++) acc[r][c] = _mm512_fmadd_ps(p, vj[c], acc[r][c]);
        }
    }
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < C; c++) _mm512_storeu_ps(o + (size_t)(i0 + r) * hdp + d0 + 16 * c, acc[r][c]);
}

static void accumulate(const float *s, int mp, int n_keys, const float *v, int hdp, const float *alpha, float *o) {
    for (int i0 = 0; i0 < mp; i0 += 4) {
        int d0 = 0;
        for (; d0 + 64 <= hdp; d0 += 64) accumulate_tile(s, mp, n_keys, v, hdp, alpha, o, i0, d0, 4);
        for (; d0 < hdp; d0 += 16) accumulate_tile(s, mp, n_keys, v, hdp, alpha, o, i0, d0, 1);
    }
}

const struct attn_kernels attn_kernels_avx512 = { 8, scores, attn_softmax8, attn_weights8, accumulate };
