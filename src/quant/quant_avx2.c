/* AVX2 + FMA + F16C kernels.
 *
 * K-quant dot products follow the scheme ggml made standard: unsigned quants
 * times signed Q8_K activations with vpmaddubsw (pairs to int16), the
 * sub-block scale applied with vpmaddwd (to int32), one float FMA per block;
 * the Q4_K/Q5_K mins and the Q6_K -32 offset come from the activation block
 * sums (bsums), never from a second pass over the quants.
 *
 * The gemm tiles unpack each weight block of 4 rows once into a small
 * aligned buffer (quants as bytes, scales as int16 lanes) and then run a
 * 4 weight rows x 2 activation rows register block over it: per 32 values
 * and (row, column) pair that is one maddubs, one madd and one add. */
#include "quant/quant_impl.h"
#include "quant/quant_k256_x86.h"
#include "quant/quant_kq_x86.h"
#include "quant/quant_silu_x86.h"

#include <immintrin.h>
#include <string.h>


/* ---------------------------------------------------------------- Q4_K */

/* The vec_dots of Q4_K, Q5_K, Q6_K and Q8_0 make gemm_kq's and gemm_q8_0's
 * float operations for one (row, column) pair, in the same order: a row's
 * result does not depend on how many activation rows share its matmul
 * (quant_kq_x86.h). */

static void vec_dot_q4_K_q8_K(int n, float *s, const void *vx, const void *vy) {
    const struct block_q4_K *x = vx;
    const struct block_q8_K *y = vy;
    const int nb = n / QK_K;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        __m256i scales;
        __m128i mins;
        k4_scales_mins(x[i].scales, &scales, &mins);
        const uint8_t *q4 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            const __m256i q4bits = _mm256_loadu_si256((const __m256i *)(q4 + 32 * j));
            const __m256i q4l = _mm256_and_si256(q4bits, m4);
            const __m256i q4h = _mm256_and_si256(_mm256_srli_epi16(q4bits, 4), m4);
            __m256i pl = _mm256_maddubs_epi16(q4l, _mm256_loadu_si256((const __m256i *)(q8 + 64 * j)));
            __m256i ph = _mm256_maddubs_epi16(q4h, _mm256_loadu_si256((const __m256i *)(q8 + 64 * j + 32)));
            pl = _mm256_madd_epi16(bcast_i16_lane(scales, 2 * j), pl);
            ph = _mm256_madd_epi16(bcast_i16_lane(scales, 2 * j + 1), ph);
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
        }
        acc = k4_block_acc(h2f(x[i].d), h2f(x[i].dmin), mins, y[i].d, q8k_sub_sums(&y[i]), sumi, acc);
    }
    *s = hsum_ps(acc);
}

/* ---------------------------------------------------------------- Q5_K */

static void vec_dot_q5_K_q8_K(int n, float *s, const void *vx, const void *vy) {
    const struct block_q5_K *x = vx;
    const struct block_q8_K *y = vy;
    const int nb = n / QK_K;
    const __m256i m4 = _mm256_set1_epi8(0xF), m16 = _mm256_set1_epi8(0x10);
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        __m256i scales;
        __m128i mins;
        k4_scales_mins(x[i].scales, &scales, &mins);
        const uint8_t *q5 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        /* bits 2j, 2j+1 of each qh byte are the fifth bits of chunk j; shifting
         * the whole vector right by 2 per chunk brings them to bits 0, 1 */
        __m256i hbits = _mm256_loadu_si256((const __m256i *)x[i].qh);
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            const __m256i q5bits = _mm256_loadu_si256((const __m256i *)(q5 + 32 * j));
            const __m256i hl = _mm256_and_si256(_mm256_slli_epi16(hbits, 4), m16);
            const __m256i hh = _mm256_and_si256(_mm256_slli_epi16(hbits, 3), m16);
            hbits = _mm256_srli_epi16(hbits, 2);
            const __m256i q5l = _mm256_or_si256(_mm256_and_si256(q5bits, m4), hl);
            const __m256i q5h = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q5bits, 4), m4), hh);
            __m256i pl = _mm256_maddubs_epi16(q5l, _mm256_loadu_si256((const __m256i *)(q8 + 64 * j)));
            __m256i ph = _mm256_maddubs_epi16(q5h, _mm256_loadu_si256((const __m256i *)(q8 + 64 * j + 32)));
            pl = _mm256_madd_epi16(bcast_i16_lane(scales, 2 * j), pl);
            ph = _mm256_madd_epi16(bcast_i16_lane(scales, 2 * j + 1), ph);
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
        }
        acc = k4_block_acc(h2f(x[i].d), h2f(x[i].dmin), mins, y[i].d, q8k_sub_sums(&y[i]), sumi, acc);
    }
    *s = hsum_ps(acc);
}

