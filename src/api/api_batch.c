/* Several sequences in one context for the public API: batches that mix
 * sequences, and each sequence's logits, tokens, truncation and sampling.
 * Sequence 0 is the one the single-sequence functions use (the context's
 * own logits and tokens); the others live here. */
#include "api/api_impl.h"

#include "model/context.h"

#include <stdlib.h>
#include <string.h>

struct api_seq {
    float *logits;                     /* (n_vocab) of its last evaluated token */
    bool have_logits;
    int32_t *tokens;                   /* (cap) what the sequence holds, n_tokens of them */
    int n_tokens;
};

/* A sequence's fields, wherever they live. */
struct seq_view {
    float *logits;
    bool *have_logits;
    int32_t *tokens;
    int *n_tokens;
};

static bool seq_ok(const moex_context *c, int seq) {
    if (seq >= 0 && seq < context_n_seq(c->ctx)) return true;
    moex_errorf("sequence %d is out of range (%d sequences)", seq, context_n_seq(c->ctx));
    return false;
}

static struct seq_view view(const moex_context *c, int seq) {
    if (seq == 0) return (struct seq_view){ c->logits, (bool *)&c->have_logits, c->tokens, (int *)&c->n_tokens };
    struct api_seq *q = &c->seqs[seq - 1];
    return (struct seq_view){ q->logits, &q->have_logits, q->tokens, &q->n_tokens };
}

void api_seqs_free(moex_context *c) {
    if (!c->seqs) return;
    for (int s = 1; s < context_n_seq(c->ctx); s++) {
        free(c->seqs[s - 1].logits);
        free(c->seqs[s - 1].tokens);
    }
    free(c->seqs);
    c->seqs = NULL;
}

moex_context *moex_context_new_seqs(moex_model *m, const struct moex_context_params *p, int n_seq) {
    API_CHECK(m, NULL);
    moex_context *c = api_context_new(m, p, n_seq);
    if (!c || n_seq == 1) return c;
    size_t V = (size_t)m->model->hp.n_vocab;
    if (!(c->seqs = calloc((size_t)n_seq - 1, sizeof *c->seqs))) goto oom;
    for (int s = 0; s < n_seq - 1; s++)
        if (!(c->seqs[s].logits = malloc(V * sizeof(float))) ||
            !(c->seqs[s].tokens = malloc(sizeof(int32_t) * (size_t)c->cap)))
            goto oom;
    return c;
oom:
    moex_context_free(c);
    return moex_errorf("out of memory"), NULL;
}

int moex_n_seq(const moex_context *c) {
    API_CHECK(c, -1);
    return context_n_seq(c->ctx);
}

/* The sequences of a batch that fails keep what they held before it
 * (past[s]), without logits: the rule of moex_eval. */
static void batch_failed(moex_context *c, const bool *in_batch, const int *past) {
    for (int s = 0; s < context_n_seq(c->ctx); s++) {
        if (!in_batch[s]) continue;
        struct seq_view v = view(c, s);
        if (context_seq_n_past(c->ctx, s) > past[s]) context_seq_truncate(c->ctx, s, past[s]);
        if (*v.n_tokens > past[s]) *v.n_tokens = past[s];
        *v.have_logits = false;
    }
}

