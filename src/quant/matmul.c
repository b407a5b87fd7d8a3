#include "quant/matmul.h"

#include "core/threadpool.h"

#include <string.h>

/* Activation rows per kernel call: keeps a tile of quantized activations in
 * L2 while a chunk of weight rows streams past it. */
enum { ACT_BLOCK = 64 };
/* Weight rows per work item (a multiple of every kernel's row blocking and
 * of the interleaved groups). */
enum { ROW_ALIGN = QUANT_R16_ROWS };

size_t matmul_scratch_size(const struct matrix *w, int M) {
    const struct qtype_traits *tr = quant_traits(w->type);
    return quant_row_size(tr->vec_dot_type, w->cols) * (size_t)M;
}

void matmul_tile(const struct qtype_traits *tr, int n, const void *w, size_t w_stride, int n_w_rows,
                 const void *a, size_t a_stride, int n_a_rows, float *out, size_t out_stride) {
    if (n_a_rows == 1) {
        for (int i = 0; i < n_w_rows; i++) tr->vec_dot(n, &out[i], (const char *)w + (size_t)i * w_stride, a);
        return;
    }
    tr->gemm_tile(n, w, w_stride, n_w_rows, a, a_stride, n_a_rows, out, out_stride);
}

void matrix_tile(const struct matrix *w, int64_t row0, int n_rows, const void *a, size_t a_stride, int n_a_rows,
                 float *out, size_t out_stride) {
    const struct qtype_traits *tr = quant_traits(w->type);
    const size_t off = (size_t)row0 * w->row_bytes; /* a group is 16 rows' bytes */
    if (w->r16) tr->gemm_r16((int)w->cols, (const char *)w->r16 + off, w->row_bytes, n_rows, a, a_stride, n_a_rows, out,
                             out_stride);
    else matmul_tile(tr, (int)w->cols, (const char *)w->data + off, w->row_bytes, n_rows, a, a_stride, n_a_rows, out,
                     out_stride);
}

struct quantize_job {
    enum qtype act_type;
    const float *x;
    int64_t n;
    char *out;
    size_t stride;
};

static void quantize_range(void *arg, int64_t begin, int64_t end, int thread_index) {
    (void)thread_index;
    struct quantize_job *j = arg;
    for (int64_t r = begin; r < end; r++)
        quant_quantize_act(j->act_type, j->x + r * j->n, j->out + r * j->stride, j->n);
}

size_t quantize_rows(struct threadpool *pool, enum qtype weight_type, const float *x, int M, int64_t n,
                     void *out, size_t stride) {
    enum qtype act = quant_traits(weight_type)->vec_dot_type;
    if (!stride) stride = quant_row_size(act, n);
    struct quantize_job job = { act, x, n, out, stride };
    /* Quantizing one row costs about as much as a few hundred dot products:
     * only split when there are several rows. */
    threadpool_parallel_for(M > 4 ? pool : NULL, M, 1, quantize_range, &job);
    return stride;
}

struct matmul_job {
    const struct matrix *w;
    const struct qtype_traits *tr;
    const char *xq;
    size_t act_stride;
    int M;
    float *y;
    size_t y_stride;
    int64_t rows_per_item;
};

static void matmul_range(void *arg, int64_t begin, int64_t end, int thread_index) {
    (void)thread_index;
    struct matmul_job *j = arg;
    const struct matrix *w = j->w;
    for (int64_t item = begin; item < end; item++) {
        int64_t r0 = item * j->rows_per_item;
        int64_t r1 = r0 + j->rows_per_item < w->rows ? r0 + j->rows_per_item : w->rows;
        for (int m0 = 0; m0 < j->M; m0 += ACT_BLOCK) {
            int m = j->M - m0 < ACT_BLOCK ? j->M - m0 : ACT_BLOCK;
            matrix_tile(w, r0, (int)(r1 - r0), j->xq + (size_t)m0 * j->act_stride, j->act_stride, m,
                        j->y + (size_t)m0 * j->y_stride + r0, j->y_stride);
        }
    }
}

void matmul_preq(struct threadpool *pool, const struct matrix *w, const void *xq, size_t act_stride,
                 int M, float *y, size_t y_stride) {
    const struct qtype_traits *tr = quant_traits(w->type);
    int threads = pool ? threadpool_size(pool) : 1;
    /* About 4 items per thread, but never slivers that defeat the kernel's
     * row blocking; for decode, small items keep both cores busy. */
    int64_t per = (w->rows + threads * 4 - 1) / (threads * 4);
    per = (per + ROW_ALIGN - 1) / ROW_ALIGN * ROW_ALIGN;
    if (per < ROW_ALIGN) per = ROW_ALIGN;
    struct matmul_job job = { w, tr, xq, act_stride, M, y, y_stride, per };
    int64_t items = (w->rows + per - 1) / per;
    threadpool_parallel_for(pool, items, 1, matmul_range, &job);
}

void matmul(struct threadpool *pool, const struct matrix *w, const float *x, int M, float *y,
            void *scratch) {
    size_t stride = quantize_rows(pool, w->type, x, M, w->cols, scratch, 0);
    matmul_preq(pool, w, scratch, stride, M, y, (size_t)w->rows);
}
