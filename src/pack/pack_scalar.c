/* Scalar row packers: the generic dequantize-then-quantize path (any type),
 * the fused Q4_K, Q5_K, Q6_K, Q8_0 and Q5_0 paths checked against it, and the
 * search for the row maximum from sub-block bounds that every fused path uses. */
#include "pack/pack_impl.h"
#include "pack/w8a8.h"
#include "quant/quant_blocks.h"

#include <math.h>
#include <string.h>

#if defined(__clang__)
/* Dequantized values must round exactly as quant's to_float does. */
#pragma STDC FP_CONTRACT OFF
#endif

enum { GENERIC_CHUNK = 256 }; /* values dequantized at a time; a multiple of every block size */

int pack_row_generic(enum qtype t, const void *row, int K, int8_t *q, float *scale) {
    const struct qtype_traits *tr = quant_traits(t);
    if (!tr || !tr->to_float || K <= 0 || K % tr->block_size) return PACK_E_TYPE;
    const size_t chunk_bytes = (size_t)GENERIC_CHUNK / (size_t)tr->block_size * tr->type_size;
    float buf[GENERIC_CHUNK];
    float amax = 0.0f;
    /* Pass 1: the row's max |w|, one chunk at a time. */
    for (int k = 0; k < K; k += GENERIC_CHUNK) {
        int n = K - k < GENERIC_CHUNK ? K - k : GENERIC_CHUNK;
        const char *src = (const char *)row + (size_t)(k / GENERIC_CHUNK) * chunk_bytes;
        const float *v = buf;
        if (t == QT_F32) v = (const float *)(const void *)src;
        else tr->to_float(src, buf, n);
        float a = w8a8_amax(v, n);
        if (a < 0.0f) return PACK_E_VALUE;
        if (a > amax) amax = a;
    }
    /* Pass 2: dequantize again (cheaper than a row of floats) and quantize. */
    float s = w8a8_scale(amax);
    for (int k = 0; k < K; k += GENERIC_CHUNK) {
        int n = K - k < GENERIC_CHUNK ? K - k : GENERIC_CHUNK;
        const char *src = (const char *)row + (size_t)(k / GENERIC_CHUNK) * chunk_bytes;
        const float *v = buf;
        if (t == QT_F32) v = (const float *)(const void *)src;
        else tr->to_float(src, buf, n);
        w8a8_quantize(v, n, s, q + k);
    }
    *scale = s;
    return PACK_OK;
}

static inline float absf(float x) { return x < 0 ? -x : x; }

/* Q4_K/Q5_K: the 8 d1 = d * sc and m1 = dmin * m of a block, as the
 * dequantizer rounds them, and the bounds of w = d1 * c - m1 for codes in
 * [0, cmax]: max(|m1|, |d1 * cmax - m1|). */
static void kq_block(const uint8_t *scales12, uint16_t d, uint16_t dmin, float cmax, float *d1, float *m1,
                     float *bound) {
    const float df = fp16_to_f32(d), mf = fp16_to_f32(dmin);
    for (int sb = 0; sb < 8; sb++) {
        uint8_t sc, m;
        get_scale_min_k4(sb, scales12, &sc, &m);
        d1[sb] = df * (float)sc;
        m1[sb] = mf * (float)m;
        const float top = absf(d1[sb] * cmax - m1[sb]);
        bound[sb] = absf(m1[sb]) > top ? absf(m1[sb]) : top;
    }
}

/* Code l (0..31) of sub-block sb of a Q4_K / Q5_K block. */
static inline int q4k_code(const struct block_q4_K *b, int sb, int l) {
    return (b->qs[32 * (sb / 2) + l] >> (4 * (sb & 1))) & 0xF;
}
static inline int q5k_code(const struct block_q5_K *b, int sb, int l) {
    return ((b->qs[32 * (sb / 2) + l] >> (4 * (sb & 1))) & 0xF) | (((b->qh[l] >> sb) & 1) << 4);
}

static float q4k_subblock_amax(const void *row, const float *d1s, const float *m1s, int j) {
    const struct block_q4_K *b = (const struct block_q4_K *)row + j / 8;
    int lo = 15, hi = 0;
    for (int l = 0; l < 32; l++) {
        const int c = q4k_code(b, j % 8, l);
        lo = c < lo ? c : lo;
        hi = c > hi ? c : hi;
    }
    return pack_kq_amax(d1s[j], m1s[j], lo, hi);
}

static float q5k_subblock_amax(const void *row, const float *d1s, const float *m1s, int j) {
    const struct block_q5_K *b = (const struct block_q5_K *)row + j / 8;
    int lo = 31, hi = 0;
    for (int l = 0; l < 32; l++) {
        const int c = q5k_code(b, j % 8, l);
        lo = c < lo ? c : lo;
        hi = c > hi ? c : hi;
    }
    return pack_kq_amax(d1s[j], m1s[j], lo, hi);
}

int pack_q4k_prepare(const void *row, int nb, float *d1s, float *m1s, float *amax) {
    const struct block_q4_K *x = row;
    float bound[PACK_MAX_K / 32];
    for (int i = 0; i < nb; i++) {
        if (!pack_fp16_finite(x[i].d) || !pack_fp16_finite(x[i].dmin)) return PACK_E_VALUE;
        kq_block(x[i].scales, x[i].d, x[i].dmin, 15.0f, d1s + 8 * i, m1s + 8 * i, bound + 8 * i);
    }
    *amax = pack_refine_amax(bound, 8 * nb, q4k_subblock_amax, x, d1s, m1s);
    return PACK_OK;
}

/* Q4_K: the 16 possible values of a sub-block are quantized once and looked up. */
int pack_row_q4_K_scalar(const void *row, int K, int8_t *q, float *scale) {
    if (K <= 0 || K % QK_K) return PACK_E_TYPE;
    if (K > PACK_MAX_K) return PACK_E_SHAPE; /* the row tables below */
    const struct block_q4_K *x = row;
    const int nb = K / QK_K;
    float d1s[PACK_MAX_K / 32], m1s[PACK_MAX_K / 32], amax;
    const int rc = pack_q4k_prepare(x, nb, d1s, m1s, &amax);
    if (rc != PACK_OK) return rc;
    const float s = w8a8_scale(amax);
    for (int j = 0; j < 8 * nb; j++) {
        float values[16];
        int8_t table[16];
        for (int c = 0; c < 16; c++) values[c] = d1s[j] * (float)c - m1s[j];
        w8a8_quantize(values, 16, s, table);
        int8_t *out = q + (size_t)j * 32;
        for (int l = 0; l < 32; l++) out[l] = table[q4k_code(&x[j / 8], j % 8, l)];
    }
    *scale = s;
    return PACK_OK;
}

/* Q5_K: 32 possible values per sub-block of 32, so no table: values, then quantize. */
int pack_row_q5_K_scalar(const void *row, int K, int8_t *q, float *scale) {
    if (K <= 0 || K % QK_K) return PACK_E_TYPE;
    if (K > PACK_MAX_K) return PACK_E_SHAPE;
    const struct block_q5_K *x = row;
    const int nb = K / QK_K;
    float d1s[PACK_MAX_K / 32], m1s[PACK_MAX_K / 32], bound[PACK_MAX_K / 32];
    for (int i = 0; i < nb; i++) {
        if (!pack_fp16_finite(x[i].d) || !pack_fp16_finite(x[i].dmin)) return PACK_E_VALUE;
        kq_block(x[i].scales, x[i].d, x[i].dmin, 31.0f, d1s + 8 * i, m1s + 8 * i, bound + 8 * i);
    }
    const float s = w8a8_scale(pack_refine_amax(bound, 8 * nb, q5k_subblock_amax, x, d1s, m1s));
    for (int j = 0; j < 8 * nb; j++) {
        float values[32];
        for (int l = 0; l < 32; l++) values[l] = d1s[j] * (float)q5k_code(&x[j / 8], j % 8, l) - m1s[j];
        w8a8_quantize(values, 32, s, q + (size_t)j * 32);
    }
    *scale = s;
    return PACK_OK;
}

/* Q6_K: value l of sub-block j (16 values) is D_j * (code - 32), D_j = d * sc_j. */
static inline int q6k_code(const struct block_q6_K *b, int sb, int l) {
    const int v = 16 * (sb % 8) + l;  /* 0..127 within the half */
    const int h = sb / 8, quarter = v / 32, i = v % 32;
    const uint8_t lo = b->ql[64 * h + 32 * (quarter & 1) + i] >> (4 * (quarter >> 1));
    const uint8_t hi = b->qh[32 * h + i] >> (2 * quarter);
    return (lo & 0xF) | ((hi & 3) << 4);
}

static float q6k_subblock_amax(const void *row, const float *ds, const float *unused, int j) {
    (void)unused;
    const struct block_q6_K *b = (const struct block_q6_K *)row + j / 16;
    int qmax = 0;
    for (int l = 0; l < 16; l++) {
        const int c = q6k_code(b, j % 16, l) - 32;
        qmax = (c < 0 ? -c : c) > qmax ? (c < 0 ? -c : c) : qmax;
    }
    return absf(ds[j]) * (float)qmax;
}

