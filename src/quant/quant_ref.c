/* Scalar reference kernels: dequantization bit identical to ggml's
 * dequantize_row_*, the simple quantizers (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
 * Q8_1, Q8_K as ggml's *_ref), and the dot products every SIMD kernel is
 * tested against. */
#include "quant/quant_impl.h"

#include <float.h>
#include <math.h>
#include <string.h>

#if defined(__clang__)
/* y = d1*q - m1 must round twice, as ggml's C does; never fuse it. */
#pragma STDC FP_CONTRACT OFF
#endif

static inline int nearest_int(float fval) {
    float val = fval + 12582912.f; /* 1.5 * 2^23: the low mantissa bits are round-to-even(fval) */
    int i;
    memcpy(&i, &val, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* ---- dequantization ---- */

void dequantize_row_q4_0(const void *src, float *y, int64_t n) {
    const struct block_q4_0 *x = src;
    for (int64_t i = 0; i < n / QK4_0; i++) {
        const float d = fp16_to_f32(x[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const int x0 = (x[i].qs[j] & 0x0F) - 8;
            const int x1 = (x[i].qs[j] >> 4) - 8;
            y[i * QK4_0 + j] = (float)x0 * d;
            y[i * QK4_0 + j + QK4_0 / 2] = (float)x1 * d;
        }
    }
}

/* The fifth bits of a Q5_0/Q5_1 block: bit j belongs to value j. */
static inline uint32_t q5_high_bits(const uint8_t qh[4]) {
    uint32_t h;
    memcpy(&h, qh, sizeof h);
    return h;
}

void dequantize_row_q4_1(const void *src, float *y, int64_t n) {
    const struct block_q4_1 *x = src;
    for (int64_t i = 0; i < n / QK4_1; i++) {
        const float d = fp16_to_f32(x[i].d), m = fp16_to_f32(x[i].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            y[i * QK4_1 + j] = (float)(x[i].qs[j] & 0x0F) * d + m;
            y[i * QK4_1 + j + QK4_1 / 2] = (float)(x[i].qs[j] >> 4) * d + m;
        }
    }
}

void dequantize_row_q5_0(const void *src, float *y, int64_t n) {
    const struct block_q5_0 *x = src;
    for (int64_t i = 0; i < n / QK5_0; i++) {
        const float d = fp16_to_f32(x[i].d);
        const uint32_t qh = q5_high_bits(x[i].qh);
        for (int j = 0; j < QK5_0 / 2; j++) {
            const int x0 = ((x[i].qs[j] & 0x0F) | (int)((qh >> j) & 1) << 4) - 16;
            const int x1 = ((x[i].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4) - 16;
            y[i * QK5_0 + j] = (float)x0 * d;
            y[i * QK5_0 + j + QK5_0 / 2] = (float)x1 * d;
        }
    }
}

void dequantize_row_q5_1(const void *src, float *y, int64_t n) {
    const struct block_q5_1 *x = src;
    for (int64_t i = 0; i < n / QK5_1; i++) {
        const float d = fp16_to_f32(x[i].d), m = fp16_to_f32(x[i].m);
        const uint32_t qh = q5_high_bits(x[i].qh);
        for (int j = 0; j < QK5_1 / 2; j++) {
            const int x0 = (x[i].qs[j] & 0x0F) | (int)((qh >> j) & 1) << 4;
            const int x1 = (x[i].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            y[i * QK5_1 + j] = (float)x0 * d + m;
            y[i * QK5_1 + j + QK5_1 / 2] = (float)x1 * d + m;
        }
    }
}

void dequantize_row_q8_1(const void *src, float *y, int64_t n) {
    const struct block_q8_1 *x = src;
    for (int64_t i = 0; i < n / QK8_1; i++) {
        const float d = fp16_to_f32(x[i].d);
        for (int j = 0; j < QK8_1; j++) y[i * QK8_1 + j] = (float)x[i].qs[j] * d;
    }
}

void dequantize_row_q8_0(const void *src, float *y, int64_t n) {
    const struct block_q8_0 *x = src;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const float d = fp16_to_f32(x[i].d);
        for (int j = 0; j < QK8_0; j++) y[i * QK8_0 + j] = (float)x[i].qs[j] * d;
    }
}

void dequantize_row_q4_K(const void *src, float *y, int64_t n) {
    const struct block_q4_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *q = x[i].qs;
        const float d = fp16_to_f32(x[i].d);
        const float min = fp16_to_f32(x[i].dmin);
        int is = 0;
        uint8_t sc, m;
        for (int j = 0; j < QK_K; j += 64) {
            get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
            q += 32;
            is += 2;
        }
    }
}

void dequantize_row_q5_K(const void *src, float *y, int64_t n) {
    const struct block_q5_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *ql = x[i].qs;
        const uint8_t *qh = x[i].qh;
        const float d = fp16_to_f32(x[i].d);
        const float min = fp16_to_f32(x[i].dmin);
        int is = 0;
        uint8_t sc, m;
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0; j < QK_K; j += 64) {
            get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (float)((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
            ql += 32;
            is += 2;
            u1 <<= 2;
            u2 <<= 2;
        }
    }
}

void dequantize_row_q6_K(const void *src, float *y, int64_t n) {
    const struct block_q6_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_f32(x[i].d);
        const uint8_t *ql = x[i].ql;
        const uint8_t *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int half = 0; half < QK_K; half += 128) {
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                const int q1 = (int8_t)((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = (int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = (int8_t)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * (float)sc[is + 0] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
            y += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}

void dequantize_row_q8_K(const void *src, float *y, int64_t n) {
    const struct block_q8_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++)
        for (int j = 0; j < QK_K; j++) *y++ = x[i].d * (float)x[i].qs[j];
}

static void f16_to_float(const void *src, float *dst, int64_t n) { fp16_to_f32_row_scalar(src, dst, n); }
static void bf16_to_float(const void *src, float *dst, int64_t n) {
    const uint16_t *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = bf16_to_f32(s[i]);
}
static void f32_to_float(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }

/* ---- simple quantizers ---- */

/* Q4_0 / Q5_0: the first value of largest magnitude in a block of 32; it
 * maps to the most negative code. */
static float block_signed_max(const float *x) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

/* Q4_1 / Q5_1: the block's min and max; q = (x - min) / d rounded half up. */
static void block_min_max(const float *x, float *min, float *max) {
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < 32; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *min = lo;
    *max = hi;
}

void quantize_row_q4_0_ref(const float *x, void *dst, int64_t n) {
    struct block_q4_0 *y = dst;
    for (int64_t i = 0; i < n / QK4_0; i++, x += QK4_0) {
        const float d = block_signed_max(x) / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = f32_to_fp16(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const float x0 = x[j] * id;
            const float x1 = x[QK4_0 / 2 + j] * id;
            int xi0 = (int8_t)(x0 + 8.5f), xi1 = (int8_t)(x1 + 8.5f);
            if (xi0 > 15) xi0 = 15;
            if (xi1 > 15) xi1 = 15;
            y[i].qs[j] = (uint8_t)(xi0 | (xi1 << 4));
        }
    }
}

void quantize_row_q4_1_ref(const float *x, void *dst, int64_t n) {
    struct block_q4_1 *y = dst;
    for (int64_t i = 0; i < n / QK4_1; i++, x += QK4_1) {
        float min, max;
        block_min_max(x, &min, &max);
        const float d = (max - min) / ((1 << 4) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = f32_to_fp16(d);
        y[i].m = f32_to_fp16(min);
        for (int j = 0; j < QK4_1 / 2; j++) {
            const float x0 = (x[j] - min) * id;
            const float x1 = (x[QK4_1 / 2 + j] - min) * id;
            int xi0 = (int8_t)(x0 + 0.5f), xi1 = (int8_t)(x1 + 0.5f);
            if (xi0 > 15) xi0 = 15;
            if (xi1 > 15) xi1 = 15;
            y[i].qs[j] = (uint8_t)(xi0 | (xi1 << 4));
        }
    }
}

/* The fifth bits of 32 codes, bit j for code j. */
static void q5_store(const uint8_t codes[32], uint8_t qs[16], uint8_t qh[4]) {
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((codes[j] & 0x0F) | ((codes[j + 16] & 0x0F) << 4));
        h |= (uint32_t)(codes[j] >> 4 & 1) << j;
        h |= (uint32_t)(codes[j + 16] >> 4 & 1) << (j + 16);
    }
    memcpy(qh, &h, sizeof h);
}

void quantize_row_q5_0_ref(const float *x, void *dst, int64_t n) {
    struct block_q5_0 *y = dst;
    for (int64_t i = 0; i < n / QK5_0; i++, x += QK5_0) {
        const float d = block_signed_max(x) / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = f32_to_fp16(d);
        uint8_t codes[QK5_0];
        for (int j = 0; j < QK5_0; j++) {
            const int c = (int8_t)(x[j] * id + 16.5f);
            codes[j] = (uint8_t)(c > 31 ? 31 : c);
        }
        q5_store(codes, y[i].qs, y[i].qh);
    }
}

void quantize_row_q5_1_ref(const float *x, void *dst, int64_t n) {
    struct block_q5_1 *y = dst;
    for (int64_t i = 0; i < n / QK5_1; i++, x += QK5_1) {
        float min, max;
        block_min_max(x, &min, &max);
        const float d = (max - min) / ((1 << 5) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = f32_to_fp16(d);
        y[i].m = f32_to_fp16(min);
        uint8_t codes[QK5_1];
        for (int j = 0; j < QK5_1; j++) codes[j] = (uint8_t)((x[j] - min) * id + 0.5f);
        q5_store(codes, y[i].qs, y[i].qh);
    }
}

void quantize_block_q8_0_scalar(const float *x, struct block_q8_0 *y) {
    float amax = 0.0f;
    for (int j = 0; j < QK8_0; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y->d = f32_to_fp16(d);
    for (int j = 0; j < QK8_0; j++) y->qs[j] = (int8_t)roundf(x[j] * id);
}

void quantize_row_q8_0_ref(const float *x, void *dst, int64_t n) {
    struct block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / QK8_0; i++) quantize_block_q8_0_scalar(x + i * QK8_0, &y[i]);
}

void quantize_row_q8_1_ref(const float *x, void *dst, int64_t n) {
    struct block_q8_1 *y = dst;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        struct block_q8_0 b;
        quantize_block_q8_0_scalar(x, &b);
        float amax = 0.0f; /* d again, before its fp16 rounding */
        for (int j = 0; j < QK8_1; j++) amax = fmaxf(amax, fabsf(x[j]));
        int sum = 0;
        for (int j = 0; j < QK8_1; j++) sum += b.qs[j];
        y[i].d = b.d;
        y[i].s = f32_to_fp16((float)sum * (amax / ((1 << 7) - 1)));
        memcpy(y[i].qs, b.qs, QK8_1);
    }
}

void quantize_row_q8_K_ref(const float *x, void *dst, int64_t n) {
    struct block_q8_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float max = 0, amax = 0;
        for (int j = 0; j < QK_K; j++) {
            float ax = fabsf(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (!amax) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < QK_K; j++) {
            int v = nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < QK_K / 16; j++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += y[i].qs[j * 16 + l];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}

static void quantize_f16(const float *src, void *dst, int64_t n) { f32_to_fp16_row_scalar(src, dst, n); }
static void quantize_bf16(const float *src, void *dst, int64_t n) {
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = f32_to_bf16(src[i]);
}
static void quantize_f32(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }

/* ---- dot products (exact integer sums per block, double across blocks) ---- */

static void vec_dot_q4_0_q8_0(int n, float *s, const void *vx, const void *vy) {
    const struct block_q4_0 *x = vx;
    const struct block_q8_0 *y = vy;
    double sum = 0;
    for (int i = 0; i < n / QK8_0; i++) {
        int sumi = 0;
        for (int j = 0; j < QK4_0 / 2; j++) {
            sumi += ((x[i].qs[j] & 0xF) - 8) * y[i].qs[j];
            sumi += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + QK4_0 / 2];
        }
        sum += (double)sumi * (fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d));
    }
    *s = (float)sum;
}

static void vec_dot_q5_0_q8_0(int n, float *s, const void *vx, const void *vy) {
    const struct block_q5_0 *x = vx;
    const struct block_q8_0 *y = vy;
    double sum = 0;
    for (int i = 0; i < n / QK8_0; i++) {
        const uint32_t qh = q5_high_bits(x[i].qh);
        int sumi = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            sumi += (((x[i].qs[j] & 0xF) | (int)((qh >> j) & 1) << 4) - 16) * y[i].qs[j];
            sumi += (((x[i].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4) - 16) * y[i].qs[j + QK5_0 / 2];
        }
        sum += (double)sumi * (fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d));
    }
    *s = (float)sum;
}

/* Q4_1 / Q5_1: d_x d_y sum(q_x q_y) + m_x s_y per block (s_y = d_y sum(q_y)). */
static void vec_dot_q4_1_q8_1(int n, float *s, const void *vx, const void *vy) {
    const struct block_q4_1 *x = vx;
    const struct block_q8_1 *y = vy;
    double sum = 0;
    for (int i = 0; i < n / QK8_1; i++) {
        int sumi = 0;
        for (int j = 0; j < QK4_1 / 2; j++) {
            sumi += (x[i].qs[j] & 0xF) * y[i].qs[j];
            sumi += (x[i].qs[j] >> 4) * y[i].qs[j + QK4_1 / 2];
        }
        sum += (double)sumi * (fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d)) +
               (double)fp16_to_f32(x[i].m) * fp16_to_f32(y[i].s);
    }
    *s = (float)sum;
}

static void vec_dot_q5_1_q8_1(int n, float *s, const void *vx, const void *vy) {
    const struct block_q5_1 *x = vx;
    const struct block_q8_1 *y = vy;
    double sum = 0;
    for (int i = 0; i < n / QK8_1; i++) {
        const uint32_t qh = q5_high_bits(x[i].qh);
        int sumi = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            sumi += ((x[i].qs[j] & 0xF) | (int)((qh >> j) & 1) << 4) * y[i].qs[j];
            sumi += ((x[i].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4) * y[i].qs[j + QK5_1 / 2];
        }
        sum += (double)sumi * (fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d)) +
               (double)fp16_to_f32(x[i].m) * fp16_to_f32(y[i].s);
    }
    *s = (float)sum;
}

static void vec_dot_q8_0_q8_0(int n, float *s, const void *vx, const void *vy) {
    const struct block_q8_0 *x = vx;
    const struct block_q8_0 *y = vy;
    double sum = 0;
    for (int i = 0; i < n / QK8_0; i++) {
        int sumi = 0;
        for (int j = 0; j < QK8_0; j++) sumi += x[i].qs[j] * y[i].qs[j];
        sum += (double)sumi * (fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d));
    }
    *s = (float)sum;
}

/* Q4_K / Q5_K share the scale layout: sum_j sc_j*dot_j and sum_j m_j*bsum_j. */
static double k4_block_dot(const uint8_t *scales12, uint16_t d16, uint16_t dmin16, const uint8_t q[QK_K],
                           const struct block_q8_K *y) {
    int sumi = 0, summ = 0;
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, m;
        get_scale_min_k4(j, scales12, &sc, &m);
        int dot = 0;
        for (int l = 0; l < 32; l++) dot += q[32 * j + l] * y->qs[32 * j + l];
        sumi += sc * dot;
        summ += m * (y->bsums[2 * j] + y->bsums[2 * j + 1]);
    }
    return (double)y->d * ((double)fp16_to_f32(d16) * sumi - (double)fp16_to_f32(dmin16) * summ);
}

