/* Scalar row packers: the generic dequantize-then-quantize path (any type)
 * and the fused Q4_K / Q8_0 paths they are checked against. */
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

static inline bool finite_f(float x) { return fabsf(x) <= 3.40282347e38f; }

/* Q4_K: within a sub-block w = d1 * q - m1 rounds monotonically in q, so
 * max |w| sits at the smallest or the largest code present, and the 16
 * possible values can be quantized once and looked up. */
int pack_row_q4_K_scalar(const void *row, int K, int8_t *q, float *scale) {
    if (K <= 0 || K % QK_K) return PACK_E_TYPE;
    const struct block_q4_K *x = row;
    const int nb = K / QK_K;
    float amax = 0.0f;
    for (int i = 0; i < nb; i++) {
        const float d = fp16_to_f32(x[i].d), dmin = fp16_to_f32(x[i].dmin);
        for (int sb = 0; sb < 8; sb++) {
            uint8_t sc, m;
            get_scale_min_k4(sb, x[i].scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            const uint8_t *qs = x[i].qs + 32 * (sb / 2);
            const int shift = 4 * (sb & 1);
            int lo = 15, hi = 0;
            for (int l = 0; l < 32; l++) {
                int c = (qs[l] >> shift) & 0xF;
                if (c < lo) lo = c;
                if (c > hi) hi = c;
            }
            const float wlo = d1 * (float)lo - m1, whi = d1 * (float)hi - m1;
            if (!finite_f(wlo) || !finite_f(whi)) return PACK_E_VALUE;
            if (fabsf(wlo) > amax) amax = fabsf(wlo);
            if (fabsf(whi) > amax) amax = fabsf(whi);
        }
    }
    const float s = w8a8_scale(amax);
    for (int i = 0; i < nb; i++) {
        const float d = fp16_to_f32(x[i].d), dmin = fp16_to_f32(x[i].dmin);
        for (int sb = 0; sb < 8; sb++) {
            uint8_t sc, m;
            get_scale_min_k4(sb, x[i].scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            float values[16];
            int8_t table[16];
            for (int c = 0; c < 16; c++) values[c] = d1 * (float)c - m1;
            w8a8_quantize(values, 16, s, table);
            const uint8_t *qs = x[i].qs + 32 * (sb / 2);
            const int shift = 4 * (sb & 1);
            int8_t *out = q + (size_t)i * QK_K + 32 * sb;
            for (int l = 0; l < 32; l++) out[l] = table[(qs[l] >> shift) & 0xF];
        }
    }
    *scale = s;
    return PACK_OK;
}

/* Q8_0: w = q * d, so |w| is largest where |q| is. */
int pack_row_q8_0_scalar(const void *row, int K, int8_t *q, float *scale) {
    if (K <= 0 || K % QK8_0) return PACK_E_TYPE;
    const struct block_q8_0 *x = row;
    const int nb = K / QK8_0;
    float amax = 0.0f;
    for (int i = 0; i < nb; i++) {
        const float d = fp16_to_f32(x[i].d);
        if (!finite_f(d)) return PACK_E_VALUE;
        int qmax = 0;
        for (int l = 0; l < QK8_0; l++) {
            int a = x[i].qs[l] < 0 ? -x[i].qs[l] : x[i].qs[l];
            if (a > qmax) qmax = a;
        }
        const float a = (float)qmax * fabsf(d);
        if (a > amax) amax = a;
    }
    const float s = w8a8_scale(amax);
    for (int i = 0; i < nb; i++) {
        const float d = fp16_to_f32(x[i].d);
        float values[QK8_0];
        for (int l = 0; l < QK8_0; l++) values[l] = (float)x[i].qs[l] * d;
        w8a8_quantize(values, QK8_0, s, q + (size_t)i * QK8_0);
    }
    *scale = s;
    return PACK_OK;
}
