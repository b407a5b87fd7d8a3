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

R16Y_INLINE __m256i q4_dot_first(__m256i w, const int8_t *ys) { return _mm256_maddubs_epi16(w, bcast4(ys)); }
/* The empty asm keeps the sum where it is: GCC would re-associate the
 * chain of adds into a tree that computes every product first and spills
 * them (vpaddsw instead would do too, but it issues on half the pipes). */
R16Y_INLINE __m256i q4_dot(__m256i sum, __m256i w, const int8_t *ys) {
    sum = _mm256_add_epi16(sum, q4_dot_first(w, ys));
    __asm__("" : "+x"(sum));
    return sum;
}
R16Y_INLINE __m256i q4_scaled(__m256i sum, __m256i scale) { return _mm256_madd_epi16(sum, scale); }

R16Y_INLINE __m256i dot_i16_add(__m256i acc, __m256i a, __m256i b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }
