/* The arithmetic of the cuda device on GGUF blocks, one copy for both sides:
 * compiled as CUDA by the kernels (kernels.cu) and as plain C11 on the host,
 * where the fake CUDA layer of the tests runs it and tests/test_cuda_blocks.c
 * proves it against src/quant/quant_ref.c before any GPU does.
 *
 * A weight row is read in chunks of 32 values (every type moex computes
 * with has them: one block of Q4_0..Q8_0, one eighth of a K-quant block).
 * A chunk is 32 signed 8-bit codes and value i = d[i / 16] * code_i - m,
 * which is bit for bit the reference dequantization of each type.
 * Activations are quantized once per row into qb_q8 blocks (32 codes, a
 * float scale and the codes' exact sum); a chunk's dot with one is two
 * 16-value integer dots (dp4a on the GPU) and three float products.
 *
 * Float operations go through qb_mul/qb_add/qb_sub, which the CUDA compiler
 * never fuses (__fmul_rn etc.) and which are single expressions on the
 * host, so that host and device round the same way. */
#ifndef MOEX_DEV_CUDA_QBLOCK_H
#define MOEX_DEV_CUDA_QBLOCK_H

#include "quant/quant.h"
#include "quant/quant_blocks.h"

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define QB_FN __host__ __device__ static inline
#else
#define QB_FN static inline
#endif

#define QB_CHUNK 32 /* values per chunk, per qb_q8 block */
#define QB_WARP 32  /* lanes that share a row's chunks in the GEMV */

struct qb_chunk {
    int32_t q[8]; /* 32 codes, code i in byte i % 4 (little-endian) of q[i / 4] */
    float d[2];   /* scale of codes 0..15 and 16..31 */
    float m;      /* value i = d[i / 16] * code_i - m */
};

/* 32 activations: value i ~= d * code_i, sum = the codes' exact sum. */
struct qb_q8 {
    float d;
    int32_t sum;
    int32_t q[8];
};

