#include "quant/matmul.h"

#include "core/spin.h"
#include "core/threadpool.h"

#include <stdatomic.h>
#include <string.h>

/* Activation rows per kernel call: keeps a tile of quantized activations in
 * L2 while a chunk of weight rows streams past it. */
enum { ACT_BLOCK = 64 };
/* Weight rows per work item (a multiple of every kernel's row blocking and
 * of the interleaved groups). */
enum { ROW_ALIGN = QUANT_R16_ROWS };
/* Rows per quantizing item, when the activations are quantized in the
 * matmul's own job, and the blocks of activation rows that can be tracked
 * there (more rows: quantized in a job of their own first). */
enum { QUANT_ITEM_ROWS = 8, MAX_ACT_BLOCKS = 64 };

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

/* Several matrices reading the same activations, as one job: their items
 * are numbered one after the other, so the pool waits once for all. When
 * x is set, the job quantizes it first: its first q_items items quantize
 * QUANT_ITEM_ROWS rows each, and a matmul item waits for the rows of each
 * ACT_BLOCK it reads (block_rows_done), not for all of them. The pool hands
 * out items in order, so every quantizing item is taken before any matmul
 * item waits, and the thread that took it never waits: no deadlock. */
enum { MAX_MATS = 4 };
struct matmul_job {
    int n_mats;
    const struct matrix *w[MAX_MATS];
    float *y[MAX_MATS];
    size_t y_stride[MAX_MATS];
    int64_t rows_per_item[MAX_MATS], first_item[MAX_MATS + 1];
    const char *xq;
    size_t act_stride;
    int M;
    const float *x;          /* (M, cols) to quantize into xq, or NULL: xq is ready */
    enum qtype act_type;
    int64_t cols;
    int64_t q_items;
    _Atomic int block_rows_done[MAX_ACT_BLOCKS];
};

static void quantize_item(struct matmul_job *j, int64_t item) {
    int r0 = (int)item * QUANT_ITEM_ROWS, r1 = r0 + QUANT_ITEM_ROWS < j->M ? r0 + QUANT_ITEM_ROWS : j->M;
    for (int r = r0; r < r1; r++)
        quant_quantize_act(j->act_type, j->x + (size_t)r * j->cols, (char *)j->xq + (size_t)r * j->act_stride, j->cols);
    atomic_fetch_add_explicit(&j->block_rows_done[r0 / ACT_BLOCK], r1 - r0, memory_order_release);
}

static void wait_block(struct matmul_job *j, int m0, int m) {
    unsigned spins = 0;
    while (atomic_load_explicit(&j->block_rows_done[m0 / ACT_BLOCK], memory_order_acquire) < m) spin_pause(&spins);
}

static void matmul_range(void *arg, int64_t begin, int64_t end, int thread_index) {
    (void)thread_index;
    struct matmul_job *j = arg;
    for (int64_t at = begin; at < end; at++) {
        if (at < j->q_items) {
            quantize_item(j, at);
            continue;
        }
        int64_t item = at - j->q_items;
        int k = 0;
        while (item >= j->first_item[k + 1]) k++;
        const struct matrix *w = j->w[k];
        const size_t y_stride = j->y_stride[k];
        int64_t r0 = (item - j->first_item[k]) * j->rows_per_item[k];
        int64_t r1 = r0 + j->rows_per_item[k] < w->rows ? r0 + j->rows_per_item[k] : w->rows;
        for (int m0 = 0; m0 < j->M; m0 += ACT_BLOCK) {
            int m = j->M - m0 < ACT_BLOCK ? j->M - m0 : ACT_BLOCK;
            if (j->x) wait_block(j, m0, m);
            matrix_tile(w, r0, (int)(r1 - r0), j->xq + (size_t)m0 * j->act_stride, j->act_stride, m,
                        j->y[k] + (size_t)m0 * y_stride + r0, y_stride);
        }
    }
}

/* x, when not NULL: floats (M, w[0]->cols) that the first group's job
 * quantizes into xq itself. */
