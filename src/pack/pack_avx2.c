/* AVX2 row packers: the W8A8 quantizer, the max |x| scan, and the fused
 * Q4_K / Q8_0 passes. Same bytes as the scalar code in pack_scalar.c and
 * w8a8.c: multiplies and subtracts are never fused, division is IEEE, and
 * rounding is cvtps2dq's nearest-even after a clamp to [-127, 127]. */
#include "pack/pack_impl.h"
#include "pack/w8a8.h"
#include "quant/quant_blocks.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* A plain IEEE division: on Zen 3 a reciprocal multiply with an exactness
 * check near half-integers measured slower than vdivps itself. */
static inline __m256i quantize8(__m256 x, __m256 scale) {
    const __m256 hi = _mm256_set1_ps((float)W8A8_QMAX), lo = _mm256_set1_ps(-(float)W8A8_QMAX);
    __m256 v = _mm256_div_ps(x, scale);
    v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
    return _mm256_cvtps_epi32(v);
}

/* Four vectors of 8 int32 (values 0-7, 8-15, 16-23, 24-31) to 32 int8 in order. */
static inline __m256i pack32(__m256i a, __m256i b, __m256i c, __m256i d) {
    __m256i ab = _mm256_packs_epi32(a, b); /* a0-3 b0-3 | a4-7 b4-7 */
    __m256i cd = _mm256_packs_epi32(c, d);
    __m256i v = _mm256_packs_epi16(ab, cd); /* a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7 */
    return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

void w8a8_quantize_avx2(const float *x, int64_t n, float scale, int8_t *q) {
    if (scale == 0.0f) {
        memset(q, 0, (size_t)n);
        return;
    }
    const __m256 s = _mm256_set1_ps(scale);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i v = pack32(quantize8(_mm256_loadu_ps(x + i), s), quantize8(_mm256_loadu_ps(x + i + 8), s),
                           quantize8(_mm256_loadu_ps(x + i + 16), s), quantize8(_mm256_loadu_ps(x + i + 24), s));
        _mm256_storeu_si256((__m256i *)(q + i), v);
    }
    for (; i < n; i++) q[i] = (int8_t)w8a8_quantize_one(x[i], scale);
}

static inline float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

float w8a8_amax_avx2(const float *x, int64_t n) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 big = _mm256_set1_ps(3.40282347e38f);
    __m256 m0 = _mm256_setzero_ps(), m1 = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask);
        __m256 b = _mm256_and_ps(_mm256_loadu_ps(x + i + 8), abs_mask);
        /* not (a <= big): true for NaN and infinity */
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, big, _CMP_NLE_UQ));
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(b, big, _CMP_NLE_UQ));
        m0 = _mm256_max_ps(m0, a);
        m1 = _mm256_max_ps(m1, b);
    }
    if (_mm256_movemask_ps(bad)) return -1.0f;
    float amax = hmax8(_mm256_max_ps(m0, m1));
    for (; i < n; i++) {
        float a = fabsf(x[i]);
        if (!(a <= 3.40282347e38f)) return -1.0f;
        if (a > amax) amax = a;
    }
    return amax;
}

/* Per 128-bit lane: bytes 0..15 reduced to lane byte 0 (min or max). */
static inline __m256i lane_min_u8(__m256i v) {
    v = _mm256_min_epu8(v, _mm256_srli_si256(v, 8));
    v = _mm256_min_epu8(v, _mm256_srli_si256(v, 4));
    v = _mm256_min_epu8(v, _mm256_srli_si256(v, 2));
    return _mm256_min_epu8(v, _mm256_srli_si256(v, 1));
}
static inline __m256i lane_max_u8(__m256i v) {
    v = _mm256_max_epu8(v, _mm256_srli_si256(v, 8));
    v = _mm256_max_epu8(v, _mm256_srli_si256(v, 4));
    v = _mm256_max_epu8(v, _mm256_srli_si256(v, 2));
    return _mm256_max_epu8(v, _mm256_srli_si256(v, 1));
}

