#include "quant/attn_kernels.h"
#include "quant/attn_kernels_x86.h"

/* s rows 0..3, columns c0..c0+15: 8 accumulators against 2 query and 4
 * key loads per dim. The 8 x 8 panel needs 9 loads per 8 multiply-adds,
 * more than the 2 loads a cycle that keep both FMA pipes busy. */
ATTN_INLINE void scores_panel4x16(const float *qt, int mp, int hd, const float *k, int c0, float *s) {
    __m256 acc[4][2];
    for (int r = 0; r < 4; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int d = 0; d < hd; d++) {
        const __m256 q0 = _mm256_loadu_ps(qt + (size_t)d * mp + c0), q1 = _mm256_loadu_ps(qt + (size_t)d * mp + c0 + 8);
        for (int r = 0; r < 4; r++) {
            const __m256 kr = _mm256_set1_ps(k[(size_t)r * hd + d]);
            acc[r][0] = _mm256_fmadd_ps(kr, q0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(kr, q1, acc[r][1]);
        }
    }
    for (int r = 0; r < 4; r++) {
        _mm256_storeu_ps(s + (size_t)r * mp + c0, acc[r][0]);
        _mm256_storeu_ps(s + (size_t)r * mp + c0 + 8, acc[r][1]);
    }
}

static void scores(const float *qt, int mp, int hd, const float *k, int n_keys, float *s) {
    for (int j0 = 0; j0 < n_keys; j0 += 8) {
        int c0 = 0;
        for (; c0 + 16 <= mp; c0 += 16)
            for (int r0 = 0; r0 < 8; r0 += 4)
                scores_panel4x16(qt, mp, hd, k + (size_t)(j0 + r0) * hd, c0, s + (size_t)(j0 + r0) * mp);
        for (; c0 < mp; c0 += 8) attn_scores_panel8(qt, mp, hd, k + (size_t)j0 * hd, c0, s + (size_t)j0 * mp);
    }
}

/* Four output rows by 16 dims in eight accumulators, over every key. */
static void accumulate(const float *s, int mp, int n_keys, const float *v, int hdp, const float *alpha, float *o) {
    for (int i0 = 0; i0 < mp; i0 += 4)
        for (int d0 = 0; d0 < hdp; d0 += 16) {
            __m256 acc[4][2];
            for (int r = 0; r < 4; r++) {
                const __m256 a = _mm256_set1_ps(alpha[i0 + r]);
                for (int c = 0; c < 2; c++)
                    acc[r][c] = _mm256_mul_ps(_mm256_loadu_ps(o + (size_t)(i0 + r) * hdp + d0 + 8 * c), a);
            }
            for (int j = 0; j < n_keys; j++) {
                const __m256 v0 = _mm256_loadu_ps(v + (size_t)j * hdp + d0), v1 = _mm256_loadu_ps(v + (size_t)j * hdp + d0 + 8);
                for (int r = 0; r < 4; r++) {
                    const __m256 p = _mm256_set1_ps(s[(size_t)j * mp + i0 + r]);
                    acc[r][0] = _mm256_fmadd_ps(p, v0, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(p, v1, acc[r][1]);
                }
            }
            for (int r = 0; r < 4; r++)
                for (int c = 0; c < 2; c++) _mm256_storeu_ps(o + (size_t)(i0 + r) * hdp + d0 + 8 * c, acc[r][c]);
        }
}

const struct attn_kernels attn_kernels_avx2 = { 8, scores, attn_softmax8, attn_stats8, attn_weights8, accumulate };
