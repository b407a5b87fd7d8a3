/* Internal to src/quant: the per-ISA kernel tables that quant.c merges into
 * the dispatch table, and the scalar pieces other ISA files reuse. */
#ifndef MOEX_QUANT_IMPL_H
#define MOEX_QUANT_IMPL_H

#include "quant/quant.h"
#include "quant/quant_blocks.h"

typedef void (*fp16_to_f32_row_fn)(const uint16_t *src, float *dst, int64_t n);
typedef void (*f32_to_fp16_row_fn)(const float *src, uint16_t *dst, int64_t n);
typedef void (*silu_mul_row_fn)(float *g, const float *u, int64_t n);

/* What one ISA provides. Members left NULL fall back to the next lower ISA
 * that has them (AVX-512 -> AVX2 -> scalar, NEON -> scalar). */
struct quant_isa_table {
    struct qtype_kernels k[QT_MAX];
    gemm_tile_fn gemm_r16[QT_MAX];   /* on rows interleaved by 16 */
    gemm_tile_fn gemm_r16_avxvnni[QT_MAX]; /* AVX2 only: ones with AVX-VNNI, for CPUs
                                             that have it when the cap is above avx2 */
    fp16_to_f32_row_fn fp16_to_f32_row;
    f32_to_fp16_row_fn f32_to_fp16_row;
    silu_mul_row_fn silu_mul_row;
};

void quant_fill_scalar(struct quant_isa_table *t);
#if defined(__x86_64__)
void quant_fill_avx2(struct quant_isa_table *t);
void quant_fill_avx512(struct quant_isa_table *t);
#endif
#if defined(__aarch64__)
void quant_fill_neon(struct quant_isa_table *t);
#endif

/* Scalar kernels (quant_ref.c, quant_kquants.c, quant_fp16.c). */
void dequantize_row_q4_0(const void *src, float *dst, int64_t n);
void dequantize_row_q4_1(const void *src, float *dst, int64_t n);
void dequantize_row_q5_0(const void *src, float *dst, int64_t n);
void dequantize_row_q5_1(const void *src, float *dst, int64_t n);
void dequantize_row_q8_0(const void *src, float *dst, int64_t n);
void dequantize_row_q8_1(const void *src, float *dst, int64_t n);
void dequantize_row_q4_K(const void *src, float *dst, int64_t n);
void dequantize_row_q5_K(const void *src, float *dst, int64_t n);
void dequantize_row_q6_K(const void *src, float *dst, int64_t n);
void dequantize_row_q8_K(const void *src, float *dst, int64_t n);
void quantize_row_q4_0_ref(const float *src, void *dst, int64_t n);
void quantize_row_q4_1_ref(const float *src, void *dst, int64_t n);
void quantize_row_q5_0_ref(const float *src, void *dst, int64_t n);
void quantize_row_q5_1_ref(const float *src, void *dst, int64_t n);
void quantize_row_q8_0_ref(const float *src, void *dst, int64_t n);
void quantize_row_q8_1_ref(const float *src, void *dst, int64_t n);
void quantize_row_q8_K_ref(const float *src, void *dst, int64_t n);
void quantize_row_q4_K_ref(const float *src, void *dst, int64_t n);
void quantize_row_q5_K_ref(const float *src, void *dst, int64_t n);
void quantize_row_q6_K_ref(const float *src, void *dst, int64_t n);
void fp16_to_f32_row_scalar(const uint16_t *src, float *dst, int64_t n);
void f32_to_fp16_row_scalar(const float *src, uint16_t *dst, int64_t n);
void silu_mul_row_scalar(float *g, const float *u, int64_t n);
/* expf as glibc computes it (since 2.28, the FMA build every AVX2 + FMA
 * CPU gets): x * 32/ln2 = k + r in double, 2^(k/32) from a table of 2^(i/32)
 * with k/32's integer part added to the exponent, times a cubic in r,
 * rounded to float once; for |x| < 88, where it needs no special case.
 * quant_expf_tab[i] is the bits of 2^(i/32) less i << 47 (so that adding
 * k << 47 gives the bits of 2^(k/32)). The SIMD silu_mul_row kernels compute it lane by lane with these, so that
 * they give silu_mul_row_scalar's bits. */
