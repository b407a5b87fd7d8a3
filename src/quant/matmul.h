/* Dense matmuls on the CPU straight from quantized weights. */
#ifndef MOEX_MATMUL_H
#define MOEX_MATMUL_H

#include "quant/quant.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct threadpool;

/* A weight matrix as stored in GGUF: `rows` output features, each a row of
 * `cols` input values of `type`, rows row_bytes apart. */
struct matrix {
    const void *data;
    enum qtype type;
    int64_t rows, cols;
    size_t row_bytes;
    const void *r16;    /* the same rows interleaved by 16 (quant_r16_pack) for the
                           CPU kernels, or NULL; data stays the file's layout */
};

/* out[j * out_stride + i] = w row i . a row j: the type's gemm tile kernel,
 * or for a single activation row (decode) its vec_dot, which streams the
 * weights without unpacking them for reuse. */
void matmul_tile(const struct qtype_traits *tr, int n, const void *w, size_t w_stride, int n_w_rows,
                 const void *a, size_t a_stride, int n_a_rows, float *out, size_t out_stride);

/* The same for rows row0 .. row0+n_rows-1 of w, from its interleaved copy
 * when it has one (then row0 and n_rows are multiples of QUANT_R16_ROWS). */
void matrix_tile(const struct matrix *w, int64_t row0, int n_rows, const void *a, size_t a_stride, int n_a_rows,
                 float *out, size_t out_stride);

/* Bytes of scratch matmul() needs for M rows of `cols` inputs. */
size_t matmul_scratch_size(const struct matrix *w, int M);

/* y[M][w->rows] = x[M][w->cols] . w^T. Activations are quantized once into
 * the weight type's vec_dot type (scratch), then the rows of w are split over
 * the pool; every chunk runs the gemm tile kernel over all M rows. */
void matmul(struct threadpool *pool, const struct matrix *w, const float *x, int M, float *y,
            void *scratch);

/* The same with activations already in w's vec_dot type, act_stride bytes
 * apart (used by the attention block, which quantizes its input once for q,
 * k and v). y rows are y_stride floats apart. */
void matmul_preq(struct threadpool *pool, const struct matrix *w, const void *xq, size_t act_stride,
                 int M, float *y, size_t y_stride);

/* matmul_preq for several matrices that read the same activations (their
 * weight types want the same activation type), y[k] rows w[k]->rows floats
 * apart: one job, so the threads wait for each other once, not per matrix. */
void matmul_preq_many(struct threadpool *pool, int n_mats, const struct matrix *const *w, const void *xq,
                      size_t act_stride, int M, float *const *y);

/* matmul for several matrices that read the same x (their weight types
 * want the same activation type, their cols equal): x quantized once into
 * scratch, y[k] rows w[k]->rows floats apart; for several rows the
 * quantizing runs in the matmuls' job, each item waiting only for the
 * activation rows it reads. */
void matmul_many(struct threadpool *pool, int n_mats, const struct matrix *const *w, const float *x, int M,
                 void *scratch, float *const *y);

/* Quantizes M rows of n floats into the activation type of weight type t,
 * rows `stride` bytes apart, in parallel. Returns the row stride used when
 * stride is 0 (quant_row_size of the activation type). */
size_t quantize_rows(struct threadpool *pool, enum qtype weight_type, const float *x, int M, int64_t n,
                     void *out, size_t stride);

#endif
