/* Embeddings: the mean over a text's tokens of the model's final hidden
 * state (the residual stream after the output norm, the lm head's input),
 * L2-normalised. These are generative models, not trained for retrieval:
 * the vectors are what the model's last layer holds, no more. */
#include "api/api_impl.h"

#include "model/context_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int moex_model_n_embd(const moex_model *m) {
    API_CHECK(m, -1);
    return m->model->hp.n_embd;
}

int moex_embed(moex_context *c, const int32_t *tokens, int n, float *out) {
    API_CHECK(c, -1);
    API_CHECK(tokens, -1);
    API_CHECK(out, -1);
    if (n <= 0) return moex_errorf("moex_embed: no tokens");
    int D = c->m->model->hp.n_embd;
    float *sum = calloc((size_t)D, sizeof *sum);
    if (!sum) return moex_errorf("out of memory");
    moex_truncate(c, 0);
    c->n_tokens = 0;
    c->ctx->hidden_sum = sum;
    int rc = context_eval(c->ctx, tokens, n, NULL, true);
    c->ctx->hidden_sum = NULL;
    context_truncate(c->ctx, 0); /* the context is left empty: its logits are no text's */
    c->n_tokens = 0;
    c->have_logits = false;
    if (rc) { free(sum); return -1; }
    double norm = 0;
    for (int d = 0; d < D; d++) {
        sum[d] /= (float)n;
        norm += (double)sum[d] * sum[d];
    }
    float scale = norm > 0 ? (float)(1.0 / sqrt(norm)) : 0.0f;
    for (int d = 0; d < D; d++) out[d] = sum[d] * scale;
    free(sum);
    return 0;
}
