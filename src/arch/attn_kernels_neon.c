#include "arch/attn_kernels.h"

#include <arm_neon.h>

enum { GROUP = 8 };

static inline float32x4_t lo_f16(const uint16_t *p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}
static inline float scalar_f16(uint16_t h) {
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

#define DOT_GROUP(NAME, T, LOAD, SCALAR)                                                        \
    static void NAME(const float *q, int nq, int n, const T *k, float *out) {                  \
        for (int j0 = 0; j0 < nq; j0 += GROUP) {                                                \
            int nj = nq - j0 < GROUP ? nq - j0 : GROUP;                                         \
            const float *qj = q + (size_t)j0 * n;                                               \
            float32x4_t acc[GROUP];                                                             \
            for (int j = 0; j < GROUP; j++) acc[j] = vdupq_n_f32(0);                            \
            int i = 0;                                                                          \
            for (; i + 4 <= n; i += 4) {                                                        \
                float32x4_t kv = LOAD(k + i);                                                   \
                for (int j = 0; j < nj; j++) acc[j] = vfmaq_f32(acc[j], vld1q_f32(qj + (size_t)j * n + i), kv); \
            }                                                                                   \
            for (int j = 0; j < nj; j++) {                                                      \
                float s = vaddvq_f32(acc[j]);                                                   \
                for (int t = i; t < n; t++) s += qj[(size_t)j * n + t] * SCALAR(k[t]);          \
                out[j0 + j] = s;                                                                \
            }                                                                                   \
        }                                                                                       \
    }

#define WSUM_GROUP(NAME, T, LOAD, SCALAR)                                                       \
    static void NAME(const float *w, int nq, int n_keys, const T *v, size_t v_stride, int n, float *out) { \
        for (int j0 = 0; j0 < nq; j0 += GROUP) {                                                \
            int nj = nq - j0 < GROUP ? nq - j0 : GROUP;                                         \
            int i = 0;                                                                          \
            for (; i + 4 <= n; i += 4) {                                                        \
                float32x4_t acc[GROUP];                                                         \
                for (int j = 0; j < GROUP; j++) acc[j] = vdupq_n_f32(0);                        \
                for (int p = 0; p < n_keys; p++) {                                              \
                    float32x4_t vv = LOAD(v + (size_t)p * v_stride + i);                        \
                    const float *wp = w + (size_t)p * nq + j0;                                  \
                    for (int j = 0; j < nj; j++) acc[j] = vfmaq_n_f32(acc[j], vv, wp[j]);       \
                }                                                                               \
                for (int j = 0; j < nj; j++) vst1q_f32(out + (size_t)(j0 + j) * n + i, acc[j]); \
            }                                                                                   \
            for (; i < n; i++)                                                                  \
                for (int j = 0; j < nj; j++) {                                                  \
                    float s = 0;                                                                \
                    for (int p = 0; p < n_keys; p++) s += w[(size_t)p * nq + j0 + j] * SCALAR(v[(size_t)p * v_stride + i]); \
                    out[(size_t)(j0 + j) * n + i] = s;                                          \
                }                                                                               \
        }                                                                                       \
    }

#define F32_SCALAR(x) (x)
DOT_GROUP(dot_f16, uint16_t, lo_f16, scalar_f16)
DOT_GROUP(dot_f32, float, vld1q_f32, F32_SCALAR)
WSUM_GROUP(wsum_f16, uint16_t, lo_f16, scalar_f16)
WSUM_GROUP(wsum_f32, float, vld1q_f32, F32_SCALAR)

const struct attn_kernels attn_kernels_neon = { dot_f16, wsum_f16, dot_f32, wsum_f32, attn_softmax_scalar };
