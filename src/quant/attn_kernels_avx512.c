/* AVX-512 attention kernels: with 32 registers the score tile is 8 keys by
 * 32 query columns and the output tile 4 rows by 64 dims (16 accumulators
 * each); the softmax and the f16 weights run 16 columns per vector, lane
 * for lane the 256-bit code's operations (so the same bits), and 8-column
 * remainders on that code. */
#include "quant/attn_kernels.h"
#include "quant/attn_kernels_x86.h"

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

/* attn_exp_neg, 16 lanes. */
ATTN_INLINE __m512 exp_neg16(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(EXPN_MIN));
    const __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(EXPN_LOG2E)),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(EXPN_LN2_HI), x);
    x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(EXPN_LN2_LO), x);
    __m512 y = _mm512_set1_ps(EXPN_P0);
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(EXPN_P1));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(EXPN_P2));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(EXPN_P3));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(EXPN_P4));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(EXPN_P5));
    y = _mm512_fmadd_ps(y, _mm512_mul_ps(x, x), _mm512_add_ps(x, _mm512_set1_ps(1.0f)));
    /* fx as an integer: its bits after adding 1.5 * 2^23 (exact for |fx| < 2^22, the same as
     * cvtps_epi32, which SIMDe's AVX-512 lacks) */
    const __m512 magic = _mm512_set1_ps(12582912.0f);
    const __m512i n = _mm512_sub_epi32(_mm512_castps_si512(_mm512_add_ps(fx, magic)), _mm512_castps_si512(magic));
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(y, _mm512_castsi512_ps(e));
}

/* Each value rounded to f16 and back, in two 256-bit halves (F16C). */
ATTN_INLINE __m512 round_f16_16(__m512 p) {
#define ROUND_F16_MODE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC) /* an immediate */
    const __m256 lo = _mm256_cvtph_ps(_mm256_cvtps_ph(_mm512_castps512_ps256(p), ROUND_F16_MODE));
    const __m256 hi = _mm256_cvtph_ps(
        _mm256_cvtps_ph(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(p), 1)), ROUND_F16_MODE));
#undef ROUND_F16_MODE
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi), 1));
}

/* Columns of row j that it shows (col >= masked0 + j*step), of the 16 from c0. */
ATTN_INLINE __mmask16 seen16(int c0, int masked0, int j, int step) {
    const __m512i col = _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32(c0));
    return _mm512_cmpgt_epi32_mask(col, _mm512_set1_epi32(masked0 + j * step - 1));
}

ATTN_INLINE void softmax16(float *s, int n_keys, int mp, float scale, int masked0, int step, float *max, float *sum,
                           float *alpha, const int write) {
    const __m512 sc = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
    int c0 = 0;
    for (; c0 + 16 <= mp; c0 += 16) {
        const int open = c0 >= masked0 + (n_keys - 1) * step; /* no row hides any of these columns */
        const __m512 old = _mm512_loadu_ps(max + c0);
        __m512 m = old;
        for (int j = 0; j < n_keys; j++) {
            float *sj = s + (size_t)j * mp + c0;
            __m512 v = _mm512_mul_ps(_mm512_loadu_ps(sj), sc);
            if (write) _mm512_storeu_ps(sj, v);
            if (!open) v = _mm512_mask_blend_ps(seen16(c0, masked0, j, step), ninf, v);
            m = _mm512_max_ps(m, v);
        }
        __m512 block = _mm512_setzero_ps();
        for (int j = 0; j < n_keys; j++) {
            float *sj = s + (size_t)j * mp + c0;
            const __m512 sv = _mm512_loadu_ps(sj);
            __m512 p = exp_neg16(_mm512_sub_ps(write ? sv : _mm512_mul_ps(sv, sc), m));
            if (!open) p = _mm512_maskz_mov_ps(seen16(c0, masked0, j, step), p);
            if (write) _mm512_storeu_ps(sj, p);
            block = _mm512_add_ps(block, p);
        }
        const __mmask16 none = _mm512_cmp_ps_mask(m, ninf, _CMP_EQ_OQ);
        const __m512 a = _mm512_mask_blend_ps(none, exp_neg16(_mm512_sub_ps(old, m)), _mm512_set1_ps(1.0f));
        _mm512_storeu_ps(alpha + c0, a);
        _mm512_storeu_ps(sum + c0, _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(sum + c0), a), block));
        _mm512_storeu_ps(max + c0, m);
    }
    attn_softmax8_body(s, n_keys, mp, scale, masked0, step, max, sum, alpha, c0, write);
}

static void softmax(float *s, int n_keys, int mp, float scale, int masked0, int step, float *max, float *sum,
                    float *alpha) {
    softmax16(s, n_keys, mp, scale, masked0, step, max, sum, alpha, 1);
}

static void stats(float *s, int n_keys, int mp, float scale, int masked0, int step, float *max, float *sum,
                  float *alpha) {
    softmax16(s, n_keys, mp, scale, masked0, step, max, sum, alpha, 0);
}

static void weights(float *s, int n_keys, int mp, float scale, int masked0, int step, const float *max,
                    const float *inv_sum) {
    const __m512 sc = _mm512_set1_ps(scale);
    int c0 = 0;
    for (; c0 + 16 <= mp; c0 += 16) {
        const int open = c0 >= masked0 + (n_keys - 1) * step;
        const __m512 m = _mm512_loadu_ps(max + c0), inv = _mm512_loadu_ps(inv_sum + c0);
        for (int j = 0; j < n_keys; j++) {
            float *sj = s + (size_t)j * mp + c0;
            __m512 p = _mm512_mul_ps(exp_neg16(_mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(sj), sc), m)), inv);
            p = round_f16_16(p);
            if (!open) p = _mm512_maskz_mov_ps(seen16(c0, masked0, j, step), p);
            _mm512_storeu_ps(sj, p);
        }
    }
    attn_weights8_body(s, n_keys, mp, scale, masked0, step, max, inv_sum, c0);
}

const struct attn_kernels attn_kernels_avx512 = { 8, scores, softmax, stats, weights, accumulate };
