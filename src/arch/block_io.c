#include "arch/block_io.h"

#include "arch/block_norm.h"
#include "arch/block_proj.h"
#include "core/timer.h"
#include "gguf/gguf.h"
#include "model/context_impl.h"
#include "model/model_load.h"
#include "arch/tensor_names.h"

int io_bind(struct model *m, const char *final_norm) {
    struct model_hparams *hp = &m->hp;
    const struct gguf_tensor *emb = gguf_find_tensor(m->file, TN_TOKEN_EMBD);
    if (!emb) return moex_errorf("%s: tensor 'token_embd.weight' is missing", m->file->path);
    if (emb->ne[1] <= 0 || emb->ne[1] > MODEL_DIM_MAX)
        return moex_errorf("%s: tensor 'token_embd.weight' has an invalid vocabulary size", m->file->path);
    hp->n_vocab = (int)emb->ne[1];
    if (model_want_matrix(m, &m->token_embd, hp->n_embd, hp->n_vocab, TN_TOKEN_EMBD) ||
        !(m->output_norm = model_want_vector(m, hp->n_embd, "%s", final_norm)))
        return -1;
    if (!model_has_tensor(m, TN_OUTPUT)) m->output = m->token_embd; /* tied embedding */
    else if (model_want_matrix(m, &m->output, hp->n_embd, hp->n_vocab, TN_OUTPUT)) return -1;
    return model_describe_dense(m, DENSE_LM_HEAD, -1, &m->output);
}

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
    float eps = c->m->hp.rms_eps;
    if (!all_logits && c->n_runs > 1) {
        /* Several sequences: the last token of each run that wants them. */
        int rows = 0;
        for (int r = 0; r < c->n_runs; r++) {
            const struct batch_run *run = &c->runs[r];
            if (!run->logits) continue;
            rms_norm_rows(c->x + (size_t)(run->first + run->n - 1) * D, norm, c->xn + (size_t)rows * D, 1, D, eps);
            rows++;
        }
        if (rows) dense_matmul(c, head, c->xn, rows, logits);
        c->times.ns[OP_LM_HEAD] += time_ns() - t0;
        return;
    }
    int first = all_logits ? 0 : n - 1;
    rms_norm_rows(c->x + (size_t)first * D, norm, c->xn, n - first, D, eps);
    dense_matmul(c, head, c->xn, n - first, logits ? logits : c->last_logits);
    c->times.ns[OP_LM_HEAD] += time_ns() - t0;
}
