/* AVX-VNNI GEMMs on Q4_K and Q6_K rows interleaved by 16 (layouts:
 * quant_r16.c; the tiles: quant_r16_ymm.h): vpdpbusd on ymm, 4 values of
 * each of 8 rows against the activation's 4 bytes broadcast, summed in int32,
 * then one multiply by the sub-block scale. For CPUs with AVX-VNNI (Alder
 * Lake and later, Zen 5), chosen at run time in place of the AVX2 ones. */
#define R16Y_NAME(x) x##_avxvnni
#include "quant/quant_r16_ymm.h"

/* byte k of each dword, zero-extended */
R16Y_INLINE __m256i q4_scale(__m256i v, int k) { return _mm256_and_si256(_mm256_srli_epi32(v, 8 * k), _mm256_set1_epi32(0xFF)); }

R16Y_INLINE __m256i q4_sub_dot(const __m256i w[8], const int8_t *ys, __m256i scale) {
    /* two chains: with one activation row (decode) the latency of dependent
     * vpdpbusd would bound the speed */
    __m256i t0 = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), w[0], bcast4(ys));
    __m256i t1 = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), w[4], bcast4(ys + 16));
    for (int i = 1; i < 4; i++) {
        t0 = _mm256_dpbusd_avx_epi32(t0, w[i], bcast4(ys + 4 * i));
        t1 = _mm256_dpbusd_avx_epi32(t1, w[i + 4], bcast4(ys + 16 + 4 * i));
    }
    return _mm256_mullo_epi32(_mm256_add_epi32(t0, t1), scale);
}

/* int16 k of each dword, sign-extended */
R16Y_INLINE __m256i q6_scale(__m256i pair, int k) {
    return k ? _mm256_srai_epi32(pair, 16) : _mm256_srai_epi32(_mm256_slli_epi32(pair, 16), 16);
}

R16Y_INLINE __m256i q6_sub_dot(const __m256i w[4], const int8_t *ys, __m256i scale) {
    __m256i t0 = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), w[0], bcast4(ys));
    __m256i t1 = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), w[2], bcast4(ys + 8));
    t0 = _mm256_dpbusd_avx_epi32(t0, w[1], bcast4(ys + 4));
    t1 = _mm256_dpbusd_avx_epi32(t1, w[3], bcast4(ys + 12));
    return _mm256_mullo_epi32(_mm256_add_epi32(t0, t1), scale);
}

R16Y_INLINE __m256i dot_i16_add(__m256i acc, __m256i a, __m256i b) { return _mm256_dpwssd_avx_epi32(acc, a, b); }
