/* Expert cache policies on a recorded routing trace: LRU (what the executor
 * runs) against Belady's offline optimum, with and without a pinned core
 * from the first half's statistics, at several cache sizes. The trace is
 * decode-shaped: one token per step, each layer's top-k experts.
 *   bench_cache MODEL [tokens] [threads]
 * Prints a markdown table of hit rates (accesses = expert uses). */
#include "core/error.h"
#include "core/threadpool.h"
#include "model/model.h"
#include "moe/expert_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct recorder {
    int n_expert;
    int32_t *keys;
    int64_t n, cap;
};

static void record(void *user, int layer, int n_tokens, int top_k, const int32_t *ids, const float *w) {
    (void)w;
    struct recorder *r = user;
    for (int i = 0; i < n_tokens * top_k; i++) {
        if (r->n == r->cap) {
            r->cap = r->cap ? r->cap * 2 : 4096;
            r->keys = realloc(r->keys, sizeof *r->keys * (size_t)r->cap);
            if (!r->keys) exit(1);
        }
        r->keys[r->n++] = layer * r->n_expert + ids[i];
    }
}

static int by_count_desc(const void *a, const void *b) {
    const int64_t *x = a, *y = b;
    return (x[0] < y[0]) - (x[0] > y[0]);
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: bench_cache MODEL [tokens] [threads]\n"); return 2; }
    int n_tokens = argc > 2 ? atoi(argv[2]) : 1024;
    struct model *m = model_load(argv[1]);
    if (!m) { fprintf(stderr, "%s\n", moex_error()); return 1; }
    struct threadpool *pool = threadpool_new(argc > 3 ? atoi(argv[3]) : 0, true);
    struct context_params cp = { n_tokens + 1, 1, KV_F16, pool, NULL, NULL };
    struct context *c = context_new(m, &cp);
    if (!c) { fprintf(stderr, "%s\n", moex_error()); return 1; }
    struct recorder rec = { m->hp.n_expert, NULL, 0, 0 };
    context_set_route_observer(c, record, &rec);
    /* Greedy generation from a fixed start: the model's own sequence. */
    float *logits = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
    int32_t tok = 1;
    for (int t = 0; t < n_tokens; t++) {
        if (context_eval(c, &tok, 1, logits, false) != 0) { fprintf(stderr, "%s\n", moex_error()); return 1; }
        int32_t best = 0;
        for (int i = 1; i < m->hp.n_vocab; i++) if (logits[i] > logits[best]) best = i;
        tok = best;
    }
    int L = m->moe.n_layers, E = m->hp.n_expert, K = m->hp.n_expert_used, keys_total = L * E;
    /* One batch per token (all its layers), as the executor's cache sees decode. */
    int64_t per_token = (int64_t)L * K, n_batches = rec.n / per_token;
    int64_t *starts = malloc(sizeof *starts * (size_t)(n_batches + 1));
    for (int64_t b = 0; b <= n_batches; b++) starts[b] = b * per_token;
    /* The pinned core: the most used experts of the first half. */
    int64_t (*counts)[2] = calloc((size_t)keys_total, sizeof *counts);
    for (int k = 0; k < keys_total; k++) counts[k][1] = k;
    for (int64_t i = 0; i < starts[n_batches / 2]; i++) counts[rec.keys[i]][0]++;
    qsort(counts, (size_t)keys_total, sizeof *counts, by_count_desc);
    int32_t *pinned = malloc(sizeof *pinned * (size_t)keys_total);
    for (int k = 0; k < keys_total; k++) pinned[k] = (int32_t)counts[k][1];
    int64_t half = n_batches / 2;
    printf("trace: %d tokens greedy from token 1, %d layers x %d experts, top-%d (%lld expert uses); "
           "hit rates on the second half\n\n", n_tokens, L, E, K, (long long)(n_batches - half) * per_token);
    printf("| cache (share of experts) | LRU | Belady | static top (first half) | 25%% pinned + LRU tail | Belady / LRU misses |\n");
    printf("|---:|---:|---:|---:|---:|---:|\n");
    static const double shares[] = { 0.10, 0.25, 0.40, 0.60 };
    for (size_t i = 0; i < sizeof shares / sizeof shares[0]; i++) {
        int cap = (int)(shares[i] * keys_total);
        /* Simulate the whole trace, count the second half: warm caches. */
        struct cache_sim_result all = cache_simulate(rec.keys, starts, n_batches, keys_total, cap, NULL, 0);
        struct cache_sim_result first = cache_simulate(rec.keys, starts, half, keys_total, cap, NULL, 0);
        struct cache_sim_result stat = cache_simulate(rec.keys + starts[half], starts, n_batches - half, keys_total,
                                                      cap, pinned, cap);
        int n_pin = cap / 4;
        struct cache_sim_result mix = cache_simulate(rec.keys, starts, n_batches, keys_total, cap, pinned, n_pin);
        struct cache_sim_result mix1 = cache_simulate(rec.keys, starts, half, keys_total, cap, pinned, n_pin);
        double acc = (double)(all.accesses - first.accesses);
        double lru = (all.lru_hits - first.lru_hits) / acc, opt = (all.belady_hits - first.belady_hits) / acc;
        double st = (double)stat.belady_hits / (double)stat.accesses; /* all-pinned: every policy hits the pins only */
        double mx = (mix.lru_hits - mix1.lru_hits) / acc;
        printf("| %d (%.0f%%) | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %.2f |\n", cap, shares[i] * 100, 100 * lru,
               100 * opt, 100 * st, 100 * mx, (1 - opt) / (1 - lru));
    }
    free(starts); free(counts); free(pinned); free(rec.keys); free(logits);
    context_free(c);
    threadpool_free(pool);
    model_free(m);
    return 0;
}
