/* NEON dotprod GEMMs on Q4_K and Q6_K rows interleaved by 16 (layouts:
 * quant_r16.c). A 64-byte vector of the layout is four q registers of 4 rows
 * each; a tile is one such quarter (4 rows, one per lane) against up to
 * R16N_COLS activation rows. sdot by lane multiplies 4 values of each of the
 * 4 rows by 4 activation bytes taken from a 16-byte load, so the 4 rows'
 * sums come out in the 4 lanes with no horizontal sums; the sub-block scale
 * multiplies them once. Integer sums are exact, so the float steps alone fix
 * the result: the reference's fused multiply-adds per block, in its order.
 * (ISA_NEON requires dotprod, so there is no widening-multiply variant.) */
#include "quant/quant_impl.h"

#include <arm_neon.h>

#define R16N_INLINE static inline __attribute__((always_inline))

enum {
    R16N_COLS = 8, R16N_PANEL = 16,
    R16N_Q4_BLOCK = QUANT_R16_ROWS * (int)sizeof(struct block_q4_K),
    R16N_Q6_BLOCK = QUANT_R16_ROWS * (int)sizeof(struct block_q6_K),
};

R16N_INLINE float32x4_t load_f16x4(const uint8_t *p) { return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(p))); }

/* Byte k of each lane, zero-extended. */
R16N_INLINE int32x4_t lane_byte(uint32x4_t v, int k) {
    return vreinterpretq_s32_u32(vandq_u32(vshlq_u32(v, vdupq_n_s32(-8 * k)), vdupq_n_u32(0xFF)));
}

/* sum over i < 4 of lanes' w[i] . bytes 4i..4i+3 of a */
R16N_INLINE int32x4_t dot4(int32x4_t acc, const int8x16_t *w, int8x16_t a) {
    acc = vdotq_laneq_s32(acc, w[0], a, 0);
    acc = vdotq_laneq_s32(acc, w[1], a, 1);
    acc = vdotq_laneq_s32(acc, w[2], a, 2);
    return vdotq_laneq_s32(acc, w[3], a, 3);
}

/* Rows 4qr..4qr+3 of a Q4_K group against nc activation rows; with nq = 4,
 * rows 0..15 in one pass (decode: each cache line used once, as it comes). */
R16N_INLINE void q4_tile(const int nc, const int nq, int nb, const uint8_t *wg, int q0, const char *a, size_t a_stride,
                         float *out, size_t out_stride) {
    const uint8x16_t m4 = vdupq_n_u8(0xF);
    const uint32x4_t m6 = vdupq_n_u32(0x3f3f3f3f), lo4 = vdupq_n_u32(0x0f0f0f0f), lo2 = vdupq_n_u32(0x03030303);
    float32x4_t acc[4][R16N_COLS];
    for (int qq = 0; qq < nq; qq++)
        for (int c = 0; c < nc; c++) acc[qq][c] = vdupq_n_f32(0);
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = wg + (size_t)b * R16N_Q4_BLOCK;
        if (q0 == 0) /* decode streams the rows from DRAM: ask for the block after next */
            for (int off = 0; off < R16N_Q4_BLOCK; off += 64) __builtin_prefetch(blk + 2 * R16N_Q4_BLOCK + off);
        for (int qq = 0; qq < nq; qq++) {
        const int qr = q0 + qq;
        const float32x4_t d = load_f16x4(blk + 8 * qr), dmin = load_f16x4(blk + 32 + 8 * qr);
        const uint32x4_t u0 = vld1q_u32((const uint32_t *)(blk + 64 + 16 * qr));
        const uint32x4_t u1 = vld1q_u32((const uint32_t *)(blk + 128 + 16 * qr));
        const uint32x4_t u2 = vld1q_u32((const uint32_t *)(blk + 192 + 16 * qr));
        /* unpack_scales_mins_k4, 4 rows at once */
        const uint32x4_t sc03 = vandq_u32(u0, m6);
        const uint32x4_t sc47 = vorrq_u32(vandq_u32(u2, lo4), vshlq_n_u32(vandq_u32(vshrq_n_u32(u0, 6), lo2), 4));
        const uint32x4_t mn03 = vandq_u32(u1, m6);
        const uint32x4_t mn47 =
            vorrq_u32(vandq_u32(vshrq_n_u32(u2, 4), lo4), vshlq_n_u32(vandq_u32(vshrq_n_u32(u1, 6), lo2), 4));
        const struct block_q8_K *y[R16N_COLS];
        int32x4_t isum[R16N_COLS];
        for (int c = 0; c < nc; c++) {
            y[c] = (const struct block_q8_K *)(a + (size_t)c * a_stride) + b;
            isum[c] = vdupq_n_s32(0);
        }
        for (int s = 0; s < 8; s++) {
            const int32x4_t sc = lane_byte(s < 4 ? sc03 : sc47, s & 3);
            const uint8_t *q = blk + 256 + 256 * s + 16 * qr;
            int8x16_t w[8];
            for (int i = 0; i < 4; i++) {
                const uint8x16_t bits = vld1q_u8(q + 64 * i);
                w[i] = vreinterpretq_s8_u8(vandq_u8(bits, m4));
                w[i + 4] = vreinterpretq_s8_u8(vshrq_n_u8(bits, 4));
            }
            for (int c = 0; c < nc; c++) {
                const int8_t *ys = y[c]->qs + 32 * s;
                /* two chains: with one activation row (decode) the latency of
                 * dependent sdot would bound the speed */
                const int32x4_t t0 = dot4(vdupq_n_s32(0), w, vld1q_s8(ys));
                const int32x4_t t1 = dot4(vdupq_n_s32(0), w + 4, vld1q_s8(ys + 16));
                isum[c] = vmlaq_s32(isum[c], vaddq_s32(t0, t1), sc);
            }
        }
        int32x4_t mins[8];
        for (int s = 0; s < 8; s++) mins[s] = lane_byte(s < 4 ? mn03 : mn47, s & 3);
        for (int c = 0; c < nc; c++) {
            /* the sub-blocks' activation sums: pairs of bsums */
            const int16x8_t bs = vpaddq_s16(vld1q_s16(y[c]->bsums), vld1q_s16(y[c]->bsums + 8));
            const int32x4_t bs03 = vmovl_s16(vget_low_s16(bs)), bs47 = vmovl_s16(vget_high_s16(bs));
            int32x4_t msum = vmulq_laneq_s32(mins[0], bs03, 0);
            msum = vmlaq_laneq_s32(msum, mins[1], bs03, 1);
            msum = vmlaq_laneq_s32(msum, mins[2], bs03, 2);
            msum = vmlaq_laneq_s32(msum, mins[3], bs03, 3);
            msum = vmlaq_laneq_s32(msum, mins[4], bs47, 0);
            msum = vmlaq_laneq_s32(msum, mins[5], bs47, 1);
            msum = vmlaq_laneq_s32(msum, mins[6], bs47, 2);
            msum = vmlaq_laneq_s32(msum, mins[7], bs47, 3);
            const float32x4_t dy = vdupq_n_f32(y[c]->d);
            acc[qq][c] = vfmaq_f32(acc[qq][c], vmulq_f32(d, dy), vcvtq_f32_s32(isum[c]));
            acc[qq][c] = vfmsq_f32(acc[qq][c], vmulq_f32(dmin, dy), vcvtq_f32_s32(msum));
        }
        }
    }
    for (int qq = 0; qq < nq; qq++)
        for (int c = 0; c < nc; c++) vst1q_f32(out + (size_t)c * out_stride + 4 * (q0 + qq), acc[qq][c]);
}

