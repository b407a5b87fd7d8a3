/* Quantization types: one table row per type, byte-compatible with the GGUF
 * (ggml) block layouts so weights are used straight from the mapped file.
 * Kernels are chosen once per ISA by quant_init(); inner loops never branch
 * on the ISA. */
#ifndef MOEX_QUANT_H
#define MOEX_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Values are the GGUF / ggml type ids. */
enum qtype {
    QT_F32 = 0,
    QT_F16 = 1,
    QT_Q4_0 = 2,
    QT_Q4_1 = 3,
    QT_Q5_0 = 6,
    QT_Q5_1 = 7,
    QT_Q8_0 = 8,
    QT_Q8_1 = 9,
    QT_Q4_K = 12,
    QT_Q5_K = 13,
    QT_Q6_K = 14,
    QT_Q8_K = 15,
    QT_BF16 = 30,
    QT_MAX = 40, /* ids are < QT_MAX */
};

enum isa {
    ISA_SCALAR = 0,
    ISA_AVX2,    /* AVX2 + FMA + F16C; AVX-VNNI where the CPU has it and the
                    limit is above avx2 (the interleaved kernels use it) */
    ISA_AVX512,  /* AVX-512 F/BW/VL + VNNI */
    ISA_NEON,    /* aarch64 NEON + dotprod */
    ISA_COUNT,
};

/* Dequantize n values (n a multiple of block_size). */
typedef void (*to_float_fn)(const void *src, float *dst, int64_t n);
/* Quantize n values (n a multiple of block_size). */
typedef void (*from_float_fn)(const float *src, void *dst, int64_t n);
/* *s = dot(x, y) over n values; x is of this type, y of vec_dot_type. */
typedef void (*vec_dot_fn)(int n, float *s, const void *x, const void *y);
/* A small GEMM tile: out[j * out_stride + i] = dot(w row i, a row j) for
 * i < n_w_rows, j < n_a_rows. w rows are this type (w_stride bytes apart),
 * a rows are vec_dot_type (a_stride bytes apart). Kernels keep w rows in
 * registers/L1 across the a rows: this is the prefill GEMM's inner loop. */
typedef void (*gemm_tile_fn)(int n, const void *w, size_t w_stride, int n_w_rows,
                             const void *a, size_t a_stride, int n_a_rows,
                             float *out, size_t out_stride);

struct qtype_traits {
    const char *name;        /* "Q4_K" as GGUF tools print it; NULL if unknown */
    int block_size;          /* values per block */
    size_t type_size;        /* bytes per block */
    bool supported;          /* moex can compute with it */
    to_float_fn to_float;           /* bit identical to ggml's dequantize_row_* */
    from_float_fn from_float;       /* reference quantizer (k-quant scale search);
                                       same bytes as llama-quantize without imatrix */
    enum qtype vec_dot_type;        /* activation type vec_dot wants */
    vec_dot_fn vec_dot;             /* best kernel for this machine */
    gemm_tile_fn gemm_tile;         /* best kernel for this machine */
    gemm_tile_fn gemm_r16;          /* gemm_tile on rows interleaved by 16
                                       (quant_r16_pack): n_w_rows a multiple of
                                       16, w_stride still the plain row's bytes;
                                       NULL where this machine has no SIMD one */
};

/* Selects the best kernels this CPU can run (at most max_isa; ISA_COUNT =
 * no limit; ISA_AVX2 also leaves AVX-VNNI out, the level of a Zen 3).
 * Idempotent; called by quant_traits() on first use. The table is
 * process-wide: calling it again re-selects, which must happen before
 * other threads use the table (the public moex_set_isa() guards that). */
void quant_init(enum isa max_isa);
/* The row of type t, or NULL for an id moex does not know. */
const struct qtype_traits *quant_traits(enum qtype t);
/* Kernels of a given ISA (for tests and benchmarks): NULL members where that
 * ISA has no kernel for t, NULL if the ISA cannot run here. */
struct qtype_kernels {
    vec_dot_fn vec_dot;
    gemm_tile_fn gemm_tile;
    from_float_fn quantize_act; /* fast activation quantizer (vec_dot types) */
    to_float_fn to_float;
};
const struct qtype_kernels *quant_kernels(enum qtype t, enum isa isa);
/* The gemm_r16 kernel of one ISA (the scalar one is the reference the SIMD
 * ones equal bit for bit); NULL where it has none or cannot run here. */
gemm_tile_fn quant_r16_kernel(enum qtype t, enum isa isa);
const char *isa_name(enum isa isa);
/* The ISA named "scalar", "avx2", "avx512" or "neon"; -1 for another name. */
int isa_from_name(const char *name, enum isa *out);
bool isa_available(enum isa isa);
/* The ISA the selected kernels belong to. */
enum isa quant_active_isa(void);

/* Rows interleaved by QUANT_R16_ROWS for the int8 dot instructions (Q4_K):
 * the same bytes per group of rows as the plain rows, so a row offset is a
 * group offset. dst gets rows*src_stride bytes; -1 for another type or
 * shape. */
enum { QUANT_R16_ROWS = 16 };
int quant_r16_pack(enum qtype t, const void *src, size_t src_stride, int64_t rows, int64_t cols, void *dst);
/* The layout quant_r16_pack writes for t on this machine, as the id a pack
 * file records with the bytes; 0 where no interleaved kernel runs t here.
 * A change of the layout, or an ISA that wants its own, takes a new id. */
uint32_t quant_r16_variant(enum qtype t);

/* Bytes of a row of n values; 0 if n is not a multiple of the block size. */
size_t quant_row_size(enum qtype t, int64_t n);
const char *quant_type_name(enum qtype t); /* "?" when unknown */

/* Quantize a float row into the activation type of t (fast path, exact same
 * result on every ISA for finite inputs). */
void quant_quantize_act(enum qtype act_type, const float *src, void *dst, int64_t n);

/* fp16 / bf16 conversion (bit exact, round to nearest even). */
float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);
void fp16_to_f32_row(const uint16_t *src, float *dst, int64_t n);
void f32_to_fp16_row(const float *src, uint16_t *dst, int64_t n);
/* g[i] = silu(g[i]) * u[i] = g[i] / (1 + expf(-g[i])) * u[i], the same bits
 * as that expression with glibc's expf on every ISA's kernel. */
void silu_mul_row(float *g, const float *u, int64_t n);

#endif
