/* The cpu device's int8 GEMM in AVX2: blocks of 2 activation rows x 4
 * weight channels, 32 values of K per step. Bit for bit the plain C kernel
 * (dev_cpu_gemm.h): the int32 sums are exact and the output is
 * w8a8_out(acc, row_scale, channel_scale), two float multiplies in order.
 *
 * AVX2 multiplies bytes only as unsigned x signed (vpmaddubsw), so each step
 * takes |a| as the unsigned operand and w with a's sign as the signed one:
 * |a| * (sign(a) * w) = a * w. The pair sums cannot saturate int16: weight
 * codes are in [-127, 127] (W8A8 never makes -128, so sign(a) * w never
 * wraps), |a| <= 128 (an activation of -128 gives the unsigned byte 128),
 * and 2 * 128 * 127 = 32512 <= 32767. vpmaddwd against ones then widens the
 * pairs to int32, which hold any K this device takes (K <= 32768:
 * 32768 * 128 * 127 < 2^31). */
#include "dev/dev_cpu_gemm.h"
#include "pack/w8a8.h"

#include <immintrin.h>

enum {
    ROWS = 2,           /* activation rows per block */
    COLS = 4,           /* weight channels per block */
    ROW_BLOCK = 64,     /* rows that pass over one block of channels while it sits in L1 */
};

/* a * w for 32 bytes, summed in int32 pairs of pairs (8 lanes). */
static inline __m256i dot32(__m256i abs_a, __m256i a, __m256i w, __m256i ones) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(abs_a, _mm256_sign_epi8(w, a)), ones);
}

/* The 8 lanes of each of s0..s3 summed: {sum s0, sum s1, sum s2, sum s3}. */
static inline __m128i hsum4(__m256i s0, __m256i s1, __m256i s2, __m256i s3) {
    __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(s0, s1), _mm256_hadd_epi32(s2, s3));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

static inline int32_t dot_tail(const int8_t *a, const int8_t *w, int k0, int K) {
    int32_t s = 0;
    for (int k = k0; k < K; k++) s += (int32_t)a[k] * (int32_t)w[k];
    return s;
}

/* Four channels of `rows` (1 or 2) activation rows: out = (float)acc * rs * cs. */
static inline void store4(__m128i acc, float rs, const float *cs, float *out) {
    __m128 v = _mm_mul_ps(_mm_cvtepi32_ps(acc), _mm_set1_ps(rs));
    _mm_storeu_ps(out, _mm_mul_ps(v, _mm_loadu_ps(cs)));
}

/* Rows a0, a1 (K bytes each) against channels w[0..3] (K bytes apart). */
static void block_2x4(const int8_t *a0, const int8_t *a1, const int8_t *w, int K, const float *rs, const float *cs,
                      float *o0, float *o1) {
    const __m256i ones = _mm256_set1_epi16(1);
    const int8_t *w0 = w, *w1 = w + K, *w2 = w + 2 * (size_t)K, *w3 = w + 3 * (size_t)K;
    __m256i s00 = _mm256_setzero_si256(), s01 = s00, s02 = s00, s03 = s00;
    __m256i s10 = s00, s11 = s00, s12 = s00, s13 = s00;
    const int K32 = K & ~31;
    for (int k = 0; k < K32; k += 32) {
        const __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)(a0 + k));
        const __m256i x1 = _mm256_loadu_si256((const __m256i *)(const void *)(a1 + k));
        const __m256i ax0 = _mm256_abs_epi8(x0), ax1 = _mm256_abs_epi8(x1);
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(w0 + k));
        s00 = _mm256_add_epi32(s00, dot32(ax0, x0, v, ones));
        s10 = _mm256_add_epi32(s10, dot32(ax1, x1, v, ones));
        v = _mm256_loadu_si256((const __m256i *)(const void *)(w1 + k));
        s01 = _mm256_add_epi32(s01, dot32(ax0, x0, v, ones));
        s11 = _mm256_add_epi32(s11, dot32(ax1, x1, v, ones));
        v = _mm256_loadu_si256((const __m256i *)(const void *)(w2 + k));
        s02 = _mm256_add_epi32(s02, dot32(ax0, x0, v, ones));
        s12 = _mm256_add_epi32(s12, dot32(ax1, x1, v, ones));
        v = _mm256_loadu_si256((const __m256i *)(const void *)(w3 + k));
        s03 = _mm256_add_epi32(s03, dot32(ax0, x0, v, ones));
        s13 = _mm256_add_epi32(s13, dot32(ax1, x1, v, ones));
    }
    __m128i r0 = hsum4(s00, s01, s02, s03), r1 = hsum4(s10, s11, s12, s13);
    if (K32 < K) {
        r0 = _mm_add_epi32(r0, _mm_setr_epi32(dot_tail(a0, w0, K32, K), dot_tail(a0, w1, K32, K),
                                              dot_tail(a0, w2, K32, K), dot_tail(a0, w3, K32, K)));
        r1 = _mm_add_epi32(r1, _mm_setr_epi32(dot_tail(a1, w0, K32, K), dot_tail(a1, w1, K32, K),
                                              dot_tail(a1, w2, K32, K), dot_tail(a1, w3, K32, K)));
    }
    store4(r0, rs[0], cs, o0);
    store4(r1, rs[1], cs, o1);
}

