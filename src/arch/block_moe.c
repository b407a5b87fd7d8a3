#include "arch/block_moe.h"

#include "arch/block_norm.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "model/context_impl.h"
#include "model/model_load.h"
#include "moe/executor.h"
#include "moe/experts.h"
#include "arch/tensor_names.h"

#include <math.h>
#include <stdlib.h>

int moe_bind(struct model *m, struct moe_router *r, int l, int moe_index) {
    const struct model_hparams *hp = &m->hp;
    int D = hp->n_embd;
    struct moe_layer_desc *E = &m->moe_layers[moe_index];
    *E = (struct moe_layer_desc){ .layer = l, .n_expert = hp->n_expert, .n_used = hp->n_expert_used,
                                  .n_ff = hp->n_ff_exp, .n_embd = D };
    if (model_want_matrix(m, &r->gate_inp, D, hp->n_expert, TN_LAYER(TN_FFN_GATE_INP), l) ||
        model_want_experts(m, &E->gate, D, hp->n_ff_exp, hp->n_expert, TN_LAYER(TN_FFN_GATE_EXPS), l) ||
        model_want_experts(m, &E->up, D, hp->n_ff_exp, hp->n_expert, TN_LAYER(TN_FFN_UP_EXPS), l) ||
        model_want_experts(m, &E->down, hp->n_ff_exp, D, hp->n_expert, TN_LAYER(TN_FFN_DOWN_EXPS), l))
        return -1;
    return 0;
}

struct moe_block_scratch {
    float *probs;               /* (n_batch, n_expert) router logits, then probabilities */
    int32_t *ids;               /* (n_batch, top_k) */
    float *weights;             /* (n_batch, top_k) */
    struct moe_scratch *experts;
};

struct moe_block_scratch *moe_block_scratch_new(const struct moe_layer_desc *d, int n_batch) {
    struct moe_block_scratch *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    size_t B = (size_t)n_batch;
    s->probs = malloc(B * d->n_expert * 4);
    s->ids = malloc(B * d->n_used * 4);
    s->weights = malloc(B * d->n_used * 4);
    struct expert_layer shape = { NULL, NULL, NULL, d->n_expert, d->n_ff, d->n_embd };
    s->experts = moe_scratch_new(&shape, n_batch, d->n_used);
    if (!s->probs || !s->ids || !s->weights || !s->experts) {
        moe_block_scratch_free(s);
        return NULL;
    }
    return s;
}

void moe_block_scratch_free(struct moe_block_scratch *s) {
    if (!s) return;
    free(s->probs); free(s->ids); free(s->weights);
    moe_scratch_free(s->experts);
    free(s);
}

static void softmax(float *p, int n) {
    float max = -INFINITY;
    for (int e = 0; e < n; e++) if (p[e] > max) max = p[e];
    double sum = 0;
    for (int e = 0; e < n; e++) { p[e] = expf(p[e] - max); sum += p[e]; }
    float inv = (float)(1.0 / sum);
    for (int e = 0; e < n; e++) p[e] *= inv;
}

void moe_route(const struct moe_router *r, int E, int K, float *logits, int n, int32_t *all_ids, float *all_w) {
    const float *bias = r->selection_bias;
    for (int t = 0; t < n; t++) {
        float *p = logits + (size_t)t * E;
        if (r->gating == MOE_GATING_SIGMOID)
            for (int e = 0; e < E; e++) p[e] = 1.0f / (1.0f + expf(-p[e]));
        else
            softmax(p, E);
        int32_t *ids = all_ids + (size_t)t * K;
        float *w = all_w + (size_t)t * K;
        /* Top-k by p (+ bias), in one pass: a value enters the list, kept in
         * order of choice, only when it beats the last one, and goes after
         * every equal one, so the first of equal values wins (as K scans for
         * the largest not taken would choose). w holds the list's values
         * until the weights replace them. */
        float *top = w;
        int n_top = 0;
        for (int e = 0; e < E; e++) {
            const float v = bias ? p[e] + bias[e] : p[e];
            if (n_top == K && !(v > top[K - 1])) continue;
            int at = n_top < K ? n_top++ : K - 1;
            while (at > 0 && v > top[at - 1]) {
                top[at] = top[at - 1];
                ids[at] = ids[at - 1];
                at--;
            }
            top[at] = v;
            ids[at] = e;
        }
        for (int k = 0; k < K; k++) w[k] = p[ids[k]];
        if (r->renormalise) {
            float wsum = 0;
            for (int k = 0; k < K; k++) wsum += w[k];
            /* Kept off zero as llama.cpp does (the smallest normal f16):
             * sigmoid weights can all be tiny. */
            if (wsum < 6.103515625e-5f) wsum = 6.103515625e-5f;
            for (int k = 0; k < K; k++) w[k] /= wsum;
        }
        if (r->weight_scale != 0 && r->weight_scale != 1)
            for (int k = 0; k < K; k++) w[k] *= r->weight_scale;
    }
}