/* ---------------------------------------------------------------- Q6_K */

static void vec_dot_q6_K_q8_K(int n, float *s, const void *vx, const void *vy) {
    const struct block_q6_K *x = vx;
    const struct block_q8_K *y = vy;
    const int nb = n / QK_K;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const float d = y[i].d * h2f(x[i].d);
        const __m128i scales8 = _mm_loadu_si128((const __m128i *)x[i].scales);
        /* the -32 offset of every quant, through the activation sums */
        const __m256i bias = _mm256_madd_epi16(_mm256_cvtepi8_epi16(scales8),
                                               _mm256_loadu_si256((const __m256i *)y[i].bsums));
        __m256i sumi = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(bias, 5));
        const int8_t *q8 = y[i].qs;
        for (int h = 0; h < 2; h++) {
            __m256i q[4];
            q6_unpack_half(x[i].ql + 64 * h, x[i].qh + 32 * h, q);
            for (int k = 0; k < 4; k++) {
                __m256i p = _mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)(q8 + 128 * h + 32 * k)));
                p = _mm256_madd_epi16(q6_scale_pair(scales8, 4 * h + k), p);
                sumi = _mm256_add_epi32(sumi, p);
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum_ps(acc);
}

/* ---------------------------------------------------------------- Q8_0 */

/* int32 pair sums of x*y for signed bytes: |x| * (y with x's sign). */
static inline __m256i mul_sum_i8_pairs(__m256i x, __m256i y) {
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

static void vec_dot_q8_0_q8_0(int n, float *s, const void *vx, const void *vy) {
    const struct block_q8_0 *x = vx;
    const struct block_q8_0 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / QK8_0; i++) {
        const __m256i p = mul_sum_i8_pairs(_mm256_loadu_si256((const __m256i *)x[i].qs),
                                           _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d)), _mm256_cvtepi32_ps(p), acc);
    }
    *s = hsum_ps(acc);
}

/* ---------------------------------------------------------------- F32 / F16 / BF16 */

static void vec_dot_f32(int n, float *s, const void *vx, const void *vy) {
    const float *x = vx, *y = vy;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++) sum += x[i] * y[i];
    *s = sum;
}

static inline __m256 load_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

