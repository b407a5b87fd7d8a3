/* Internal to the x86 kernel files: vec_dot and gemm tile of the 32-value
 * types Q4_0, Q5_0, Q4_1, Q5_1 (quant_b32.h), written once for AVX2 and
 * AVX-512 VNNI. The includer is compiled with at least AVX2 + FMA + F16C and
 * defines, before including this file, its integer dot product of 32 bytes
 * (the sum split in any way over the 8 int32 lanes; here u <= 31 and
 * |s| <= 127, so a vpmaddubsw pair sum cannot saturate) and its expansion of
 * a Q5 block's fifth bits:
 *   static inline __m256i b32_dot_u8(__m256i u, __m256i s);  uint8 u times int8 s
 *   static inline __m256i b32_fifth_bits(const uint8_t qh[4]);  0xFF in byte j
 *                                          where bit j of the 32-bit qh is set
 * Signed codes go in as |w| and the activations with w's sign. */
#ifndef MOEX_QUANT_B32_X86_H
#define MOEX_QUANT_B32_X86_H

#include "quant/quant_b32.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

/* The 32 nibbles of qs[16] in value order: value j < 16 is the low nibble of
 * qs[j], value j + 16 its high nibble. */
static inline __m256i b32_nibbles(const uint8_t *qs) {
    const __m128i t = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0xF));
}

/* The block's codes as bytes: q - 8 / q - 16 (signed) for Q4_0 / Q5_0, q for
 * Q4_1 / Q5_1. */
static inline __attribute__((always_inline)) __m256i b32_codes(enum b32_kind k, const void *blk) {
    switch (k) {
    case B32_Q4_0:
        return _mm256_sub_epi8(b32_nibbles(((const struct block_q4_0 *)blk)->qs), _mm256_set1_epi8(8));
    case B32_Q5_0: {
        const struct block_q5_0 *b = blk;
        /* q - 16 = the nibble, with 0xF0 (-16) or'ed in where the fifth bit is clear */
        return _mm256_or_si256(b32_nibbles(b->qs), _mm256_andnot_si256(b32_fifth_bits(b->qh), _mm256_set1_epi8((char)0xF0)));
    }
    case B32_Q4_1:
        return b32_nibbles(((const struct block_q4_1 *)blk)->qs);
    case B32_Q5_1: {
        const struct block_q5_1 *b = blk;
        return _mm256_or_si256(b32_nibbles(b->qs), _mm256_and_si256(b32_fifth_bits(b->qh), _mm256_set1_epi8(0x10)));
    }
    }
    return _mm256_setzero_si256();
}

/* The scale d and (Q4_1 / Q5_1) the min m of a weight block: both types put
 * them first, d then m. */
static inline float b32_d(const void *blk) { uint16_t h; memcpy(&h, blk, 2); return _cvtsh_ss(h); }
static inline float b32_m(const void *blk) { uint16_t h; memcpy(&h, (const char *)blk + 2, 2); return _cvtsh_ss(h); }

static inline __m256i b32_act_qs(enum b32_kind k, const void *blk) {
    return _mm256_loadu_si256((const __m256i *)((const char *)blk + b32_act_qs_offset(k)));
}

/* The codes of a signed kind become |w| and their signs go to the activations. */
static inline __attribute__((always_inline)) __m256i b32_dot(enum b32_kind k, __m256i w, __m256i wabs, __m256i a) {
    return b32_has_min(k) ? b32_dot_u8(w, a) : b32_dot_u8(wabs, _mm256_sign_epi8(a, w));
}

static inline float b32_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* One (row, column) pair with b32_gemm's operations in the same order, so
 * that a row's result does not depend on how many activation rows share its
 * matmul: per block d_x d_y sum(q_x q_y) into one accumulator and (Q4_1,
 * Q5_1) m_x s_y into the min sum, fused. */
static inline __attribute__((always_inline)) void b32_vec_dot(enum b32_kind k, int n, float *s, const void *vx,
                                                              const void *vy) {
    const char *x = vx, *y = vy;
    const size_t xb = b32_block_bytes(k), yb = b32_act_bytes(k);
    __m256 acc = _mm256_setzero_ps();
    float m = 0.0f;
    for (int i = 0; i < n / 32; i++, x += xb, y += yb) {
        const __m256i q = b32_codes(k, x);
        const __m256i p = b32_dot(k, q, b32_has_min(k) ? q : _mm256_abs_epi8(q), b32_act_qs(k, y));
        acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(b32_d(x)), _mm256_set1_ps(b32_d(y))), _mm256_cvtepi32_ps(p), acc);
        if (b32_has_min(k)) m = fmaf(b32_m(x), b32_m(y), m); /* the Q8_1 s sits where a min would */
    }
    *s = b32_hsum(acc) + m;
}