static void vec_dot_q4_K_q8_K(int n, float *s, const void *vx, const void *vy) {
    const struct block_q4_K *x = vx;
    const struct block_q8_K *y = vy;
    double sum = 0;
    uint8_t q[QK_K];
    for (int i = 0; i < n / QK_K; i++) {
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                q[64 * c + l] = x[i].qs[32 * c + l] & 0xF;
                q[64 * c + 32 + l] = x[i].qs[32 * c + l] >> 4;
            }
        sum += k4_block_dot(x[i].scales, x[i].d, x[i].dmin, q, &y[i]);
    }
    *s = (float)sum;
}

static void vec_dot_q5_K_q8_K(int n, float *s, const void *vx, const void *vy) {
    const struct block_q5_K *x = vx;
    const struct block_q8_K *y = vy;
    double sum = 0;
    uint8_t q[QK_K];
    for (int i = 0; i < n / QK_K; i++) {
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                q[64 * c + l] = (uint8_t)((x[i].qs[32 * c + l] & 0xF) | (((x[i].qh[l] >> (2 * c)) & 1) << 4));
                q[64 * c + 32 + l] = (uint8_t)((x[i].qs[32 * c + l] >> 4) | (((x[i].qh[l] >> (2 * c + 1)) & 1) << 4));
            }
        sum += k4_block_dot(x[i].scales, x[i].d, x[i].dmin, q, &y[i]);
    }
    *s = (float)sum;
}