static void vec_dot_f16(int n, float *s, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(load_f16(x + i), load_f16(y + i), a0);
        a1 = _mm256_fmadd_ps(load_f16(x + i + 8), load_f16(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(load_f16(x + i + 16), load_f16(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(load_f16(x + i + 24), load_f16(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load_f16(x + i), load_f16(y + i), a0);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++) sum += h2f(x[i]) * h2f(y[i]);
    *s = sum;
}

static inline __m256 load_bf16(const uint16_t *p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

static void vec_dot_bf16(int n, float *s, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(load_bf16(x + i), load_bf16(y + i), a0);
        a1 = _mm256_fmadd_ps(load_bf16(x + i + 8), load_bf16(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(load_bf16(x + i + 16), load_bf16(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(load_bf16(x + i + 24), load_bf16(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load_bf16(x + i), load_bf16(y + i), a0);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++) sum += bf16_to_f32(x[i]) * bf16_to_f32(y[i]);
    *s = sum;
}

/* ---------------------------------------------------------------- activation quantizers */

static inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

static inline float hmax_ps(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* 32 int32 lanes (four vectors) to 32 int8 in order. */
static inline __m256i pack_i32x32_to_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    const __m256i bytes = _mm256_packs_epi16(ab, cd);
    return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* Same bytes as quantize_row_q8_K_ref: the signed value of largest magnitude
 * (first one on ties) maps to -127, rounding to nearest even. */
static void quantize_row_q8_K(const float *x, void *dst, int64_t n) {
    struct block_q8_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        __m256 vmax = _mm256_setzero_ps();
        for (int j = 0; j < QK_K; j += 8) vmax = _mm256_max_ps(vmax, abs_ps(_mm256_loadu_ps(x + j)));
        const float amax = hmax_ps(vmax);
        if (!amax) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float max = 0;
        const __m256 vamax = _mm256_set1_ps(amax);
        for (int j = 0; j < QK_K; j += 8) {
            int mask = _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(x + j)), vamax, _CMP_EQ_OQ));
            if (mask) {
                max = x[j + __builtin_ctz((unsigned)mask)];
                break;
            }
        }
        const float iscale = -127.f / max;
        const __m256 vis = _mm256_set1_ps(iscale);
        const __m256i v127 = _mm256_set1_epi32(127);
        for (int j = 0; j < QK_K; j += 32) {
            __m256i v[4];
            for (int k = 0; k < 4; k++)
                v[k] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(vis, _mm256_loadu_ps(x + j + 8 * k))), v127);
            const __m256i q = pack_i32x32_to_i8(v[0], v[1], v[2], v[3]);
            _mm256_storeu_si256((__m256i *)(y[i].qs + j), q);
            /* two bsums from these 32 bytes */
            const __m256i s32 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1));
            __m128i s = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm_setzero_si128());
            __m128i t = _mm256_extracti128_si256(s32, 1);
            s = _mm_hadd_epi32(s, t);          /* a01 a23 b01 b23 */
            s = _mm_hadd_epi32(s, s);          /* a b a b */
            y[i].bsums[j / 16] = (int16_t)_mm_cvtsi128_si32(s);
            y[i].bsums[j / 16 + 1] = (int16_t)_mm_extract_epi32(s, 1);
        }
        y[i].d = 1 / iscale;
    }
}

/* One Q8_0 block with the bytes of quantize_row_q8_0_ref (roundf: halves
 * away from zero); returns d before its fp16 rounding. */
static inline float quantize_block_q8_0(const float *x, uint16_t *d16, int8_t *qs) {
    const __m256 sign = _mm256_set1_ps(-0.0f), half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    __m256 v[4];
    __m256 vmax = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        vmax = _mm256_max_ps(vmax, abs_ps(v[k]));
    }
    const float amax = hmax_ps(vmax);
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    *d16 = f32_to_fp16(d);
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; k++) {
        const __m256 s = _mm256_mul_ps(v[k], vid);
        const __m256 t = _mm256_round_ps(s, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        const __m256 frac = abs_ps(_mm256_sub_ps(s, t));
        const __m256 step = _mm256_or_ps(_mm256_and_ps(s, sign), one);
        const __m256 r = _mm256_add_ps(t, _mm256_and_ps(_mm256_cmp_ps(frac, half, _CMP_GE_OQ), step));
        q[k] = _mm256_cvttps_epi32(r);
    }
    _mm256_storeu_si256((__m256i *)qs, pack_i32x32_to_i8(q[0], q[1], q[2], q[3]));
    return d;
}

static void quantize_row_q8_0(const float *x, void *dst, int64_t n) {
    struct block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / QK8_0; i++) quantize_block_q8_0(x + i * QK8_0, &y[i].d, y[i].qs);
}

/* Same bytes as quantize_row_q8_1_ref: Q8_0 plus s = fp16(d * sum(q)). */
static void quantize_row_q8_1(const float *x, void *dst, int64_t n) {
    struct block_q8_1 *y = dst;
    for (int64_t i = 0; i < n / QK8_1; i++) {
        const float d = quantize_block_q8_0(x + i * QK8_1, &y[i].d, y[i].qs);
        const __m256i q = _mm256_loadu_si256((const __m256i *)y[i].qs);
        const __m256i s32 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1));
        __m128i s = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
        s = _mm_hadd_epi32(s, s);
        s = _mm_hadd_epi32(s, s);
        y[i].s = f32_to_fp16((float)_mm_cvtsi128_si32(s) * d);
    }
}

