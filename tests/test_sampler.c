#include "harness.h"

#include "text/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void fill(float *v, int n, unsigned seed) {
    srand(seed);
    for (int i = 0; i < n; i++) v[i] = (float)rand() / (float)RAND_MAX * 10.0f - 5.0f;
}

static void test_sampler(void) {
    enum { V = 1000 };
    float logits[V], copy[V];
    fill(logits, V, 1);
    int32_t best = argmax(logits, V);
    struct moex_sampler_params p;
    sampler_defaults(&p);

    p.temperature = 0; /* greedy */
    struct sampler *s = sampler_new(&p, V);
    memcpy(copy, logits, sizeof copy);
    CHECK(sampler_sample(s, copy) == best);
    sampler_free(s);

    p.temperature = 1.0f; p.top_k = 1; /* top-k 1 is greedy too */
    s = sampler_new(&p, V);
    for (int i = 0; i < 20; i++) { memcpy(copy, logits, sizeof copy); CHECK(sampler_sample(s, copy) == best); }
    sampler_free(s);

    /* Same seed, same tokens; another seed, other tokens. */
    p.top_k = 0; p.top_p = 1; p.min_p = 0; p.temperature = 5.0f;
    int32_t a[50], b[50], c[50];
    for (int run = 0; run < 3; run++) {
        p.seed = run == 2 ? 99 : 7;
        s = sampler_new(&p, V);
        for (int i = 0; i < 50; i++) {
            memcpy(copy, logits, sizeof copy);
            (run == 0 ? a : run == 1 ? b : c)[i] = sampler_sample(s, copy);
        }
        sampler_free(s);
    }
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(a, c, sizeof a) != 0);

    /* top-k 5: only the 5 best ever come out. */
    p.top_k = 5; p.temperature = 10.0f;
    s = sampler_new(&p, V);
    float sorted[V];
    memcpy(sorted, logits, sizeof sorted);
    for (int i = 0; i < 1000; i++) {
        memcpy(copy, logits, sizeof copy);
        int32_t id = sampler_sample(s, copy);
        int better = 0;
        for (int j = 0; j < V; j++) better += logits[j] > logits[id];
        CHECK(better < 5);
    }
    sampler_free(s);

    /* min-p 0.5 with a dominant token: only tokens within half its probability. */
    memset(copy, 0, sizeof copy);
    float peaked[V];
    for (int i = 0; i < V; i++) peaked[i] = -10;
    peaked[3] = 5; peaked[4] = 5 + logf(0.6f); peaked[5] = 5 + logf(0.4f);
    p.top_k = 0; p.min_p = 0.5f; p.temperature = 1; p.top_p = 1;
    s = sampler_new(&p, V);
    int seen[V] = { 0 };
    for (int i = 0; i < 2000; i++) { memcpy(copy, peaked, sizeof copy); seen[sampler_sample(s, copy)]++; }
    CHECK(seen[3] > 0 && seen[4] > 0 && seen[5] == 0);
    sampler_free(s);

    /* top-p 0.4: the dominant token (half the mass) alone. */
    p.min_p = 0; p.top_p = 0.4f;
    s = sampler_new(&p, V);
    for (int i = 0; i < 200; i++) { memcpy(copy, peaked, sizeof copy); CHECK(sampler_sample(s, copy) == 3); }
    sampler_free(s);

    /* Repetition penalty: the recent best token loses to the runner-up. */
    p.temperature = 0; p.repeat_penalty = 100.0f; p.repeat_last_n = 8; p.top_p = 1;
    s = sampler_new(&p, V);
    sampler_accept(s, 3);
    memcpy(copy, peaked, sizeof copy);
    CHECK(sampler_sample(s, copy) == 4);
    sampler_free(s);
}

int main(void) {
    test_sampler();
    return test_finish();
}
