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

/* ---- helpers of the fused paths ---- */

/* pack_refine_amax (pack_impl.h) with 8 bounds per compare: the same
 * search, at a fraction of the scalar loop's cost per row. n is a multiple
 * of 8. */
static inline float refine_amax_avx2(const float *bound, int n, pack_subblock_amax_fn exact, const void *row,
                                     const float *a, const float *b) {
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < n; j += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(bound + j));
    const float top = hmax8(m);
    if (top == 0.0f) return 0.0f; /* every value is 0 */
    const __m256 topv = _mm256_set1_ps(top);
    int first = 0;
    for (int j = 0;; j += 8) {
        const unsigned eq = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(bound + j), topv, _CMP_EQ_OQ));
        if (eq) {
            first = j + __builtin_ctz(eq);
            break;
        }
    }
    float best = exact(row, a, b, first);
    for (int j = 0; j < n; j += 8) {
        unsigned mask = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(bound + j), _mm256_set1_ps(best),
                                                                   _CMP_GT_OQ));
        while (mask) {
            const int jj = j + __builtin_ctz(mask);
            mask &= mask - 1;
            if (jj == first || !(bound[jj] > best)) continue;
            const float v = exact(row, a, b, jj);
            if (v > best) best = v;
        }
    }
    return best;
}

/* Smallest and largest of 32 bytes. */
static inline int min_u8x32(__m256i v) {
    __m128i m = _mm_min_epu8(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    m = _mm_min_epu8(m, _mm_srli_si128(m, 8));
    m = _mm_min_epu8(m, _mm_srli_si128(m, 4));
    m = _mm_min_epu8(m, _mm_srli_si128(m, 2));
    m = _mm_min_epu8(m, _mm_srli_si128(m, 1));
    return _mm_cvtsi128_si32(m) & 0xFF;
}
static inline int max_u8x32(__m256i v) {
    __m128i m = _mm_max_epu8(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    m = _mm_max_epu8(m, _mm_srli_si128(m, 8));
    m = _mm_max_epu8(m, _mm_srli_si128(m, 4));
    m = _mm_max_epu8(m, _mm_srli_si128(m, 2));
    m = _mm_max_epu8(m, _mm_srli_si128(m, 1));
    return _mm_cvtsi128_si32(m) & 0xFF;
}

/* ---- quantizing without the clamp ----
 *
 * Rows of Q4_K, Q5_K, Q6_K, Q8_0 and F16 hold multiples of 2^-24 (products and
 * differences of fp16 scales and integer codes), so their max |w| is 0 or
 * at least 2^-24 and s = amax / 127 is a normal float, rounded to within a
 * factor (1 +- 2^-24) of the exact quotient. Every value of the row has
 * |w| <= amax, hence |w / s| <= 127 * (1 + 2^-24) + rounding, which is below
 * 127.5: the clamp to [-127, 127] never changes a code and is left out. A
 * Q4_K table entry of a code that its sub-block does not hold may fall
 * outside; such entries are never looked up. */
static inline __m256i quantize8_in_range(__m256 x, __m256 scale) { return _mm256_cvtps_epi32(_mm256_div_ps(x, scale)); }

/* 32 bytes whose 128-bit lanes hold values 0-15 and 16-31, widened to four
 * vectors of int32 in the order that two rounds of packs put back in place:
 * e[0] = values 0-3 | 16-19, e[1] = 4-7 | 20-23, e[2] = 8-11 | 24-27,
 * e[3] = 12-15 | 28-31 (lane 0 | lane 1). */
static inline void widen_u8(__m256i v, __m256 e[4]) {
    const __m256i z = _mm256_setzero_si256();
    const __m256i lo = _mm256_unpacklo_epi8(v, z), hi = _mm256_unpackhi_epi8(v, z);
    e[0] = _mm256_cvtepi32_ps(_mm256_unpacklo_epi16(lo, z));
    e[1] = _mm256_cvtepi32_ps(_mm256_unpackhi_epi16(lo, z));
    e[2] = _mm256_cvtepi32_ps(_mm256_unpacklo_epi16(hi, z));
    e[3] = _mm256_cvtepi32_ps(_mm256_unpackhi_epi16(hi, z));
}
/* The inverse order of widen_u8: four vectors of int32 codes to 32 bytes. */
static inline __m256i narrow_widened(__m256i r0, __m256i r1, __m256i r2, __m256i r3) {
    return _mm256_packs_epi16(_mm256_packs_epi32(r0, r1), _mm256_packs_epi32(r2, r3));
}

/* ---- Q4_K ---- */

/* The 8 d*sc and dmin*m of a Q4_K/Q5_K block, as the scalar dequantizer rounds them. */
static inline void kq_scales(const uint8_t *scales12, uint16_t d, uint16_t dmin, __m256 *d1, __m256 *m1) {
    uint32_t sm[4];
    unpack_scales_mins_k4(scales12, sm); /* 8 scale bytes, then 8 min bytes */
    __m128i bytes = _mm_loadu_si128((const __m128i *)(const void *)sm);
    __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
    __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8)));
    *d1 = _mm256_mul_ps(_mm256_set1_ps(fp16_to_f32(d)), sc);
    *m1 = _mm256_mul_ps(_mm256_set1_ps(fp16_to_f32(dmin)), mn);
}

