/* The routing of synthetic models, measured through moex's own forward pass
 * as `moex profile` does: the top-10% share follows the requested Zipf law
 * (within 10%), --skew 0 is near uniform, and the default locality lands
 * within 10 points of Qwen3-30B-A3B's published 45% next-token and 80%
 * within-8-tokens repeat rates. Shapes: Qwen3-30B-A3B's routing (128
 * experts, top-8) on a small model. */
#include "harness.h"

#include "core/error.h"
#include "model/model.h"
#include "synth/synth.h"
#include "moe/routing_stats.h"
#include "text/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define SEQ_LEN 512
#define N_SEQ 8

struct measured {
    double top10, entropy_norm, repeat_next, repeat_window;
};

static int profile(const struct synth_params *p, const char *name, struct measured *out) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir(), name);
    if (synth_write(p, path)) { fprintf(stderr, "%s: %s\n", name, moex_error()); return -1; }
    struct model *m = model_load(path);
    if (!m) { fprintf(stderr, "%s: %s\n", name, moex_error()); return -1; }
    struct context_params cp = { .n_ctx = SEQ_LEN, .n_batch = SEQ_LEN, .kv_type = KV_F32 };
    struct context *c = context_new(m, &cp);
    struct routing_stats *s = routing_stats_new(m->moe.n_layers, m->hp.n_expert, m->hp.n_expert_used, name);
    int32_t *ids = malloc(SEQ_LEN * sizeof *ids);
    int rc = c && s && ids ? 0 : -1;
    if (rc == 0) context_set_route_observer(c, routing_stats_observe, s);
    uint64_t x = 12345;
    for (int q = 0; q < N_SEQ && rc == 0; q++) {
        /* random normal tokens, as `moex profile -n` uses */
        for (int i = 0; i < SEQ_LEN; i++) {
            int32_t id;
            do {
                x = x * 6364136223846793005ULL + 1442695040888963407ULL;
                id = (int32_t)((x >> 33) % (uint64_t)m->hp.n_vocab);
            } while (tokenizer_token_type(m->tok, id) != TOKEN_NORMAL);
            ids[i] = id;
        }
        context_truncate(c, 0);
        routing_stats_begin_sequence(s);
        routing_stats_set_phase(s, q >= N_SEQ / 2);
        rc = context_eval(c, ids, SEQ_LEN, NULL, false);
    }
    if (rc == 0) {
        *out = (struct measured){ 0 };
        for (int l = 0; l < s->n_layers; l++) {
            struct routing_layer_summary sum;
            routing_stats_summarize(s, l, &sum);
            out->top10 += sum.top10_share / s->n_layers;
            out->entropy_norm += sum.entropy_norm / s->n_layers;
            out->repeat_next += sum.repeat_next / s->n_layers;
            out->repeat_window += sum.repeat_window / s->n_layers;
        }
        fprintf(stderr, "%s: top10 %.3f (zipf %.3f) H/Hmax %.3f next %.3f within8 %.3f\n", name, out->top10,
                routing_zipf_top10_share(128, 8, p->skew), out->entropy_norm, out->repeat_next, out->repeat_window);
    } else {
        fprintf(stderr, "%s: %s\n", name, moex_error());
    }
    free(ids);
    routing_stats_free(s);
    context_free(c);
    model_free(m);
    remove(path);
    return rc;
}

static void base_params(struct synth_params *p) {
    synth_preset("tiny", p);
    p->n_expert = 128;
    p->n_expert_used = 8;
    p->n_ff_exp = 64; /* experts' size does not enter the routing */
    p->n_layers = 2;
}

int main(void) {
    struct synth_params p;
    struct measured m;

    base_params(&p);
    CHECK(profile(&p, "route-default.gguf", &m) == 0);
    double zipf = routing_zipf_top10_share(128, 8, p.skew);
    CHECKF(fabs(m.top10 / zipf - 1) <= 0.10, "top-10%% share %.3f, Zipf %.3f", m.top10, zipf);
    CHECKF(fabs(m.repeat_next - 0.45) <= 0.10, "next-token repeat %.3f", m.repeat_next);
    CHECKF(fabs(m.repeat_window - 0.80) <= 0.10, "within-8 repeat %.3f", m.repeat_window);

    base_params(&p);
    p.skew = 1.0;
    CHECK(profile(&p, "route-skew1.gguf", &m) == 0);
    zipf = routing_zipf_top10_share(128, 8, p.skew);
    CHECKF(fabs(m.top10 / zipf - 1) <= 0.10, "skew 1: top-10%% share %.3f, Zipf %.3f", m.top10, zipf);

    /* Uniform: the entropy is that of a uniform law; the top 10% of counts
     * sit a little above 10% only by sampling noise. */
    base_params(&p);
    p.skew = 0;
    CHECK(profile(&p, "route-uniform.gguf", &m) == 0);
    CHECKF(m.entropy_norm >= 0.99, "skew 0: H/Hmax %.4f", m.entropy_norm);
    CHECKF(m.top10 < 0.17, "skew 0: top-10%% share %.3f", m.top10);

    /* Locality is the knob it claims to be: without it, the next token's
     * experts repeat hardly more than the skew alone makes them. */
    base_params(&p);
    p.locality = 0;
    CHECK(profile(&p, "route-local0.gguf", &m) == 0);
    CHECKF(m.repeat_next < 0.2, "locality 0: next-token repeat %.3f", m.repeat_next);
    return test_finish();
}
