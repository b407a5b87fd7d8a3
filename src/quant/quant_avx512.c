/* AVX-512 VNNI kernels for the hot types (dispatched only where the CPU
 * reports AVX-512 F/BW/VL and VNNI). They keep the structure of
 * quant_avx2.c on 256-bit vectors and change two things:
 *  - vpdpwssd folds "madd by the sub-block scale, then add" into one
 *    instruction, vpdpbusd folds Q8_0's "maddubs, madd by ones, add" (and
 *    that of Q4_0, Q5_0, Q4_1, Q5_1, whose kernels quant_b32_x86.h shares
 *    with AVX2);
 *  - with 32 vector registers the gemm tile's register block is 4 weight
 *    rows x 4 activation rows instead of 4 x 2. */
#include "quant/quant_impl.h"
#include "quant/quant_k256_x86.h"
#include "quant/quant_kq_x86.h"
#include "quant/quant_silu_x86.h"

#include <immintrin.h>
#include <string.h>


/* ---------------------------------------------------------------- vec_dot */

/* The vec_dots of Q4_K, Q5_K, Q6_K and Q8_0 make gemm_kq's and gemm_q8_0's
 * float operations for one (row, column) pair, in the same order: a row's
 * result does not depend on how many activation rows share its matmul
 * (quant_kq_x86.h). */

static void vec_dot_q4_K_q8_K(int n, float *s, const void *vx, const void *vy) {
    const struct block_q4_K *x = vx;
    const struct block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / QK_K; i++) {
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
            const __m256i pl = _mm256_maddubs_epi16(q4l, _mm256_loadu_si256((const __m256i *)(q8 + 64 * j)));
            const __m256i ph = _mm256_maddubs_epi16(q4h, _mm256_loadu_si256((const __m256i *)(q8 + 64 * j + 32)));
            sumi = _mm256_dpwssd_epi32(sumi, pl, bcast_i16_lane(scales, 2 * j));
            sumi = _mm256_dpwssd_epi32(sumi, ph, bcast_i16_lane(scales, 2 * j + 1));
        }
        acc = k4_block_acc(h2f(x[i].d), h2f(x[i].dmin), mins, y[i].d, q8k_sub_sums(&y[i]), sumi, acc);
    }
    *s = hsum_ps(acc);
}

static void vec_dot_q5_K_q8_K(int n, float *s, const void *vx, const void *vy) {
    const struct block_q5_K *x = vx;
    const struct block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0xF), m16 = _mm256_set1_epi8(0x10);
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / QK_K; i++) {
        __m256i scales;
        __m128i mins;
        k4_scales_mins(x[i].scales, &scales, &mins);
        const uint8_t *q5 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        __m256i hbits = _mm256_loadu_si256((const __m256i *)x[i].qh);
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            const __m256i q5bits = _mm256_loadu_si256((const __m256i *)(q5 + 32 * j));
            const __m256i hl = _mm256_and_si256(_mm256_slli_epi16(hbits, 4), m16);
            const __m256i hh = _mm256_and_si256(_mm256_slli_epi16(hbits, 3), m16);
            hbits = _mm256_srli_epi16(hbits, 2);
            const __m256i q5l = _mm256_or_si256(_mm256_and_si256(q5bits, m4), hl);
            const __m256i q5h = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q5bits, 4), m4), hh);
            const __m256i pl = _mm256_maddubs_epi16(q5l, _mm256_loadu_si256((const __m256i *)(q8 + 64 * j)));
            const __m256i ph = _mm256_maddubs_epi16(q5h, _mm256_loadu_si256((const __m256i *)(q8 + 64 * j + 32)));
            sumi = _mm256_dpwssd_epi32(sumi, pl, bcast_i16_lane(scales, 2 * j));
            sumi = _mm256_dpwssd_epi32(sumi, ph, bcast_i16_lane(scales, 2 * j + 1));
        }
        acc = k4_block_acc(h2f(x[i].d), h2f(x[i].dmin), mins, y[i].d, q8k_sub_sums(&y[i]), sumi, acc);
    }
    *s = hsum_ps(acc);
}

static void vec_dot_q6_K_q8_K(int n, float *s, const void *vx, const void *vy) {
    const struct block_q6_K *x = vx;
    const struct block_q8_K *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / QK_K; i++) {
        const float d = y[i].d * h2f(x[i].d);
        const __m128i scales8 = _mm_loadu_si128((const __m128i *)x[i].scales);
        const __m256i bias = _mm256_madd_epi16(_mm256_cvtepi8_epi16(scales8),
                                               _mm256_loadu_si256((const __m256i *)y[i].bsums));
        __m256i sumi = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(bias, 5));
        const int8_t *q8 = y[i].qs;
        for (int h = 0; h < 2; h++) {
            __m256i q[4];
            q6_unpack_half(x[i].ql + 64 * h, x[i].qh + 32 * h, q);
            for (int k = 0; k < 4; k++) {
                const __m256i p = _mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)(q8 + 128 * h + 32 * k)));
                sumi = _mm256_dpwssd_epi32(sumi, p, q6_scale_pair(scales8, 4 * h + k));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum_ps(acc);
}