static void quantize_f16(const float *x, void *dst, int64_t n) {
    uint16_t *y = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = f32_to_fp16(x[i]);
}

static void quantize_bf16(const float *x, void *dst, int64_t n) {
    uint16_t *y = dst;
    int64_t i = 0;
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff), quiet = _mm256_set1_epi32(64);
    for (; i + 8 <= n; i += 8) {
        const __m256i u = _mm256_loadu_si256((const __m256i *)(x + i));
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, absm), inf);
        const __m256i hi = _mm256_srli_epi32(u, 16);
        const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(hi, one))), 16);
        const __m256i r = _mm256_blendv_epi8(rounded, _mm256_or_si256(hi, quiet), nan);
        const __m256i p = _mm256_packus_epi32(r, r);
        const __m256i o = _mm256_permute4x64_epi64(p, 0x08);
        _mm_storeu_si128((__m128i *)(y + i), _mm256_castsi256_si128(o));
    }
    for (; i < n; i++) y[i] = f32_to_bf16(x[i]);
}

static void f16_to_f32_row(const uint16_t *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_f16(src + i));
    for (; i < n; i++) dst[i] = h2f(src[i]);
}

static void f32_to_f16_row(const float *src, uint16_t *dst, int64_t n) { quantize_f16(src, dst, n); }

static void f16_to_float(const void *src, float *dst, int64_t n) { f16_to_f32_row(src, dst, n); }

static void bf16_to_float(const void *src, float *dst, int64_t n) {
    const uint16_t *s = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_bf16(s + i));
    for (; i < n; i++) dst[i] = bf16_to_f32(s[i]);
}

/* ---------------------------------------------------------------- k-quant gemm tiles */

/* acc[r][c] = sum_j madd(maddubs(q_rj, a_cj), sc_rj) for 4 rows x 2 columns:
 * eight accumulators, two activation vectors and one weight vector live in
 * registers; scales are memory operands. */
#define KQ_STEP(r, y0, y1, c0, c1)                                                           \
    do {                                                                                     \
        const __m256i w_ = _mm256_load_si256(&p[r].q[j]);                                    \
        const __m256i s_ = _mm256_load_si256(&p[r].sc[j]);                                   \
        c0 = _mm256_add_epi32(c0, _mm256_madd_epi16(_mm256_maddubs_epi16(w_, y0), s_));      \
        c1 = _mm256_add_epi32(c1, _mm256_madd_epi16(_mm256_maddubs_epi16(w_, y1), s_));      \
    } while (0)

static inline void kblock_4x2(const struct kblock *p, const int8_t *a0, const int8_t *a1, __m256i acc[4][2]) {
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    for (int j = 0; j < 8; j++) {
        const __m256i y0 = _mm256_loadu_si256((const __m256i *)(a0 + 32 * j));
        const __m256i y1 = _mm256_loadu_si256((const __m256i *)(a1 + 32 * j));
        KQ_STEP(0, y0, y1, c00, c01);
        KQ_STEP(1, y0, y1, c10, c11);
        KQ_STEP(2, y0, y1, c20, c21);
        KQ_STEP(3, y0, y1, c30, c31);
        /* keeps the compiler from re-associating the sums across j (which
         * spills every product to the stack) */
        __asm__("" : "+x"(c00), "+x"(c01), "+x"(c10), "+x"(c11), "+x"(c20), "+x"(c21), "+x"(c30), "+x"(c31));
    }
    acc[0][0] = c00; acc[0][1] = c01; acc[1][0] = c10; acc[1][1] = c11;
    acc[2][0] = c20; acc[2][1] = c21; acc[3][0] = c30; acc[3][1] = c31;
}

enum kq_kind { KQ_Q4_K, KQ_Q5_K, KQ_Q6_K };

#define TILE_ROWS 4
#define TILE_COLS 32 /* activation rows per pass; each prepared block serves all of them */

