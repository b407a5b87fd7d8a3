#include "arch/block_moe.h"

#include "core/timer.h"
#include "model/context_impl.h"
#include "model/model_load.h"
#include "moe/executor.h"
#include "moe/experts.h"

#include <math.h>
#include <stdlib.h>

int moe_bind(struct model *m, struct moe_router *r, int l, int moe_index) {
    const struct model_hparams *hp = &m->hp;
    int D = hp->n_embd;
    struct moe_layer_desc *E = &m->moe_layers[moe_index];
    *E = (struct moe_layer_desc){ .layer = l, .n_expert = hp->n_expert, .n_used = hp->n_expert_used,
                                  .n_ff = hp->n_ff_exp, .n_embd = D };
    if (model_want_matrix(m, &r->gate_inp, D, hp->n_expert, "blk.%d.ffn_gate_inp.weight", l) ||
        model_want_experts(m, &E->gate, D, hp->n_ff_exp, hp->n_expert, "blk.%d.ffn_gate_exps.weight", l) ||
        model_want_experts(m, &E->up, D, hp->n_ff_exp, hp->n_expert, "blk.%d.ffn_up_exps.weight", l) ||
        model_want_experts(m, &E->down, hp->n_ff_exp, D, hp->n_expert, "blk.%d.ffn_down_exps.weight", l))
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
        /* Top-k by p (+ bias): the first of equal values wins. */
        for (int k = 0; k < K; k++) {
            int best = -1;
            float best_v = 0;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int j = 0; j < k; j++) taken |= ids[j] == e;
                float v = bias ? p[e] + bias[e] : p[e];
                if (!taken && (best < 0 || v > best_v)) { best = e; best_v = v; }
            }
            ids[k] = best;
            w[k] = p[best];
        }
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

void moe_ffn(struct context *c, const struct moe_router *r, int moe_layer, struct moe_block_scratch *s, const float *xn,
             int n, float *out) {
    const struct moe_layer_desc *d = &c->m->moe.layers[moe_layer];
    int64_t t0 = time_ns();
    matmul(c->pool, &r->gate_inp, xn, n, s->probs, c->act);
    moe_route(r, d->n_expert, d->n_used, s->probs, n, s->ids, s->weights);
    if (c->on_route) c->on_route(c->route_user, moe_layer, n, d->n_used, s->ids, s->weights);
    int64_t t1 = time_ns();
    moe_executor_run(c->exec, moe_layer, s->experts, xn, n, s->ids, s->weights, out);
    int64_t t2 = time_ns();
    c->times.router += t1 - t0;
    c->times.experts += t2 - t1;
}