/* int32 sums of four x*y for signed bytes: |x| (unsigned) times y with x's sign. */
static inline __m256i dot_i8(__m256i x, __m256i y) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(x), _mm256_sign_epi8(y, x));
}

static void vec_dot_q8_0_q8_0(int n, float *s, const void *vx, const void *vy) {
    const struct block_q8_0 *x = vx;
    const struct block_q8_0 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / QK8_0; i++) {
        const __m256i p = dot_i8(_mm256_loadu_si256((const __m256i *)x[i].qs), _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d)), _mm256_cvtepi32_ps(p), acc);
    }
    *s = hsum_ps(acc);
}

/* ---------------------------------------------------------------- gemm tiles */

#define KQ_STEP(r, c0, c1, c2, c3)                                                  \
    do {                                                                            \
        const __m256i w_ = _mm256_load_si256(&p[r].q[j]);                           \
        const __m256i s_ = _mm256_load_si256(&p[r].sc[j]);                          \
        c0 = _mm256_dpwssd_epi32(c0, _mm256_maddubs_epi16(w_, y0), s_);             \
        c1 = _mm256_dpwssd_epi32(c1, _mm256_maddubs_epi16(w_, y1), s_);             \
        c2 = _mm256_dpwssd_epi32(c2, _mm256_maddubs_epi16(w_, y2), s_);             \
        c3 = _mm256_dpwssd_epi32(c3, _mm256_maddubs_epi16(w_, y3), s_);             \
    } while (0)

/* acc[r][c] for 4 weight rows x 4 activation rows (a[c] = Q8_K quants). */
static inline void kblock_4x4(const struct kblock *p, const int8_t *const a[4], __m256i acc[4][4]) {
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00, c12 = c00,
            c13 = c00, c20 = c00, c21 = c00, c22 = c00, c23 = c00, c30 = c00, c31 = c00, c32 = c00, c33 = c00;
    for (int j = 0; j < 8; j++) {
        const __m256i y0 = _mm256_loadu_si256((const __m256i *)(a[0] + 32 * j));
        const __m256i y1 = _mm256_loadu_si256((const __m256i *)(a[1] + 32 * j));
        const __m256i y2 = _mm256_loadu_si256((const __m256i *)(a[2] + 32 * j));
        const __m256i y3 = _mm256_loadu_si256((const __m256i *)(a[3] + 32 * j));
        KQ_STEP(0, c00, c01, c02, c03);
        KQ_STEP(1, c10, c11, c12, c13);
        KQ_STEP(2, c20, c21, c22, c23);
        KQ_STEP(3, c30, c31, c32, c33);
        /* no re-association of the sums across j (it would spill products) */
        __asm__("" : "+v"(c00), "+v"(c01), "+v"(c02), "+v"(c03), "+v"(c10), "+v"(c11), "+v"(c12), "+v"(c13));
        __asm__("" : "+v"(c20), "+v"(c21), "+v"(c22), "+v"(c23), "+v"(c30), "+v"(c31), "+v"(c32), "+v"(c33));
    }
    acc[0][0] = c00; acc[0][1] = c01; acc[0][2] = c02; acc[0][3] = c03;
    acc[1][0] = c10; acc[1][1] = c11; acc[1][2] = c12; acc[1][3] = c13;
    acc[2][0] = c20; acc[2][1] = c21; acc[2][2] = c22; acc[2][3] = c23;
    acc[3][0] = c30; acc[3][1] = c31; acc[3][2] = c32; acc[3][3] = c33;
}

enum kq_kind { KQ_Q4_K, KQ_Q5_K, KQ_Q6_K };

