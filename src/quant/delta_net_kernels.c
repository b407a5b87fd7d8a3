/* The scalar delta-net kernels: the reference the others are tested
 * against (and the code of machines without a SIMD build). */
#include "quant/delta_net_kernels.h"

#include <math.h>

/* y += sum_m a[m] x[m] over k rows of x, four rows per pass over y. */
static void axpy_rows(float *y, const float *a, const float *x, size_t ldx, int k, int n) {
    int m = 0;
    for (; m + 4 <= k; m += 4) {
        const float *x0 = x + m * ldx, *x1 = x0 + ldx, *x2 = x1 + ldx, *x3 = x2 + ldx;
        float a0 = a[m], a1 = a[m + 1], a2 = a[m + 2], a3 = a[m + 3];
        for (int i = 0; i < n; i++) y[i] += a0 * x0[i] + a1 * x1[i] + a2 * x2[i] + a3 * x3[i];
    }
    for (; m < k; m++)
        for (int i = 0; i < n; i++) y[i] += a[m] * x[m * ldx + i];
}

static void gemm(float *y, size_t ldy, const float *a, size_t lda, const float *x, size_t ldx, int rows, int k,
                 int n) {
    for (int r = 0; r < rows; r++) axpy_rows(y + r * ldy, a + r * lda, x, ldx, k, n);
}

static float dot(const float *a, const float *b, int n) {
    float s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static float silu(float x) { return x / (1.0f + expf(-x)); }

static void conv_silu(const float *x, size_t ldx, const float *state, size_t ldstate, int n, int width, int K,
                      const float *w, float *out, size_t ldout) {
    int past = K - 1;
    for (int t = 0; t < n; t++)
        for (int ch = 0; ch < width; ch++) {
            float s = 0;
            for (int j = 0; j < K; j++) {
                int src = t - past + j; /* < 0: from the state */
                s += w[(size_t)ch * K + j] * (src < 0 ? state[(size_t)(past + src) * ldstate + ch] : x[(size_t)src * ldx + ch]);
            }
            out[(size_t)t * ldout + ch] = silu(s);
        }
}

static void gated_norm(float *x, const float *z, const float *w, int len, float eps) {
    double sum = 0;
    for (int i = 0; i < len; i++) sum += (double)(x[i] * x[i]);
    float scale = 1.0f / sqrtf((float)(sum / len) + eps);
    for (int i = 0; i < len; i++) x[i] = (x[i] * scale) * w[i] * silu(z[i]);
}

static const struct delta_net_kernels scalar = { gemm, dot, conv_silu, gated_norm };

const struct delta_net_kernels *delta_net_kernels_isa(enum isa isa) {
    if (isa == ISA_SCALAR) return &scalar;
    if (!isa_available(isa)) return NULL;
#if defined(__x86_64__)
    if (isa == ISA_AVX2) return &delta_net_kernels_avx2;
    if (isa == ISA_AVX512) return &delta_net_kernels_avx512;
#elif defined(__aarch64__)
    if (isa == ISA_NEON) return &delta_net_kernels_neon;
#endif
    return NULL;
}

const struct delta_net_kernels *delta_net_kernels(void) {
    const struct delta_net_kernels *k = delta_net_kernels_isa(quant_active_isa());
    return k ? k : &scalar;
}
