/* The row-interleaved layout for the int8 dot instructions, and its scalar
 * reference kernel.
 *
 * Q4_K rows are grouped by 16; a group stores, for each block of 256
 * columns, 2304 bytes (16 rows x 144, the same as the plain rows):
 *   uint16 d[16], dmin[16]      the rows' fp16 scales
 *   uint32 u0[16], u1[16], u2[16] the rows' 12 packed scale bytes, as dwords
 *   uint8  qs[8][4][64]         sub-block s, vector i: byte 4r+j holds value
 *                               32s+4i+j of row r in its low nibble and value
 *                               32s+4(i+4)+j in its high nibble
 * so one 64-byte load gives 4 consecutive values of each of 16 rows: the
 * operand of vpdpbusd against 4 activation bytes broadcast to all lanes, and
 * the 16 lanes of the results are the 16 rows (no horizontal sums).
 *
 * Q6_K: 3360 bytes per group and block (16 x 210):
 *   uint16 d[16]
 *   int8   sc[8][16][2]         pair t, row r: the scales of sub-blocks 2t, 2t+1
 *   then per pair t of sub-blocks (32 values, 384 bytes):
 *   uint8  lo[4][64]            as Q4_K's qs: the low 4 bits of the values
 *   uint8  hi[2][64]            vector h, byte 4r+j: the top 2 bits of value
 *                               32t+16h+4i+j of row r at bits 2i..2i+1 */
#include "quant/quant_impl.h"

#include <math.h>
#include <string.h>

enum {
    R16_BLOCK_BYTES = QUANT_R16_ROWS * (int)sizeof(struct block_q4_K),
    R16_Q6_BLOCK_BYTES = QUANT_R16_ROWS * (int)sizeof(struct block_q6_K),
};