/* The top 2 bits of quad i (bits 2i..2i+1 of each byte) moved to bits 4..5. */
R16N_INLINE uint8x16_t q6_top(uint8x16_t h, int i) {
    const uint8x16_t m = vdupq_n_u8(0x30);
    switch (i) {
    case 0: return vandq_u8(vshlq_n_u8(h, 4), m);
    case 1: return vandq_u8(vshlq_n_u8(h, 2), m);
    case 2: return vandq_u8(h, m);
    default: return vandq_u8(vshrq_n_u8(h, 2), m);
    }
}

/* The same for a Q6_K group. */
R16N_INLINE void q6_tile(const int nc, const int nq, int nb, const uint8_t *wg, int q0, const char *a, size_t a_stride,
                         float *out, size_t out_stride) {
    const uint8x16_t m4 = vdupq_n_u8(0xF);
    float32x4_t acc[4][R16N_COLS];
    for (int qq = 0; qq < nq; qq++)
        for (int c = 0; c < nc; c++) acc[qq][c] = vdupq_n_f32(0);
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = wg + (size_t)b * R16N_Q6_BLOCK;
        if (q0 == 0)
            for (int off = 0; off < R16N_Q6_BLOCK; off += 64) __builtin_prefetch(blk + 2 * R16N_Q6_BLOCK + off);
        for (int qq = 0; qq < nq; qq++) {
        const int qr = q0 + qq;
        const float32x4_t d = load_f16x4(blk + 8 * qr);
        const struct block_q8_K *y[R16N_COLS];
        int32x4_t isum[R16N_COLS], bias[R16N_COLS];
        for (int c = 0; c < nc; c++) {
            y[c] = (const struct block_q8_K *)(a + (size_t)c * a_stride) + b;
            isum[c] = bias[c] = vdupq_n_s32(0);
        }
        for (int t = 0; t < 8; t++) {
            /* row r's scales of sub-blocks 2t and 2t+1 are bytes 2r and 2r+1 */
            const int16x8_t pair = vmovl_s8(vld1_s8((const int8_t *)blk + 32 + 32 * t + 8 * qr));
            const int32x4_t sc0 = vmovl_s16(vget_low_s16(vuzp1q_s16(pair, pair)));
            const int32x4_t sc1 = vmovl_s16(vget_low_s16(vuzp2q_s16(pair, pair)));
            const uint8_t *q = blk + 288 + 384 * t + 16 * qr;
            const uint8x16_t h0 = vld1q_u8(q + 256), h1 = vld1q_u8(q + 320);
            int8x16_t w0[4], w1[4];
            for (int i = 0; i < 4; i++) {
                const uint8x16_t lo = vld1q_u8(q + 64 * i);
                w0[i] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(lo, m4), q6_top(h0, i)));
                w1[i] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(lo, 4), q6_top(h1, i)));
            }
            for (int c = 0; c < nc; c++) {
                const int8_t *ys = y[c]->qs + 32 * t;
                isum[c] = vmlaq_s32(isum[c], dot4(vdupq_n_s32(0), w0, vld1q_s8(ys)), sc0);
                isum[c] = vmlaq_s32(isum[c], dot4(vdupq_n_s32(0), w1, vld1q_s8(ys + 16)), sc1);
                bias[c] = vmlaq_n_s32(bias[c], sc0, y[c]->bsums[2 * t]);
                bias[c] = vmlaq_n_s32(bias[c], sc1, y[c]->bsums[2 * t + 1]);
            }
        }
        for (int c = 0; c < nc; c++) {
            const int32x4_t v = vsubq_s32(isum[c], vshlq_n_s32(bias[c], 5));
            acc[qq][c] = vfmaq_f32(acc[qq][c], vmulq_f32(d, vdupq_n_f32(y[c]->d)), vcvtq_f32_s32(v));
        }
        }
    }
    for (int qq = 0; qq < nq; qq++)
        for (int c = 0; c < nc; c++) vst1q_f32(out + (size_t)c * out_stride + 4 * (q0 + qq), acc[qq][c]);
}

