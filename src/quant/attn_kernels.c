/* The scalar attention kernels: the reference the others are tested
 * against, in the same order of operations per column (but without fused
 * multiply-adds and with libm's expf). */
#include "quant/attn_kernels.h"


#include <math.h>

static void scores(const float *qt, int mp, int hd, const float *k, int n_keys, float *s) {
    for (int j = 0; j < n_keys; j++)
        for (int i = 0; i < mp; i++) {
            float acc = 0;
            for (int d = 0; d < hd; d++) acc += k[(size_t)j * hd + d] * qt[(size_t)d * mp + i];
            s[(size_t)j * mp + i] = acc;
        }
}

/* With write 0 (the stats), s stays as it was. */
static void softmax_body(float *s, int n_keys, int mp, float scale, int masked0, int step, float *max, float *sum,
                         float *alpha, int write) {
    for (int i = 0; i < mp; i++) {
        float m = max[i];
        for (int j = 0; j < n_keys; j++) {
            float v = s[(size_t)j * mp + i] * scale;
            if (write) s[(size_t)j * mp + i] = v;
            if (i >= masked0 + j * step && v > m) m = v;
        }
        float block = 0;
        for (int j = 0; j < n_keys; j++) {
            const float v = write ? s[(size_t)j * mp + i] : s[(size_t)j * mp + i] * scale;
            float p = i >= masked0 + j * step ? expf(v - m) : 0.0f;
            if (write) s[(size_t)j * mp + i] = p;
            block += p;
        }
        float a = m == -INFINITY ? 1.0f : expf(max[i] - m);
        alpha[i] = a;
        sum[i] = sum[i] * a + block;
        max[i] = m;
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
    for (int j = 0; j < n_keys; j++)
        for (int i = 0; i < mp; i++) {
            float *sj = s + (size_t)j * mp + i;
            float p = i >= masked0 + j * step ? expf(*sj * scale - max[i]) * inv_sum[i] : 0.0f;
            *sj = fp16_to_f32(f32_to_fp16(p));
        }
}

static void accumulate(const float *s, int mp, int n_keys, const float *v, int hdp, const float *alpha, float *o) {
    for (int i = 0; i < mp; i++)
        for (int d = 0; d < hdp; d++) o[(size_t)i * hdp + d] *= alpha[i];
    for (int j = 0; j < n_keys; j++)
        for (int i = 0; i < mp; i++) {
            const float p = s[(size_t)j * mp + i];
            for (int d = 0; d < hdp; d++) o[(size_t)i * hdp + d] += p * v[(size_t)j * hdp + d];
        }
}

static const struct attn_kernels scalar = { 1, scores, softmax, stats, weights, accumulate };

const struct attn_kernels *attn_kernels_isa(enum isa isa) {
    if (isa == ISA_SCALAR) return &scalar;
    if (!isa_available(isa)) return NULL;
#if defined(__x86_64__)
    if (isa == ISA_AVX2) return &attn_kernels_avx2;
    if (isa == ISA_AVX512) return &attn_kernels_avx512;
#elif defined(__aarch64__)
    if (isa == ISA_NEON) return &attn_kernels_neon;
#endif
    return NULL;
}

const struct attn_kernels *attn_kernels(void) {
    const struct attn_kernels *k = attn_kernels_isa(quant_active_isa());
    return k ? k : &scalar;
}
