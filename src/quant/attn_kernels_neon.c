#include "quant/attn_kernels.h"
#include "quant/exp_neg_coef.h"

#include <arm_neon.h>
#include <math.h>

#define NEON_INLINE static inline __attribute__((always_inline))

/* exp(x) for x <= 0: the Cephes polynomial of the x86 kernels (exp_neg_coef.h). */
NEON_INLINE float32x4_t exp_neg(float32x4_t x) {
    x = vmaxq_f32(x, vdupq_n_f32(EXPN_MIN));
    const float32x4_t fx = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(EXPN_LOG2E)));
    x = vfmsq_f32(x, fx, vdupq_n_f32(EXPN_LN2_HI));
    x = vfmsq_f32(x, fx, vdupq_n_f32(EXPN_LN2_LO));
    float32x4_t y = vdupq_n_f32(EXPN_P0);
    y = vfmaq_f32(vdupq_n_f32(EXPN_P1), y, x);
    y = vfmaq_f32(vdupq_n_f32(EXPN_P2), y, x);
    y = vfmaq_f32(vdupq_n_f32(EXPN_P3), y, x);
    y = vfmaq_f32(vdupq_n_f32(EXPN_P4), y, x);
    y = vfmaq_f32(vdupq_n_f32(EXPN_P5), y, x);
    y = vfmaq_f32(vaddq_f32(x, vdupq_n_f32(1.0f)), y, vmulq_f32(x, x));
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(fx), vdupq_n_s32(127)), 23);
    return vmulq_f32(y, vreinterpretq_f32_s32(e));
}

/* s rows 0..7, columns c0..c0+4*C-1. */
NEON_INLINE void scores_panel(const float *qt, int mp, int hd, const float *k, int c0, float *s, const int C) {
    float32x4_t acc[8][2];
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < C; c++) acc[r][c] = vdupq_n_f32(0);
    for (int d = 0; d < hd; d++) {
        float32x4_t q[2];
        for (int c = 0; c < C; c++) q[c] = vld1q_f32(qt + (size_t)d * mp + c0 + 4 * c);
        for (int r = 0; r < 8; r++) {
            const float kr = k[(size_t)r * hd + d];
            for (int c = 0; c < C; c++) acc[r][c] = vfmaq_n_f32(acc[r][c], q[c], kr);
        }
    }
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < C; c++) vst1q_f32(s + (size_t)r * mp + c0 + 4 * c, acc[r][c]);
}

static void scores(const float *qt, int mp, int hd, const float *k, int n_keys, float *s) {
    for (int j0 = 0; j0 < n_keys; j0 += 8) {
        int c0 = 0;
        for (; c0 + 8 <= mp; c0 += 8) scores_panel(qt, mp, hd, k + (size_t)j0 * hd, c0, s + (size_t)j0 * mp, 2);
        for (; c0 < mp; c0 += 4) scores_panel(qt, mp, hd, k + (size_t)j0 * hd, c0, s + (size_t)j0 * mp, 1);
    }
}

/* With write 0 (the stats), s stays as it was. */
NEON_INLINE void softmax_body(float *s, int n_keys, int mp, float scale, int masked0, int step, float *max, float *sum,
                              float *alpha, const int write) {
    const float32x4_t ninf = vdupq_n_f32(-INFINITY);
    const int32_t lanes[4] = { 0, 1, 2, 3 };
    const int32x4_t lane = vld1q_s32(lanes);
    for (int c0 = 0; c0 < mp; c0 += 4) {
        const int32x4_t col = vaddq_s32(lane, vdupq_n_s32(c0));
        const int open = c0 >= masked0 + (n_keys - 1) * step;
        const float32x4_t old = vld1q_f32(max + c0);
        float32x4_t m = old;
        for (int j = 0; j < n_keys; j++) {
            float *sj = s + (size_t)j * mp + c0;
            float32x4_t v = vmulq_n_f32(vld1q_f32(sj), scale);
            if (write) vst1q_f32(sj, v);
            if (!open) v = vbslq_f32(vcgeq_s32(col, vdupq_n_s32(masked0 + j * step)), v, ninf);
            m = vmaxq_f32(m, v);
        }
        float32x4_t block = vdupq_n_f32(0);
        for (int j = 0; j < n_keys; j++) {
            float *sj = s + (size_t)j * mp + c0;
            const float32x4_t sv = vld1q_f32(sj);
            float32x4_t p = exp_neg(vsubq_f32(write ? sv : vmulq_n_f32(sv, scale), m));
            if (!open)
                p = vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(p),
                                                    vcgeq_s32(col, vdupq_n_s32(masked0 + j * step))));
            if (write) vst1q_f32(sj, p);
            block = vaddq_f32(block, p);
        }
        const float32x4_t a = vbslq_f32(vceqq_f32(m, ninf), vdupq_n_f32(1.0f), exp_neg(vsubq_f32(old, m)));
        vst1q_f32(alpha + c0, a);
        vst1q_f32(sum + c0, vaddq_f32(vmulq_f32(vld1q_f32(sum + c0), a), block));
        vst1q_f32(max + c0, m);
    }
}