static void vec_dot_q6_K_q8_K(int n, float *s, const void *vx, const void *vy) {
    const struct block_q6_K *x = vx;
    const struct block_q8_K *y = vy;
    double sum = 0;
    int8_t q[QK_K];
    for (int i = 0; i < n / QK_K; i++) {
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = x[i].ql + 64 * h, *qh = x[i].qh + 32 * h;
            int8_t *o = q + 128 * h;
            for (int l = 0; l < 32; l++) {
                o[l + 0] = (int8_t)(((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
                o[l + 32] = (int8_t)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
                o[l + 64] = (int8_t)(((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                o[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
        }
        int sumi = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            int dot = 0;
            for (int l = 0; l < 16; l++) dot += q[16 * j + l] * y[i].qs[16 * j + l];
            sumi += x[i].scales[j] * dot;
        }
        sum += (double)y[i].d * fp16_to_f32(x[i].d) * sumi;
    }
    *s = (float)sum;
}

static void vec_dot_f16(int n, float *s, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += (double)fp16_to_f32(x[i]) * fp16_to_f32(y[i]);
    *s = (float)sum;
}

static void vec_dot_bf16(int n, float *s, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += (double)bf16_to_f32(x[i]) * bf16_to_f32(y[i]);
    *s = (float)sum;
}

static void vec_dot_f32(int n, float *s, const void *vx, const void *vy) {
    const float *x = vx, *y = vy;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += (double)x[i] * y[i];
    *s = (float)sum;
}

QUANT_GEMM_FROM_VEC_DOT(gemm_q4_0, vec_dot_q4_0_q8_0)
QUANT_GEMM_FROM_VEC_DOT(gemm_q4_1, vec_dot_q4_1_q8_1)
QUANT_GEMM_FROM_VEC_DOT(gemm_q5_0, vec_dot_q5_0_q8_0)
QUANT_GEMM_FROM_VEC_DOT(gemm_q5_1, vec_dot_q5_1_q8_1)
QUANT_GEMM_FROM_VEC_DOT(gemm_q8_0, vec_dot_q8_0_q8_0)
QUANT_GEMM_FROM_VEC_DOT(gemm_q4_K, vec_dot_q4_K_q8_K)
QUANT_GEMM_FROM_VEC_DOT(gemm_q5_K, vec_dot_q5_K_q8_K)
QUANT_GEMM_FROM_VEC_DOT(gemm_q6_K, vec_dot_q6_K_q8_K)
QUANT_GEMM_FROM_VEC_DOT(gemm_f16, vec_dot_f16)
QUANT_GEMM_FROM_VEC_DOT(gemm_bf16, vec_dot_bf16)
QUANT_GEMM_FROM_VEC_DOT(gemm_f32, vec_dot_f32)

void quant_fill_scalar(struct quant_isa_table *t) {
    struct qtype_kernels *k = t->k;
    k[QT_F32] = (struct qtype_kernels){vec_dot_f32, gemm_f32, quantize_f32, f32_to_float};
    k[QT_F16] = (struct qtype_kernels){vec_dot_f16, gemm_f16, quantize_f16, f16_to_float};
    k[QT_BF16] = (struct qtype_kernels){vec_dot_bf16, gemm_bf16, quantize_bf16, bf16_to_float};
    k[QT_Q4_0] = (struct qtype_kernels){vec_dot_q4_0_q8_0, gemm_q4_0, NULL, dequantize_row_q4_0};
    k[QT_Q4_1] = (struct qtype_kernels){vec_dot_q4_1_q8_1, gemm_q4_1, NULL, dequantize_row_q4_1};
    k[QT_Q5_0] = (struct qtype_kernels){vec_dot_q5_0_q8_0, gemm_q5_0, NULL, dequantize_row_q5_0};
    k[QT_Q5_1] = (struct qtype_kernels){vec_dot_q5_1_q8_1, gemm_q5_1, NULL, dequantize_row_q5_1};
    k[QT_Q8_0] = (struct qtype_kernels){vec_dot_q8_0_q8_0, gemm_q8_0, quantize_row_q8_0_ref, dequantize_row_q8_0};
    k[QT_Q8_1] = (struct qtype_kernels){NULL, NULL, quantize_row_q8_1_ref, dequantize_row_q8_1};
    k[QT_Q4_K] = (struct qtype_kernels){vec_dot_q4_K_q8_K, gemm_q4_K, NULL, dequantize_row_q4_K};
    k[QT_Q5_K] = (struct qtype_kernels){vec_dot_q5_K_q8_K, gemm_q5_K, NULL, dequantize_row_q5_K};
    k[QT_Q6_K] = (struct qtype_kernels){vec_dot_q6_K_q8_K, gemm_q6_K, NULL, dequantize_row_q6_K};
    k[QT_Q8_K] = (struct qtype_kernels){NULL, NULL, quantize_row_q8_K_ref, dequantize_row_q8_K};
    t->fp16_to_f32_row = fp16_to_f32_row_scalar;
    t->f32_to_fp16_row = f32_to_fp16_row_scalar;
    t->silu_mul_row = silu_mul_row_scalar;
}

const uint64_t quant_expf_tab[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, 0x3fef72b83c7d517b,
    0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715, 0x3feef1a7373aa9cb,
    0x3feedea64c123422, 0x3feece086061892d, 0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
    0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d, 0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};


void silu_mul_row_scalar(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}
