/* aarch64 NEON + dotprod kernels for the hot types (and the 32-value types
 * Q4_0, Q5_0, Q4_1, Q5_1). The structure mirrors
 * quant_avx2.c: sdot (vdotq_s32) sums four int8 products per lane; the
 * sub-block scale multiplies the int32 lanes (mla); the Q4_K/Q5_K mins and
 * the Q6_K -32 offset come from the Q8_K block sums. The gemm tiles unpack a
 * weight block of 4 rows once and reuse it for every activation row. */
#include "quant/quant_b32.h"
#include "quant/quant_impl.h"

#include <arm_neon.h>
#include <string.h>

static inline float h2f(uint16_t h) {
    __fp16 f;
    memcpy(&f, &h, sizeof f);
    return (float)f;
}

/* Q4_K/Q5_K scales (8) and mins (8) of a block, as bytes. */
static inline void k4_scales_mins(const uint8_t *scales12, uint8_t sc[8], int16x8_t *mins) {
    uint32_t u[4];
    unpack_scales_mins_k4(scales12, u);
    memcpy(sc, u, 8);
    *mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8((const uint8_t *)&u[2])));
}

/* sum_j mins_j * (bsums_2j + bsums_2j+1) */
static inline int32_t k4_mins_dot(int16x8_t mins, const struct block_q8_K *y) {
    const int16x8_t q8sums = vpaddq_s16(vld1q_s16(y->bsums), vld1q_s16(y->bsums + 8));
    const int32x4_t p = vaddq_s32(vmull_s16(vget_low_s16(mins), vget_low_s16(q8sums)),
                                  vmull_high_s16(mins, q8sums));
    return vaddvq_s32(p);
}

/* 32 products of int8 vectors (two 16-byte halves) summed into 4 int32 lanes */
static inline int32x4_t dot32(int8x16_t x0, int8x16_t x1, int8x16_t y0, int8x16_t y1) {
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), x0, y0), x1, y1);
}

/* ---------------------------------------------------------------- unpacking */

/* One weight row's super-block unpacked to signed bytes in Q8_K value order,
 * with one int32 scale per 32 values (Q4_K/Q5_K) or per 16 (Q6_K). */
struct kblock {
    int8x16_t q[16];
    int32_t sc[16];
    int16x8_t mins;   /* Q4_K/Q5_K */
    int16x8_t sc16lo, sc16hi; /* Q6_K: the 16 scales, for the -32 offset */
    float d, dmin;
};

static inline void prep_q4_K(const struct block_q4_K *b, struct kblock *p) {
    const uint8x16_t m4 = vdupq_n_u8(0xF);
    uint8_t sc[8];
    k4_scales_mins(b->scales, sc, &p->mins);
    for (int j = 0; j < 4; j++) {
        const uint8x16_t b0 = vld1q_u8(b->qs + 32 * j), b1 = vld1q_u8(b->qs + 32 * j + 16);
        p->q[4 * j + 0] = vreinterpretq_s8_u8(vandq_u8(b0, m4));
        p->q[4 * j + 1] = vreinterpretq_s8_u8(vandq_u8(b1, m4));
        p->q[4 * j + 2] = vreinterpretq_s8_u8(vshrq_n_u8(b0, 4));
        p->q[4 * j + 3] = vreinterpretq_s8_u8(vshrq_n_u8(b1, 4));
    }
    for (int j = 0; j < 8; j++) p->sc[j] = sc[j];
    p->d = h2f(b->d);
    p->dmin = h2f(b->dmin);
}

static inline void prep_q5_K(const struct block_q5_K *b, struct kblock *p) {
    const uint8x16_t m4 = vdupq_n_u8(0xF), m16 = vdupq_n_u8(0x10);
    uint8_t sc[8];
    k4_scales_mins(b->scales, sc, &p->mins);
    uint8x16_t h0 = vld1q_u8(b->qh), h1 = vld1q_u8(b->qh + 16);
    for (int j = 0; j < 4; j++) {
        const uint8x16_t b0 = vld1q_u8(b->qs + 32 * j), b1 = vld1q_u8(b->qs + 32 * j + 16);
        p->q[4 * j + 0] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(b0, m4), vandq_u8(vshlq_n_u8(h0, 4), m16)));
        p->q[4 * j + 1] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(b1, m4), vandq_u8(vshlq_n_u8(h1, 4), m16)));
        p->q[4 * j + 2] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(b0, 4), vandq_u8(vshlq_n_u8(h0, 3), m16)));
        p->q[4 * j + 3] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(b1, 4), vandq_u8(vshlq_n_u8(h1, 3), m16)));
        h0 = vshrq_n_u8(h0, 2);
        h1 = vshrq_n_u8(h1, 2);
    }
    for (int j = 0; j < 8; j++) p->sc[j] = sc[j];
    p->d = h2f(b->d);
    p->dmin = h2f(b->dmin);
}

