/* The W8A8 rule in scalar C, and the choice of its SIMD versions. */
#include "pack/w8a8.h"

#include "pack/pack_impl.h"
#include "quant/quant.h"

#include <math.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

bool pack_avx2_enabled(void) {
#if defined(__x86_64__)
    enum isa isa = quant_active_isa();
    return isa == ISA_AVX2 || isa == ISA_AVX512;
#else
    return false;
#endif
}

bool pack_neon_enabled(void) {
#if defined(__aarch64__)
    return quant_active_isa() == ISA_NEON;
#else
    return false;
#endif
}

float w8a8_scale(float amax) { return amax / (float)W8A8_QMAX; }

static float amax_ref(const float *x, int64_t n) {
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (!(a <= 3.40282347e38f)) return -1.0f; /* NaN or infinity */
        if (a > amax) amax = a;
    }
    return amax;
}

float w8a8_amax(const float *x, int64_t n) {
#if defined(__x86_64__)
    if (pack_avx2_enabled()) return w8a8_amax_avx2(x, n);
#endif
#if defined(__aarch64__)
    if (pack_neon_enabled()) return w8a8_amax_neon(x, n);
#endif
    return amax_ref(x, n);
}

/* Clamping first keeps |v| small enough for the 1.5 * 2^23 trick, which
 * rounds to nearest even in the default rounding mode as cvtps2dq does. */
int w8a8_quantize_one(float x, float scale) {
    if (scale == 0.0f) return 0;
    float v = x / scale;
    if (v > (float)W8A8_QMAX) v = (float)W8A8_QMAX;
    if (v < -(float)W8A8_QMAX) v = -(float)W8A8_QMAX;
    float r = v + 12582912.0f;
    int32_t bits;
    memcpy(&bits, &r, sizeof bits);
    return (bits & 0x007fffff) - 0x00400000;
}

void w8a8_quantize_ref(const float *x, int64_t n, float scale, int8_t *q) {
    for (int64_t i = 0; i < n; i++) q[i] = (int8_t)w8a8_quantize_one(x[i], scale);
}

void w8a8_quantize(const float *x, int64_t n, float scale, int8_t *q) {
#if defined(__x86_64__)
    if (pack_avx2_enabled()) {
        w8a8_quantize_avx2(x, n, scale, q);
        return;
    }
#endif
#if defined(__aarch64__)
    if (pack_neon_enabled()) {
        w8a8_quantize_neon(x, n, scale, q);
        return;
    }
#endif
    w8a8_quantize_ref(x, n, scale, q);
}

int w8a8_quantize_row(const float *x, int64_t n, int8_t *q, float *scale) {
    float amax = w8a8_amax(x, n);
    if (amax < 0.0f) return -1;
    float s = w8a8_scale(amax);
    w8a8_quantize(x, n, s, q);
    *scale = s;
    return 0;
}

int w8a8_quantize_act(const float *x, int M, int64_t K, int64_t x_stride, int8_t *q, float *scales) {
    for (int m = 0; m < M; m++)
        if (w8a8_quantize_row(x + (int64_t)m * x_stride, K, q + (int64_t)m * K, &scales[m]) != 0) return -1;
    return 0;
}