static void run_many(struct threadpool *pool, int n_mats, const struct matrix *const *w, const float *x, void *xq,
                     size_t act_stride, int M, float *const *y, const size_t *y_stride) {
    int threads = pool ? threadpool_size(pool) : 1;
    struct matmul_job job = { .xq = xq, .act_stride = act_stride, .M = M };
    if (x) {
        job.x = x;
        job.act_type = quant_traits(w[0]->type)->vec_dot_type;
        job.cols = w[0]->cols;
        job.q_items = (M + QUANT_ITEM_ROWS - 1) / QUANT_ITEM_ROWS;
        for (int b = 0; b < MAX_ACT_BLOCKS; b++) atomic_init(&job.block_rows_done[b], 0);
    }
    for (int k0 = 0; k0 < n_mats; k0 += MAX_MATS) {
        job.n_mats = n_mats - k0 < MAX_MATS ? n_mats - k0 : MAX_MATS;
        job.first_item[0] = 0;
        for (int k = 0; k < job.n_mats; k++) {
            const struct matrix *wk = w[k0 + k];
            /* About 4 items per thread, but never slivers that defeat the
             * kernel's row blocking; for decode, small items keep both
             * cores busy. */
            int64_t per = (wk->rows + threads * 4 - 1) / (threads * 4);
            per = (per + ROW_ALIGN - 1) / ROW_ALIGN * ROW_ALIGN;
            if (per < ROW_ALIGN) per = ROW_ALIGN;
            job.w[k] = wk;
            job.y[k] = y[k0 + k];
            job.y_stride[k] = y_stride ? y_stride[k0 + k] : (size_t)wk->rows;
            job.rows_per_item[k] = per;
            job.first_item[k + 1] = job.first_item[k] + (wk->rows + per - 1) / per;
        }
        threadpool_parallel_for(pool, job.q_items + job.first_item[job.n_mats], 1, matmul_range, &job);
        job.x = NULL; /* quantized for the groups that follow */
        job.q_items = 0;
    }
}

void matmul_preq_many(struct threadpool *pool, int n_mats, const struct matrix *const *w, const void *xq,
                      size_t act_stride, int M, float *const *y) {
    run_many(pool, n_mats, w, NULL, (void *)xq, act_stride, M, y, NULL);
}

/* Whether x's quantization goes into the matmul's own job: for several
 * rows on several threads, up to one block of rows (a batched decode step,
 * a short prompt). Larger batches quantize in a job of their own first: at
 * pp512 on qwen3moe, 2 threads, the fused form took the attention
 * projections 139 -> 209 ms and the router 35 -> 57 ms (0.86-0.90x pp512),
 * more than the barrier it saves. */
static bool quantize_inside(struct threadpool *pool, int M) {
    return pool && threadpool_size(pool) > 1 && M > 4 && M <= ACT_BLOCK && (M + ACT_BLOCK - 1) / ACT_BLOCK <= MAX_ACT_BLOCKS;
}

void matmul_many(struct threadpool *pool, int n_mats, const struct matrix *const *w, const float *x, int M,
                 void *scratch, float *const *y) {
    size_t stride = quant_row_size(quant_traits(w[0]->type)->vec_dot_type, w[0]->cols);
    if (quantize_inside(pool, M)) {
        run_many(pool, n_mats, w, x, scratch, stride, M, y, NULL);
        return;
    }
    quantize_rows(pool, w[0]->type, x, M, w[0]->cols, scratch, stride);
    run_many(pool, n_mats, w, NULL, scratch, stride, M, y, NULL);
}

void matmul_preq(struct threadpool *pool, const struct matrix *w, const void *xq, size_t act_stride,
                 int M, float *y, size_t y_stride) {
    run_many(pool, 1, &w, NULL, (void *)xq, act_stride, M, &y, &y_stride);
}

void matmul(struct threadpool *pool, const struct matrix *w, const float *x, int M, float *y,
            void *scratch) {
    matmul_many(pool, 1, &w, x, M, scratch, &y);
}
