#include "model/attn_kernels.h"

#include <immintrin.h>

static float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static float dot_f16(const float *q, const uint16_t *k, int n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(k + i))), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8),
                             _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(k + i + 8))), a1);
    }
    float s = hsum(_mm256_add_ps(a0, a1));
    for (; i < n; i++) s += q[i] * _cvtsh_ss(k[i]);
    return s;
}

static void axpy_f16(float w, const uint16_t *v, float *acc, int n) {
    __m256 wv = _mm256_set1_ps(w);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(wv, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + i))),
                                                  _mm256_loadu_ps(acc + i)));
    for (; i < n; i++) acc[i] += w * _cvtsh_ss(v[i]);
}

static float dot_f32(const float *q, const float *k, int n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(k + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), _mm256_loadu_ps(k + i + 8), a1);
    }
    float s = hsum(_mm256_add_ps(a0, a1));
    for (; i < n; i++) s += q[i] * k[i];
    return s;
}

static void axpy_f32(float w, const float *v, float *acc, int n) {
    __m256 wv = _mm256_set1_ps(w);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(wv, _mm256_loadu_ps(v + i), _mm256_loadu_ps(acc + i)));
    for (; i < n; i++) acc[i] += w * v[i];
}

const struct attn_kernels attn_kernels_avx2 = { dot_f16, axpy_f16, dot_f32, axpy_f32 };
