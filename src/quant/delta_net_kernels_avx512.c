/* The delta-net kernels on AVX-512 F: 16 floats a vector, gemm tiles of 4
 * rows by 64 columns (16 accumulators of the 32 registers). Only AVX-512 F
 * instructions (no DQ: the sign bit goes through integer ors). */
#include <immintrin.h>

#define VF __m512
#define VL 16
#define GEMM_C 4
#define V_LOAD _mm512_loadu_ps
#define V_STORE _mm512_storeu_ps
#define V_SET1 _mm512_set1_ps
#define V_ZERO _mm512_setzero_ps
#define V_ADD _mm512_add_ps
#define V_SUB _mm512_sub_ps
#define V_MUL _mm512_mul_ps
#define V_DIV _mm512_div_ps
#define V_MAX _mm512_max_ps
#define V_FMA _mm512_fmadd_ps
#define V_FNMA _mm512_fnmadd_ps
#define V_ROUND(x) _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define V_LDEXP _mm512_scalef_ps
#define V_NEG_ABS(x) _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u)))
#define V_SEL_GE0(x, a, b) _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ), b, a)

/* The sum of the lanes, halves added down to one (AVX-512 F and AVX only). */
static inline float hsum16(__m512 v) {
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#define V_HSUM hsum16

#include "quant/delta_net_kernels_simd.h"

const struct delta_net_kernels delta_net_kernels_avx512 = DELTA_NET_KERNELS;
