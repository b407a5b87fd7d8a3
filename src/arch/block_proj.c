#include "arch/block_proj.h"

#include "model/context_impl.h"

void project_rows(struct context *c, const struct matrix *const *w, float *const *y, int k, const float *x, int n) {
    enum qtype act_type = QT_MAX;
    size_t act_stride = 0;
    for (int i = 0; i < k; i++) {
        enum qtype want = quant_traits(w[i]->type)->vec_dot_type;
        if (want != act_type) {
            act_stride = quantize_rows(c->pool, w[i]->type, x, n, w[i]->cols, c->act, 0);
            act_type = want;
        }
        matmul_preq(c->pool, w[i], c->act, act_stride, n, y[i], (size_t)w[i]->rows);
    }
}
