#include "arch/attn_kernels.h"

#include "core/cpu.h"
#include "quant/quant.h"

#include <math.h>

static void dot_f16(const float *q, int nq, int n, const uint16_t *k, float *out) {
    for (int j = 0; j < nq; j++) {
        float s = 0;
        for (int i = 0; i < n; i++) s += q[(size_t)j * n + i] * fp16_to_f32(k[i]);
        out[j] = s;
    }
}

static void wsum_f16(const float *w, int nq, int n_keys, const uint16_t *v, size_t v_stride, int n, float *out) {
    for (int j = 0; j < nq * n; j++) out[j] = 0;
    for (int p = 0; p < n_keys; p++)
        for (int j = 0; j < nq; j++)
            for (int i = 0; i < n; i++) out[(size_t)j * n + i] += w[(size_t)p * nq + j] * fp16_to_f32(v[p * v_stride + i]);
}

static void dot_f32(const float *q, int nq, int n, const float *k, float *out) {
    for (int j = 0; j < nq; j++) {
        float s = 0;
        for (int i = 0; i < n; i++) s += q[(size_t)j * n + i] * k[i];
        out[j] = s;
    }
}

static void wsum_f32(const float *w, int nq, int n_keys, const float *v, size_t v_stride, int n, float *out) {
    for (int j = 0; j < nq * n; j++) out[j] = 0;
    for (int p = 0; p < n_keys; p++)
        for (int j = 0; j < nq; j++)
            for (int i = 0; i < n; i++) out[(size_t)j * n + i] += w[(size_t)p * nq + j] * v[p * v_stride + i];
}

void attn_softmax_scalar(float *scores, int n_keys, int nq, float scale, int round_f16) {
    float max[64], w[64];
    double sum[64];
    for (int h0 = 0; h0 < nq; h0 += 64) {
        const int nh = nq - h0 < 64 ? nq - h0 : 64;
        for (int h = 0; h < nh; h++) { max[h] = -INFINITY; sum[h] = 0; }
        for (int p = 0; p < n_keys; p++)
            for (int h = 0; h < nh; h++) {
                float v = scores[(size_t)p * nq + h0 + h] * scale;
                scores[(size_t)p * nq + h0 + h] = v;
                if (v > max[h]) max[h] = v;
            }
        for (int p = 0; p < n_keys; p++)
            for (int h = 0; h < nh; h++) {
                float e = expf(scores[(size_t)p * nq + h0 + h] - max[h]);
                scores[(size_t)p * nq + h0 + h] = e;
                sum[h] += e;
            }
        for (int h = 0; h < nh; h++) w[h] = (float)(1.0 / sum[h]);
        for (int p = 0; p < n_keys; p++)
            for (int h = 0; h < nh; h++) {
                float pr = scores[(size_t)p * nq + h0 + h] * w[h];
                scores[(size_t)p * nq + h0 + h] = round_f16 ? fp16_to_f32(f32_to_fp16(pr)) : pr;
            }
    }
}

static const struct attn_kernels scalar = { dot_f16, wsum_f16, dot_f32, wsum_f32, attn_softmax_scalar };

const struct attn_kernels *attn_kernels_isa(int isa) {
    if (isa == 0) return &scalar;
#if defined(__x86_64__)
    const struct cpu_features *f = cpu_features();
    if (isa == 1 && f->avx2 && f->fma && f->f16c) return &attn_kernels_avx2;
#elif defined(__aarch64__)
    if (isa == 1) return &attn_kernels_neon;
#endif
    return 0;
}

const struct attn_kernels *attn_kernels(void) {
    const struct attn_kernels *k = attn_kernels_isa(1);
    return k ? k : &scalar;
}