QB_FN float qb_mul(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
QB_FN float qb_add(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
QB_FN float qb_sub(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

QB_FN float qb_bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* IEEE half bits to float, exactly (subnormals included). */
QB_FN float qb_half(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f) return qb_bits_float(sign | 0x7f800000u | (mant << 13));
    if (exp) return qb_bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
    if (!mant) return qb_bits_float(sign);
    exp = 113;
    while (!(mant & 0x400u)) {
        mant <<= 1;
        exp--;
    }
    return qb_bits_float(sign | (exp << 23) | ((mant & 0x3ffu) << 13));
}

QB_FN uint16_t qb_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* Round to nearest, ties to even, for |x| < 2^22: the low mantissa bits of
 * x + 1.5 * 2^23 (the reference quantizers' nearest_int). */
QB_FN int qb_round(float x) {
    uint32_t u;
    float v = qb_add(x, 12582912.f);
    memcpy(&u, &v, sizeof u);
    return (int)(u & 0x007fffffu) - 0x00400000;
}

QB_FN void qb_put_code(struct qb_chunk *c, int i, int code) {
    c->q[i >> 2] |= (int32_t)((uint32_t)(uint8_t)(int8_t)code << (8 * (i & 3)));
}

QB_FN int qb_code(const int32_t *q, int i) { return (int8_t)(uint8_t)((uint32_t)q[i >> 2] >> (8 * (i & 3))); }

/* Values per block of the types the device computes with; 0: not one of them. */
QB_FN int qb_block_values(int type) {
    switch (type) {
    case QT_Q4_0: case QT_Q4_1: case QT_Q5_0: case QT_Q5_1: case QT_Q8_0: return 32;
    case QT_Q4_K: case QT_Q5_K: case QT_Q6_K: return QK_K;
    default: return 0;
    }
}

QB_FN int qb_block_bytes(int type) {
    switch (type) {
    case QT_Q4_0: return (int)sizeof(struct block_q4_0);
    case QT_Q4_1: return (int)sizeof(struct block_q4_1);
    case QT_Q5_0: return (int)sizeof(struct block_q5_0);
    case QT_Q5_1: return (int)sizeof(struct block_q5_1);
    case QT_Q8_0: return (int)sizeof(struct block_q8_0);
    case QT_Q4_K: return (int)sizeof(struct block_q4_K);
    case QT_Q5_K: return (int)sizeof(struct block_q5_K);
    case QT_Q6_K: return (int)sizeof(struct block_q6_K);
    default: return 0;
    }
}

/* The 6-bit scale and min of sub-block j of a Q4_K/Q5_K block (get_scale_min_k4). */
QB_FN void qb_scale_min_k4(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Chunk c (0..7) of a Q4_K (high = 0) or Q5_K block: sub-block c, the low
 * nibbles of qs[32 (c/2) ..] for even c, the high ones for odd c. */
QB_FN void qb_chunk_k4(const uint8_t *scales, uint16_t d16, uint16_t dmin16, const uint8_t *qs, const uint8_t *qh,
                       int c, struct qb_chunk *out) {
    int sc, mn;
    qb_scale_min_k4(c, scales, &sc, &mn);
    float d = qb_mul(qb_half(d16), (float)sc);
    out->d[0] = out->d[1] = d;
    out->m = qb_mul(qb_half(dmin16), (float)mn);
    const uint8_t *q = qs + 32 * (c >> 1);
    for (int l = 0; l < 32; l++) {
        int code = (q[l] >> (4 * (c & 1))) & 0xF;
        if (qh) code |= ((qh[l] >> c) & 1) << 4;
        qb_put_code(out, l, code);
    }
}

/* Chunk c of a Q6_K block: half h = c / 4, part p = c % 4 of it. */
QB_FN void qb_chunk_q6_k(const struct block_q6_K *b, int c, struct qb_chunk *out) {
    int h = c >> 2, p = c & 3;
    const uint8_t *ql = b->ql + 64 * h + 32 * (p & 1), *qh = b->qh + 32 * h;
    float d = qb_half(b->d);
    out->d[0] = qb_mul(d, (float)b->scales[8 * h + 2 * p]);
    out->d[1] = qb_mul(d, (float)b->scales[8 * h + 2 * p + 1]);
    out->m = 0.0f;
    for (int l = 0; l < 32; l++) {
        int code = ((ql[l] >> (4 * (p >> 1))) & 0xF) | (((qh[l] >> (2 * p)) & 3) << 4);
        qb_put_code(out, l, code - 32);
    }
}

/* Q4_0..Q5_1 and Q8_0: one block is one chunk; nibble j is value j, j + 16. */
QB_FN void qb_chunk_small(int type, const uint8_t *blk, struct qb_chunk *out) {
    float d = qb_half(qb_u16(blk)), m = 0.0f;
    if (type == QT_Q8_0) {
        const struct block_q8_0 *b = (const struct block_q8_0 *)blk;
        for (int l = 0; l < 32; l++) qb_put_code(out, l, b->qs[l]);
    } else {
        bool has_min = type == QT_Q4_1 || type == QT_Q5_1, five = type == QT_Q5_0 || type == QT_Q5_1;
        const uint8_t *qs = blk + (has_min ? 4 : 2) + (five ? 4 : 0);
        uint32_t qh = 0;
        if (five) memcpy(&qh, blk + (has_min ? 4 : 2), 4);
        int offset = has_min ? 0 : five ? 16 : 8;
        if (has_min) m = -qb_half(qb_u16(blk + 2)); /* y = d q + m: minus a negated min, exactly */
        for (int l = 0; l < 32; l++) {
            int code = l < 16 ? qs[l] & 0xF : qs[l - 16] >> 4;
            if (five) code |= (int)((qh >> l) & 1) << 4;
            qb_put_code(out, l, code - offset);
        }
    }
    out->d[0] = out->d[1] = d;
    out->m = m;
}

/* Chunk c of a row of blocks of `type` (c counts 32-value chunks from the row's start). */
QB_FN void qb_chunk_get(int type, const uint8_t *row, int c, struct qb_chunk *out) {
    for (int i = 0; i < 8; i++) out->q[i] = 0;
    if (qb_block_values(type) == 32) {
        qb_chunk_small(type, row + (size_t)c * (size_t)qb_block_bytes(type), out);
        return;
    }
    const uint8_t *blk = row + (size_t)(c >> 3) * (size_t)qb_block_bytes(type);
    if (type == QT_Q6_K) {
        qb_chunk_q6_k((const struct block_q6_K *)blk, c & 7, out);
    } else {
        const struct block_q4_K *b4 = (const struct block_q4_K *)blk;
        const struct block_q5_K *b5 = (const struct block_q5_K *)blk;
        if (type == QT_Q4_K) qb_chunk_k4(b4->scales, b4->d, b4->dmin, b4->qs, NULL, c & 7, out);
        else qb_chunk_k4(b5->scales, b5->d, b5->dmin, b5->qs, b5->qh, c & 7, out);
    }
}

/* Value i of a chunk, as the reference dequantization computes it. */
QB_FN float qb_chunk_value(const struct qb_chunk *c, int i) {
    return qb_sub(qb_mul(c->d[i >> 4], (float)qb_code(c->q, i)), c->m);
}

/* 32 floats into a qb_q8 block: d = max|x| / 127, codes round(x / d). */
QB_FN void qb_quantize_q8(const float *x, struct qb_q8 *out) {
    float amax = 0.0f;
    for (int i = 0; i < 32; i++) {
        float a = x[i] < 0 ? -x[i] : x[i];
        amax = a > amax ? a : amax;
    }
    float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int i = 0; i < 8; i++) out->q[i] = 0;
    for (int i = 0; i < 32; i++) {
        int code = qb_round(qb_mul(x[i], id));
        code = code > 127 ? 127 : code < -127 ? -127 : code;
        sum += code;
        out->q[i >> 2] |= (int32_t)((uint32_t)(uint8_t)(int8_t)code << (8 * (i & 3)));
    }
    out->d = d;
    out->sum = sum;
}

/* Four byte products added to acc: __dp4a on the GPU. */
QB_FN int32_t qb_dp4a(int32_t a, int32_t b, int32_t acc) {
#if defined(__CUDA_ARCH__)
    return __dp4a(a, b, acc);
#else
    for (int i = 0; i < 4; i++) acc += qb_code(&a, i) * qb_code(&b, i);
    return acc;
#endif
}

/* dot(chunk, activations) = a.d (d0 s0 + d1 s1) - m a.d a.sum, s0 / s1 the
 * integer dots of codes 0..15 / 16..31. */
QB_FN float qb_dot_chunk(const struct qb_chunk *w, const struct qb_q8 *a) {
    int32_t s0 = 0, s1 = 0;
    for (int i = 0; i < 4; i++) s0 = qb_dp4a(w->q[i], a->q[i], s0);
    for (int i = 4; i < 8; i++) s1 = qb_dp4a(w->q[i], a->q[i], s1);
    float scaled = qb_add(qb_mul(w->d[0], (float)s0), qb_mul(w->d[1], (float)s1));
    return qb_sub(qb_mul(a->d, scaled), qb_mul(w->m, qb_mul(a->d, (float)a->sum)));
}

/* A row's dot with a quantized activation row in the GEMV's order: lane l
 * of a warp sums chunks l, l + 32, ... in turn, then the lanes are added in
 * a butterfly (xor 16, 8, 4, 2, 1). The kernel does exactly this, so host
 * and device agree bit for bit. */
QB_FN float qb_lane_partial(int type, const uint8_t *row, const struct qb_q8 *act, int n_chunks, int lane) {
    float s = 0.0f;
    for (int c = lane; c < n_chunks; c += QB_WARP) {
        struct qb_chunk w;
        qb_chunk_get(type, row, c, &w);
        s = qb_add(s, qb_dot_chunk(&w, &act[c]));
    }
    return s;
}

#if !defined(__CUDA_ARCH__)
static inline float qb_row_dot_host(int type, const uint8_t *row, const struct qb_q8 *act, int n_chunks) {
    float lanes[QB_WARP], next[QB_WARP];
    for (int l = 0; l < QB_WARP; l++) lanes[l] = qb_lane_partial(type, row, act, n_chunks, l);
    for (int off = QB_WARP / 2; off > 0; off >>= 1) {
        for (int l = 0; l < QB_WARP; l++) next[l] = qb_add(lanes[l], lanes[l ^ off]);
        memcpy(lanes, next, sizeof lanes);
    }
    return lanes[0];
}
#endif

/* Float to IEEE half bits, round to nearest even (the GEMM's operands). */
QB_FN uint16_t qb_float_half(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds past 65504 */
    if (ax < 0x38800000u) { /* a half subnormal or zero: value / 2^-24, rounded */
        if (ax < 0x33000000u) return (uint16_t)sign;
        uint32_t mant = (ax & 0x7fffffu) | 0x800000u, shift = 126u - (ax >> 23);
        uint32_t h = mant >> shift, rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rest > half || (rest == half && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((ax >> 13) - (112u << 10)), rest = ax & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

#endif
