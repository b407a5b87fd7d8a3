#include "arch/block_io.h"

#include "arch/block_norm.h"
#include "core/timer.h"
#include "model/context_impl.h"

void embed_tokens(const struct matrix *embd, const int32_t *tokens, int n, float *x) {
    const struct qtype_traits *tr = quant_traits(embd->type);
    for (int t = 0; t < n; t++)
        tr->to_float((const char *)embd->data + (size_t)tokens[t] * embd->row_bytes, x + (size_t)t * embd->cols,
                     embd->cols);
}

void output_head(struct context *c, const float *norm, const struct matrix *head, int n, float *logits,
                 bool all_logits) {
    if (all_logits && !logits) return; /* no logits wanted */
    int64_t t0 = time_ns();
    int D = c->m->hp.n_embd;
    int first = all_logits ? 0 : n - 1;
    rms_norm_rows(c->x + (size_t)first * D, norm, c->xn, n - first, D, c->m->hp.rms_eps);
    matmul(c->pool, head, c->xn, n - first, logits ? logits : c->last_logits, c->act);
    c->times.lm_head += time_ns() - t0;
}
