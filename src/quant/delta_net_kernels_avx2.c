/* The delta-net kernels on AVX2 + FMA: 8 floats a vector, gemm tiles of 4
 * rows by 16 columns (8 accumulators of the 16 registers). */
#include <immintrin.h>

#define VF __m256
#define VL 8
#define GEMM_C 2
#define V_LOAD _mm256_loadu_ps
#define V_STORE _mm256_storeu_ps
#define V_SET1 _mm256_set1_ps
#define V_ZERO _mm256_setzero_ps
#define V_ADD _mm256_add_ps
#define V_SUB _mm256_sub_ps
#define V_MUL _mm256_mul_ps
#define V_DIV _mm256_div_ps
#define V_MAX _mm256_max_ps
#define V_FMA _mm256_fmadd_ps
#define V_FNMA _mm256_fnmadd_ps
#define V_ROUND(x) _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define V_LDEXP(y, f) _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(f), _mm256_set1_epi32(127)), 23)))
#define V_NEG_ABS(x) _mm256_or_ps(x, _mm256_set1_ps(-0.0f))
#define V_SEL_GE0(x, a, b) _mm256_blendv_ps(b, a, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ))

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#define V_HSUM hsum8

#include "quant/delta_net_kernels_simd.h"

const struct delta_net_kernels delta_net_kernels_avx2 = DELTA_NET_KERNELS;