/* Byte 0 of each lane of r[0..3] (sub-blocks 0,1 | 2,3 | 4,5 | 6,7) as 8
 * floats in sub-block order. */
static inline __m256 gather_codes(const __m256i r[4]) {
    __m256i b01 = _mm256_unpacklo_epi8(r[0], r[1]);  /* lane 0: sb0 sb2, lane 1: sb1 sb3 */
    __m256i b23 = _mm256_unpacklo_epi8(r[2], r[3]);  /* lane 0: sb4 sb6, lane 1: sb5 sb7 */
    __m256i w = _mm256_unpacklo_epi16(b01, b23);     /* lane 0: sb0 sb2 sb4 sb6, lane 1: sb1 sb3 sb5 sb7 */
    __m128i even = _mm256_castsi256_si128(w), odd = _mm256_extracti128_si256(w, 1);
    __m128i ordered = _mm_unpacklo_epi8(even, odd);  /* sb0 sb1 ... sb7 */
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(ordered));
}

/* The 8 d*sc and dmin*m of a Q4_K block, as the scalar dequantizer rounds them. */
static inline void q4k_scales(const struct block_q4_K *b, __m256 *d1, __m256 *m1) {
    uint32_t sm[4];
    unpack_scales_mins_k4(b->scales, sm); /* 8 scale bytes, then 8 min bytes */
    __m128i bytes = _mm_loadu_si128((const __m128i *)(const void *)sm);
    __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
    __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8)));
    *d1 = _mm256_mul_ps(_mm256_set1_ps(fp16_to_f32(b->d)), sc);
    *m1 = _mm256_mul_ps(_mm256_set1_ps(fp16_to_f32(b->dmin)), mn);
}

int pack_row_q4_K_avx2(const void *row, int K, int8_t *q, float *scale) {
    if (K <= 0 || K % QK_K) return PACK_E_TYPE;
    const struct block_q4_K *x = row;
    const int nb = K / QK_K;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 big = _mm256_set1_ps(3.40282347e38f);
    __m256 amax = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        __m256 d1, m1;
        q4k_scales(&x[i], &d1, &m1);
        /* Smallest and largest code of each sub-block: chunk c's low nibbles
         * are sub-block 2c, its high nibbles 2c+1. After the lane reductions
         * byte 0 of lane 0 / lane 1 holds sub-block 2c / 2c+1. */
        __m256i mn[4], mx[4];
        for (int c = 0; c < 4; c++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(x[i].qs + 32 * c));
            __m256i lo = _mm256_and_si256(v, low4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
            __m256i a = _mm256_permute2x128_si256(lo, hi, 0x20), b = _mm256_permute2x128_si256(lo, hi, 0x31);
            mn[c] = lane_min_u8(_mm256_min_epu8(a, b));
            mx[c] = lane_max_u8(_mm256_max_epu8(a, b));
        }
        __m256 wlo = _mm256_sub_ps(_mm256_mul_ps(d1, gather_codes(mn)), m1);
        __m256 whi = _mm256_sub_ps(_mm256_mul_ps(d1, gather_codes(mx)), m1);
        wlo = _mm256_and_ps(wlo, abs_mask);
        whi = _mm256_and_ps(whi, abs_mask);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(wlo, big, _CMP_NLE_UQ));
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(whi, big, _CMP_NLE_UQ));
        amax = _mm256_max_ps(amax, _mm256_max_ps(wlo, whi));
    }
    if (_mm256_movemask_ps(bad)) return PACK_E_VALUE;
    const float s = w8a8_scale(hmax8(amax));
    if (s == 0.0f) {
        memset(q, 0, (size_t)K);
        *scale = s;
        return PACK_OK;
    }
    const __m256 sv = _mm256_set1_ps(s);
    const __m256 codes0 = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256 codes1 = _mm256_setr_ps(8, 9, 10, 11, 12, 13, 14, 15);
    for (int i = 0; i < nb; i++) {
        float d1s[8], m1s[8];
        __m256 d1, m1;
        q4k_scales(&x[i], &d1, &m1);
        _mm256_storeu_ps(d1s, d1);
        _mm256_storeu_ps(m1s, m1);
        for (int c = 0; c < 4; c++) {
            /* Tables of the 16 codes of sub-blocks 2c and 2c+1. */
            __m256 da = _mm256_set1_ps(d1s[2 * c]), ma = _mm256_set1_ps(m1s[2 * c]);
            __m256 db = _mm256_set1_ps(d1s[2 * c + 1]), mb = _mm256_set1_ps(m1s[2 * c + 1]);
            __m256i ta0 = quantize8(_mm256_sub_ps(_mm256_mul_ps(da, codes0), ma), sv);
            __m256i ta1 = quantize8(_mm256_sub_ps(_mm256_mul_ps(da, codes1), ma), sv);
            __m256i tb0 = quantize8(_mm256_sub_ps(_mm256_mul_ps(db, codes0), mb), sv);
            __m256i tb1 = quantize8(_mm256_sub_ps(_mm256_mul_ps(db, codes1), mb), sv);
            __m256i t = pack32(ta0, ta1, tb0, tb1); /* lane 0: table a, lane 1: table b */
            __m256i lut_a = _mm256_permute2x128_si256(t, t, 0x00);
            __m256i lut_b = _mm256_permute2x128_si256(t, t, 0x11);
            __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(x[i].qs + 32 * c));
            __m256i lo = _mm256_and_si256(v, low4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
            int8_t *out = q + (size_t)i * QK_K + 64 * c;
            _mm256_storeu_si256((__m256i *)(void *)out, _mm256_shuffle_epi8(lut_a, lo));
            _mm256_storeu_si256((__m256i *)(void *)(out + 32), _mm256_shuffle_epi8(lut_b, hi));
        }
    }
    *scale = s;
    return PACK_OK;
}

