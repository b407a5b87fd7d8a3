/* Packing: GGUF quantized weights into device layouts of the W8A8 format
 * (pack/w8a8.h). A weight is a GGUF matrix of N rows (output channels) of K
 * values in any type quant.h dequantizes; each row becomes K int8 codes and
 * one float scale. Fused row kernels (no float copy of the row): Q4_K, Q5_K,
 * Q6_K, Q8_0 and Q5_0 in C; Q4_K, Q5_K, Q6_K, Q8_0, F16 and BF16 in AVX2;
 * Q4_K in NEON. Other types dequantize one block at a time. */
#ifndef MOEX_PACK_H
#define MOEX_PACK_H

#include "quant/quant.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct threadpool;

enum pack_status {
    PACK_OK = 0,
    PACK_E_TYPE = -1,  /* type unknown to quant.h, or K not a multiple of its block */
    PACK_E_SHAPE = -2, /* K or N outside the layout's envelope */
    PACK_E_VALUE = -3, /* the weights hold a NaN or an infinity */
};

enum pack_layout {
    /* [N][K]: row n holds channel n's K codes. The cpu and sim devices. */
    PACK_ROWS,
    /* AMX VNNI tiles, K a multiple of 64 and N of 16: tiles of 16 rows x 64
     * bytes, ordered [N/16][K/64]; in tile (nb, kb) row r, bytes 4c..4c+3
     * hold w[16 nb + c][64 kb + 4 r .. 64 kb + 4 r + 3]. A tile is a B
     * operand of TDPBSSD as loaded with a 64-byte stride. */
    PACK_AMX,
    /* The RK3588 NPU's tiles (pack_rknpu.h), K and N multiples of 32:
     * buffers of up to 8192 channels x 1024 inputs, each [N/32][K/32][32][32].
     * An offset needs N: pack_code_at does not read it, pack_rknpu_offset does. */
    PACK_RKNPU,
};

/* The largest K any layout packs (rows are quantized through a stack row). */
#define PACK_MAX_K 32768

/* Bytes of int8 codes of a K x N weight in a layout. */
size_t pack_bytes(enum pack_layout layout, int K, int N);
/* 0 when (K, N) fits the layout, else PACK_E_SHAPE. */
int pack_check_shape(enum pack_layout layout, int K, int N);

/* Which row kernel to use; the paths differ in speed only. */
enum pack_path {
    PACK_PATH_BEST = 0,     /* fused SIMD where there is one */
    PACK_PATH_GENERIC,      /* quant_traits()->to_float per block */
    PACK_PATH_FUSED_SCALAR, /* Q4_K, Q5_K, Q6_K, Q8_0, Q5_0 */
    PACK_PATH_FUSED_AVX2,   /* Q4_K, Q5_K, Q6_K, Q8_0, F16, BF16; x86 with AVX2 */
    PACK_PATH_FUSED_NEON,   /* Q4_K; aarch64 with NEON dotprod */
};

/* One GGUF row of K values of type t into q[K] and *scale (K <= PACK_MAX_K). */
int pack_row(enum pack_path path, enum qtype t, const void *row, int K, int8_t *q, float *scale);

/* A whole weight (row i at src + i * quant_row_size(t, K)) into `codes`
 * (pack_bytes) and scales[N], rows split over the pool (NULL: serial).
 * On error the outputs hold partial data. */
int pack_matrix(struct threadpool *pool, enum pack_path path, enum qtype t, const void *src, int K, int N,
                enum pack_layout layout, int8_t *codes, float *scales);

/* The code of channel n, input k in a packed layout (for tests and for
 * backends that read single values). */
int8_t pack_code_at(enum pack_layout layout, const int8_t *codes, int K, int n, int k);

/* Whether every code is in -127..127 (none is -128, which no packer writes
 * and whose negation overflows an int8). */
bool pack_codes_in_range(const int8_t *codes, size_t n);

const char *pack_status_string(int status);

#endif
