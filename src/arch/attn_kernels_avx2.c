#include "arch/attn_kernels.h"

#include <immintrin.h>

/* Heads handled per pass: eight accumulators, the converted key and a query
 * load fit the sixteen ymm registers. */
enum { GROUP = 8 };

static float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline __m256 load_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
static inline __m256 load_f32(const float *p) { return _mm256_loadu_ps(p); }

#define DOT_GROUP(NAME, T, LOAD, SCALAR)                                                          \
    static void NAME(const float *q, int nq, int n, const T *k, float *out) {                    \
        for (int j0 = 0; j0 < nq; j0 += GROUP) {                                                  \
            int nj = nq - j0 < GROUP ? nq - j0 : GROUP;                                           \
            const float *qj = q + (size_t)j0 * n;                                                 \
            __m256 acc[GROUP];                                                                    \
            for (int j = 0; j < GROUP; j++) acc[j] = _mm256_setzero_ps();                         \
            int i = 0;                                                                            \
            if (nj == GROUP) {                                                                    \
                for (; i + 8 <= n; i += 8) {                                                      \
                    __m256 kv = LOAD(k + i);                                                      \
                    for (int j = 0; j < GROUP; j++)                                               \
                        acc[j] = _mm256_fmadd_ps(_mm256_loadu_ps(qj + (size_t)j * n + i), kv, acc[j]); \
                }                                                                                 \
            } else {                                                                              \
                for (; i + 8 <= n; i += 8) {                                                      \
                    __m256 kv = LOAD(k + i);                                                      \
                    for (int j = 0; j < nj; j++)                                                  \
                        acc[j] = _mm256_fmadd_ps(_mm256_loadu_ps(qj + (size_t)j * n + i), kv, acc[j]); \
                }                                                                                 \
            }                                                                                     \
            for (int j = 0; j < nj; j++) {                                                        \
                float s = hsum(acc[j]);                                                           \
                for (int t = i; t < n; t++) s += qj[(size_t)j * n + t] * SCALAR(k[t]);            \
                out[j0 + j] = s;                                                                  \
            }                                                                                     \
        }                                                                                         \
    }

/* For each 8 columns: the group's accumulators in registers over all keys. */
#define WSUM_GROUP(NAME, T, LOAD, SCALAR)                                                         \
    static void NAME(const float *w, int nq, int n_keys, const T *v, size_t v_stride, int n, float *out) { \
        for (int j0 = 0; j0 < nq; j0 += GROUP) {                                                  \
            int nj = nq - j0 < GROUP ? nq - j0 : GROUP;                                           \
            int i = 0;                                                                            \
            for (; i + 8 <= n; i += 8) {                                                          \
                __m256 acc[GROUP];                                                                \
                for (int j = 0; j < GROUP; j++) acc[j] = _mm256_setzero_ps();                     \
                for (int p = 0; p < n_keys; p++) {                                                \
                    __m256 vv = LOAD(v + (size_t)p * v_stride + i);                               \
                    const float *wp = w + (size_t)p * nq + j0;                                    \
                    if (nj == GROUP)                                                              \
                        for (int j = 0; j < GROUP; j++) acc[j] = _mm256_fmadd_ps(_mm256_broadcast_ss(wp + j), vv, acc[j]); \
                    else                                                                          \
                        for (int j = 0; j < nj; j++) acc[j] = _mm256_fmadd_ps(_mm256_broadcast_ss(wp + j), vv, acc[j]); \
                }                                                                                 \
                for (int j = 0; j < nj; j++) _mm256_storeu_ps(out + (size_t)(j0 + j) * n + i, acc[j]); \
            }                                                                                     \
            for (; i < n; i++)                                                                    \
                for (int j = 0; j < nj; j++) {                                                    \
                    float s = 0;                                                                  \
                    for (int p = 0; p < n_keys; p++) s += w[(size_t)p * nq + j0 + j] * SCALAR(v[(size_t)p * v_stride + i]); \
                    out[(size_t)(j0 + j) * n + i] = s;                                            \
                }                                                                                 \
        }                                                                                         \
    }

#define F16_SCALAR(x) _cvtsh_ss(x)
#define F32_SCALAR(x) (x)
DOT_GROUP(dot_f16, uint16_t, load_f16, F16_SCALAR)
DOT_GROUP(dot_f32, float, load_f32, F32_SCALAR)
WSUM_GROUP(wsum_f16, uint16_t, load_f16, F16_SCALAR)
WSUM_GROUP(wsum_f32, float, load_f32, F32_SCALAR)

const struct attn_kernels attn_kernels_avx2 = { dot_f16, wsum_f16, dot_f32, wsum_f32 };