/* w = d1 * c - m1 for codes c in [0, cmax]: |w| is at most the larger of
 * |w(0)| = |m1| and |w(cmax)|. */
static inline __m256 kq_bound(__m256 d1, __m256 m1, float cmax) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 top = _mm256_sub_ps(_mm256_mul_ps(d1, _mm256_set1_ps(cmax)), m1);
    return _mm256_max_ps(_mm256_and_ps(m1, abs_mask), _mm256_and_ps(top, abs_mask));
}

static float q4k_subblock_amax(const void *row, const float *d1s, const float *m1s, int j) {
    const struct block_q4_K *b = (const struct block_q4_K *)row + j / 8;
    const int sb = j % 8;
    __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(b->qs + 32 * (sb / 2)));
    if (sb & 1) v = _mm256_srli_epi16(v, 4);
    v = _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
    return pack_kq_amax(d1s[j], m1s[j], min_u8x32(v), max_u8x32(v));
}

int pack_row_q4_K_avx2(const void *row, int K, int8_t *q, float *scale) {
    if (K <= 0 || K % QK_K) return PACK_E_TYPE;
    if (K > PACK_MAX_K) return PACK_E_SHAPE; /* the row tables below */
    const struct block_q4_K *x = row;
    const int nb = K / QK_K;
    float d1s[PACK_MAX_K / 32], m1s[PACK_MAX_K / 32], bound[PACK_MAX_K / 32];
    for (int i = 0; i < nb; i++) {
        if (!pack_fp16_finite(x[i].d) || !pack_fp16_finite(x[i].dmin)) return PACK_E_VALUE; /* then no value is finite */
        __m256 d1, m1;
        kq_scales(x[i].scales, x[i].d, x[i].dmin, &d1, &m1);
        _mm256_storeu_ps(d1s + 8 * i, d1);
        _mm256_storeu_ps(m1s + 8 * i, m1);
        _mm256_storeu_ps(bound + 8 * i, kq_bound(d1, m1, 15.0f));
    }
    const float s = w8a8_scale(refine_amax_avx2(bound, 8 * nb, q4k_subblock_amax, x, d1s, m1s));
    *scale = s;
    if (s == 0.0f) {
        memset(q, 0, (size_t)K);
        return PACK_OK;
    }
    const __m256 sv = _mm256_set1_ps(s);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    /* Table entries in the order the packs below put back in place: codes
     * 0-3, 8-11 and 4-7, 12-15 give lanes 0-7 | 8-15 after packs_epi32. */
    const __m256 codes_a = _mm256_setr_ps(0, 1, 2, 3, 8, 9, 10, 11);
    const __m256 codes_b = _mm256_setr_ps(4, 5, 6, 7, 12, 13, 14, 15);
    for (int i = 0; i < nb; i++) {
        const float *d1 = d1s + 8 * i, *m1 = m1s + 8 * i;
        for (int c = 0; c < 4; c++) {
            /* the 16-entry tables of sub-blocks 2c (t) and 2c+1 (u) */
            const __m256 dt = _mm256_broadcast_ss(d1 + 2 * c), mt = _mm256_broadcast_ss(m1 + 2 * c);
            const __m256 du = _mm256_broadcast_ss(d1 + 2 * c + 1), mu = _mm256_broadcast_ss(m1 + 2 * c + 1);
            __m256i t = _mm256_packs_epi32(quantize8_in_range(_mm256_sub_ps(_mm256_mul_ps(dt, codes_a), mt), sv),
                                           quantize8_in_range(_mm256_sub_ps(_mm256_mul_ps(dt, codes_b), mt), sv));
            __m256i u = _mm256_packs_epi32(quantize8_in_range(_mm256_sub_ps(_mm256_mul_ps(du, codes_a), mu), sv),
                                           quantize8_in_range(_mm256_sub_ps(_mm256_mul_ps(du, codes_b), mu), sv));
            /* qwords: t 0-7, u 0-7, t 8-15, u 8-15 */
            const __m256i tu = _mm256_packs_epi16(t, u);
            const __m256i lut_t = _mm256_permute4x64_epi64(tu, 0x88), lut_u = _mm256_permute4x64_epi64(tu, 0xDD);
            const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(x[i].qs + 32 * c));
            const __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
            int8_t *out = q + (size_t)i * QK_K + 64 * c;
            _mm256_storeu_si256((__m256i *)(void *)out, _mm256_shuffle_epi8(lut_t, lo));
            _mm256_storeu_si256((__m256i *)(void *)(out + 32), _mm256_shuffle_epi8(lut_u, hi));
        }
    }
    return PACK_OK;
}