#define B32_TILE_ROWS 4
#define B32_TILE_COLS 32 /* activation rows per pass; each unpacked block serves all of them */

/* The codes of 4 weight rows' block are unpacked once and reused for every
 * activation row: per (row, column) pair one integer dot and one FMA; the
 * min terms of the 4 rows take one 4-wide FMA per column. */
static inline __attribute__((always_inline)) void b32_gemm(enum b32_kind k, int n, const void *w, size_t w_stride,
                                                           int n_w_rows, const void *a, size_t a_stride, int n_a_rows,
                                                           float *out, size_t out_stride) {
    const int nb = n / 32;
    const size_t xb = b32_block_bytes(k), yb = b32_act_bytes(k);
    __m256 facc[B32_TILE_COLS][B32_TILE_ROWS];
    __m128 macc[B32_TILE_COLS];
    for (int c0 = 0; c0 < n_a_rows; c0 += B32_TILE_COLS) {
        const int nc = n_a_rows - c0 < B32_TILE_COLS ? n_a_rows - c0 : B32_TILE_COLS;
        for (int r0 = 0; r0 < n_w_rows; r0 += B32_TILE_ROWS) {
            const int nr = n_w_rows - r0 < B32_TILE_ROWS ? n_w_rows - r0 : B32_TILE_ROWS;
            /* missing rows of a short tile repeat the last one; their results are dropped */
            const char *wr[B32_TILE_ROWS];
            for (int r = 0; r < B32_TILE_ROWS; r++)
                wr[r] = (const char *)w + (size_t)(r0 + (r < nr ? r : nr - 1)) * w_stride;
            for (int c = 0; c < nc; c++) {
                for (int r = 0; r < B32_TILE_ROWS; r++) facc[c][r] = _mm256_setzero_ps();
                macc[c] = _mm_setzero_ps();
            }
            for (int b = 0; b < nb; b++) {
                __m256i wq[B32_TILE_ROWS], wabs[B32_TILE_ROWS];
                __m256 wd[B32_TILE_ROWS];
                float wm[B32_TILE_ROWS] = {0};
                for (int r = 0; r < B32_TILE_ROWS; r++) {
                    const char *blk = wr[r] + (size_t)b * xb;
                    if (b + 4 < nb) _mm_prefetch(blk + 4 * xb, _MM_HINT_T0);
                    wq[r] = b32_codes(k, blk);
                    wabs[r] = b32_has_min(k) ? wq[r] : _mm256_abs_epi8(wq[r]);
                    wd[r] = _mm256_set1_ps(b32_d(blk));
                    if (b32_has_min(k)) wm[r] = b32_m(blk);
                }
                const __m128 wmins = _mm_loadu_ps(wm);
                for (int c = 0; c < nc; c++) {
                    const char *y = (const char *)a + (size_t)(c0 + c) * a_stride + (size_t)b * yb;
                    const __m256i yq = b32_act_qs(k, y);
                    const __m256 yd = _mm256_set1_ps(b32_d(y));
                    for (int r = 0; r < B32_TILE_ROWS; r++)
                        facc[c][r] = _mm256_fmadd_ps(_mm256_mul_ps(wd[r], yd), _mm256_cvtepi32_ps(b32_dot(k, wq[r], wabs[r], yq)),
                                                     facc[c][r]);
                    if (b32_has_min(k)) macc[c] = _mm_fmadd_ps(wmins, _mm_set1_ps(b32_m(y)), macc[c]);
                }
            }
            for (int c = 0; c < nc; c++) {
                float mins[B32_TILE_ROWS];
                _mm_storeu_ps(mins, macc[c]);
                for (int r = 0; r < nr; r++)
                    out[(size_t)(c0 + c) * out_stride + (size_t)(r0 + r)] = b32_hsum(facc[c][r]) + mins[r];
            }
        }
    }
}

B32_DEFINE_KERNELS

#endif
