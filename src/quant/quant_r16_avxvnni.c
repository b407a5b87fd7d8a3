/* AVX-VNNI GEMMs on Q4_K and Q6_K rows interleaved by 16 (layouts:
 * quant_r16.c; the tiles: quant_r16_ymm.h): vpdpbusd on ymm, 4 values of
 * each of 8 rows against the activation's 4 bytes broadcast, summed in
 * int32 over a sub-block, then one multiply by its scale; vpdpwssd for the
 * mins and Q6_K's -32 offset. For CPUs with AVX-VNNI (Alder Lake and later,
 * Zen 5), chosen at run time in place of the AVX2 ones. */
#define R16Y_NAME(x) x##_avxvnni
#define R16Y_WITH_Q6
#define R16Y_Q6_DPBUSD
#define R16Y_STREAM_ONLY
#include "quant/quant_r16_ymm.h"

/* byte k of each dword, zero-extended */
R16Y_INLINE __m256i q4_scale(__m256i v, int k) { return _mm256_and_si256(_mm256_srli_epi32(v, 8 * k), _mm256_set1_epi32(0xFF)); }

R16Y_INLINE __m256i q4_dot(__m256i sum, __m256i w, const int8_t *ys) { return _mm256_dpbusd_avx_epi32(sum, w, bcast4(ys)); }
R16Y_INLINE __m256i q4_dot_first(__m256i w, const int8_t *ys) { return q4_dot(_mm256_setzero_si256(), w, ys); }
R16Y_INLINE __m256i q4_scaled(__m256i sum, __m256i scale) { return _mm256_mullo_epi32(sum, scale); }

R16Y_INLINE __m256i dot_i16_add(__m256i acc, __m256i a, __m256i b) { return _mm256_dpwssd_avx_epi32(acc, a, b); }