static inline __attribute__((always_inline)) void gemm_kq(enum kq_kind kind, int n, const void *w, size_t w_stride,
                                                          int n_w_rows, const void *a, size_t a_stride, int n_a_rows,
                                                          float *out, size_t out_stride) {
    const int nb = n / QK_K;
    const size_t wblock = kind == KQ_Q4_K ? sizeof(struct block_q4_K)
                        : kind == KQ_Q5_K ? sizeof(struct block_q5_K) : sizeof(struct block_q6_K);
    struct kblock prep[TILE_ROWS];
    __m256 facc[TILE_COLS][TILE_ROWS];
    for (int c0 = 0; c0 < n_a_rows; c0 += TILE_COLS) {
        const int nc = n_a_rows - c0 < TILE_COLS ? n_a_rows - c0 : TILE_COLS;
        for (int r0 = 0; r0 < n_w_rows; r0 += TILE_ROWS) {
            const int nr = n_w_rows - r0 < TILE_ROWS ? n_w_rows - r0 : TILE_ROWS;
            for (int c = 0; c < nc; c++)
                for (int r = 0; r < TILE_ROWS; r++) facc[c][r] = _mm256_setzero_ps();
            for (int b = 0; b < nb; b++) {
                /* missing rows of a short tile repeat the last one; their results are dropped */
                for (int r = 0; r < TILE_ROWS; r++) {
                    const int row = r0 + (r < nr ? r : nr - 1);
                    const char *blk = (const char *)w + (size_t)row * w_stride + (size_t)b * wblock;
                    /* weights come from DRAM once per tile: fetch two blocks ahead */
                    if (b + 2 < nb)
                        for (size_t off = 0; off < wblock; off += 64) _mm_prefetch(blk + 2 * wblock + off, _MM_HINT_T0);
                    if (kind == KQ_Q4_K) prep_q4_K((const struct block_q4_K *)blk, &prep[r]);
                    else if (kind == KQ_Q5_K) prep_q5_K((const struct block_q5_K *)blk, &prep[r]);
                    else prep_q6_K((const struct block_q6_K *)blk, &prep[r]);
                }
                for (int c = 0; c < nc; c += 2) {
                    const int c1 = c + 1 < nc ? c + 1 : c;
                    const struct block_q8_K *y0 =
                        (const struct block_q8_K *)((const char *)a + (size_t)(c0 + c) * a_stride) + b;
                    const struct block_q8_K *y1 =
                        (const struct block_q8_K *)((const char *)a + (size_t)(c0 + c1) * a_stride) + b;
                    __m256i acc[4][2];
                    kblock_4x2(prep, y0->qs, y1->qs, acc);
                    const struct block_q8_K *ys[2] = {y0, y1};
                    for (int k = 0; k < 2; k++) {
                        if (k == 1 && c1 == c) break;
                        const struct block_q8_K *y = ys[k];
                        const __m256 yd = _mm256_set1_ps(y->d);
                        if (kind == KQ_Q6_K) {
                            const __m256i bs = _mm256_loadu_si256((const __m256i *)y->bsums);
                            for (int r = 0; r < TILE_ROWS; r++) {
                                const __m256i bias = _mm256_slli_epi32(_mm256_madd_epi16(prep[r].sc16, bs), 5);
                                const __m256 dd = _mm256_mul_ps(_mm256_set1_ps(prep[r].d), yd);
                                facc[c + k][r] = _mm256_fmadd_ps(
                                    dd, _mm256_cvtepi32_ps(_mm256_sub_epi32(acc[r][k], bias)), facc[c + k][r]);
                            }
                        } else {
                            const __m256 ysum = _mm256_mul_ps(
                                yd, _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(q8k_sub_sums(y))));
                            for (int r = 0; r < TILE_ROWS; r++) {
                                const __m256 dd = _mm256_mul_ps(_mm256_set1_ps(prep[r].d), yd);
                                __m256 f = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(acc[r][k]), facc[c + k][r]);
                                facc[c + k][r] = _mm256_fnmadd_ps(prep[r].mins, ysum, f);
                            }
                        }
                    }
                }
            }
            for (int c = 0; c < nc; c++)
                for (int r = 0; r < nr; r++) out[(size_t)(c0 + c) * out_stride + (size_t)(r0 + r)] = hsum_ps(facc[c][r]);
        }
    }
}