/* One quarter-group tile of nc (2..R16N_COLS) activation rows, or the
 * whole group against one. */
typedef void (*r16n_tile_fn)(int nc, int nb, const uint8_t *wg, int qr, const char *a, size_t a_stride, float *out,
                             size_t out_stride);

#define R16N_WIDTHS(tile)                                                   \
    switch (nc) { /* constant widths: the accumulators stay in registers */ \
    case 1: tile(1, 4, nb, wg, 0, a, a_stride, out, out_stride); break;     \
    case 2: tile(2, 1, nb, wg, qr, a, a_stride, out, out_stride); break;    \
    case 3: tile(3, 1, nb, wg, qr, a, a_stride, out, out_stride); break;    \
    case 4: tile(4, 1, nb, wg, qr, a, a_stride, out, out_stride); break;    \
    case 5: tile(5, 1, nb, wg, qr, a, a_stride, out, out_stride); break;    \
    case 6: tile(6, 1, nb, wg, qr, a, a_stride, out, out_stride); break;    \
    case 7: tile(7, 1, nb, wg, qr, a, a_stride, out, out_stride); break;    \
    default: tile(8, 1, nb, wg, qr, a, a_stride, out, out_stride); break;   \
    }

static void q4_tile_n(int nc, int nb, const uint8_t *wg, int qr, const char *a, size_t a_stride, float *out,
                      size_t out_stride) {
    R16N_WIDTHS(q4_tile)
}

static void q6_tile_n(int nc, int nb, const uint8_t *wg, int qr, const char *a, size_t a_stride, float *out,
                      size_t out_stride) {
    R16N_WIDTHS(q6_tile)
}

/* R16N_PANEL activation rows stay in L1/L2 while the groups stream past
 * them; a group is read from memory once per panel, then from L1. */
static void r16n_gemm(r16n_tile_fn tile, int n, const void *w, size_t w_stride, int n_w_rows, const void *a,
                      size_t a_stride, int n_a_rows, float *out, size_t out_stride) {
    const int nb = n / QK_K;
    for (int p0 = 0; p0 < n_a_rows; p0 += R16N_PANEL) {
        const int p1 = n_a_rows - p0 < R16N_PANEL ? n_a_rows : p0 + R16N_PANEL;
        for (int g = 0; g < n_w_rows / QUANT_R16_ROWS; g++) {
            const uint8_t *wg = (const uint8_t *)w + (size_t)g * QUANT_R16_ROWS * w_stride;
            for (int c0 = p0; c0 < p1; c0 += R16N_COLS) {
                const int nc = p1 - c0 < R16N_COLS ? p1 - c0 : R16N_COLS;
                for (int qr = 0; qr < (nc == 1 ? 1 : 4); qr++) /* one activation row: all quarters at once */
                    tile(nc, nb, wg, qr, (const char *)a + (size_t)c0 * a_stride, a_stride,
                         out + (size_t)c0 * out_stride + (size_t)g * QUANT_R16_ROWS, out_stride);
            }
        }
    }
}

void gemm_q4_K_r16_neon(int n, const void *w, size_t w_stride, int n_w_rows, const void *a, size_t a_stride,
                        int n_a_rows, float *out, size_t out_stride) {
    r16n_gemm(q4_tile_n, n, w, w_stride, n_w_rows, a, a_stride, n_a_rows, out, out_stride);
}

void gemm_q6_K_r16_neon(int n, const void *w, size_t w_stride, int n_w_rows, const void *a, size_t a_stride,
                        int n_a_rows, float *out, size_t out_stride) {
    r16n_gemm(q6_tile_n, n, w, w_stride, n_w_rows, a, a_stride, n_a_rows, out, out_stride);
}