int pack_row_q8_0_avx2(const void *row, int K, int8_t *q, float *scale) {
    if (K <= 0 || K % QK8_0) return PACK_E_TYPE;
    const struct block_q8_0 *x = row;
    const int nb = K / QK8_0;
    float amax = 0.0f;
    for (int i = 0; i < nb; i++) {
        const float d = fp16_to_f32(x[i].d);
        if (!(fabsf(d) <= 3.40282347e38f)) return PACK_E_VALUE;
        /* |q| as unsigned bytes (|-128| = 0x80 = 128), max over the block */
        __m256i a = _mm256_abs_epi8(_mm256_loadu_si256((const __m256i *)(const void *)x[i].qs));
        __m128i m = _mm_max_epu8(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
        m = _mm_max_epu8(m, _mm_srli_si128(m, 8));
        m = _mm_max_epu8(m, _mm_srli_si128(m, 4));
        m = _mm_max_epu8(m, _mm_srli_si128(m, 2));
        m = _mm_max_epu8(m, _mm_srli_si128(m, 1));
        const float b = (float)(_mm_cvtsi128_si32(m) & 0xFF) * fabsf(d);
        if (b > amax) amax = b;
    }
    const float s = w8a8_scale(amax);
    if (s == 0.0f) {
        memset(q, 0, (size_t)K);
        *scale = s;
        return PACK_OK;
    }
    const __m256 sv = _mm256_set1_ps(s);
    for (int i = 0; i < nb; i++) {
        const __m256 d = _mm256_set1_ps(fp16_to_f32(x[i].d));
        const __m128i *src = (const __m128i *)(const void *)x[i].qs;
        __m128i v0 = _mm_loadu_si128(src), v1 = _mm_loadu_si128(src + 1);
        __m256 f0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v0)), d);
        __m256 f1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v0, 8))), d);
        __m256 f2 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v1)), d);
        __m256 f3 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v1, 8))), d);
        __m256i out = pack32(quantize8(f0, sv), quantize8(f1, sv), quantize8(f2, sv), quantize8(f3, sv));
        _mm256_storeu_si256((__m256i *)(void *)(q + (size_t)i * QK8_0), out);
    }
    *scale = s;
    return PACK_OK;
}
