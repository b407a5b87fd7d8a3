/* Block layouts of the quantized types, byte for byte as GGUF (ggml) stores
 * them, so that kernels read weights straight from the mapped file. Internal
 * to src/quant and to code that packs weights for devices. */
#ifndef MOEX_QUANT_BLOCKS_H
#define MOEX_QUANT_BLOCKS_H

#include <assert.h>
#include <stdint.h>

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK_K 256
#define K_SCALE_SIZE 12

/* fp16 fields are kept as raw bits (uint16_t): convert with fp16_to_f32. */
struct block_q4_0 {
    uint16_t d;            /* scale */
    uint8_t qs[QK4_0 / 2]; /* value j in low nibble of qs[j], j+16 in the high one; q - 8 */
};
static_assert(sizeof(struct block_q4_0) == 18, "block_q4_0 layout");

/* y = d*q + m, q = 0..15; nibbles ordered as in Q4_0. */
struct block_q4_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qs[QK4_1 / 2];
};
static_assert(sizeof(struct block_q4_1) == 20, "block_q4_1 layout");

/* y = d*(q - 16), q = 0..31: low four bits as Q4_0's nibbles, bit j of the
 * little-endian 32-bit qh is the fifth bit of value j. */
struct block_q5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[QK5_0 / 2];
};
static_assert(sizeof(struct block_q5_0) == 22, "block_q5_0 layout");

/* y = d*q + m, q = 0..31, bits as in Q5_0. */
struct block_q5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
};
static_assert(sizeof(struct block_q5_1) == 24, "block_q5_1 layout");

struct block_q8_0 {
    uint16_t d;
    int8_t qs[QK8_0];
};
static_assert(sizeof(struct block_q8_0) == 34, "block_q8_0 layout");

/* Activations for Q4_1/Q5_1: Q8_0 with s = fp16(d * sum(qs)), d before its
 * fp16 rounding, so that a block's min term is m*s. */
struct block_q8_1 {
    uint16_t d;
    uint16_t s;
    int8_t qs[QK8_1];
};
static_assert(sizeof(struct block_q8_1) == 36, "block_q8_1 layout");

/* 8 sub-blocks of 32 with 6-bit scales and mins: y = d*sc*q - dmin*m. */
struct block_q4_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qs[QK_K / 2]; /* 64-value chunks: low nibbles sub-block 2c, high 2c+1 */
};
static_assert(sizeof(struct block_q4_K) == 144, "block_q4_K layout");

struct block_q5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8]; /* bit 2c / 2c+1 of qh[l]: fifth bit of value l of sub-block 2c / 2c+1 */
    uint8_t qs[QK_K / 2];
};
static_assert(sizeof(struct block_q5_K) == 176, "block_q5_K layout");

/* 16 sub-blocks of 16 with signed 8-bit scales: y = d*sc*(q - 32). */
struct block_q6_K {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    uint16_t d;
};
static_assert(sizeof(struct block_q6_K) == 210, "block_q6_K layout");

/* Activations for the k-quant dot products. */
struct block_q8_K {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16]; /* sums of qs in groups of 16 */
};
static_assert(sizeof(struct block_q8_K) == 292, "block_q8_K layout");

/* Unpacks the 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block. */
static inline void get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

/* The 12 packed scale bytes of a Q4_K/Q5_K block as 8 scales then 8 mins
 * (16 bytes), the order the SIMD kernels load them in. */
static inline void unpack_scales_mins_k4(const uint8_t *scales12, uint32_t out[4]) {
    const uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
    uint32_t u[3];
    __builtin_memcpy(u, scales12, 12);
    out[3] = ((u[2] >> 4) & kmask2) | (((u[1] >> 6) & kmask3) << 4);
    out[2] = u[1] & kmask1;
    out[1] = (u[2] & kmask2) | (((u[0] >> 6) & kmask3) << 4);
    out[0] = u[0] & kmask1;
}

#endif