/* A prompt's router, split by tokens: an item quantizes its tokens' rows
 * (F32 weights read them as they are), takes their logits against every
 * expert's row and routes them, so no thread waits for another's rows and
 * the routing runs on every thread. ROUTE_ROWS expert rows at a time stay
 * in L2 while the item's tokens pass them. Decode and short batches keep
 * the matmul split by rows, which shares the weight stream. */
enum { ROUTE_TOKENS = 16, ROUTE_ROWS = 32, ROUTE_SPLIT_MIN = 64 };

struct route_job {
    const struct moe_router *r;
    float *res;         /* (n, cols) the residual rows to add `add` to and normalise into x, or NULL */
    const float *add, *norm;
    float eps;
    const float *x;
    char *xq;          /* (n, act_stride) the quantized rows, or NULL: F32 reads x */
    size_t act_stride;
    int E, K, n;
    float *probs;
    int32_t *ids;
    float *weights;
};

static void route_items(void *arg, int64_t begin, int64_t end, int thread_index) {
    (void)thread_index;
    const struct route_job *j = arg;
    const struct matrix *w = &j->r->gate_inp;
    const enum qtype act = quant_traits(w->type)->vec_dot_type;
    for (int64_t item = begin; item < end; item++) {
        const int t0 = (int)item * ROUTE_TOKENS, nt = j->n - t0 < ROUTE_TOKENS ? j->n - t0 : ROUTE_TOKENS;
        if (j->res)
            residual_norm_rows(NULL, j->res + (size_t)t0 * w->cols, j->add + (size_t)t0 * w->cols, j->norm,
                               (float *)j->x + (size_t)t0 * w->cols, nt, (int)w->cols, j->eps);
        const char *a = (const char *)(j->x + (size_t)t0 * w->cols);
        if (j->xq) {
            for (int t = t0; t < t0 + nt; t++)
                quant_quantize_act(act, j->x + (size_t)t * w->cols, j->xq + (size_t)t * j->act_stride, w->cols);
            a = j->xq + (size_t)t0 * j->act_stride;
        }
        float *p = j->probs + (size_t)t0 * j->E;
        for (int r0 = 0; r0 < j->E; r0 += ROUTE_ROWS)
            matrix_tile(w, r0, j->E - r0 < ROUTE_ROWS ? j->E - r0 : ROUTE_ROWS, a, j->act_stride, nt, p + r0,
                        (size_t)j->E);
        moe_route(j->r, j->E, j->K, p, nt, j->ids + (size_t)t0 * j->K, j->weights + (size_t)t0 * j->K);
    }
}

static void route(struct context *c, const struct moe_router *r, const struct moe_layer_desc *d,
                  struct moe_block_scratch *s, const struct route_job *norm_of, float *xn, int n) {
    const struct matrix *w = &r->gate_inp;
    if (n < ROUTE_SPLIT_MIN || threadpool_size(c->pool) < 2) {
        if (norm_of->res)
            residual_norm_rows(c->pool, norm_of->res, norm_of->add, norm_of->norm, xn, n, (int)w->cols, norm_of->eps);
        matmul(c->pool, w, xn, n, s->probs, c->act);
        moe_route(r, d->n_expert, d->n_used, s->probs, n, s->ids, s->weights);
        return;
    }
    const enum qtype act = quant_traits(w->type)->vec_dot_type;
    const bool as_is = act == QT_F32 && w->type == QT_F32;
    struct route_job job = { r, norm_of->res, norm_of->add, norm_of->norm, norm_of->eps, xn, as_is ? NULL : c->act,
                             as_is ? (size_t)w->cols * sizeof(float) : quant_row_size(act, w->cols),
                             d->n_expert, d->n_used, n, s->probs, s->ids, s->weights };
    threadpool_parallel_for(c->pool, (n + ROUTE_TOKENS - 1) / ROUTE_TOKENS, 1, route_items, &job);
}

void moe_ffn(struct context *c, const struct moe_router *r, int moe_layer, struct moe_block_scratch *s, const float *xn,
             int n, float *out) {
    moe_ffn_norm(c, r, moe_layer, s, NULL, NULL, NULL, 0, (float *)xn, n, out);
}

void moe_ffn_norm(struct context *c, const struct moe_router *r, int moe_layer, struct moe_block_scratch *s, float *x,
                  const float *add, const float *norm, float eps, float *xn, int n, float *out) {
    const struct moe_layer_desc *d = &c->m->moe.layers[moe_layer];
    int64_t t0 = time_ns();
    const struct route_job norm_of = { .res = x, .add = add, .norm = norm, .eps = eps };
    route(c, r, d, s, &norm_of, xn, n);
    if (c->on_route) c->on_route(c->route_user, moe_layer, n, d->n_used, s->ids, s->weights);
    int64_t t1 = time_ns();
    moe_executor_run(c->exec, moe_layer, s->experts, xn, n, s->ids, s->weights, out);
    int64_t t2 = time_ns();
    c->times.ns[OP_ROUTER] += t1 - t0;
    c->times.ns[OP_EXPERTS] += t2 - t1;
}
