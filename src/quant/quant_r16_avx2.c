/* AVX2 GEMMs on Q4_K and Q6_K rows interleaved by 16 (layouts: quant_r16.c;
 * the tiles: quant_r16_ymm.h). vpmaddubsw multiplies 4 values of each of 8
 * rows by the activation's 4 bytes broadcast and sums them in int16 pairs;
 * a Q4_K sub-block's 8 such products add up in int16 without overflow
 * (8 x 2 x 15 x 128 < 32768), so one vpmaddwd by the sub-block scale turns
 * 32 values into the scaled int32 sum. */
#define R16Y_NAME(x) x##_avx2
#define R16Y_WITH_Q6
#include "quant/quant_r16_ymm.h"

/* (sc, sc) as the two int16 of each dword: vpmaddwd's scale operand */
R16Y_INLINE __m256i q4_scale(__m256i v, int k) { return dword_bytes_i16(v, k, k); }

R16Y_INLINE __m256i q4_sub_dot(const __m256i w[8], const int8_t *ys, __m256i scale) {
    __m256i p[8];
    for (int i = 0; i < 8; i++) p[i] = _mm256_maddubs_epi16(w[i], bcast4(ys + 4 * i));
    const __m256i s03 = _mm256_add_epi16(_mm256_add_epi16(p[0], p[1]), _mm256_add_epi16(p[2], p[3]));
    const __m256i s47 = _mm256_add_epi16(_mm256_add_epi16(p[4], p[5]), _mm256_add_epi16(p[6], p[7]));
    return _mm256_madd_epi16(_mm256_add_epi16(s03, s47), scale);
}

R16Y_INLINE __m256i dot_i16_add(__m256i acc, __m256i a, __m256i b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }
