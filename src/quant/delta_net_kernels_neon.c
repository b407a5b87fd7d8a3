/* The delta-net kernels on aarch64 NEON: 4 floats a vector, gemm tiles of 4
 * rows by 16 columns (16 accumulators of the 32 registers). */
#include <arm_neon.h>

#define VF float32x4_t
#define VL 4
#define GEMM_C 4
#define V_LOAD vld1q_f32
#define V_STORE vst1q_f32
#define V_SET1 vdupq_n_f32
#define V_ZERO() vdupq_n_f32(0.0f)
#define V_ADD vaddq_f32
#define V_SUB vsubq_f32
#define V_MUL vmulq_f32
#define V_DIV vdivq_f32
#define V_MAX vmaxq_f32
#define V_FMA(a, b, c) vfmaq_f32(c, a, b)
#define V_FNMA(a, b, c) vfmsq_f32(c, a, b)
#define V_ROUND vrndnq_f32
#define V_LDEXP(y, f) vmulq_f32(y, vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(f), vdupq_n_s32(127)), 23)))
#define V_NEG_ABS(x) vnegq_f32(vabsq_f32(x))
#define V_SEL_GE0(x, a, b) vbslq_f32(vcgeq_f32(x, vdupq_n_f32(0.0f)), a, b)
#define V_HSUM vaddvq_f32

#include "quant/delta_net_kernels_simd.h"

const struct delta_net_kernels delta_net_kernels_neon = DELTA_NET_KERNELS;
