#include "model/attn_kernels.h"

#include <arm_neon.h>

static float dot_f16(const float *q, const uint16_t *k, int n) {
    float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        float16x8_t kh = vreinterpretq_f16_u16(vld1q_u16(k + i));
        a0 = vfmaq_f32(a0, vld1q_f32(q + i), vcvt_f32_f16(vget_low_f16(kh)));
        a1 = vfmaq_f32(a1, vld1q_f32(q + i + 4), vcvt_high_f32_f16(kh));
    }
    float s = vaddvq_f32(vaddq_f32(a0, a1));
    for (; i < n; i++) {
        float16x4_t h = vreinterpret_f16_u16(vdup_n_u16(k[i]));
        s += q[i] * vgetq_lane_f32(vcvt_f32_f16(h), 0);
    }
    return s;
}

static void axpy_f16(float w, const uint16_t *v, float *acc, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        float16x8_t vh = vreinterpretq_f16_u16(vld1q_u16(v + i));
        vst1q_f32(acc + i, vfmaq_n_f32(vld1q_f32(acc + i), vcvt_f32_f16(vget_low_f16(vh)), w));
        vst1q_f32(acc + i + 4, vfmaq_n_f32(vld1q_f32(acc + i + 4), vcvt_high_f32_f16(vh), w));
    }
    for (; i < n; i++) {
        float16x4_t h = vreinterpret_f16_u16(vdup_n_u16(v[i]));
        acc[i] += w * vgetq_lane_f32(vcvt_f32_f16(h), 0);
    }
}

static float dot_f32(const float *q, const float *k, int n) {
    float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        a0 = vfmaq_f32(a0, vld1q_f32(q + i), vld1q_f32(k + i));
        a1 = vfmaq_f32(a1, vld1q_f32(q + i + 4), vld1q_f32(k + i + 4));
    }
    float s = vaddvq_f32(vaddq_f32(a0, a1));
    for (; i < n; i++) s += q[i] * k[i];
    return s;
}

static void axpy_f32(float w, const float *v, float *acc, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(acc + i, vfmaq_n_f32(vld1q_f32(acc + i), vld1q_f32(v + i), w));
    for (; i < n; i++) acc[i] += w * v[i];
}

const struct attn_kernels attn_kernels_neon = { dot_f16, axpy_f16, dot_f32, axpy_f32 };
