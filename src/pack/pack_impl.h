/* Internal to src/pack: the row kernels behind pack.h and w8a8.h, per path.
 * Every path produces the same bytes; tests hold them to that. */
#ifndef MOEX_PACK_IMPL_H
#define MOEX_PACK_IMPL_H

#include "pack/pack.h"

#include <stdbool.h>
#include <stdint.h>

/* True when the AVX2 (NEON) kernels may run: the CPU has them and quant's
 * ISA ceiling (quant_init, moex_set_isa) allows them. */
bool pack_avx2_enabled(void);
bool pack_neon_enabled(void);

/* Scalar rule pieces (w8a8.c). */
int w8a8_quantize_one(float x, float scale);

/* Dequantize-then-quantize through quant_traits()->to_float, one block at a
 * time in two passes (amax, then quantize): any type, no row buffer. */
int pack_row_generic(enum qtype t, const void *row, int K, int8_t *q, float *scale);

/* The row maximum from sub-block bounds. In every fused type a sub-block's
 * values are monotone in its codes, so its max |w| sits at its smallest or
 * largest code and is bounded by the values of the extreme codes the format
 * allows; the bounds come from the scales alone. exact(row, a, b, j) is
 * sub-block j's max |w| as dequantization rounds it; bound[j] >= it for
 * j < n. Only sub-blocks whose bound beats the best found so far are read,
 * the largest bound first: for real weights one or a few per row. */
/* An fp16 scale that is an infinity or a NaN: every value a block
 * dequantizes with it is then not finite either. */
static inline bool pack_fp16_finite(uint16_t h) { return (h & 0x7C00) != 0x7C00; }

/* Q4_K/Q5_K: max |d1 * c - m1| over a sub-block whose codes span [lo, hi]
 * (includers compile without contraction of multiply and add). */
static inline float pack_kq_amax(float d1, float m1, int lo, int hi) {
    const float wlo = d1 * (float)lo - m1, whi = d1 * (float)hi - m1;
    const float alo = wlo < 0 ? -wlo : wlo, ahi = whi < 0 ? -whi : whi;
    return alo > ahi ? alo : ahi;
}

typedef float (*pack_subblock_amax_fn)(const void *row, const float *a, const float *b, int j);
static inline float pack_refine_amax(const float *bound, int n, pack_subblock_amax_fn exact, const void *row,
                                     const float *a, const float *b) {
    if (n <= 0) return 0.0f;
    int first = 0;
    for (int j = 1; j < n; j++)
        if (bound[j] > bound[first]) first = j;
    if (!(bound[first] > 0.0f)) return 0.0f; /* every value is 0 */
    float best = exact(row, a, b, first);
    for (int j = 0; j < n; j++) {
        if (j == first || !(bound[j] > best)) continue;
        const float v = exact(row, a, b, j);
        if (v > best) best = v;
    }
    return best;
}

/* Fused scalar paths: the maximum from sub-block bounds, then a 16-entry
 * table per sub-block (Q4_K) or one division per value (Q5_K, Q6_K, Q8_0,
 * Q5_0). */
int pack_row_q4_K_scalar(const void *row, int K, int8_t *q, float *scale);
/* Their first pass over nb Q4_K blocks: d1 = d * sc and m1 = dmin * m of
 * every sub-block, and the row maximum. PACK_OK or PACK_E_VALUE. */
int pack_q4k_prepare(const void *row, int nb, float *d1s, float *m1s, float *amax);
int pack_row_q5_K_scalar(const void *row, int K, int8_t *q, float *scale);
int pack_row_q6_K_scalar(const void *row, int K, int8_t *q, float *scale);
int pack_row_q8_0_scalar(const void *row, int K, int8_t *q, float *scale);
int pack_row_q5_0_scalar(const void *row, int K, int8_t *q, float *scale);

#if defined(__x86_64__)
/* Fused AVX2 paths: the row maximum from sub-block bounds (reading the
 * codes of few sub-blocks), then one pass that dequantizes and quantizes. */
int pack_row_q4_K_avx2(const void *row, int K, int8_t *q, float *scale);
int pack_row_q5_K_avx2(const void *row, int K, int8_t *q, float *scale);
int pack_row_q6_K_avx2(const void *row, int K, int8_t *q, float *scale);
int pack_row_q8_0_avx2(const void *row, int K, int8_t *q, float *scale);
int pack_row_f16_avx2(const void *row, int K, int8_t *q, float *scale);
int pack_row_bf16_avx2(const void *row, int K, int8_t *q, float *scale);
void w8a8_quantize_avx2(const float *x, int64_t n, float scale, int8_t *q);
float w8a8_amax_avx2(const float *x, int64_t n);
#endif

#if defined(__aarch64__)
/* NEON: the W8A8 quantizer and max |x| scan (behind w8a8.h), and the Q4_K
 * path's second pass as a 16-byte table lookup per 16 codes. */
void w8a8_quantize_neon(const float *x, int64_t n, float scale, int8_t *q);
float w8a8_amax_neon(const float *x, int64_t n);
int pack_row_q4_K_neon(const void *row, int K, int8_t *q, float *scale);
#endif

#endif