#define TILE_ROWS 4
#define TILE_COLS 32
#define MICRO_COLS 4

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
                for (int c = 0; c < nc; c += MICRO_COLS) {
                    /* missing columns of a short step repeat the last one; their results are dropped */
                    const struct block_q8_K *ys[MICRO_COLS];
                    const int8_t *qs[MICRO_COLS];
                    for (int k = 0; k < MICRO_COLS; k++) {
                        const int col = c0 + (c + k < nc ? c + k : nc - 1);
                        ys[k] = (const struct block_q8_K *)((const char *)a + (size_t)col * a_stride) + b;
                        qs[k] = ys[k]->qs;
                    }
                    __m256i acc[4][4];
                    kblock_4x4(prep, qs, acc);
                    for (int k = 0; k < MICRO_COLS && c + k < nc; k++) {
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
                                const __m256 f = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(acc[r][k]), facc[c + k][r]);
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

static void gemm_q8_0(int n, const void *w, size_t w_stride, int n_w_rows, const void *a, size_t a_stride,
                      int n_a_rows, float *out, size_t out_stride) {
    const int nb = n / QK8_0;
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
                    wabs[r] = _mm256_abs_epi8(wq[r]);
                    wd[r] = _mm256_set1_ps(h2f(wr[r][b].d));
                }
                for (int c = 0; c < nc; c++) {
                    const struct block_q8_0 *y = (const struct block_q8_0 *)((const char *)a + (size_t)(c0 + c) * a_stride) + b;
                    const __m256i yq = _mm256_loadu_si256((const __m256i *)y->qs);
                    const __m256 yd = _mm256_set1_ps(h2f(y->d));
                    for (int r = 0; r < TILE_ROWS; r++) {
                        const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), wabs[r], _mm256_sign_epi8(yq, wq[r]));
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

static inline __m256i b32_dot_u8(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }

/* the 32 bits are a byte mask as they are */
static inline __m256i b32_fifth_bits(const uint8_t qh[4]) {
    uint32_t h;
    memcpy(&h, qh, sizeof h);
    return _mm256_movm_epi8((__mmask32)h);
}

#include "quant/quant_b32_x86.h"

/* ---------------------------------------------------------------- F32 (the routers) */

/* The AVX2 dot product's sums exactly (its four 8-float accumulators, the
 * same additions at the end), for blocks of F32_ROWS weight rows x
 * F32_ACTS activation rows: one zmm holds two of those accumulators, so
 * each load serves several dot products. */
enum { F32_ROWS = 4, F32_ACTS = 2, F32_STEP = 32 };

static inline __attribute__((always_inline)) void f32_block(const int R, const int C, int n, const float *w,
                                                            size_t w_stride, const float *a, size_t a_stride,
                                                            float *out, size_t out_stride) {
    __m512 acc[F32_ROWS][F32_ACTS][2];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c][0] = acc[r][c][1] = _mm512_setzero_ps();
    for (int i = 0; i < n; i += F32_STEP) {
        __m512 x[F32_ROWS][2];
        for (int r = 0; r < R; r++) {
            x[r][0] = _mm512_loadu_ps(w + r * w_stride + i);
            x[r][1] = _mm512_loadu_ps(w + r * w_stride + i + 16);
        }
        for (int c = 0; c < C; c++) {
            const __m512 y0 = _mm512_loadu_ps(a + c * a_stride + i), y1 = _mm512_loadu_ps(a + c * a_stride + i + 16);
            for (int r = 0; r < R; r++) {
                acc[r][c][0] = _mm512_fmadd_ps(x[r][0], y0, acc[r][c][0]);
                acc[r][c][1] = _mm512_fmadd_ps(x[r][1], y1, acc[r][c][1]);
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            const __m256 a0 = _mm512_castps512_ps256(acc[r][c][0]);
            const __m256 a1 = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[r][c][0]), 1));
            const __m256 a2 = _mm512_castps512_ps256(acc[r][c][1]);
            const __m256 a3 = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[r][c][1]), 1));
            out[(size_t)c * out_stride + r] = hsum_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
        }
}

static void gemm_f32(int n, const void *w, size_t w_stride, int n_w_rows, const void *a, size_t a_stride, int n_a_rows,
                     float *out, size_t out_stride) {
    const vec_dot_fn dot = quant_kernels(QT_F32, ISA_AVX2)->vec_dot;
    if (n % F32_STEP || w_stride % sizeof(float) || a_stride % sizeof(float)) { /* its tail loops: one at a time */
        for (int c = 0; c < n_a_rows; c++)
            for (int r = 0; r < n_w_rows; r++)
                dot(n, &out[(size_t)c * out_stride + r], (const char *)w + r * w_stride, (const char *)a + c * a_stride);
        return;
    }
    const size_t ws = w_stride / sizeof(float), as = a_stride / sizeof(float);
    for (int c0 = 0; c0 < n_a_rows; c0 += F32_ACTS)
        for (int r0 = 0; r0 < n_w_rows; r0 += F32_ROWS) {
            const float *wb = (const float *)w + r0 * ws, *ab = (const float *)a + c0 * as;
            float *ob = out + (size_t)c0 * out_stride + r0;
            const int R = n_w_rows - r0 < F32_ROWS ? n_w_rows - r0 : F32_ROWS;
            if (n_a_rows - c0 >= F32_ACTS) {
                switch (R) { /* constant shapes: the accumulators stay in registers */
                case 1: f32_block(1, F32_ACTS, n, wb, ws, ab, as, ob, out_stride); break;
                case 2: f32_block(2, F32_ACTS, n, wb, ws, ab, as, ob, out_stride); break;
                case 3: f32_block(3, F32_ACTS, n, wb, ws, ab, as, ob, out_stride); break;
                default: f32_block(F32_ROWS, F32_ACTS, n, wb, ws, ab, as, ob, out_stride); break;
                }
            } else {
                switch (R) {
                case 1: f32_block(1, 1, n, wb, ws, ab, as, ob, out_stride); break;
                case 2: f32_block(2, 1, n, wb, ws, ab, as, ob, out_stride); break;
                case 3: f32_block(3, 1, n, wb, ws, ab, as, ob, out_stride); break;
                default: f32_block(F32_ROWS, 1, n, wb, ws, ab, as, ob, out_stride); break;
                }
            }
        }
}

