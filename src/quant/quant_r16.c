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
 * the 16 lanes of the results are the 16 rows (no horizontal sums). */
#include "quant/quant_impl.h"

#include <math.h>
#include <string.h>

enum { R16_BLOCK_BYTES = QUANT_R16_ROWS * (int)sizeof(struct block_q4_K) };

static int q4_K_value(const struct block_q4_K *b, int k) {
    const uint8_t byte = b->qs[(k / 64) * 32 + k % 32];
    return k % 64 < 32 ? byte & 0xF : byte >> 4;
}

int quant_r16_pack(enum qtype t, const void *src, size_t src_stride, int64_t rows, int64_t cols, void *dst) {
    if (t != QT_Q4_K || rows % QUANT_R16_ROWS || cols % QK_K) return -1;
    const int64_t nb = cols / QK_K;
    uint8_t *out = dst;
    for (int64_t g = 0; g < rows / QUANT_R16_ROWS; g++)
        for (int64_t b = 0; b < nb; b++, out += R16_BLOCK_BYTES) {
            for (int r = 0; r < QUANT_R16_ROWS; r++) {
                const struct block_q4_K *x =
                    (const struct block_q4_K *)((const char *)src + (size_t)(g * QUANT_R16_ROWS + r) * src_stride) + b;
                memcpy(out + 2 * r, &x->d, 2);
                memcpy(out + 32 + 2 * r, &x->dmin, 2);
                for (int w = 0; w < 3; w++) memcpy(out + 64 + 64 * w + 4 * r, x->scales + 4 * w, 4);
                for (int s = 0; s < 8; s++)
                    for (int i = 0; i < 4; i++)
                        for (int j = 0; j < 4; j++)
                            out[256 + 256 * s + 64 * i + 4 * r + j] =
                                (uint8_t)(q4_K_value(x, 32 * s + 4 * i + j) | q4_K_value(x, 32 * s + 4 * (i + 4) + j) << 4);
            }
        }
    return 0;
}

/* The SIMD kernels' arithmetic, one lane at a time: per block, the exact
 * integer sums (scaled values and mins), then two fused multiply-adds into
 * the row's float sum, in block order. */
void gemm_q4_K_r16_ref(int n, const void *w, size_t w_stride, int n_w_rows, const void *a, size_t a_stride,
                       int n_a_rows, float *out, size_t out_stride) {
    const int nb = n / QK_K;
    for (int g = 0; g < n_w_rows / QUANT_R16_ROWS; g++) {
        const uint8_t *wg = (const uint8_t *)w + (size_t)g * QUANT_R16_ROWS * w_stride;
        for (int c = 0; c < n_a_rows; c++) {
            const struct block_q8_K *y = (const struct block_q8_K *)((const char *)a + (size_t)c * a_stride);
            for (int r = 0; r < QUANT_R16_ROWS; r++) {
                float acc = 0;
                for (int b = 0; b < nb; b++) {
                    const uint8_t *blk = wg + (size_t)b * R16_BLOCK_BYTES;
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
                                const int q = i < 4 ? byte & 0xF : byte >> 4;
                                sub += q * y[b].qs[32 * s + 4 * i + j];
                            }
                        isum += sub * sc;
                        msum += m * (y[b].bsums[2 * s] + y[b].bsums[2 * s + 1]);
                    }
                    acc = fmaf(fp16_to_f32(d) * y[b].d, (float)isum, acc);
                    acc = fmaf(-(fp16_to_f32(dmin) * y[b].d), (float)msum, acc);
                }
                out[(size_t)c * out_stride + (size_t)g * QUANT_R16_ROWS + r] = acc;
            }
        }
    }
}
