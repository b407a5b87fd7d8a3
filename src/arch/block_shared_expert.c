#include "arch/block_shared_expert.h"

#include "core/timer.h"
#include "model/context_impl.h"

#include <math.h>
#include <stdlib.h>

struct shared_expert_scratch {
    struct ffn_scratch *ffn;
    float *y;                          /* (n_batch, n_embd) the FFN's output */
    float *gate;                       /* (n_batch) */
};

struct shared_expert_scratch *shared_expert_scratch_new(int n_ff, int n_embd, int n_batch) {
    struct shared_expert_scratch *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->ffn = ffn_scratch_new(n_ff, n_batch);
    s->y = malloc((size_t)n_batch * n_embd * sizeof *s->y);
    s->gate = malloc((size_t)n_batch * sizeof *s->gate);
    if (!s->ffn || !s->y || !s->gate) {
        shared_expert_scratch_free(s);
        return NULL;
    }
    return s;
}

void shared_expert_scratch_free(struct shared_expert_scratch *s) {
    if (!s) return;
    ffn_scratch_free(s->ffn);
    free(s->y);
    free(s->gate);
    free(s);
}

void shared_expert_add(struct context *c, const struct shared_expert *w, struct shared_expert_scratch *s,
                       const float *xn, int n, float *out) {
    int64_t t0 = time_ns();
    int D = (int)w->ffn.down.rows;
    ffn_swiglu(c, &w->ffn, s->ffn, xn, n, s->y);
    matmul(c->pool, &w->gate_inp, xn, n, s->gate, c->act);
    for (int t = 0; t < n; t++) {
        float g = 1.0f / (1.0f + expf(-s->gate[t]));
        const float *y = s->y + (size_t)t * D;
        float *o = out + (size_t)t * D;
        for (int i = 0; i < D; i++) o[i] += g * y[i];
    }
    c->times.ns[OP_EXPERTS] += time_ns() - t0;
}