/* ---- Q5_K ---- */

/* Codes of sub-blocks 2c (*a) and 2c+1 (*b) of a Q5_K block: the nibbles
 * of qs[32c..] plus 16 for bits 2c / 2c+1 of qh. */
static inline void q5k_codes(const struct block_q5_K *b, int c, __m256i *ca, __m256i *cb) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), b16 = _mm256_set1_epi8(0x10);
    const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(b->qs + 32 * c));
    /* 16-bit shifts: the masks keep each byte's own bits */
    const __m256i h = _mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(const void *)b->qh), 2 * c);
    *ca = _mm256_or_si256(_mm256_and_si256(v, low4), _mm256_and_si256(_mm256_slli_epi16(h, 4), b16));
    *cb = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4),
                          _mm256_and_si256(_mm256_slli_epi16(h, 3), b16));
}

static float q5k_subblock_amax(const void *row, const float *d1s, const float *m1s, int j) {
    const struct block_q5_K *b = (const struct block_q5_K *)row + j / 8;
    const int sb = j % 8;
    __m256i ca, cb;
    q5k_codes(b, sb / 2, &ca, &cb);
    const __m256i v = sb & 1 ? cb : ca;
    return pack_kq_amax(d1s[j], m1s[j], min_u8x32(v), max_u8x32(v));
}

/* 32 codes of one sub-block: w = d1 * c - m1, quantized to out[0..31]. */
static inline void kq_quantize32(__m256i codes, __m256 d1, __m256 m1, __m256 sv, int8_t *out) {
    __m256 e[4];
    widen_u8(codes, e);
    __m256i r[4];
    for (int k = 0; k < 4; k++) r[k] = quantize8_in_range(_mm256_sub_ps(_mm256_mul_ps(d1, e[k]), m1), sv);
    _mm256_storeu_si256((__m256i *)(void *)out, narrow_widened(r[0], r[1], r[2], r[3]));
}

int pack_row_q5_K_avx2(const void *row, int K, int8_t *q, float *scale) {
    if (K <= 0 || K % QK_K) return PACK_E_TYPE;
    if (K > PACK_MAX_K) return PACK_E_SHAPE; /* the row tables below */
    const struct block_q5_K *x = row;
    const int nb = K / QK_K;
    float d1s[PACK_MAX_K / 32], m1s[PACK_MAX_K / 32], bound[PACK_MAX_K / 32];
    for (int i = 0; i < nb; i++) {
        if (!pack_fp16_finite(x[i].d) || !pack_fp16_finite(x[i].dmin)) return PACK_E_VALUE;
        __m256 d1, m1;
        kq_scales(x[i].scales, x[i].d, x[i].dmin, &d1, &m1);
        _mm256_storeu_ps(d1s + 8 * i, d1);
        _mm256_storeu_ps(m1s + 8 * i, m1);
        _mm256_storeu_ps(bound + 8 * i, kq_bound(d1, m1, 31.0f));
    }
    const float s = w8a8_scale(refine_amax_avx2(bound, 8 * nb, q5k_subblock_amax, x, d1s, m1s));
    *scale = s;
    if (s == 0.0f) {
        memset(q, 0, (size_t)K);
        return PACK_OK;
    }
    const __m256 sv = _mm256_set1_ps(s);
    for (int i = 0; i < nb; i++) {
        const float *d1 = d1s + 8 * i, *m1 = m1s + 8 * i;
        for (int c = 0; c < 4; c++) {
            __m256i ca, cb;
            q5k_codes(&x[i], c, &ca, &cb);
            int8_t *out = q + (size_t)i * QK_K + 64 * c;
            kq_quantize32(ca, _mm256_broadcast_ss(d1 + 2 * c), _mm256_broadcast_ss(m1 + 2 * c), sv, out);
            kq_quantize32(cb, _mm256_broadcast_ss(d1 + 2 * c + 1), _mm256_broadcast_ss(m1 + 2 * c + 1), sv, out + 32);
        }
    }
    return PACK_OK;
}