int pack_row_q6_K_scalar(const void *row, int K, int8_t *q, float *scale) {
    if (K <= 0 || K % QK_K) return PACK_E_TYPE;
    if (K > PACK_MAX_K) return PACK_E_SHAPE;
    const struct block_q6_K *x = row;
    const int nb = K / QK_K;
    float ds[PACK_MAX_K / 16], bound[PACK_MAX_K / 16];
    for (int i = 0; i < nb; i++) {
        if (!pack_fp16_finite(x[i].d)) return PACK_E_VALUE;
        const float d = fp16_to_f32(x[i].d);
        for (int sb = 0; sb < 16; sb++) {
            ds[16 * i + sb] = d * (float)x[i].scales[sb];
            bound[16 * i + sb] = absf(ds[16 * i + sb]) * 32.0f; /* |code - 32| <= 32 */
        }
    }
    const float s = w8a8_scale(pack_refine_amax(bound, 16 * nb, q6k_subblock_amax, x, ds, NULL));
    for (int j = 0; j < 16 * nb; j++) {
        float values[16];
        for (int l = 0; l < 16; l++) values[l] = ds[j] * (float)(q6k_code(&x[j / 16], j % 16, l) - 32);
        w8a8_quantize(values, 16, s, q + (size_t)j * 16);
    }
    *scale = s;
    return PACK_OK;
}

/* Q8_0 and Q5_0: blocks of 32 values w = c d with the fp16 d first and
 * |c| <= cmax (128: Q8_0's q; 16: Q5_0's q - 16, q = 0..31). */
typedef void (*d32_codes_fn)(const void *blk, int8_t c[32]);

static void q80_codes(const void *blk, int8_t c[32]) { memcpy(c, ((const struct block_q8_0 *)blk)->qs, 32); }

static void q50_codes(const void *blk, int8_t c[32]) {
    const struct block_q5_0 *b = blk;
    uint32_t qh;
    memcpy(&qh, b->qh, sizeof qh);
    for (int l = 0; l < QK5_0 / 2; l++) {
        c[l] = (int8_t)(((b->qs[l] & 0xF) | (int)((qh >> l) & 1) << 4) - 16);
        c[l + QK5_0 / 2] = (int8_t)(((b->qs[l] >> 4) | (int)((qh >> (l + 16)) & 1) << 4) - 16);
    }
}

/* A block's max |w| = max |c| * |d|: the product rounds alike for either sign. */
static inline __attribute__((always_inline)) float d32_block_amax(d32_codes_fn codes, size_t block_bytes,
                                                                  const void *row, const float *ds, int j) {
    int8_t c[32];
    codes((const char *)row + (size_t)j * block_bytes, c);
    int cmax = 0;
    for (int l = 0; l < 32; l++) {
        const int a = c[l] < 0 ? -c[l] : c[l];
        cmax = a > cmax ? a : cmax;
    }
    return (float)cmax * absf(ds[j]);
}

static float q80_block_amax(const void *row, const float *ds, const float *unused, int j) {
    (void)unused;
    return d32_block_amax(q80_codes, sizeof(struct block_q8_0), row, ds, j);
}

static float q50_block_amax(const void *row, const float *ds, const float *unused, int j) {
    (void)unused;
    return d32_block_amax(q50_codes, sizeof(struct block_q5_0), row, ds, j);
}

static inline __attribute__((always_inline)) int pack_row_d32(const void *row, int K, size_t block_bytes, float cmax,
                                                              d32_codes_fn codes, pack_subblock_amax_fn block_amax,
                                                              int8_t *q, float *scale) {
    if (K <= 0 || K % 32) return PACK_E_TYPE;
    if (K > PACK_MAX_K) return PACK_E_SHAPE;
    const char *x = row;
    const int nb = K / 32;
    float ds[PACK_MAX_K / 32], bound[PACK_MAX_K / 32];
    for (int i = 0; i < nb; i++) {
        uint16_t d;
        memcpy(&d, x + (size_t)i * block_bytes, sizeof d);
        if (!pack_fp16_finite(d)) return PACK_E_VALUE;
        ds[i] = fp16_to_f32(d);
        bound[i] = cmax * absf(ds[i]);
    }
    const float s = w8a8_scale(pack_refine_amax(bound, nb, block_amax, x, ds, NULL));
    /* GENERIC_CHUNK values per quantizer call: its SIMD loop wants long runs */
    for (int i0 = 0; i0 < nb; i0 += GENERIC_CHUNK / 32) {
        const int n = nb - i0 < GENERIC_CHUNK / 32 ? nb - i0 : GENERIC_CHUNK / 32;
        float values[GENERIC_CHUNK];
        for (int i = 0; i < n; i++) {
            int8_t c[32];
            codes(x + (size_t)(i0 + i) * block_bytes, c);
            for (int l = 0; l < 32; l++) values[32 * i + l] = (float)c[l] * ds[i0 + i];
        }
        w8a8_quantize(values, (int64_t)n * 32, s, q + (size_t)i0 * 32);
    }
    *scale = s;
    return PACK_OK;
}

int pack_row_q8_0_scalar(const void *row, int K, int8_t *q, float *scale) {
    return pack_row_d32(row, K, sizeof(struct block_q8_0), 128.0f, q80_codes, q80_block_amax, q, scale);
}

int pack_row_q5_0_scalar(const void *row, int K, int8_t *q, float *scale) {
    return pack_row_d32(row, K, sizeof(struct block_q5_0), 16.0f, q50_codes, q50_block_amax, q, scale);
}