/* Q6_K quants stay unsigned (0..63): the -32 goes through the bsums. */
static inline void prep_q6_K(const struct block_q6_K *b, struct kblock *p) {
    const uint8x16_t m4 = vdupq_n_u8(0xF), m3 = vdupq_n_u8(0x30);
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
        for (int k = 0; k < 2; k++) { /* 16-byte halves of the 32-byte groups */
            const uint8x16_t l0 = vld1q_u8(ql + 16 * k), l1 = vld1q_u8(ql + 32 + 16 * k);
            const uint8x16_t hb = vld1q_u8(qh + 16 * k);
            int8x16_t *o = &p->q[8 * h];
            o[0 + k] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(l0, m4), vandq_u8(vshlq_n_u8(hb, 4), m3)));
            o[2 + k] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(l1, m4), vandq_u8(vshlq_n_u8(hb, 2), m3)));
            o[4 + k] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(hb, m3)));
            o[6 + k] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(vshrq_n_u8(hb, 2), m3)));
        }
    }
    for (int j = 0; j < 16; j++) p->sc[j] = b->scales[j];
    const int8x16_t s8 = vld1q_s8(b->scales);
    p->sc16lo = vmovl_s8(vget_low_s8(s8));
    p->sc16hi = vmovl_high_s8(s8);
    p->d = h2f(b->d);
}

/* sum_j sc_j * bsums_j: the Q6_K offset term (times 32) */
static inline int32_t q6_bias(const struct kblock *p, const struct block_q8_K *y) {
    const int16x8_t b0 = vld1q_s16(y->bsums), b1 = vld1q_s16(y->bsums + 8);
    int32x4_t s = vmull_s16(vget_low_s16(p->sc16lo), vget_low_s16(b0));
    s = vmlal_high_s16(s, p->sc16lo, b0);
    s = vmlal_s16(s, vget_low_s16(p->sc16hi), vget_low_s16(b1));
    s = vmlal_high_s16(s, p->sc16hi, b1);
    return vaddvq_s32(s);
}

/* Integer dot of one prepared block with one Q8_K block (scales applied). */
static inline int32x4_t kblock_dot(const struct kblock *p, const int8_t *q8, int per16) {
    int32x4_t acc = vdupq_n_s32(0);
    if (per16) {
        for (int j = 0; j < 16; j++) {
            const int32x4_t d = vdotq_s32(vdupq_n_s32(0), p->q[j], vld1q_s8(q8 + 16 * j));
            acc = vmlaq_n_s32(acc, d, p->sc[j]);
        }
    } else {
        for (int j = 0; j < 8; j++) {
            const int32x4_t d = dot32(p->q[2 * j], p->q[2 * j + 1], vld1q_s8(q8 + 32 * j), vld1q_s8(q8 + 32 * j + 16));
            acc = vmlaq_n_s32(acc, d, p->sc[j]);
        }
    }
    return acc;
}

/* ---------------------------------------------------------------- vec_dot */

/* The vec_dots of Q4_K, Q5_K, Q6_K and Q8_0 make gemm_kq's and gemm_q8_0's
 * float operations for one (row, column) pair, in the same order: a row's
 * result does not depend on how many activation rows share its matmul. */

/* One Q4_K / Q5_K super-block into acc, as gemm_kq does it. */
static inline float32x4_t k4_block_acc(const struct kblock *p, const struct block_q8_K *y, float32x4_t acc) {
    acc = vmlaq_n_f32(acc, vcvtq_f32_s32(kblock_dot(p, y->qs, 0)), p->d * y->d);
    const float mins = p->dmin * y->d * (float)k4_mins_dot(p->mins, y);
    return vsetq_lane_f32(vgetq_lane_f32(acc, 0) - mins, acc, 0);
}