/* ---- Q6_K ---- */

/* The 32 six-bit codes (0..63, value = code - 32) of quarter qtr (0..3) of
 * half h of a Q6_K block: values 128 h + 32 qtr + 0..31, which are
 * sub-blocks 8 h + 2 qtr (lane 0) and 8 h + 2 qtr + 1 (lane 1). */
static inline __m256i q6k_codes(const struct block_q6_K *b, int h, int qtr) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), b45 = _mm256_set1_epi8(0x30);
    __m256i l = _mm256_loadu_si256((const __m256i *)(const void *)(b->ql + 64 * h + 32 * (qtr & 1)));
    const __m256i hb = _mm256_loadu_si256((const __m256i *)(const void *)(b->qh + 32 * h));
    if (qtr >= 2) l = _mm256_srli_epi16(l, 4);
    /* bits 2 qtr, 2 qtr + 1 of qh to bits 4, 5 (16-bit shifts; the mask keeps each byte's own bits) */
    __m256i top;
    switch (qtr) {
    case 0: top = _mm256_slli_epi16(hb, 4); break;
    case 1: top = _mm256_slli_epi16(hb, 2); break;
    case 2: top = hb; break;
    default: top = _mm256_srli_epi16(hb, 2); break;
    }
    return _mm256_or_si256(_mm256_and_si256(l, low4), _mm256_and_si256(top, b45));
}

static float q6k_subblock_amax(const void *row, const float *ds, const float *unused, int j) {
    (void)unused;
    const struct block_q6_K *b = (const struct block_q6_K *)row + j / 16;
    const int s = j % 16;
    const __m256i v = q6k_codes(b, s / 8, (s % 8) / 2);
    /* |code - 32| in the sub-block's lane; the other lane made 0 */
    __m256i a = _mm256_abs_epi8(_mm256_sub_epi8(v, _mm256_set1_epi8(32)));
    a = _mm256_and_si256(a, s & 1 ? _mm256_setr_epi64x(0, 0, -1, -1) : _mm256_setr_epi64x(-1, -1, 0, 0));
    return fabsf(ds[j]) * (float)max_u8x32(a);
}