static void gemm_q4_K(int n, const void *w, size_t ws, int nw, const void *a, size_t as, int na, float *out, size_t os) {
    gemm_kq(KQ_Q4_K, n, w, ws, nw, a, as, na, out, os);
}
static void gemm_q5_K(int n, const void *w, size_t ws, int nw, const void *a, size_t as, int na, float *out, size_t os) {
    gemm_kq(KQ_Q5_K, n, w, ws, nw, a, as, na, out, os);
}
static void gemm_q6_K(int n, const void *w, size_t ws, int nw, const void *a, size_t as, int na, float *out, size_t os) {
    gemm_kq(KQ_Q6_K, n, w, ws, nw, a, as, na, out, os);
}

/* ---------------------------------------------------------------- Q8_0 gemm tile */

/* Blocks of 32: per (row, column) pair the sign trick, maddubs, madd and one
 * FMA with the product of the two block scales. */
static void gemm_q8_0(int n, const void *w, size_t w_stride, int n_w_rows, const void *a, size_t a_stride,
                      int n_a_rows, float *out, size_t out_stride) {
    const int nb = n / QK8_0;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 facc[TILE_COLS][TILE_ROWS];
    for (int c0 = 0; c0 < n_a_rows; c0 += TILE_COLS) {
        const int nc = n_a_rows - c0 < TILE_COLS ? n_a_rows - c0 : TILE_COLS;
        for (int r0 = 0; r0 < n_w_rows; r0 += TILE_ROWS) {
            const int nr = n_w_rows - r0 < TILE_ROWS ? n_w_rows - r0 : TILE_ROWS;
            const struct block_q8_0 *wr[TILE_ROWS];
            for (int r = 0; r < TILE_ROWS; r++)
                wr[r] = (const struct block_q8_0 *)((const char *)w + (size_t)(r0 + (r < nr ? r : nr - 1)) * w_stride);
            for (int c = 0; c < nc; c++)
                for (int r = 0; r < TILE_ROWS; r++) facc[c][r] = _mm256_setzero_ps();
            for (int b = 0; b < nb; b++) {
                __m256i wabs[TILE_ROWS], wq[TILE_ROWS];
                __m256 wd[TILE_ROWS];
                for (int r = 0; r < TILE_ROWS; r++) {
                    if (b + 4 < nb) _mm_prefetch((const char *)&wr[r][b + 4], _MM_HINT_T0);
                    wq[r] = _mm256_loadu_si256((const __m256i *)wr[r][b].qs);
                    wabs[r] = _mm256_sign_epi8(wq[r], wq[r]);
                    wd[r] = _mm256_set1_ps(h2f(wr[r][b].d));
                }
                for (int c = 0; c < nc; c++) {
                    const struct block_q8_0 *y = (const struct block_q8_0 *)((const char *)a + (size_t)(c0 + c) * a_stride) + b;
                    const __m256i yq = _mm256_loadu_si256((const __m256i *)y->qs);
                    const __m256 yd = _mm256_set1_ps(h2f(y->d));
                    for (int r = 0; r < TILE_ROWS; r++) {
                        const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(wabs[r], _mm256_sign_epi8(yq, wq[r])), ones);
                        facc[c][r] = _mm256_fmadd_ps(_mm256_mul_ps(wd[r], yd), _mm256_cvtepi32_ps(p), facc[c][r]);
                    }
                }
            }
            for (int c = 0; c < nc; c++)
                for (int r = 0; r < nr; r++) out[(size_t)(c0 + c) * out_stride + (size_t)(r0 + r)] = hsum_ps(facc[c][r]);
        }
    }
}

/* ---------------------------------------------------------------- Q4_0 / Q5_0 / Q4_1 / Q5_1 */