#define QUANT_EXPF_INV_LN2_32 0x40471547652b82feull /* 32 / ln 2 */
#define QUANT_EXPF_SHIFT 0x4338000000000000ull      /* 1.5 * 2^52: rounds to an integer */
#define QUANT_EXPF_C0 0x3ebc6af84b912394ull
#define QUANT_EXPF_C1 0x3f2ebfce50fac4f3ull
#define QUANT_EXPF_C2 0x3f962e42ff0c52d6ull
extern const uint64_t quant_expf_tab[32];

/* Q4_K and Q6_K on rows interleaved by 16 (quant_r16.c, quant_r16_avx512.c,
 * quant_r16_avx2.c, quant_r16_avxvnni.c, quant_r16_neon.c). */
void gemm_q4_K_r16_ref(int n, const void *w, size_t w_stride, int n_w_rows, const void *a, size_t a_stride,
                       int n_a_rows, float *out, size_t out_stride);
void gemm_q6_K_r16_ref(int n, const void *w, size_t w_stride, int n_w_rows, const void *a, size_t a_stride,
                       int n_a_rows, float *out, size_t out_stride);
#if defined(__x86_64__)
void gemm_q4_K_r16_avx512(int n, const void *w, size_t w_stride, int n_w_rows, const void *a, size_t a_stride,
                          int n_a_rows, float *out, size_t out_stride);
void gemm_q6_K_r16_avx512(int n, const void *w, size_t w_stride, int n_w_rows, const void *a, size_t a_stride,
                          int n_a_rows, float *out, size_t out_stride);
void gemm_q4_K_r16_avx2(int n, const void *w, size_t w_stride, int n_w_rows, const void *a, size_t a_stride,
                        int n_a_rows, float *out, size_t out_stride);
void gemm_q6_K_r16_avx2(int n, const void *w, size_t w_stride, int n_w_rows, const void *a, size_t a_stride,
                        int n_a_rows, float *out, size_t out_stride);
void gemm_q4_K_r16_avxvnni(int n, const void *w, size_t w_stride, int n_w_rows, const void *a, size_t a_stride,
                           int n_a_rows, float *out, size_t out_stride);
void gemm_q6_K_r16_avxvnni(int n, const void *w, size_t w_stride, int n_w_rows, const void *a, size_t a_stride,
                           int n_a_rows, float *out, size_t out_stride);
#endif
#if defined(__aarch64__)
void gemm_q4_K_r16_neon(int n, const void *w, size_t w_stride, int n_w_rows, const void *a, size_t a_stride,
                        int n_a_rows, float *out, size_t out_stride);
void gemm_q6_K_r16_neon(int n, const void *w, size_t w_stride, int n_w_rows, const void *a, size_t a_stride,
                        int n_a_rows, float *out, size_t out_stride);
#endif

/* Q8_0 activation row: one block's scale and quants from 32 floats, with
 * ggml's quantize_row_q8_0_ref rounding (half away from zero). SIMD versions
 * must reproduce these bytes exactly. */
void quantize_block_q8_0_scalar(const float *x, struct block_q8_0 *y);

/* Generic gemm tile: a loop of vec_dot calls (for types without a
 * register-blocked kernel). */
#define QUANT_GEMM_FROM_VEC_DOT(name, vec_dot)                                              \
    static void name(int n, const void *w, size_t w_stride, int n_w_rows, const void *a,    \
                     size_t a_stride, int n_a_rows, float *out, size_t out_stride) {         \
        for (int j = 0; j < n_a_rows; j++)                                                   \
            for (int i = 0; i < n_w_rows; i++)                                               \
                vec_dot(n, &out[(size_t)j * out_stride + (size_t)i],                         \
                        (const char *)w + (size_t)i * w_stride,                              \
                        (const char *)a + (size_t)j * a_stride);                             \
    }

#endif
