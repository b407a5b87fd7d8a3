#include "arch/block_proj.h"

#include "model/context_impl.h"

void project_rows(struct context *c, const struct matrix *const *w, float *const *y, int k, const float *x, int n) {
    /* Quantize once per run of matrices that want the same activation type,
     * and run each such run as one job: one barrier instead of one each. */
    for (int i = 0; i < k;) {
        enum qtype want = quant_traits(w[i]->type)->vec_dot_type;
        int j = i + 1;
        while (j < k && quant_traits(w[j]->type)->vec_dot_type == want && w[j]->cols == w[i]->cols) j++;
        size_t act_stride = quantize_rows(c->pool, w[i]->type, x, n, w[i]->cols, c->act, 0);
        matmul_preq_many(c->pool, j - i, w + i, c->act, act_stride, n, y + i);
        i = j;
    }
}