static void vec_dot_q4_K_q8_K(int n, float *s, const void *vx, const void *vy) {
    const struct block_q4_K *x = vx;
    const struct block_q8_K *y = vy;
    float32x4_t acc = vdupq_n_f32(0);
    struct kblock p;
    for (int i = 0; i < n / QK_K; i++) {
        prep_q4_K(&x[i], &p);
        acc = k4_block_acc(&p, &y[i], acc);
    }
    *s = vaddvq_f32(acc);
}

static void vec_dot_q5_K_q8_K(int n, float *s, const void *vx, const void *vy) {
    const struct block_q5_K *x = vx;
    const struct block_q8_K *y = vy;
    float32x4_t acc = vdupq_n_f32(0);
    struct kblock p;
    for (int i = 0; i < n / QK_K; i++) {
        prep_q5_K(&x[i], &p);
        acc = k4_block_acc(&p, &y[i], acc);
    }
    *s = vaddvq_f32(acc);
}

static void vec_dot_q6_K_q8_K(int n, float *s, const void *vx, const void *vy) {
    const struct block_q6_K *x = vx;
    const struct block_q8_K *y = vy;
    float32x4_t acc = vdupq_n_f32(0);
    struct kblock p;
    for (int i = 0; i < n / QK_K; i++) {
        prep_q6_K(&x[i], &p);
        int32x4_t sumi = kblock_dot(&p, y[i].qs, 1);
        sumi = vsetq_lane_s32(vgetq_lane_s32(sumi, 0) - 32 * q6_bias(&p, &y[i]), sumi, 0);
        acc = vmlaq_n_f32(acc, vcvtq_f32_s32(sumi), p.d * y[i].d);
    }
    *s = vaddvq_f32(acc);
}

static void vec_dot_q8_0_q8_0(int n, float *s, const void *vx, const void *vy) {
    const struct block_q8_0 *x = vx;
    const struct block_q8_0 *y = vy;
    float32x4_t acc = vdupq_n_f32(0);
    for (int i = 0; i < n / QK8_0; i++) {
        const int32x4_t p = dot32(vld1q_s8(x[i].qs), vld1q_s8(x[i].qs + 16), vld1q_s8(y[i].qs), vld1q_s8(y[i].qs + 16));
        acc = vmlaq_n_f32(acc, vcvtq_f32_s32(p), h2f(x[i].d) * h2f(y[i].d));
    }
    *s = vaddvq_f32(acc);
}

/* ---------------------------------------------------------------- gemm tiles */

enum kq_kind { KQ_Q4_K, KQ_Q5_K, KQ_Q6_K };

#define TILE_ROWS 4
#define TILE_COLS 32

