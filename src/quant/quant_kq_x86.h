/* The float part of one Q4_K / Q5_K super-block for one (weight row,
 * activation row) pair, as the x86 gemm tiles (gemm_kq) do it: the scaled
 * integer sums, less the mins times the activation's sub-block sums. Their
 * vec_dots use it too, so that a row's result does not depend on how many
 * activation rows share its matmul. sub_sums: the 8 int16 sums of the Q8_K
 * block's 32-value sub-blocks; mins: the weight block's 8 int16 mins. */
#ifndef MOEX_QUANT_KQ_X86_H
#define MOEX_QUANT_KQ_X86_H

#include <immintrin.h>

static inline __m256 k4_block_acc(float wd, float wdmin, __m128i mins, float yd_, __m128i sub_sums, __m256i sumi,
                                  __m256 acc) {
    const __m256 yd = _mm256_set1_ps(yd_);
    const __m256 wmins = _mm256_mul_ps(_mm256_set1_ps(wdmin), _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(mins)));
    const __m256 ysum = _mm256_mul_ps(yd, _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(sub_sums)));
    const __m256 f = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(wd), yd), _mm256_cvtepi32_ps(sumi), acc);
    return _mm256_fnmadd_ps(wmins, ysum, f);
}

#endif