int pack_row_q6_K_avx2(const void *row, int K, int8_t *q, float *scale) {
    if (K <= 0 || K % QK_K) return PACK_E_TYPE;
    if (K > PACK_MAX_K) return PACK_E_SHAPE; /* the row tables below */
    const struct block_q6_K *x = row;
    const int nb = K / QK_K;
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    /* D = d * sc per sub-block of 16, exact (11 x 8 bits); w = D * (code - 32) */
    float ds[PACK_MAX_K / 16], bound[PACK_MAX_K / 16];
    for (int i = 0; i < nb; i++) {
        if (!pack_fp16_finite(x[i].d)) return PACK_E_VALUE; /* then no value is finite */
        const __m256 d = _mm256_set1_ps(fp16_to_f32(x[i].d));
        const __m128i sc = _mm_loadu_si128((const __m128i *)(const void *)x[i].scales);
        const __m256 d0 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)));
        const __m256 d1 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8))));
        _mm256_storeu_ps(ds + 16 * i, d0);
        _mm256_storeu_ps(ds + 16 * i + 8, d1);
        /* |code - 32| <= 32 */
        _mm256_storeu_ps(bound + 16 * i, _mm256_mul_ps(_mm256_and_ps(d0, abs_mask), _mm256_set1_ps(32.0f)));
        _mm256_storeu_ps(bound + 16 * i + 8, _mm256_mul_ps(_mm256_and_ps(d1, abs_mask), _mm256_set1_ps(32.0f)));
    }
    const float s = w8a8_scale(refine_amax_avx2(bound, 16 * nb, q6k_subblock_amax, x, ds, NULL));
    *scale = s;
    if (s == 0.0f) {
        memset(q, 0, (size_t)K);
        return PACK_OK;
    }
    const __m256 sv = _mm256_set1_ps(s), bias = _mm256_set1_ps(32.0f);
    for (int i = 0; i < nb; i++) {
        for (int h = 0; h < 2; h++)
            for (int qtr = 0; qtr < 4; qtr++) {
                const int sb = 8 * h + 2 * qtr;
                /* D of sub-block sb in lane 0, of sb + 1 in lane 1 */
                const __m256 D = _mm256_setr_m128(_mm_broadcast_ss(ds + 16 * i + sb), _mm_broadcast_ss(ds + 16 * i + sb + 1));
                __m256 e[4];
                widen_u8(q6k_codes(&x[i], h, qtr), e);
                __m256i r[4];
                for (int k = 0; k < 4; k++) r[k] = quantize8_in_range(_mm256_mul_ps(D, _mm256_sub_ps(e[k], bias)), sv);
                _mm256_storeu_si256((__m256i *)(void *)(q + (size_t)i * QK_K + 16 * sb), narrow_widened(r[0], r[1], r[2], r[3]));
            }
    }
    return PACK_OK;
}

/* ---- F16 and BF16 ----
 * The magnitudes of both order as the integers of their low 15 bits, so
 * the row maximum is an integer maximum; a magnitude at or above the
 * infinity pattern is an infinity or a NaN. */

static inline uint16_t max_u16x16(__m256i v) {
    __m128i m = _mm_max_epu16(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    m = _mm_max_epu16(m, _mm_srli_si128(m, 8));
    m = _mm_max_epu16(m, _mm_srli_si128(m, 4));
    m = _mm_max_epu16(m, _mm_srli_si128(m, 2));
    return (uint16_t)(_mm_cvtsi128_si32(m) & 0xFFFF);
}

static uint16_t max_magnitude16(const uint16_t *h, int K) {
    const __m256i mask = _mm256_set1_epi16(0x7FFF);
    __m256i m0 = _mm256_setzero_si256(), m1 = m0;
    int k = 0;
    for (; k + 32 <= K; k += 32) {
        m0 = _mm256_max_epu16(m0, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)(h + k)), mask));
        m1 = _mm256_max_epu16(m1, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)(h + k + 16)), mask));
    }
    uint16_t top = max_u16x16(_mm256_max_epu16(m0, m1));
    for (; k < K; k++) top = (uint16_t)(h[k] & 0x7FFF) > top ? (uint16_t)(h[k] & 0x7FFF) : top;
    return top;
}

int pack_row_f16_avx2(const void *row, int K, int8_t *q, float *scale) {
    if (K <= 0) return PACK_E_TYPE;
    const uint16_t *h = row;
    const uint16_t top = max_magnitude16(h, K);
    if (top >= 0x7C00) return PACK_E_VALUE;
    const float s = w8a8_scale(fp16_to_f32(top));
    *scale = s;
    if (s == 0.0f) {
        memset(q, 0, (size_t)K);
        return PACK_OK;
    }
    const __m256 sv = _mm256_set1_ps(s);
    int k = 0;
    for (; k + 32 <= K; k += 32) {
        __m256i r[4];
        for (int j = 0; j < 4; j++)
            r[j] = quantize8_in_range(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(h + k + 8 * j))), sv);
        _mm256_storeu_si256((__m256i *)(void *)(q + k), pack32(r[0], r[1], r[2], r[3]));
    }
    for (; k < K; k++) q[k] = (int8_t)w8a8_quantize_one(fp16_to_f32(h[k]), s);
    return PACK_OK;
}

