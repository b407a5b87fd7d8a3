/* Routing statistics for the public API: a recorder on a context's route
 * observer (src/moe/routing_stats.h), tied to the model's GGUF by hash. */
#include "api/api_impl.h"

#include "core/atomic_file.h"
#include "gguf/gguf.h"
#include "moe/routing_stats.h"
#include "pack/packfile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct moex_routing {
    moex_context *c;
    struct routing_stats *st;
};

moex_routing *moex_routing_new(moex_context *c) {
    API_CHECK(c, NULL);
    const struct model *m = c->m->model;
    struct packfile_identity id;
    if (packfile_model_identity(m->file, &id) != PACKFILE_OK) return NULL;
    moex_routing *r = calloc(1, sizeof *r);
    if (!r) return moex_errorf("out of memory"), NULL;
    if (!(r->st = routing_stats_new(m->moe.n_layers, m->hp.n_expert, m->hp.n_expert_used, m->name))) {
        free(r);
        return NULL;
    }
    r->st->model_hash = id.hash;
    r->st->model_size = id.gguf_size;
    r->c = c;
    context_set_route_observer(c->ctx, routing_stats_observe, r->st);
    return r;
}

void moex_routing_free(moex_routing *r) {
    if (!r) return;
    context_set_route_observer(r->c->ctx, NULL, NULL);
    routing_stats_free(r->st);
    free(r);
}

void moex_routing_begin_sequence(moex_routing *r) {
    API_CHECK_VOID(r);
    routing_stats_begin_sequence(r->st);
}

void moex_routing_set_half(moex_routing *r, int half) {
    API_CHECK_VOID(r);
    routing_stats_set_phase(r->st, half != 0);
}

int moex_routing_write(const moex_routing *r, moex_file *f) {
    API_CHECK(f, -1);
    if (!r) {
        atomic_file_discard((struct atomic_file *)f);
        return api_null(__func__, "r");
    }
    return routing_stats_write_file(r->st, (struct atomic_file *)f);
}

static void report(FILE *out, const struct model *m, const struct routing_stats *st) {
    fprintf(out, "routing of %s: %llu tokens in %llu sequences, %d experts, top-%d\n", m->name,
            (unsigned long long)st->n_tokens, (unsigned long long)st->n_sequences, st->n_expert, st->top_k);
    float skew;
    if (gguf_get_f32(m->file, "moex.synth.skew", &skew) == 0)
        fprintf(out, "synthetic: skew %.3g asks for a top-10%% share of %.3f\n", skew,
                routing_zipf_top10_share(st->n_expert, st->top_k, skew));
    fprintf(out, "%5s %12s %8s %8s %8s %8s %9s %9s\n", "layer", "rows", "top10%", "entropy", "H/Hmax", "next",
            "within8", "hot 1st/2nd");
    struct routing_layer_summary sum, mean;
    memset(&mean, 0, sizeof mean);
    for (int l = 0; l < st->n_layers; l++) {
        routing_stats_summarize(st, l, &sum);
        fprintf(out, "%5d %12llu %8.3f %8.2f %8.3f %8.3f %9.3f %5.2f/%.2f\n", l, (unsigned long long)sum.rows,
                sum.top10_share, sum.entropy, sum.entropy_norm, sum.repeat_next, sum.repeat_window, sum.hot_own,
                sum.hot_other);
        mean.top10_share += sum.top10_share / st->n_layers;
        mean.entropy += sum.entropy / st->n_layers;
        mean.entropy_norm += sum.entropy_norm / st->n_layers;
        mean.repeat_next += sum.repeat_next / st->n_layers;
        mean.repeat_window += sum.repeat_window / st->n_layers;
        mean.hot_own += sum.hot_own / st->n_layers;
        mean.hot_other += sum.hot_other / st->n_layers;
    }
    fprintf(out, "%5s %12s %8.3f %8.2f %8.3f %8.3f %9.3f %5.2f/%.2f\n", "mean", "", mean.top10_share, mean.entropy,
            mean.entropy_norm, mean.repeat_next, mean.repeat_window, mean.hot_own, mean.hot_other);
    fprintf(out, "(top10%%: share of routed rows taken by the top %d experts; next / within8: share of a token's\n"
                 " experts also chosen by the previous token / one of the previous %d; hot 1st/2nd: share of\n"
                 " each half's rows taken by the first half's top %d experts)\n",
            routing_top10_count(st->n_expert), ROUTING_WINDOW, st->n_expert / 4 > 0 ? st->n_expert / 4 : 1);
}

char *moex_routing_report(const moex_routing *r) {
    API_CHECK(r, NULL);
    struct api_text t;
    FILE *out = api_text_open(&t);
    if (out) report(out, r->c->m->model, r->st);
    return api_text_close(&t, true);
}
