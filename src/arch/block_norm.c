#include "arch/block_norm.h"

#include "core/threadpool.h"
#include "quant/quant.h"

#include <math.h>
#include <stddef.h>

enum { SUM_LANES = 8, ROWS_PER_ITEM = 8 };

void rms_norm(const float *x, const float *w, float *y, int n, float eps) {
    /* Sum of squares in double (as the reference), in SUM_LANES interleaved
     * partial sums so that the additions do not wait on each other; scale
     * in float. */
    double part[SUM_LANES] = { 0 };
    int i = 0;
    for (; i + SUM_LANES <= n; i += SUM_LANES)
        for (int l = 0; l < SUM_LANES; l++) part[l] += (double)(x[i + l] * x[i + l]);
    for (; i < n; i++) part[0] += (double)(x[i] * x[i]);
    double sum = ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
    float scale = 1.0f / sqrtf((float)(sum / n) + eps);
    for (i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
}

void rms_norm_rows(const float *x, const float *w, float *y, int rows, int n, float eps) {
    for (int r = 0; r < rows; r++) rms_norm(x + (size_t)r * n, w, y + (size_t)r * n, n, eps);
}

void add_residual(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

struct norm_job {
    float *x;
    const float *add, *w;
    float *y;
    int rows, n;
    float eps;
    enum qtype act; /* and y quantized into yq, when yq is set */
    char *yq;
    size_t yq_stride;
};

static void norm_range(void *arg, int64_t begin, int64_t end, int thread_index) {
    (void)thread_index;
    const struct norm_job *j = arg;
    const int64_t last = end * ROWS_PER_ITEM < j->rows ? end * ROWS_PER_ITEM : j->rows;
    for (int64_t r = begin * ROWS_PER_ITEM; r < last; r++) {
        float *x = j->x + (size_t)r * j->n;
        if (j->add) add_residual(x, j->add + (size_t)r * j->n, j->n);
        if (j->w) rms_norm(x, j->w, j->y + (size_t)r * j->n, j->n, j->eps);
        if (j->w && j->yq) quant_quantize_act(j->act, j->y + (size_t)r * j->n, j->yq + (size_t)r * j->yq_stride, j->n);
    }
}

void residual_norm_rows(struct threadpool *pool, float *x, const float *add, const float *w, float *y, int rows, int n,
                        float eps) {
    residual_norm_quantize_rows(pool, x, add, w, y, rows, n, eps, QT_F32, NULL);
}

size_t residual_norm_quantize_rows(struct threadpool *pool, float *x, const float *add, const float *w, float *y,
                                   int rows, int n, float eps, enum qtype act, void *yq) {
    struct norm_job job = { x, add, w, y, rows, n, eps, act, yq, yq ? quant_row_size(act, n) : 0 };
    /* A few rows cost less than the threads' meeting. */
    threadpool_parallel_for(rows >= 4 * ROWS_PER_ITEM ? pool : NULL, (rows + ROWS_PER_ITEM - 1) / ROWS_PER_ITEM, 1,
                            norm_range, &job);
    return job.yq_stride;
}