static void softmax(float *s, int n_keys, int mp, float scale, int masked0, int step, float *max, float *sum,
                    float *alpha) {
    softmax_body(s, n_keys, mp, scale, masked0, step, max, sum, alpha, 1);
}

static void stats(float *s, int n_keys, int mp, float scale, int masked0, int step, float *max, float *sum,
                  float *alpha) {
    softmax_body(s, n_keys, mp, scale, masked0, step, max, sum, alpha, 0);
}

static void weights(float *s, int n_keys, int mp, float scale, int masked0, int step, const float *max,
                    const float *inv_sum) {
    const int32_t lanes[4] = { 0, 1, 2, 3 };
    const int32x4_t lane = vld1q_s32(lanes);
    for (int c0 = 0; c0 < mp; c0 += 4) {
        const int32x4_t col = vaddq_s32(lane, vdupq_n_s32(c0));
        const int open = c0 >= masked0 + (n_keys - 1) * step;
        const float32x4_t m = vld1q_f32(max + c0), inv = vld1q_f32(inv_sum + c0);
        for (int j = 0; j < n_keys; j++) {
            float *sj = s + (size_t)j * mp + c0;
            float32x4_t p = vmulq_f32(exp_neg(vsubq_f32(vmulq_n_f32(vld1q_f32(sj), scale), m)), inv);
            p = vcvt_f32_f16(vcvt_f16_f32(p));
            if (!open)
                p = vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(p),
                                                    vcgeq_s32(col, vdupq_n_s32(masked0 + j * step))));
            vst1q_f32(sj, p);
        }
    }
}

/* Four output rows by 16 dims in sixteen accumulators, over every key. */
static void accumulate(const float *s, int mp, int n_keys, const float *v, int hdp, const float *alpha, float *o) {
    for (int i0 = 0; i0 < mp; i0 += 4)
        for (int d0 = 0; d0 < hdp; d0 += 16) {
            float32x4_t acc[4][4];
            for (int r = 0; r < 4; r++)
                for (int c = 0; c < 4; c++)
                    acc[r][c] = vmulq_n_f32(vld1q_f32(o + (size_t)(i0 + r) * hdp + d0 + 4 * c), alpha[i0 + r]);
            for (int j = 0; j < n_keys; j++) {
                float32x4_t vj[4];
                for (int c = 0; c < 4; c++) vj[c] = vld1q_f32(v + (size_t)j * hdp + d0 + 4 * c);
                for (int r = 0; r < 4; r++) {
                    const float p = s[(size_t)j * mp + i0 + r];
                    for (int c = 0; c < 4; c++) acc[r][c] = vfmaq_n_f32(acc[r][c], vj[c], p);
                }
            }
            for (int r = 0; r < 4; r++)
                for (int c = 0; c < 4; c++) vst1q_f32(o + (size_t)(i0 + r) * hdp + d0 + 4 * c, acc[r][c]);
        }
}

const struct attn_kernels attn_kernels_neon = { 4, scores, softmax, stats, weights, accumulate };
