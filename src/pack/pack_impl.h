/* Internal to src/pack: the row kernels behind pack.h and w8a8.h, per path.
 * Every path produces the same bytes; tests hold them to that. */
#ifndef MOEX_PACK_IMPL_H
#define MOEX_PACK_IMPL_H

#include "pack/pack.h"

#include <stdbool.h>
#include <stdint.h>

/* True when the AVX2 kernels may run (the CPU has them and quant's ISA
 * ceiling, MOEX_ISA, allows them). */
bool pack_avx2_enabled(void);

/* Scalar rule pieces (w8a8.c). */
int w8a8_quantize_one(float x, float scale);

/* Dequantize-then-quantize through quant_traits()->to_float, one block at a
 * time in two passes (amax, then quantize): any type, no row buffer. */
int pack_row_generic(enum qtype t, const void *row, int K, int8_t *q, float *scale);

/* Fused scalar paths: the maximum from each sub-block's extreme codes, then
 * a 16-entry table per sub-block (Q4_K) or one division per value (Q8_0). */
int pack_row_q4_K_scalar(const void *row, int K, int8_t *q, float *scale);
int pack_row_q8_0_scalar(const void *row, int K, int8_t *q, float *scale);

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

#endif