/* One row against four channels. */
static void block_1x4(const int8_t *a0, const int8_t *w, int K, float rs, const float *cs, float *o0) {
    const __m256i ones = _mm256_set1_epi16(1);
    const int8_t *w0 = w, *w1 = w + K, *w2 = w + 2 * (size_t)K, *w3 = w + 3 * (size_t)K;
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    const int K32 = K & ~31;
    for (int k = 0; k < K32; k += 32) {
        const __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)(a0 + k));
        const __m256i ax0 = _mm256_abs_epi8(x0);
        s0 = _mm256_add_epi32(s0, dot32(ax0, x0, _mm256_loadu_si256((const __m256i *)(const void *)(w0 + k)), ones));
        s1 = _mm256_add_epi32(s1, dot32(ax0, x0, _mm256_loadu_si256((const __m256i *)(const void *)(w1 + k)), ones));
        s2 = _mm256_add_epi32(s2, dot32(ax0, x0, _mm256_loadu_si256((const __m256i *)(const void *)(w2 + k)), ones));
        s3 = _mm256_add_epi32(s3, dot32(ax0, x0, _mm256_loadu_si256((const __m256i *)(const void *)(w3 + k)), ones));
    }
    __m128i r0 = hsum4(s0, s1, s2, s3);
    if (K32 < K)
        r0 = _mm_add_epi32(r0, _mm_setr_epi32(dot_tail(a0, w0, K32, K), dot_tail(a0, w1, K32, K),
                                              dot_tail(a0, w2, K32, K), dot_tail(a0, w3, K32, K)));
    store4(r0, rs, cs, o0);
}

/* One row against one channel (the last n % 4 channels). */
static float dot_1x1(const int8_t *a, const int8_t *w, int K, float rs, float cs) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i s = _mm256_setzero_si256();
    const int K32 = K & ~31;
    for (int k = 0; k < K32; k += 32) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(a + k));
        s = _mm256_add_epi32(
            s, dot32(_mm256_abs_epi8(x), x, _mm256_loadu_si256((const __m256i *)(const void *)(w + k)), ones));
    }
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
    return w8a8_out(_mm_cvtsi128_si32(h) + dot_tail(a, w, K32, K), rs, cs);
}

#include "dev/dev_cpu_blocked.h"

void dev_cpu_gemm_avx2(const int8_t *act, const float *act_scale, int m, const int8_t *w, const float *w_scale,
                       int n, int K, float *out, size_t out_stride) {
    dev_cpu_blocked(act, act_scale, m, w, w_scale, n, K, out, out_stride);
}