static inline __m256i b32_dot_u8(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

static inline __m256i b32_fifth_bits(const uint8_t qh[4]) {
    int32_t h;
    memcpy(&h, qh, sizeof h);
    /* byte j of the vector takes byte j / 8 of qh (in each 128-bit lane) */
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(h), _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2,
                                               3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

#include "quant/quant_b32_x86.h"

QUANT_GEMM_FROM_VEC_DOT(gemm_f16, vec_dot_f16)
QUANT_GEMM_FROM_VEC_DOT(gemm_bf16, vec_dot_bf16)
QUANT_GEMM_FROM_VEC_DOT(gemm_f32, vec_dot_f32)

/* ---------------------------------------------------------------- silu(g) * u */

static inline __m256d bits_pd(uint64_t b) { return _mm256_castsi256_pd(_mm256_set1_epi64x((long long)b)); }

/* expf of 4 floats, glibc's steps in double (quant_impl.h), the table read
 * by a gather */
static inline __m128 expf4(__m128 x) {
    const __m256d inv_ln2_32 = bits_pd(QUANT_EXPF_INV_LN2_32), shift = bits_pd(QUANT_EXPF_SHIFT);
    const __m256d xd = _mm256_cvtps_pd(x);
    __m256d kd = _mm256_fmadd_pd(inv_ln2_32, xd, shift);
    const __m256i ki = _mm256_castpd_si256(kd);
    kd = _mm256_sub_pd(kd, shift);
    const __m256d r = _mm256_fmsub_pd(inv_ln2_32, xd, kd);
    const __m256i idx = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
    __m256i t = _mm256_i64gather_epi64((const long long *)quant_expf_tab, idx, 8);
    t = _mm256_add_epi64(t, _mm256_slli_epi64(ki, 47));
    const __m256d z = _mm256_fmadd_pd(r, bits_pd(QUANT_EXPF_C0), bits_pd(QUANT_EXPF_C1)), r2 = _mm256_mul_pd(r, r);
    __m256d y = _mm256_fmadd_pd(r, bits_pd(QUANT_EXPF_C2), _mm256_set1_pd(1.0));
    y = _mm256_fmadd_pd(z, r2, y);
    return _mm256_cvtpd_ps(_mm256_mul_pd(y, _mm256_castsi256_pd(t)));
}

static inline __m256 expf8(__m256 x) {
    return _mm256_set_m128(expf4(_mm256_extractf128_ps(x, 1)), expf4(_mm256_castps256_ps128(x)));
}

static void silu_mul_row_avx2(float *g, const float *u, int64_t n) { silu_mul_row_x86(g, u, n, expf8); }

void quant_fill_avx2(struct quant_isa_table *t) {
    struct qtype_kernels *k = t->k;
    k[QT_F32] = (struct qtype_kernels){vec_dot_f32, gemm_f32, NULL, NULL};
    k[QT_F16] = (struct qtype_kernels){vec_dot_f16, gemm_f16, quantize_f16, f16_to_float};
    k[QT_BF16] = (struct qtype_kernels){vec_dot_bf16, gemm_bf16, quantize_bf16, bf16_to_float};
    k[QT_Q8_0] = (struct qtype_kernels){vec_dot_q8_0_q8_0, gemm_q8_0, quantize_row_q8_0, NULL};
    k[QT_Q4_K] = (struct qtype_kernels){vec_dot_q4_K_q8_K, gemm_q4_K, NULL, NULL};
    k[QT_Q5_K] = (struct qtype_kernels){vec_dot_q5_K_q8_K, gemm_q5_K, NULL, NULL};
    k[QT_Q6_K] = (struct qtype_kernels){vec_dot_q6_K_q8_K, gemm_q6_K, NULL, NULL};
    k[QT_Q8_K] = (struct qtype_kernels){NULL, NULL, quantize_row_q8_K, NULL};
    k[QT_Q8_1].quantize_act = quantize_row_q8_1;
    b32_fill(k);
    t->gemm_r16[QT_Q4_K] = gemm_q4_K_r16_avx2;
    t->gemm_r16[QT_Q6_K] = gemm_q6_K_r16_avx2;
    t->gemm_r16_avxvnni[QT_Q4_K] = gemm_q4_K_r16_avxvnni;
    t->gemm_r16_avxvnni[QT_Q6_K] = gemm_q6_K_r16_avxvnni;
    t->fp16_to_f32_row = f16_to_f32_row;
    t->f32_to_fp16_row = f32_to_f16_row;
    t->silu_mul_row = silu_mul_row_avx2;
}
