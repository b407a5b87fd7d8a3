#include "arch/block_proj.h"

#include "model/context_impl.h"
#include "moe/executor.h"

void project_rows(struct context *c, const struct matrix *const *w, float *const *y, int k, const float *x, int n) {
    project_rows_preq(c, w, y, k, x, NULL, n);
}

void project_rows_preq(struct context *c, const struct matrix *const *w, float *const *y, int k, const float *x,
                       const void *xq, int n) {
    unsigned left = executor_dense(c->exec, k, w, y, x, n);
    const struct matrix *cw[DENSE_GROUP_MAX];
    float *cy[DENSE_GROUP_MAX];
    int m = 0;
    for (int i = 0; i < k; i++)
        if (left & (1u << i)) {
            cw[m] = w[i];
            cy[m++] = y[i];
        }
    if (xq && m) {
        matmul_preq_many(c->pool, m, cw, xq, quant_row_size(quant_traits(cw[0]->type)->vec_dot_type, cw[0]->cols), n,
                         cy);
        return;
    }
    /* Quantize once per run of matrices that want the same activation type,
     * and run each such run as one job: one barrier instead of one each. */
    for (int i = 0; i < m;) {
        enum qtype want = quant_traits(cw[i]->type)->vec_dot_type;
        int j = i + 1;
        while (j < m && quant_traits(cw[j]->type)->vec_dot_type == want && cw[j]->cols == cw[i]->cols) j++;
        matmul_many(c->pool, j - i, cw + i, x, n, c->act, cy + i);
        i = j;
    }
}

void dense_matmul(struct context *c, const struct matrix *w, const float *x, int n, float *y) {
    if (executor_dense(c->exec, 1, &w, &y, x, n)) matmul(c->pool, w, x, n, y, c->act);
}

void dense_matmul_preq(struct context *c, const struct matrix *w, const float *x, const void *xq, int n, float *y) {
    if (executor_dense(c->exec, 1, &w, &y, x, n))
        matmul_preq(c->pool, w, xq, quant_row_size(quant_traits(w->type)->vec_dot_type, w->cols), n, y, (size_t)w->rows);
}
