/* The cpu device's int8 GEMM with NEON dotprod (SDOT: four int8 products
 * summed into each int32 lane, both operands signed, exact): blocks of 2
 * activation rows x 4 weight channels, 16 values of K per step. Bit for bit
 * the plain C kernel (dev_cpu_gemm.h): the int32 sums are exact and the
 * output is w8a8_out(acc, row_scale, channel_scale), two float multiplies in
 * order (vmulq_f32, never fused). */
#include "dev/dev_cpu_gemm.h"
#include "pack/w8a8.h"

#include <arm_neon.h>

enum {
    ROWS = 2,       /* activation rows per block */
    COLS = 4,       /* weight channels per block */
    ROW_BLOCK = 64, /* rows that pass over one block of channels while it sits in L1 */
};

static inline int32_t dot_tail(const int8_t *a, const int8_t *w, int k0, int K) {
    int32_t s = 0;
    for (int k = k0; k < K; k++) s += (int32_t)a[k] * (int32_t)w[k];
    return s;
}

/* {sum s0, sum s1, sum s2, sum s3} */
static inline int32x4_t hsum4(int32x4_t s0, int32x4_t s1, int32x4_t s2, int32x4_t s3) {
    return vpaddq_s32(vpaddq_s32(s0, s1), vpaddq_s32(s2, s3));
}

static inline void store4(int32x4_t acc, float rs, const float *cs, float *out) {
    float32x4_t v = vmulq_f32(vcvtq_f32_s32(acc), vdupq_n_f32(rs));
    vst1q_f32(out, vmulq_f32(v, vld1q_f32(cs)));
}

static inline int32x4_t tails4(const int8_t *a, const int8_t *w, size_t K, int k0) {
    int32_t t[4];
    for (int c = 0; c < 4; c++) t[c] = dot_tail(a, w + (size_t)c * K, k0, (int)K);
    return vld1q_s32(t);
}

static void block_2x4(const int8_t *a0, const int8_t *a1, const int8_t *w, int K, const float *rs, const float *cs,
                      float *o0, float *o1) {
    const size_t Kz = (size_t)K;
    const int8_t *w0 = w, *w1 = w + Kz, *w2 = w + 2 * Kz, *w3 = w + 3 * Kz;
    int32x4_t s00 = vdupq_n_s32(0), s01 = s00, s02 = s00, s03 = s00;
    int32x4_t s10 = s00, s11 = s00, s12 = s00, s13 = s00;
    const int K16 = K & ~15;
    for (int k = 0; k < K16; k += 16) {
        const int8x16_t x0 = vld1q_s8(a0 + k), x1 = vld1q_s8(a1 + k);
        int8x16_t v = vld1q_s8(w0 + k);
        s00 = vdotq_s32(s00, x0, v);
        s10 = vdotq_s32(s10, x1, v);
        v = vld1q_s8(w1 + k);
        s01 = vdotq_s32(s01, x0, v);
        s11 = vdotq_s32(s11, x1, v);
        v = vld1q_s8(w2 + k);
        s02 = vdotq_s32(s02, x0, v);
        s12 = vdotq_s32(s12, x1, v);
        v = vld1q_s8(w3 + k);
        s03 = vdotq_s32(s03, x0, v);
        s13 = vdotq_s32(s13, x1, v);
    }
    int32x4_t r0 = hsum4(s00, s01, s02, s03), r1 = hsum4(s10, s11, s12, s13);
    if (K16 < K) {
        r0 = vaddq_s32(r0, tails4(a0, w, Kz, K16));
        r1 = vaddq_s32(r1, tails4(a1, w, Kz, K16));
    }
    store4(r0, rs[0], cs, o0);
    store4(r1, rs[1], cs, o1);
}

static void block_1x4(const int8_t *a0, const int8_t *w, int K, float rs, const float *cs, float *o0) {
    const size_t Kz = (size_t)K;
    const int8_t *w0 = w, *w1 = w + Kz, *w2 = w + 2 * Kz, *w3 = w + 3 * Kz;
    int32x4_t s0 = vdupq_n_s32(0), s1 = s0, s2 = s0, s3 = s0;
    const int K16 = K & ~15;
    for (int k = 0; k < K16; k += 16) {
        const int8x16_t x0 = vld1q_s8(a0 + k);
        s0 = vdotq_s32(s0, x0, vld1q_s8(w0 + k));
        s1 = vdotq_s32(s1, x0, vld1q_s8(w1 + k));
        s2 = vdotq_s32(s2, x0, vld1q_s8(w2 + k));
        s3 = vdotq_s32(s3, x0, vld1q_s8(w3 + k));
    }
    int32x4_t r0 = hsum4(s0, s1, s2, s3);
    if (K16 < K) r0 = vaddq_s32(r0, tails4(a0, w, Kz, K16));
    store4(r0, rs, cs, o0);
}

static float dot_1x1(const int8_t *a, const int8_t *w, int K, float rs, float cs) {
    int32x4_t s = vdupq_n_s32(0);
    const int K16 = K & ~15;
    for (int k = 0; k < K16; k += 16) s = vdotq_s32(s, vld1q_s8(a + k), vld1q_s8(w + k));
    return w8a8_out(vaddvq_s32(s) + dot_tail(a, w, K16, K), rs, cs);
}

#include "dev/dev_cpu_blocked.h"

void dev_cpu_gemm_neon(const int8_t *act, const float *act_scale, int m, const int8_t *w, const float *w_scale,
                       int n, int K, float *out, size_t out_stride) {
    dev_cpu_blocked(act, act_scale, m, w, w_scale, n, K, out, out_stride);
}