static int eval_batch(moex_context *c, const int32_t *tokens, const int32_t *seq_ids, int n) {
    if (n < 0) return moex_errorf("%d tokens to evaluate: a count cannot be negative", n);
    if (n == 0) return 0;
    if (!tokens) return api_null("moex_eval_batch", "tokens");
    if (!seq_ids) return api_null("moex_eval_batch", "seq_ids");
    int n_seq = context_n_seq(c->ctx);
    for (int i = 0; i < n; i++)
        if (!seq_ok(c, seq_ids[i])) return -1;
    /* The destinations of the sequences in the batch; whether each one's
     * tokens are known from the start (then the batch's are appended). */
    float **logits = malloc(sizeof *logits * (size_t)n_seq);
    bool *known = calloc((size_t)n_seq, sizeof *known), *in_batch = calloc((size_t)n_seq, sizeof *in_batch);
    int *past = calloc((size_t)n_seq, sizeof *past);
    int rc = -1;
    if (!logits || !known || !in_batch || !past) { moex_errorf("out of memory"); goto done; }
    for (int s = 0; s < n_seq; s++) {
        struct seq_view v = view(c, s);
        logits[s] = v.logits;
    }
    for (int i = 0; i < n; i++) {
        int s = seq_ids[i];
        if (in_batch[s]) continue;
        struct seq_view v = view(c, s);
        in_batch[s] = true;
        past[s] = context_seq_n_past(c->ctx, s);
        known[s] = *v.n_tokens == past[s];
        *v.have_logits = false;
    }
    if (api_threads_take(c->m, "moex_eval_batch")) {
        batch_failed(c, in_batch, past);
        goto done;
    }
    int evaluated = context_eval_seqs(c->ctx, tokens, seq_ids, n, logits);
    api_threads_give(c->m);
    if (evaluated != 0) {
        batch_failed(c, in_batch, past);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        struct seq_view v = view(c, seq_ids[i]);
        if (known[seq_ids[i]]) v.tokens[(*v.n_tokens)++] = tokens[i];
    }
    for (int s = 0; s < n_seq; s++)
        if (in_batch[s]) *view(c, s).have_logits = true;
    c->evaluated += (uint64_t)n;
    rc = 0;
done:
    free(logits);
    free(known);
    free(in_batch);
    free(past);
    return rc;
}

int moex_eval_batch(moex_context *c, const int32_t *tokens, const int32_t *seq_ids, int n) {
    if (api_enter(c, __func__)) return -1;
    int rc = eval_batch(c, tokens, seq_ids, n);
    api_leave(c);
    return rc;
}

const float *moex_seq_logits(const moex_context *c, int seq) {
    API_CHECK(c, NULL);
    if (!seq_ok(c, seq)) return NULL;
    struct seq_view v = view(c, seq);
    return *v.have_logits ? v.logits : NULL;
}

int moex_seq_n_past(const moex_context *c, int seq) {
    API_CHECK(c, -1);
    return seq_ok(c, seq) ? context_seq_n_past(c->ctx, seq) : -1;
}

int moex_seq_shared_prefix(const moex_context *c, int seq, const int32_t *tokens, int n) {
    API_CHECK(c, -1);
    if (!tokens && n > 0) return api_null(__func__, "tokens");
    if (!seq_ok(c, seq)) return -1;
    struct seq_view v = view(c, seq);
    int past = context_seq_n_past(c->ctx, seq), keep = 0, held = *v.n_tokens < past ? *v.n_tokens : past;
    while (keep < held && keep < n && v.tokens[keep] == tokens[keep]) keep++;
    return keep;
}

void moex_seq_truncate(moex_context *c, int seq, int n_past) {
    if (api_enter(c, __func__)) return;
    if (n_past < 0) n_past = 0;
    if (seq_ok(c, seq) && n_past < context_seq_n_past(c->ctx, seq)) {
        struct seq_view v = view(c, seq);
        context_seq_truncate(c->ctx, seq, n_past);
        if (*v.n_tokens > n_past) *v.n_tokens = n_past;
        *v.have_logits = false;
    }
    api_leave(c);
}

int moex_seq_copy(moex_context *c, int src, int dst) {
    if (api_enter(c, __func__)) return -1;
    int rc = -1;
    if (seq_ok(c, src) && seq_ok(c, dst)) {
        rc = context_seq_copy(c->ctx, src, dst);
        struct seq_view s = view(c, src), d = view(c, dst);
        if (rc == 0 && src != dst) {
            memcpy(d.logits, s.logits, sizeof(float) * (size_t)moex_model_n_vocab(c->m));
            *d.have_logits = *s.have_logits;
            memcpy(d.tokens, s.tokens, sizeof(int32_t) * (size_t)*s.n_tokens);
            *d.n_tokens = *s.n_tokens;
        }
    }
    api_leave(c);
    return rc;
}

void moex_seq_checkpoint(moex_context *c, int seq) {
    if (api_enter(c, __func__)) return;
    if (seq_ok(c, seq)) context_seq_checkpoint(c->ctx, seq);
    api_leave(c);
}

int32_t moex_sample_seq(moex_sampler *s, const moex_context *c, int seq) {
    API_CHECK(s, -1);
    if (api_enter(c, __func__)) return -1;
    const float *logits = moex_seq_logits(c, seq);
    int32_t id = logits ? api_sample(s, (float *)logits)
                        : moex_errorf("moex_sample_seq: sequence %d has no logits yet", seq);
    api_leave(c);
    return id;
}
