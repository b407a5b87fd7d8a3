#include "harness.h"

#include "arch/attn_kernels.h"
#include "quant/quant.h"
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

static void test_attn_kernels(void) {
    const struct attn_kernels *ref = attn_kernels_isa(0);
    enum { N = 200, HEADS = 11 };
    static float q[HEADS * N], acc0[HEADS * N], acc1[HEADS * N], vf[N];
    float r[HEADS], g[HEADS];
    uint16_t k[N];
    fill(q, HEADS * N, 3);
    fill(vf, N, 4);
    for (int i = 0; i < N; i++) k[i] = f32_to_fp16(vf[i]);
    for (int i = 0; i < N; i++) vf[i] = fp16_to_f32(k[i]);
    const struct attn_kernels *ak = attn_kernels_isa(1);
    CHECK(ak != NULL || attn_kernels() == ref);
    if (!ak) return;
    for (int nq = 1; nq <= HEADS; nq++) {
        for (int n = 1; n <= N; n += 13) {
            ref->dot_f16(q, nq, n, k, r);
            ak->dot_f16(q, nq, n, k, g);
            for (int j = 0; j < nq; j++) {
                float scale = 0;
                for (int i = 0; i < n; i++) scale += fabsf(q[j * n + i] * vf[i]);
                CHECKF(fabsf(r[j] - g[j]) <= 1e-5f * scale + 1e-6f, "dot_f16 nq=%d n=%d j=%d", nq, n, j);
            }
            ref->dot_f32(q, nq, n, vf, r);
            ak->dot_f32(q, nq, n, vf, g);
            for (int j = 0; j < nq; j++) {
                float scale = 0;
                for (int i = 0; i < n; i++) scale += fabsf(q[j * n + i] * vf[i]);
                CHECKF(fabsf(r[j] - g[j]) <= 1e-5f * scale + 1e-6f, "dot_f32 nq=%d n=%d", nq, n);
            }
            /* Weighted sums over 7 keys whose rows are 3 values apart (rows overlap). */
            int keys = 7;
            ref->wsum_f16(q, nq, keys, k, 3, n < N - 18 ? n : N - 18, acc0);
            ak->wsum_f16(q, nq, keys, k, 3, n < N - 18 ? n : N - 18, acc1);
            for (int i = 0; i < nq * (n < N - 18 ? n : N - 18); i++) CHECK(fabsf(acc0[i] - acc1[i]) <= 1e-4f * (fabsf(acc0[i]) + 1));
            ref->wsum_f32(q, nq, keys, vf, 3, n < N - 18 ? n : N - 18, acc0);
            ak->wsum_f32(q, nq, keys, vf, 3, n < N - 18 ? n : N - 18, acc1);
            for (int i = 0; i < nq * (n < N - 18 ? n : N - 18); i++) CHECK(fabsf(acc0[i] - acc1[i]) <= 1e-4f * (fabsf(acc0[i]) + 1));
        }
    }
}

/* The softmax over (keys, heads): every ISA's within 1e-5 relative of the
 * scalar one (libm expf), for head counts that do and do not fill a vector,
 * with and without f16 rounding, including scores far below the maximum. */
static void test_attn_softmax(void) {
    const struct attn_kernels *ref = attn_kernels_isa(0), *ak = attn_kernels_isa(1);
    if (!ak) return;
    enum { KEYS = 300, HEADS = 24 };
    static float s0[KEYS * HEADS], s1[KEYS * HEADS];
    const int heads[] = {1, 3, 8, 16, 24};
    for (int hi = 0; hi < 5; hi++)
        for (int round = 0; round < 2; round++)
            for (int keys = 1; keys <= KEYS; keys += 37) {
                const int nq = heads[hi];
                fill(s0, keys * nq, 5 + keys);
                for (int i = 0; i < keys * nq; i++) s0[i] *= i % 11 == 3 ? 400.0f : 30.0f; /* some exp underflow */
                memcpy(s1, s0, sizeof(float) * (size_t)keys * nq);
                ref->softmax(s0, keys, nq, 0.0884f, round);
                ak->softmax(s1, keys, nq, 0.0884f, round);
                int off = 0;
                for (int i = 0; i < keys * nq; i++)
                    off += !(fabsf(s0[i] - s1[i]) <= 1e-5f * s0[i] + 1e-30f ||
                             (round && fabsf(s0[i] - s1[i]) <= 1e-3f * s0[i])); /* one f16 step apart */
                CHECKF(off == 0, "softmax nq=%d keys=%d round=%d: %d values off", nq, keys, round, off);
                double sum = 0;
                for (int p = 0; p < keys; p++) sum += s1[p * nq];
                CHECKF(fabs(sum - 1) < (round ? 1e-2 : 1e-5), "softmax nq=%d keys=%d: sum %.9g", nq, keys, sum);
            }
}

int main(void) {
    test_sampler();
    test_attn_kernels();
    test_attn_softmax();
    return test_finish();
}
