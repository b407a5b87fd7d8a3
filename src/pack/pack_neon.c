/* NEON row packers: the W8A8 quantizer, the max |x| scan, and the second
 * pass of the fused Q4_K path. Same bytes as the scalar code in w8a8.c and
 * pack_scalar.c: multiplies and subtracts are never fused, division is
 * IEEE, and FCVTNS rounds to nearest even as the scalar rule does. */
#include "pack/pack_impl.h"
#include "pack/w8a8.h"
#include "quant/quant_blocks.h"

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* Four vectors of 4 int32 (values 0-3, 4-7, 8-11, 12-15) to 16 int8, saturating. */
static inline int8x16_t narrow16(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
    const int16x8_t ab = vcombine_s16(vqmovn_s32(a), vqmovn_s32(b));
    const int16x8_t cd = vcombine_s16(vqmovn_s32(c), vqmovn_s32(d));
    return vcombine_s8(vqmovn_s16(ab), vqmovn_s16(cd));
}

void w8a8_quantize_neon(const float *x, int64_t n, float scale, int8_t *q) {
    if (scale == 0.0f) {
        memset(q, 0, (size_t)n);
        return;
    }
    const float32x4_t s = vdupq_n_f32(scale), hi = vdupq_n_f32((float)W8A8_QMAX), lo = vdupq_n_f32(-(float)W8A8_QMAX);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        int32x4_t r[4];
        for (int k = 0; k < 4; k++) {
            float32x4_t v = vdivq_f32(vld1q_f32(x + i + 4 * k), s);
            r[k] = vcvtnq_s32_f32(vminq_f32(vmaxq_f32(v, lo), hi));
        }
        vst1q_s8(q + i, narrow16(r[0], r[1], r[2], r[3]));
    }
    for (; i < n; i++) q[i] = (int8_t)w8a8_quantize_one(x[i], scale);
}

float w8a8_amax_neon(const float *x, int64_t n) {
    const float32x4_t big = vdupq_n_f32(3.40282347e38f);
    float32x4_t m0 = vdupq_n_f32(0.0f), m1 = m0;
    uint32x4_t finite = vdupq_n_u32(0xFFFFFFFFu);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float32x4_t a = vabsq_f32(vld1q_f32(x + i)), b = vabsq_f32(vld1q_f32(x + i + 4));
        /* a <= big is false for NaN and infinity */
        finite = vandq_u32(finite, vandq_u32(vcleq_f32(a, big), vcleq_f32(b, big)));
        m0 = vmaxq_f32(m0, a);
        m1 = vmaxq_f32(m1, b);
    }
    if (vminvq_u32(finite) == 0) return -1.0f;
    float amax = vmaxvq_f32(vmaxq_f32(m0, m1));
    for (; i < n; i++) {
        const float a = fabsf(x[i]);
        if (!(a <= 3.40282347e38f)) return -1.0f;
        if (a > amax) amax = a;
    }
    return amax;
}

/* The 16 codes of a Q4_K sub-block, w = d1 * c - m1, quantized. As in the
 * AVX2 path the clamp is left out: a row's values are multiples of 2^-24,
 * so s = amax / 127 is normal and every value the sub-block holds quantizes
 * into [-127, 127]; an entry of a code it does not hold may saturate and is
 * never looked up. */
static inline int8x16_t q4k_table(float d1, float m1, float32x4_t sv) {
    static const float codes[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    const float32x4_t d = vdupq_n_f32(d1), m = vdupq_n_f32(m1);
    int32x4_t r[4];
    for (int k = 0; k < 4; k++)
        r[k] = vcvtnq_s32_f32(vdivq_f32(vsubq_f32(vmulq_f32(d, vld1q_f32(codes + 4 * k)), m), sv));
    return narrow16(r[0], r[1], r[2], r[3]);
}

int pack_row_q4_K_neon(const void *row, int K, int8_t *q, float *scale) {
    if (K <= 0 || K % QK_K) return PACK_E_TYPE;
    if (K > PACK_MAX_K) return PACK_E_SHAPE; /* the row tables below */
    const struct block_q4_K *x = row;
    const int nb = K / QK_K;
    float d1s[PACK_MAX_K / 32], m1s[PACK_MAX_K / 32], amax;
    const int rc = pack_q4k_prepare(x, nb, d1s, m1s, &amax);
    if (rc != PACK_OK) return rc;
    const float s = w8a8_scale(amax);
    *scale = s;
    if (s == 0.0f) {
        memset(q, 0, (size_t)K);
        return PACK_OK;
    }
    const float32x4_t sv = vdupq_n_f32(s);
    const uint8x16_t low4 = vdupq_n_u8(0x0F);
    /* sub-blocks 2c and 2c+1 of a block share the 32 bytes qs[32c..]: low
     * nibbles and high nibbles */
    for (int j = 0; j < 8 * nb; j += 2) {
        const int8x16_t ta = q4k_table(d1s[j], m1s[j], sv), tb = q4k_table(d1s[j + 1], m1s[j + 1], sv);
        const uint8_t *qs = x[j / 8].qs + 32 * ((j % 8) / 2);
        const uint8x16_t v0 = vld1q_u8(qs), v1 = vld1q_u8(qs + 16);
        int8_t *out = q + (size_t)j * 32;
        vst1q_s8(out, vqtbl1q_s8(ta, vandq_u8(v0, low4)));
        vst1q_s8(out + 16, vqtbl1q_s8(ta, vandq_u8(v1, low4)));
        vst1q_s8(out + 32, vqtbl1q_s8(tb, vshrq_n_u8(v0, 4)));
        vst1q_s8(out + 48, vqtbl1q_s8(tb, vshrq_n_u8(v1, 4)));
    }
    return PACK_OK;
}
