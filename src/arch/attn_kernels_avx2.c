#include "arch/attn_kernels.h"

#include <immintrin.h>
#include <math.h>

/* Heads handled per pass: eight accumulators, the converted key and a query
 * load fit the sixteen ymm registers. */
enum { GROUP = 8 };

static float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The horizontal sums of 8 vectors as one vector (lane j: sum of v[j]). */
static inline __m256 hsum8(const __m256 v[8]) {
    const __m256 t0 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
    const __m256 t1 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(t0, t1, 0x20), _mm256_permute2f128_ps(t0, t1, 0x31));
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
            if (nj == GROUP && i == n) { /* 8 sums at once: a transposing reduction */          \
                _mm256_storeu_ps(out + j0, hsum8(acc));                                           \
                continue;                                                                         \
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

/* exp(x) for x <= 0 (Cephes' expf: a degree-6 polynomial after x = n ln2 + r),
 * within 2 ulp of libm; inputs below -87 give ~1e-38 instead of 0. */
static inline __m256 exp_neg(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    const __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

/* Eight heads per vector: one key's scores are one load. */
static void softmax(float *scores, int n_keys, int nq, float scale, int round_f16) {
    if (nq % 8) { attn_softmax_scalar(scores, n_keys, nq, scale, round_f16); return; }
    const __m256 sc = _mm256_set1_ps(scale);
    for (int h = 0; h < nq; h += 8) {
        __m256 max = _mm256_set1_ps(-INFINITY);
        for (int p = 0; p < n_keys; p++) {
            float *s = scores + (size_t)p * nq + h;
            const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(s), sc);
            _mm256_storeu_ps(s, v);
            max = _mm256_max_ps(max, v);
        }
        __m256d sum_lo = _mm256_setzero_pd(), sum_hi = _mm256_setzero_pd();
        for (int p = 0; p < n_keys; p++) {
            float *s = scores + (size_t)p * nq + h;
            const __m256 e = exp_neg(_mm256_sub_ps(_mm256_loadu_ps(s), max));
            _mm256_storeu_ps(s, e);
            sum_lo = _mm256_add_pd(sum_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
            sum_hi = _mm256_add_pd(sum_hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
        }
        const __m256d one = _mm256_set1_pd(1.0);
        const __m256 w = _mm256_set_m128(_mm256_cvtpd_ps(_mm256_div_pd(one, sum_hi)),
                                         _mm256_cvtpd_ps(_mm256_div_pd(one, sum_lo)));
        for (int p = 0; p < n_keys; p++) {
            float *s = scores + (size_t)p * nq + h;
            __m256 pr = _mm256_mul_ps(_mm256_loadu_ps(s), w);
            if (round_f16) pr = _mm256_cvtph_ps(_mm256_cvtps_ph(pr, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            _mm256_storeu_ps(s, pr);
        }
    }
}

const struct attn_kernels attn_kernels_avx2 = { dot_f16, wsum_f16, dot_f32, wsum_f32, softmax };
