#include "arch/block_ffn.h"

#include "arch/block_proj.h"
#include "model/context_impl.h"
#include "moe/executor.h"
#include "model/model_load.h"

#include <math.h>
#include <stdlib.h>

struct ffn_scratch {
    float *gate, *up;                  /* (n_batch, n_ff) */
};

int ffn_describe(struct model *m, const struct ffn_weights *w, enum dense_kind kind, int l) {
    return model_describe_dense(m, kind, l, &w->gate) || model_describe_dense(m, kind, l, &w->up) ||
                   model_describe_dense(m, kind, l, &w->down)
               ? -1
               : 0;
}

struct ffn_scratch *ffn_scratch_new(int n_ff, int n_batch) {
    struct ffn_scratch *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->gate = malloc((size_t)n_batch * n_ff * sizeof(float));
    s->up = malloc((size_t)n_batch * n_ff * sizeof(float));
    if (!s->gate || !s->up) {
        ffn_scratch_free(s);
        return NULL;
    }
    return s;
}

void ffn_scratch_free(struct ffn_scratch *s) {
    if (!s) return;
    free(s->gate);
    free(s->up);
    free(s);
}

void ffn_swiglu(struct context *c, const struct ffn_weights *w, struct ffn_scratch *s, const float *xn, int n,
                float *out) {
    int64_t n_ff = w->gate.rows, D = w->gate.cols;
    const struct matrix *gate_up[2] = { &w->gate, &w->up };
    float *gate_up_out[2] = { s->gate, s->up };
    unsigned left = executor_dense(c->exec, 2, gate_up, gate_up_out, xn, n);
    /* gate and up read the same input: quantized once when their types
     * want the same activation type. */
    size_t stride = 0;
    if (left & 1) {
        stride = quantize_rows(c->pool, w->gate.type, xn, n, D, c->act, 0);
        matmul_preq(c->pool, &w->gate, c->act, stride, n, s->gate, (size_t)n_ff);
    }
    if (left & 2) {
        if (!(left & 1) || quant_traits(w->up.type)->vec_dot_type != quant_traits(w->gate.type)->vec_dot_type)
            stride = quantize_rows(c->pool, w->up.type, xn, n, D, c->act, 0);
        matmul_preq(c->pool, &w->up, c->act, stride, n, s->up, (size_t)n_ff);
    }
    for (int64_t i = 0; i < (int64_t)n * n_ff; i++) {
        float g = s->gate[i];
        s->gate[i] = g / (1.0f + expf(-g)) * s->up[i];
    }
    dense_matmul(c, &w->down, s->gate, n, out);
}
