#include "model/attn_kernels.h"

#include "core/cpu.h"
#include "quant/quant.h"

static float dot_f16(const float *q, const uint16_t *k, int n) {
    float s = 0;
    for (int i = 0; i < n; i++) s += q[i] * fp16_to_f32(k[i]);
    return s;
}

static void axpy_f16(float w, const uint16_t *v, float *acc, int n) {
    for (int i = 0; i < n; i++) acc[i] += w * fp16_to_f32(v[i]);
}

static float dot_f32(const float *q, const float *k, int n) {
    float s = 0;
    for (int i = 0; i < n; i++) s += q[i] * k[i];
    return s;
}

static void axpy_f32(float w, const float *v, float *acc, int n) {
    for (int i = 0; i < n; i++) acc[i] += w * v[i];
}

static const struct attn_kernels scalar = { dot_f16, axpy_f16, dot_f32, axpy_f32 };

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