/* BF16 keeps the clamp: it reaches float's subnormals, where s loses precision. */
int pack_row_bf16_avx2(const void *row, int K, int8_t *q, float *scale) {
    if (K <= 0) return PACK_E_TYPE;
    const uint16_t *h = row;
    const uint16_t top = max_magnitude16(h, K);
    if (top >= 0x7F80) return PACK_E_VALUE;
    const float s = w8a8_scale(bf16_to_f32(top));
    *scale = s;
    if (s == 0.0f) {
        memset(q, 0, (size_t)K);
        return PACK_OK;
    }
    const __m256 sv = _mm256_set1_ps(s);
    const __m256i z = _mm256_setzero_si256();
    int k = 0;
    for (; k + 32 <= K; k += 32) {
        /* bf16 in the high half of each 32-bit lane is the float: values
         * 0-3 | 8-11, 4-7 | 12-15, 16-19 | 24-27, 20-23 | 28-31 */
        const __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(h + k));
        const __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(h + k + 16));
        const __m256i r0 = quantize8(_mm256_castsi256_ps(_mm256_unpacklo_epi16(z, a)), sv);
        const __m256i r1 = quantize8(_mm256_castsi256_ps(_mm256_unpackhi_epi16(z, a)), sv);
        const __m256i r2 = quantize8(_mm256_castsi256_ps(_mm256_unpacklo_epi16(z, b)), sv);
        const __m256i r3 = quantize8(_mm256_castsi256_ps(_mm256_unpackhi_epi16(z, b)), sv);
        /* qwords 0-7, 16-23, 8-15, 24-31 */
        const __m256i v = _mm256_packs_epi16(_mm256_packs_epi32(r0, r1), _mm256_packs_epi32(r2, r3));
        _mm256_storeu_si256((__m256i *)(void *)(q + k), _mm256_permute4x64_epi64(v, 0xD8));
    }
    for (; k < K; k++) q[k] = (int8_t)w8a8_quantize_one(bf16_to_f32(h[k]), s);
    return PACK_OK;
}

/* ---- Q8_0 ---- */

static float q80_block_amax(const void *row, const float *ds, const float *unused, int j) {
    (void)unused;
    const struct block_q8_0 *b = (const struct block_q8_0 *)row + j;
    /* |q| as unsigned bytes (|-128| = 0x80 = 128) */
    const __m256i a = _mm256_abs_epi8(_mm256_loadu_si256((const __m256i *)(const void *)b->qs));
    return (float)max_u8x32(a) * fabsf(ds[j]);
}

/* Q8_0: w = q * d with |q| <= 128, so a block's bound is 128 |d|. Its
 * values are multiples of 2^-24 too, so quantizing skips the clamp. */
int pack_row_q8_0_avx2(const void *row, int K, int8_t *q, float *scale) {
    if (K <= 0 || K % QK8_0) return PACK_E_TYPE;
    if (K > PACK_MAX_K) return PACK_E_SHAPE; /* the row tables below */
    const struct block_q8_0 *x = row;
    const int nb = K / QK8_0, n8 = (nb + 7) & ~7;
    float ds[PACK_MAX_K / QK8_0], bound[PACK_MAX_K / QK8_0 + 8];
    for (int i = 0; i < nb; i++) {
        if (!pack_fp16_finite(x[i].d)) return PACK_E_VALUE; /* then no value is finite */
        ds[i] = _cvtsh_ss(x[i].d);
        bound[i] = 128.0f * fabsf(ds[i]);
    }
    for (int i = nb; i < n8; i++) bound[i] = 0.0f;
    const float s = w8a8_scale(refine_amax_avx2(bound, n8, q80_block_amax, x, ds, NULL));
    *scale = s;
    if (s == 0.0f) {
        memset(q, 0, (size_t)K);
        return PACK_OK;
    }
    const __m256 sv = _mm256_set1_ps(s);
    for (int i = 0; i < nb; i++) {
        const __m256 d = _mm256_broadcast_ss(ds + i);
        const __m128i *src = (const __m128i *)(const void *)x[i].qs;
        __m128i v0 = _mm_loadu_si128(src), v1 = _mm_loadu_si128(src + 1);
        __m256 f0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v0)), d);
        __m256 f1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v0, 8))), d);
        __m256 f2 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v1)), d);
        __m256 f3 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v1, 8))), d);
        __m256i out = pack32(quantize8_in_range(f0, sv), quantize8_in_range(f1, sv), quantize8_in_range(f2, sv),
                             quantize8_in_range(f3, sv));
        _mm256_storeu_si256((__m256i *)(void *)(q + (size_t)i * QK8_0), out);
    }
    return PACK_OK;
}