/* ---------------------------------------------------------------- silu(g) * u */

/* expf as glibc computes it: quant_impl.h (QUANT_EXPF_*, quant_expf_tab). */
static inline __m512d bits_pd(uint64_t b) { return _mm512_castsi512_pd(_mm512_set1_epi64((long long)b)); }

static inline __m256 expf8(__m256 x) {
    const __m512d inv_ln2_32 = bits_pd(QUANT_EXPF_INV_LN2_32), shift = bits_pd(QUANT_EXPF_SHIFT);
    const __m512d c0 = bits_pd(QUANT_EXPF_C0), c1 = bits_pd(QUANT_EXPF_C1);
    const __m512d c2 = bits_pd(QUANT_EXPF_C2), one = _mm512_set1_pd(1.0);
    const __m512i t_lo = _mm512_loadu_si512(quant_expf_tab), t_mid = _mm512_loadu_si512(quant_expf_tab + 8);
    const __m512i t_hi1 = _mm512_loadu_si512(quant_expf_tab + 16), t_hi2 = _mm512_loadu_si512(quant_expf_tab + 24);
    const __m512d xd = _mm512_cvtps_pd(x);
    __m512d kd = _mm512_fmadd_pd(inv_ln2_32, xd, shift);
    const __m512i ki = _mm512_castpd_si512(kd);
    kd = _mm512_sub_pd(kd, shift);
    const __m512d r = _mm512_fmsub_pd(inv_ln2_32, xd, kd);
    /* the table entry of k mod 32: bit 4 picks the half, bits 0-3 the entry */
    const __m512i lo = _mm512_permutex2var_epi64(t_lo, ki, t_mid), hi = _mm512_permutex2var_epi64(t_hi1, ki, t_hi2);
    const __mmask8 upper = _mm512_test_epi64_mask(ki, _mm512_set1_epi64(16));
    const __m512i t = _mm512_add_epi64(_mm512_mask_blend_epi64(upper, lo, hi), _mm512_slli_epi64(ki, 47));
    const __m512d z = _mm512_fmadd_pd(r, c0, c1), r2 = _mm512_mul_pd(r, r);
    __m512d y = _mm512_fmadd_pd(r, c2, one);
    y = _mm512_fmadd_pd(z, r2, y);
    return _mm512_cvtpd_ps(_mm512_mul_pd(y, _mm512_castsi512_pd(t)));
}

static void silu_mul_row_avx512(float *g, const float *u, int64_t n) { silu_mul_row_x86(g, u, n, expf8); }

void quant_fill_avx512(struct quant_isa_table *t) {
    struct qtype_kernels *k = t->k;
    k[QT_Q8_0] = (struct qtype_kernels){vec_dot_q8_0_q8_0, gemm_q8_0, NULL, NULL};
    k[QT_Q4_K] = (struct qtype_kernels){vec_dot_q4_K_q8_K, gemm_q4_K, NULL, NULL};
    t->gemm_r16[QT_Q4_K] = gemm_q4_K_r16_avx512;
    t->gemm_r16[QT_Q6_K] = gemm_q6_K_r16_avx512;
    k[QT_Q5_K] = (struct qtype_kernels){vec_dot_q5_K_q8_K, gemm_q5_K, NULL, NULL};
    k[QT_Q6_K] = (struct qtype_kernels){vec_dot_q6_K_q8_K, gemm_q6_K, NULL, NULL};
    b32_fill(k);
    t->silu_mul_row = silu_mul_row_avx512;
    k[QT_F32].gemm_tile = gemm_f32; /* vec_dot: AVX2's, whose sums these are */
}