static inline uint32_t word(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* 4 bytes from nibble `high` of each byte of v (as the value's low 4 bits). */
static inline uint32_t nibbles(uint32_t v, int high) { return (high ? v >> 4 : v) & 0x0F0F0F0Fu; }

/* Word by word (4 values of a row at a time): the packers run once per
 * model over every weight, so they are kept at memory speed. */
static void pack_q4_K(const void *src, size_t src_stride, int64_t rows, int64_t nb, uint8_t *out) {
    for (int64_t g = 0; g < rows / QUANT_R16_ROWS; g++)
        for (int64_t b = 0; b < nb; b++, out += R16_BLOCK_BYTES)
            for (int r = 0; r < QUANT_R16_ROWS; r++) {
                const struct block_q4_K *x =
                    (const struct block_q4_K *)((const char *)src + (size_t)(g * QUANT_R16_ROWS + r) * src_stride) + b;
                memcpy(out + 2 * r, &x->d, 2);
                memcpy(out + 32 + 2 * r, &x->dmin, 2);
                for (int w = 0; w < 3; w++) memcpy(out + 64 + 64 * w + 4 * r, x->scales + 4 * w, 4);
                /* value 32s+m is nibble s%2 of qs[32(s/2) + m] */
                for (int s = 0; s < 8; s++)
                    for (int i = 0; i < 4; i++) {
                        const uint8_t *qs = x->qs + 32 * (s / 2) + 4 * i;
                        const uint32_t v = nibbles(word(qs), s & 1) | nibbles(word(qs + 16), s & 1) << 4;
                        memcpy(out + 256 + 256 * s + 64 * i + 4 * r, &v, 4);
                    }
            }
}

static void pack_q6_K(const void *src, size_t src_stride, int64_t rows, int64_t nb, uint8_t *out) {
    for (int64_t g = 0; g < rows / QUANT_R16_ROWS; g++)
        for (int64_t b = 0; b < nb; b++, out += R16_Q6_BLOCK_BYTES)
            for (int r = 0; r < QUANT_R16_ROWS; r++) {
                const struct block_q6_K *x =
                    (const struct block_q6_K *)((const char *)src + (size_t)(g * QUANT_R16_ROWS + r) * src_stride) + b;
                memcpy(out + 2 * r, &x->d, 2);
                for (int t = 0; t < 8; t++) {
                    out[32 + 32 * t + 2 * r] = (uint8_t)x->scales[2 * t];
                    out[32 + 32 * t + 2 * r + 1] = (uint8_t)x->scales[2 * t + 1];
                    /* values 32t..32t+31 are in half t/4, quarter t%4: low bits in
                     * nibble q/2 of ql[64h + 32(q%2) + l], top bits at 2q of qh[32h + l] */
                    const int h = t / 4, quarter = t % 4;
                    const uint8_t *ql = x->ql + 64 * h + 32 * (quarter & 1), *qh = x->qh + 32 * h;
                    uint8_t *q = out + 288 + 384 * t;
                    uint32_t top0 = 0, top1 = 0;
                    for (int i = 0; i < 4; i++) {
                        const uint32_t lo = nibbles(word(ql + 4 * i), quarter >= 2) |
                                            nibbles(word(ql + 16 + 4 * i), quarter >= 2) << 4;
                        memcpy(q + 64 * i + 4 * r, &lo, 4);
                        top0 |= ((word(qh + 4 * i) >> (2 * quarter)) & 0x03030303u) << (2 * i);
                        top1 |= ((word(qh + 16 + 4 * i) >> (2 * quarter)) & 0x03030303u) << (2 * i);
                    }
                    memcpy(q + 256 + 4 * r, &top0, 4);
                    memcpy(q + 320 + 4 * r, &top1, 4);
                }
            }
}

int quant_r16_pack(enum qtype t, const void *src, size_t src_stride, int64_t rows, int64_t cols, void *dst) {
    if ((t != QT_Q4_K && t != QT_Q6_K) || rows % QUANT_R16_ROWS || cols % QK_K) return -1;
    if (t == QT_Q6_K) pack_q6_K(src, src_stride, rows, cols / QK_K, dst);
    else pack_q4_K(src, src_stride, rows, cols / QK_K, dst);
    return 0;
}

uint32_t quant_r16_variant(enum qtype t) {
    const struct qtype_traits *tr = quant_traits(t);
    /* 1: the layout above, the same bytes for every ISA's kernel */
    return tr && tr->gemm_r16 && (t == QT_Q4_K || t == QT_Q6_K) ? 1 : 0;
}

/* The SIMD kernels' arithmetic, one lane at a time: per block, the exact
 * integer sums, then fused multiply-adds into the row's float sum (Q4_K:
 * values then mins; Q6_K: one, the -32 offset folded into the integers), in
 * block order. */
static float q4_K_block_ref(const uint8_t *blk, int r, const struct block_q8_K *y, float acc) {
    uint16_t d, dmin;
    memcpy(&d, blk + 2 * r, 2);
    memcpy(&dmin, blk + 32 + 2 * r, 2);
    uint8_t scales12[12];
    for (int k = 0; k < 3; k++) memcpy(scales12 + 4 * k, blk + 64 + 64 * k + 4 * r, 4);
    int32_t isum = 0, msum = 0;
    for (int s = 0; s < 8; s++) {
        uint8_t sc, m;
        get_scale_min_k4(s, scales12, &sc, &m);
        int32_t sub = 0;
        for (int i = 0; i < 8; i++)
            for (int j = 0; j < 4; j++) {
                const uint8_t byte = blk[256 + 256 * s + 64 * (i % 4) + 4 * r + j];
                sub += (i < 4 ? byte & 0xF : byte >> 4) * y->qs[32 * s + 4 * i + j];
            }
        isum += sub * sc;
        msum += m * (y->bsums[2 * s] + y->bsums[2 * s + 1]);
    }
    acc = fmaf(fp16_to_f32(d) * y->d, (float)isum, acc);
    return fmaf(-(fp16_to_f32(dmin) * y->d), (float)msum, acc);
}

static float q6_K_block_ref(const uint8_t *blk, int r, const struct block_q8_K *y, float acc) {
    uint16_t d;
    memcpy(&d, blk + 2 * r, 2);
    int32_t isum = 0, bias = 0;
    for (int s = 0; s < 16; s++) {
        const int sc = (int8_t)blk[32 + 32 * (s / 2) + 2 * r + s % 2];
        const uint8_t *q = blk + 288 + 384 * (s / 2);
        int32_t sub = 0;
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) {
                const int lo = s % 2 ? q[64 * i + 4 * r + j] >> 4 : q[64 * i + 4 * r + j] & 0xF;
                const int hi = (q[256 + 64 * (s % 2) + 4 * r + j] >> (2 * i)) & 3;
                sub += (lo | hi << 4) * y->qs[16 * s + 4 * i + j];
            }
        isum += sub * sc;
        bias += sc * y->bsums[s];
    }
    return fmaf(fp16_to_f32(d) * y->d, (float)(isum - 32 * bias), acc);
}

typedef float (*block_ref_fn)(const uint8_t *blk, int r, const struct block_q8_K *y, float acc);

static void gemm_r16_ref(block_ref_fn block, size_t block_bytes, int n, const void *w, size_t w_stride, int n_w_rows,
                         const void *a, size_t a_stride, int n_a_rows, float *out, size_t out_stride) {
    const int nb = n / QK_K;
    for (int g = 0; g < n_w_rows / QUANT_R16_ROWS; g++) {
        const uint8_t *wg = (const uint8_t *)w + (size_t)g * QUANT_R16_ROWS * w_stride;
        for (int c = 0; c < n_a_rows; c++) {
            const struct block_q8_K *y = (const struct block_q8_K *)((const char *)a + (size_t)c * a_stride);
            for (int r = 0; r < QUANT_R16_ROWS; r++) {
                float acc = 0;
                for (int b = 0; b < nb; b++) acc = block(wg + (size_t)b * block_bytes, r, &y[b], acc);
                out[(size_t)c * out_stride + (size_t)g * QUANT_R16_ROWS + r] = acc;
            }
        }
    }
}

void gemm_q4_K_r16_ref(int n, const void *w, size_t w_stride, int n_w_rows, const void *a, size_t a_stride,
                       int n_a_rows, float *out, size_t out_stride) {
    gemm_r16_ref(q4_K_block_ref, R16_BLOCK_BYTES, n, w, w_stride, n_w_rows, a, a_stride, n_a_rows, out, out_stride);
}

void gemm_q6_K_r16_ref(int n, const void *w, size_t w_stride, int n_w_rows, const void *a, size_t a_stride,
                       int n_a_rows, float *out, size_t out_stride) {
    gemm_r16_ref(q6_K_block_ref, R16_Q6_BLOCK_BYTES, n, w, w_stride, n_w_rows, a, a_stride, n_a_rows, out, out_stride);
}