static inline __attribute__((always_inline)) void gemm_kq(enum kq_kind kind, int n, const void *w, size_t w_stride,
                                                          int n_w_rows, const void *a, size_t a_stride, int n_a_rows,
                                                          float *out, size_t out_stride) {
    const int nb = n / QK_K;
    const size_t wblock = kind == KQ_Q4_K ? sizeof(struct block_q4_K)
                        : kind == KQ_Q5_K ? sizeof(struct block_q5_K) : sizeof(struct block_q6_K);
    struct kblock prep[TILE_ROWS];
    float32x4_t facc[TILE_COLS][TILE_ROWS];
    for (int c0 = 0; c0 < n_a_rows; c0 += TILE_COLS) {
        const int nc = n_a_rows - c0 < TILE_COLS ? n_a_rows - c0 : TILE_COLS;
        for (int r0 = 0; r0 < n_w_rows; r0 += TILE_ROWS) {
            const int nr = n_w_rows - r0 < TILE_ROWS ? n_w_rows - r0 : TILE_ROWS;
            for (int c = 0; c < nc; c++)
                for (int r = 0; r < TILE_ROWS; r++) facc[c][r] = vdupq_n_f32(0);
            for (int b = 0; b < nb; b++) {
                for (int r = 0; r < TILE_ROWS; r++) {
                    const int row = r0 + (r < nr ? r : nr - 1);
                    const char *blk = (const char *)w + (size_t)row * w_stride + (size_t)b * wblock;
                    if (b + 2 < nb)
                        for (size_t off = 0; off < wblock; off += 64) __builtin_prefetch(blk + 2 * wblock + off);
                    if (kind == KQ_Q4_K) prep_q4_K((const struct block_q4_K *)blk, &prep[r]);
                    else if (kind == KQ_Q5_K) prep_q5_K((const struct block_q5_K *)blk, &prep[r]);
                    else prep_q6_K((const struct block_q6_K *)blk, &prep[r]);
                }
                for (int c = 0; c < nc; c++) {
                    const struct block_q8_K *y =
                        (const struct block_q8_K *)((const char *)a + (size_t)(c0 + c) * a_stride) + b;
                    int32x4_t acc[TILE_ROWS];
                    for (int r = 0; r < TILE_ROWS; r++) acc[r] = vdupq_n_s32(0);
                    /* 4 weight rows share each activation load */
                    if (kind == KQ_Q6_K) {
                        for (int j = 0; j < 16; j++) {
                            const int8x16_t yv = vld1q_s8(y->qs + 16 * j);
                            for (int r = 0; r < TILE_ROWS; r++)
                                acc[r] = vmlaq_n_s32(acc[r], vdotq_s32(vdupq_n_s32(0), prep[r].q[j], yv), prep[r].sc[j]);
                        }
                    } else {
                        for (int j = 0; j < 8; j++) {
                            const int8x16_t y0 = vld1q_s8(y->qs + 32 * j), y1 = vld1q_s8(y->qs + 32 * j + 16);
                            for (int r = 0; r < TILE_ROWS; r++)
                                acc[r] = vmlaq_n_s32(acc[r], dot32(prep[r].q[2 * j], prep[r].q[2 * j + 1], y0, y1),
                                                     prep[r].sc[j]);
                        }
                    }
                    for (int r = 0; r < TILE_ROWS; r++) {
                        const float dd = prep[r].d * y->d;
                        if (kind == KQ_Q6_K) {
                            const int32_t bias = 32 * q6_bias(&prep[r], y);
                            /* the offset goes to lane 0 so the lane sum stays exact */
                            acc[r] = vsetq_lane_s32(vgetq_lane_s32(acc[r], 0) - bias, acc[r], 0);
                            facc[c][r] = vmlaq_n_f32(facc[c][r], vcvtq_f32_s32(acc[r]), dd);
                        } else {
                            facc[c][r] = vmlaq_n_f32(facc[c][r], vcvtq_f32_s32(acc[r]), dd);
                            const float mins = prep[r].dmin * y->d * (float)k4_mins_dot(prep[r].mins, y);
                            facc[c][r] = vsetq_lane_f32(vgetq_lane_f32(facc[c][r], 0) - mins, facc[c][r], 0);
                        }
                    }
                }
            }
            for (int c = 0; c < nc; c++)
                for (int r = 0; r < nr; r++) out[(size_t)(c0 + c) * out_stride + (size_t)(r0 + r)] = vaddvq_f32(facc[c][r]);
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
    float32x4_t facc[TILE_COLS][TILE_ROWS];
    for (int c0 = 0; c0 < n_a_rows; c0 += TILE_COLS) {
        const int nc = n_a_rows - c0 < TILE_COLS ? n_a_rows - c0 : TILE_COLS;
        for (int r0 = 0; r0 < n_w_rows; r0 += TILE_ROWS) {
            const int nr = n_w_rows - r0 < TILE_ROWS ? n_w_rows - r0 : TILE_ROWS;
            const struct block_q8_0 *wr[TILE_ROWS];
            for (int r = 0; r < TILE_ROWS; r++)
                wr[r] = (const struct block_q8_0 *)((const char *)w + (size_t)(r0 + (r < nr ? r : nr - 1)) * w_stride);
            for (int c = 0; c < nc; c++)
                for (int r = 0; r < TILE_ROWS; r++) facc[c][r] = vdupq_n_f32(0);
            for (int b = 0; b < nb; b++) {
                int8x16_t w0[TILE_ROWS], w1[TILE_ROWS];
                float wd[TILE_ROWS];
                for (int r = 0; r < TILE_ROWS; r++) {
                    w0[r] = vld1q_s8(wr[r][b].qs);
                    w1[r] = vld1q_s8(wr[r][b].qs + 16);
                    wd[r] = h2f(wr[r][b].d);
                }
                for (int c = 0; c < nc; c++) {
                    const struct block_q8_0 *y = (const struct block_q8_0 *)((const char *)a + (size_t)(c0 + c) * a_stride) + b;
                    const int8x16_t y0 = vld1q_s8(y->qs), y1 = vld1q_s8(y->qs + 16);
                    const float yd = h2f(y->d);
                    for (int r = 0; r < TILE_ROWS; r++)
                        facc[c][r] = vmlaq_n_f32(facc[c][r], vcvtq_f32_s32(dot32(w0[r], w1[r], y0, y1)), wd[r] * yd);
                }
            }
            for (int c = 0; c < nc; c++)
                for (int r = 0; r < nr; r++) out[(size_t)(c0 + c) * out_stride + (size_t)(r0 + r)] = vaddvq_f32(facc[c][r]);
        }
    }
}

/* ---------------------------------------------------------------- Q4_0 / Q5_0 / Q4_1 / Q5_1 */

/* d, and m (weights) or s (Q8_1): the first two fp16 fields of every block. */
static inline float b32_half(const void *blk, int field) {
    uint16_t h;
    memcpy(&h, (const char *)blk + 2 * field, 2);
    return h2f(h);
}

/* 0xFF in lane j where bit j (hi: bit 16 + j) of the block's qh is set. */
static inline uint8x16_t b32_fifth_bits(const uint8_t qh[4], int hi) {
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t bytes = vcombine_u8(vdup_n_u8(qh[2 * hi]), vdup_n_u8(qh[2 * hi + 1]));
    return vtstq_u8(bytes, vld1q_u8(bit));
}

/* The block's 32 codes as bytes in value order: lo = values 0..15, hi = 16..31. */
static inline __attribute__((always_inline)) void b32_codes(enum b32_kind k, const void *blk, int8x16_t *lo,
                                                            int8x16_t *hi) {
    const uint8_t *qh = (const uint8_t *)blk + (k == B32_Q5_0 ? 2 : 4);
    const uint8_t *qs = k == B32_Q4_0 ? (const uint8_t *)blk + 2 : k == B32_Q4_1 ? qh : qh + 4;
    const uint8x16_t bytes = vld1q_u8(qs);
    uint8x16_t l = vandq_u8(bytes, vdupq_n_u8(0xF)), h = vshrq_n_u8(bytes, 4);
    if (k == B32_Q5_0) { /* q - 16: the nibble with 0xF0 (-16) where the fifth bit is clear */
        l = vorrq_u8(l, vbicq_u8(vdupq_n_u8(0xF0), b32_fifth_bits(qh, 0)));
        h = vorrq_u8(h, vbicq_u8(vdupq_n_u8(0xF0), b32_fifth_bits(qh, 1)));
    } else if (k == B32_Q5_1) {
        l = vorrq_u8(l, vandq_u8(vdupq_n_u8(0x10), b32_fifth_bits(qh, 0)));
        h = vorrq_u8(h, vandq_u8(vdupq_n_u8(0x10), b32_fifth_bits(qh, 1)));
    }
    *lo = vreinterpretq_s8_u8(l);
    *hi = vreinterpretq_s8_u8(h);
    if (k == B32_Q4_0) {
        *lo = vsubq_s8(*lo, vdupq_n_s8(8));
        *hi = vsubq_s8(*hi, vdupq_n_s8(8));
    }
}

static inline __attribute__((always_inline)) void b32_vec_dot(enum b32_kind k, int n, float *s, const void *vx,
                                                              const void *vy) {
    const char *x = vx, *y = vy;
    const size_t xb = b32_block_bytes(k), yb = b32_act_bytes(k), qs_at = b32_act_qs_offset(k);
    float32x4_t acc = vdupq_n_f32(0);
    float acc_m = 0.0f;
    for (int i = 0; i < n / 32; i++, x += xb, y += yb) {
        int8x16_t lo, hi;
        b32_codes(k, x, &lo, &hi);
        const int32x4_t p = dot32(lo, hi, vld1q_s8((const int8_t *)(y + qs_at)), vld1q_s8((const int8_t *)(y + qs_at + 16)));
        acc = vmlaq_n_f32(acc, vcvtq_f32_s32(p), b32_half(x, 0) * b32_half(y, 0));
        if (b32_has_min(k)) acc_m += b32_half(x, 1) * b32_half(y, 1);
    }
    *s = vaddvq_f32(acc) + acc_m;
}

/* The codes of 4 weight rows' block are unpacked once for all activation
 * rows; the min terms of the 4 rows take one 4-wide multiply-add per column. */
static inline __attribute__((always_inline)) void b32_gemm(enum b32_kind k, int n, const void *w, size_t w_stride,
                                                           int n_w_rows, const void *a, size_t a_stride, int n_a_rows,
                                                           float *out, size_t out_stride) {
    const int nb = n / 32;
    const size_t xb = b32_block_bytes(k), yb = b32_act_bytes(k), qs_at = b32_act_qs_offset(k);
    float32x4_t facc[TILE_COLS][TILE_ROWS], macc[TILE_COLS];
    for (int c0 = 0; c0 < n_a_rows; c0 += TILE_COLS) {
        const int nc = n_a_rows - c0 < TILE_COLS ? n_a_rows - c0 : TILE_COLS;
        for (int r0 = 0; r0 < n_w_rows; r0 += TILE_ROWS) {
            const int nr = n_w_rows - r0 < TILE_ROWS ? n_w_rows - r0 : TILE_ROWS;
            /* missing rows of a short tile repeat the last one; their results are dropped */
            const char *wr[TILE_ROWS];
            for (int r = 0; r < TILE_ROWS; r++) wr[r] = (const char *)w + (size_t)(r0 + (r < nr ? r : nr - 1)) * w_stride;
            for (int c = 0; c < nc; c++) {
                for (int r = 0; r < TILE_ROWS; r++) facc[c][r] = vdupq_n_f32(0);
                macc[c] = vdupq_n_f32(0);
            }
            for (int b = 0; b < nb; b++) {
                int8x16_t lo[TILE_ROWS], hi[TILE_ROWS];
                float wd[TILE_ROWS], wm[TILE_ROWS] = {0};
                for (int r = 0; r < TILE_ROWS; r++) {
                    const char *blk = wr[r] + (size_t)b * xb;
                    if (b + 4 < nb) __builtin_prefetch(blk + 4 * xb);
                    b32_codes(k, blk, &lo[r], &hi[r]);
                    wd[r] = b32_half(blk, 0);
                    if (b32_has_min(k)) wm[r] = b32_half(blk, 1);
                }
                const float32x4_t wmins = vld1q_f32(wm);
                for (int c = 0; c < nc; c++) {
                    const char *y = (const char *)a + (size_t)(c0 + c) * a_stride + (size_t)b * yb;
                    const int8x16_t y0 = vld1q_s8((const int8_t *)(y + qs_at)), y1 = vld1q_s8((const int8_t *)(y + qs_at + 16));
                    const float yd = b32_half(y, 0);
                    for (int r = 0; r < TILE_ROWS; r++)
                        facc[c][r] = vmlaq_n_f32(facc[c][r], vcvtq_f32_s32(dot32(lo[r], hi[r], y0, y1)), wd[r] * yd);
                    if (b32_has_min(k)) macc[c] = vmlaq_n_f32(macc[c], wmins, b32_half(y, 1));
                }
            }
            for (int c = 0; c < nc; c++) {
                float mins[TILE_ROWS];
                vst1q_f32(mins, macc[c]);
                for (int r = 0; r < nr; r++)
                    out[(size_t)(c0 + c) * out_stride + (size_t)(r0 + r)] = vaddvq_f32(facc[c][r]) + mins[r];
            }
        }
    }
}

B32_DEFINE_KERNELS

/* ---------------------------------------------------------------- fp16 rows */

static void f16_to_f32_row(const uint16_t *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(src + i))));
    for (; i < n; i++) dst[i] = h2f(src[i]);
}

static void f16_to_float(const void *src, float *dst, int64_t n) { f16_to_f32_row(src, dst, n); }

void quant_fill_neon(struct quant_isa_table *t) {
    struct qtype_kernels *k = t->k;
    k[QT_Q8_0] = (struct qtype_kernels){vec_dot_q8_0_q8_0, gemm_q8_0, NULL, NULL};
    k[QT_Q4_K] = (struct qtype_kernels){vec_dot_q4_K_q8_K, gemm_q4_K, NULL, NULL};
    k[QT_Q5_K] = (struct qtype_kernels){vec_dot_q5_K_q8_K, gemm_q5_K, NULL, NULL};
    k[QT_Q6_K] = (struct qtype_kernels){vec_dot_q6_K_q8_K, gemm_q6_K, NULL, NULL};
    k[QT_F16] = (struct qtype_kernels){NULL, NULL, NULL, f16_to_float};
    b32_fill(k);
    t->gemm_r16[QT_Q4_K] = gemm_q4_K_r16_neon;
    t->gemm_r16[QT_Q6_K] = gemm_q6_K_r16_neon;
    t->fp16_to_f32_row = f16_to_f32_row;
}
