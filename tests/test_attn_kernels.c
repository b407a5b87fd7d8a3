/* The tiled attention kernels: every ISA's scores, softmax and accumulate
 * within 1e-5 relative of the scalar ones, its f16 weights equal to them or
 * one f16 step apart; the whole tiled attention of every ISA within 1e-5 of
 * the scalar one, and the scalar one within 1e-5 of a plain double-precision
 * causal softmax attention (with an f16 cache, one that rounds the queries
 * and the normalised weights to f16 too, the bound then widened by one f16
 * step of each weight), for f16 and f32 caches, head sizes that do and do
 * not fill a vector, groups of 1 to 8 heads and runs that start deep in a
 * cache; a run evaluated at once equal bit for bit to its tokens evaluated
 * one run each, serial or threaded; runs whose new keys, values and
 * queries the kernel's items ready themselves (attn_tiled_prepared) equal
 * to the same runs readied beforehand, bit for bit, each part readied once. */
#include "harness.h"

#include "quant/attn_kernels.h"
#include "arch/attn_tiled.h"
#include "core/threadpool.h"
#include "quant/quant.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static uint32_t rng_state = 1;
static float uniform(void) { /* [-1, 1) */
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / (float)(1u << 23) - 1.0f;
}
static void fill(float *v, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) v[i] = uniform() * scale;
}

static const enum isa isas[] = { ISA_AVX2, ISA_AVX512, ISA_NEON };

static void test_scores(const struct attn_kernels *ref, const struct attn_kernels *ak, const char *name) {
    enum { HD = 136, KEYS = 64, COLS = 48 };
    static float qt[HD * COLS], k[KEYS * HD], s0[KEYS * COLS], s1[KEYS * COLS];
    const int hds[] = { 16, 40, 64, 128, 136 };
    for (int hi = 0; hi < 5; hi++)
        for (int mp = ak->lanes; mp <= COLS; mp += ak->lanes)
            for (int keys = 8; keys <= KEYS; keys += 56) {
                const int hd = hds[hi];
                fill(qt, (size_t)hd * mp, 2.0f);
                fill(k, (size_t)keys * hd, 2.0f);
                ref->scores(qt, mp, hd, k, keys, s0);
                ak->scores(qt, mp, hd, k, keys, s1);
                int off = 0;
                for (int j = 0; j < keys; j++)
                    for (int i = 0; i < mp; i++) {
                        float mag = 0;
                        for (int d = 0; d < hd; d++) mag += fabsf(k[j * hd + d] * qt[d * mp + i]);
                        off += !(fabsf(s0[j * mp + i] - s1[j * mp + i]) <= 1e-5f * mag);
                    }
                CHECKF(off == 0, "%s scores hd=%d mp=%d keys=%d: %d off", name, hd, mp, keys, off);
            }
}

static int close_rel(float a, float b) { return fabsf(a - b) <= 1e-5f * fmaxf(fabsf(a), fabsf(b)) + 1e-30f; }

/* Fresh and carried-over running sums, open blocks and diagonal ones. */
static void test_softmax(const struct attn_kernels *ref, const struct attn_kernels *ak, const char *name) {
    enum { KEYS = 64, COLS = 48 };
    static float s0[KEYS * COLS], s1[KEYS * COLS];
    float max0[COLS], max1[COLS], sum0[COLS], sum1[COLS], a0[COLS], a1[COLS];
    const int masks[][2] = { { -1000, 1 }, { 0, 1 }, { -16, 2 }, { -40, 8 }, { 5, 3 }, { -3, 1 } };
    for (int mi = 0; mi < 6; mi++)
        for (int carried = 0; carried < 2; carried++)
            for (int mp = ak->lanes; mp <= COLS; mp += ak->lanes)
                for (int keys = 1; keys <= KEYS; keys += 21) {
                    fill(s0, (size_t)keys * mp, 40.0f);
                    for (int i = 0; i < keys * mp; i += 7) s0[i] *= 30.0f; /* some weights underflow */
                    memcpy(s1, s0, sizeof(float) * (size_t)keys * mp);
                    for (int i = 0; i < mp; i++) {
                        max0[i] = max1[i] = carried ? uniform() * 3.0f : -INFINITY;
                        sum0[i] = sum1[i] = carried ? 1.0f + uniform() * 0.5f : 0.0f;
                    }
                    /* The stats alone: the same ISA's max, sum and alpha, s untouched. */
                    static float s2[KEYS * COLS];
                    float max2[COLS], sum2[COLS], a2[COLS];
                    memcpy(s2, s0, sizeof(float) * (size_t)keys * mp);
                    memcpy(max2, max1, sizeof max2);
                    memcpy(sum2, sum1, sizeof sum2);
                    ak->stats(s2, keys, mp, 0.125f, masks[mi][0], masks[mi][1], max2, sum2, a2);
                    int stats_wrote = memcmp(s2, s1, sizeof(float) * (size_t)keys * mp) != 0;
                    ref->softmax(s0, keys, mp, 0.125f, masks[mi][0], masks[mi][1], max0, sum0, a0);
                    ak->softmax(s1, keys, mp, 0.125f, masks[mi][0], masks[mi][1], max1, sum1, a1);
                    int off = 0, hidden = 0, stats_off = 0;
                    for (int i = 0; i < mp; i++)
                        stats_off += memcmp(&max1[i], &max2[i], 4) || memcmp(&sum1[i], &sum2[i], 4) ||
                                     memcmp(&a1[i], &a2[i], 4);
                    CHECKF(stats_off == 0 && !stats_wrote,
                           "%s stats mask (%d,%d) carried=%d mp=%d keys=%d: %d columns off softmax's, wrote s %d", name,
                           masks[mi][0], masks[mi][1], carried, mp, keys, stats_off, stats_wrote);
                    for (int j = 0; j < keys; j++)
                        for (int i = 0; i < mp; i++) {
                            const float p0 = s0[j * mp + i], p1 = s1[j * mp + i];
                            if (i < masks[mi][0] + j * masks[mi][1]) hidden += p0 != 0 || p1 != 0;
                            else off += !close_rel(p0, p1);
                        }
                    for (int i = 0; i < mp; i++) {
                        off += max0[i] != max1[i];
                        off += !close_rel(sum0[i], sum1[i]) || !close_rel(a0[i], a1[i]);
                    }
                    CHECKF(off == 0 && hidden == 0, "%s softmax mask (%d,%d) carried=%d mp=%d keys=%d: %d off, %d hidden",
                           name, masks[mi][0], masks[mi][1], carried, mp, keys, off, hidden);
                }
}

/* Two non-negative f16 values equal or one f16 step apart (a value that
 * rounds near a tie; subnormal steps included). */
static int one_f16_step(float a, float b) { return abs((int)f32_to_fp16(a) - (int)f32_to_fp16(b)) <= 1; }

static void test_weights(const struct attn_kernels *ref, const struct attn_kernels *ak, const char *name) {
    enum { KEYS = 64, COLS = 48 };
    static float s0[KEYS * COLS], s1[KEYS * COLS];
    float max[COLS], inv[COLS];
    const int masks[][2] = { { -1000, 1 }, { 0, 1 }, { -40, 8 }, { 5, 3 } };
    for (int mi = 0; mi < 4; mi++)
        for (int mp = ak->lanes; mp <= COLS; mp += ak->lanes)
            for (int keys = 1; keys <= KEYS; keys += 21) {
                fill(s0, (size_t)keys * mp, 40.0f);
                memcpy(s1, s0, sizeof(float) * (size_t)keys * mp);
                for (int i = 0; i < mp; i++) {
                    max[i] = 5.0f + uniform(); /* at or above every scaled score */
                    inv[i] = 1.0f / (1.0f + 10.0f * fabsf(uniform()));
                }
                ref->weights(s0, keys, mp, 0.125f, masks[mi][0], masks[mi][1], max, inv);
                ak->weights(s1, keys, mp, 0.125f, masks[mi][0], masks[mi][1], max, inv);
                int off = 0, hidden = 0;
                for (int j = 0; j < keys; j++)
                    for (int i = 0; i < mp; i++) {
                        const float p0 = s0[j * mp + i], p1 = s1[j * mp + i];
                        if (i < masks[mi][0] + j * masks[mi][1]) hidden += p0 != 0 || p1 != 0;
                        else off += !one_f16_step(p0, p1) || p1 != fp16_to_f32(f32_to_fp16(p1));
                    }
                CHECKF(off == 0 && hidden == 0, "%s weights mask (%d,%d) mp=%d keys=%d: %d off, %d hidden", name,
                       masks[mi][0], masks[mi][1], mp, keys, off, hidden);
            }
}

static void test_accumulate(const struct attn_kernels *ref, const struct attn_kernels *ak, const char *name) {
    enum { HDP = 144, KEYS = 64, COLS = 48 };
    static float s[KEYS * COLS], v[KEYS * HDP], o0[COLS * HDP], o1[COLS * HDP];
    float alpha[COLS];
    for (int hdp = 16; hdp <= HDP; hdp += 16)
        for (int mp = ak->lanes; mp <= COLS; mp += ak->lanes)
            for (int keys = 1; keys <= KEYS; keys += 31) {
                fill(s, (size_t)keys * mp, 1.0f);
                fill(v, (size_t)keys * hdp, 3.0f);
                fill(o0, (size_t)mp * hdp, 5.0f);
                memcpy(o1, o0, sizeof(float) * (size_t)mp * hdp);
                for (int i = 0; i < mp; i++) alpha[i] = 0.5f + 0.5f * uniform();
                float mag[COLS * HDP];
                for (int i = 0; i < mp; i++)
                    for (int d = 0; d < hdp; d++) {
                        mag[i * hdp + d] = fabsf(alpha[i] * o0[i * hdp + d]);
                        for (int j = 0; j < keys; j++) mag[i * hdp + d] += fabsf(s[j * mp + i] * v[j * hdp + d]);
                    }
                ref->accumulate(s, mp, keys, v, hdp, alpha, o0);
                ak->accumulate(s, mp, keys, v, hdp, alpha, o1);
                int off = 0;
                for (int i = 0; i < mp * hdp; i++) off += !(fabsf(o0[i] - o1[i]) <= 1e-5f * mag[i]);
                CHECKF(off == 0, "%s accumulate hdp=%d mp=%d keys=%d: %d off", name, hdp, mp, keys, off);
            }
}

/* One attention problem: a cache of n_pos positions for one sequence and
 * the queries of its last n tokens. */
struct problem {
    int n_head, n_kv, hd, n_pos, n;
    size_t kv_elem;
    float *q, *kf, *vf;  /* (n, n_head*hd), (n_pos, n_kv*hd) x2: the cache's values as floats */
    void *k, *v;         /* the cache itself */
};

static void problem_make(struct problem *p, int n_head, int n_kv, int hd, int n_pos, int n, size_t kv_elem) {
    *p = (struct problem){ n_head, n_kv, hd, n_pos, n, kv_elem, 0, 0, 0, 0, 0 };
    size_t qn = (size_t)n * n_head * hd, kvn = (size_t)n_pos * n_kv * hd;
    p->q = malloc(qn * 4);
    p->kf = malloc(kvn * 4);
    p->vf = malloc(kvn * 4);
    p->k = malloc(kvn * kv_elem);
    p->v = malloc(kvn * kv_elem);
    fill(p->q, qn, 3.0f);
    fill(p->kf, kvn, 3.0f);
    fill(p->vf, kvn, 2.0f);
    for (size_t i = 0; i < kvn; i += 97) p->kf[i] *= 8.0f; /* a few keys that dominate */
    if (kv_elem == 2) {
        f32_to_fp16_row(p->kf, p->k, (int64_t)kvn);
        f32_to_fp16_row(p->vf, p->v, (int64_t)kvn);
        fp16_to_f32_row(p->k, p->kf, (int64_t)kvn);
        fp16_to_f32_row(p->v, p->vf, (int64_t)kvn);
    } else {
        memcpy(p->k, p->kf, kvn * 4);
        memcpy(p->v, p->vf, kvn * 4);
    }
}

static void problem_free(struct problem *p) {
    free(p->q); free(p->kf); free(p->vf); free(p->k); free(p->v);
}

/* Tokens t0..t0+n-1 of the problem as one run. */
static struct attn_run run_of(const struct problem *p, float *out, int t0, int n) {
    size_t row = (size_t)p->n_head * p->hd;
    return (struct attn_run){ p->q + t0 * row, out + t0 * row, n, p->n_pos - p->n + t0, p->k, p->v,
                              (size_t)p->n_kv * p->hd, p->kv_elem };
}

static double round_f16(double x) { return fp16_to_f32(f32_to_fp16((float)x)); }

/* Causal softmax attention in double, position by position; with an f16
 * cache the queries and the normalised weights rounded to f16. slack
 * (n, n_head*hd): one f16 step of each weight times |v|, summed. */
static void naive(const struct problem *p, double *out, double *slack) {
    int group = p->n_head / p->n_kv, kvd = p->n_kv * p->hd, f16 = p->kv_elem == 2;
    double *w = malloc(sizeof(double) * p->n_pos), *q = malloc(sizeof(double) * p->hd);
    for (int t = 0; t < p->n; t++)
        for (int h = 0; h < p->n_head; h++) {
            for (int d = 0; d < p->hd; d++) {
                q[d] = p->q[((size_t)t * p->n_head + h) * p->hd + d];
                if (f16) q[d] = round_f16(q[d]);
            }
            int g = h / group, keys = p->n_pos - p->n + t + 1;
            double max = -INFINITY, sum = 0;
            for (int j = 0; j < keys; j++) {
                double dot = 0;
                for (int d = 0; d < p->hd; d++) dot += q[d] * p->kf[(size_t)j * kvd + g * p->hd + d];
                w[j] = dot / sqrt((double)p->hd);
                if (w[j] > max) max = w[j];
            }
            for (int j = 0; j < keys; j++) sum += w[j] = exp(w[j] - max);
            for (int j = 0; j < keys; j++) w[j] = f16 ? round_f16(w[j] / sum) : w[j] / sum;
            for (int d = 0; d < p->hd; d++) {
                double acc = 0, step = 0;
                for (int j = 0; j < keys; j++) {
                    double v = p->vf[(size_t)j * kvd + g * p->hd + d];
                    acc += w[j] * v;
                    step += f16 ? fabs(w[j] * v) / 1024.0 : 0.0;
                }
                out[((size_t)t * p->n_head + h) * p->hd + d] = acc;
                slack[((size_t)t * p->n_head + h) * p->hd + d] = step;
            }
        }
    free(w);
    free(q);
}

/* Elements of a farther from b than 1e-5 of the largest |value| of its dim
 * in the cache (an output is a convex combination of them), plus slack. */
static int count_off(const struct problem *p, const float *a, const double *b, const double *slack) {
    int group = p->n_head / p->n_kv, kvd = p->n_kv * p->hd, off = 0;
    double *bound = calloc((size_t)kvd, sizeof(double)); /* per KV head and dim */
    for (int j = 0; j < p->n_pos; j++)
        for (int e = 0; e < kvd; e++)
            if (fabs(p->vf[(size_t)j * kvd + e]) > bound[e]) bound[e] = fabs(p->vf[(size_t)j * kvd + e]);
    for (int t = 0; t < p->n; t++)
        for (int h = 0; h < p->n_head; h++)
            for (int d = 0; d < p->hd; d++) {
                size_t at = ((size_t)t * p->n_head + h) * p->hd + d;
                if (!(fabs(a[at] - b[at]) <= 1e-5 * bound[(h / group) * p->hd + d] + slack[at])) off++;
            }
    free(bound);
    return off;
}

static void test_tiled(struct threadpool *pool) {
    const struct { int n_head, n_kv, hd, n_pos, n; } shapes[] = {
        { 4, 2, 64, 64, 64 },     /* the oracle qwen3moe's heads, a prompt from position 0 */
        { 32, 4, 128, 150, 70 },  /* Qwen3-30B-A3B's heads, a run deep in the cache */
        { 6, 2, 40, 90, 90 },     /* a head that is not a multiple of 16 */
        { 3, 3, 16, 70, 1 },      /* one head per group, decoding one token */
        { 8, 1, 72, 200, 3 },     /* one KV head, a short run past two key blocks */
        { 8, 2, 64, 2060, 40 },   /* blocks that end before and after the f16 pass's kept scores */
    };
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (size_t elem = 2; elem <= 4; elem += 2) {
            struct problem p;
            problem_make(&p, shapes[si].n_head, shapes[si].n_kv, shapes[si].hd, shapes[si].n_pos, shapes[si].n, elem);
            size_t outn = (size_t)p.n * p.n_head * p.hd;
            double *want = malloc(outn * sizeof(double)), *slack = malloc(outn * sizeof(double));
            float *ref = malloc(outn * 4), *got = malloc(outn * 4), *split = malloc(outn * 4);
            /* tiles made for the whole cache, or for half of it (runs then go past it) */
            int n_ctx = si % 2 ? p.n_pos / 2 : p.n_pos;
            struct attn_tiles *t = attn_tiles_new(p.n_head, p.n_kv, p.hd, n_ctx, threadpool_size(pool));
            CHECK(t != NULL);
            naive(&p, want, slack);
            struct attn_run whole = run_of(&p, ref, 0, p.n);
            attn_tiled(NULL, attn_kernels_isa(ISA_SCALAR), t, &whole, 1);
            int off = count_off(&p, ref, want, slack);
            CHECKF(off == 0, "scalar tiled vs double, shape %zu f%zu: %d off", si, 8 * elem, off);
            for (int ii = -1; ii < 3; ii++) {
                const struct attn_kernels *ak = ii < 0 ? attn_kernels_isa(ISA_SCALAR) : attn_kernels_isa(isas[ii]);
                if (!ak) continue;
                const char *name = ii < 0 ? "scalar" : isa_name(isas[ii]);
                struct attn_run r = run_of(&p, got, 0, p.n);
                attn_tiled(pool, ak, t, &r, 1);
                if (ii >= 0) {
                    double *ref_d = malloc(outn * sizeof(double));
                    for (size_t i = 0; i < outn; i++) ref_d[i] = ref[i];
                    off = count_off(&p, got, ref_d, slack);
                    free(ref_d);
                    CHECKF(off == 0, "%s tiled vs scalar tiled, shape %zu f%zu: %d off", name, si, 8 * elem, off);
                }
                /* one run per token, and a run cut at token 5, in one call */
                struct attn_run *runs = malloc(sizeof *runs * (size_t)(p.n + 2));
                for (int i = 0; i < p.n; i++) runs[i] = run_of(&p, split, i, 1);
                memset(split, 0, outn * 4);
                attn_tiled(NULL, ak, t, runs, p.n);
                CHECKF(memcmp(split, got, outn * 4) == 0, "%s shape %zu f%zu: token by token differs from the run",
                       name, si, 8 * elem);
                int cut = p.n > 5 ? 5 : p.n;
                runs[0] = run_of(&p, split, 0, cut);
                runs[1] = run_of(&p, split, cut, p.n - cut);
                memset(split, 0, outn * 4);
                attn_tiled(pool, ak, t, runs, 2);
                CHECKF(memcmp(split, got, outn * 4) == 0, "%s shape %zu f%zu: two runs differ from one", name, si,
                       8 * elem);
                free(runs);
            }
            attn_tiles_free(t);
            free(want); free(slack); free(ref); free(got); free(split);
            problem_free(&p);
        }
}

/* Two sequences with their own caches and positions in one call: each as
 * when it runs alone. */
static void test_two_sequences(struct threadpool *pool) {
    struct problem a, b;
    problem_make(&a, 8, 2, 64, 100, 30, 2);
    problem_make(&b, 8, 2, 64, 20, 1, 2);
    float *oa = malloc((size_t)a.n * 8 * 64 * 4), *ob = malloc((size_t)b.n * 8 * 64 * 4);
    float *sa = malloc((size_t)a.n * 8 * 64 * 4), *sb = malloc((size_t)b.n * 8 * 64 * 4);
    struct attn_tiles *t = attn_tiles_new(8, 2, 64, 100, threadpool_size(pool));
    struct attn_run runs[2] = { run_of(&a, oa, 0, a.n), run_of(&b, ob, 0, b.n) };
    attn_tiled(pool, NULL, t, runs, 2);
    runs[0] = run_of(&a, sa, 0, a.n);
    attn_tiled(pool, NULL, t, runs, 1);
    runs[0] = run_of(&b, sb, 0, b.n);
    attn_tiled(pool, NULL, t, runs, 1);
    CHECK(memcmp(oa, sa, (size_t)a.n * 8 * 64 * 4) == 0);
    CHECK(memcmp(ob, sb, (size_t)b.n * 8 * 64 * 4) == 0);
    attn_tiles_free(t);
    free(oa); free(ob); free(sa); free(sb);
    problem_free(&a);
    problem_free(&b);
}

/* The prepared runs: their new tokens' queries are kept halved and their
 * new cache rows poisoned until the hooks restore them (exactly). */
struct prepared {
    struct problem *p[2];
    float *q[2];             /* the halved queries */
    _Atomic int *calls[2][3]; /* (n, n_kv) queries and keys readied, outputs reported, per run */
    const float *want[2], *got[2];
    _Atomic int early;       /* outputs reported before they were final */
};

static void prep_q(void *ctx, int run, int g, int t0, int nt) {
    struct prepared *pr = ctx;
    const struct problem *p = pr->p[run];
    int group = p->n_head / p->n_kv;
    for (int t = t0; t < t0 + nt; t++) {
        atomic_fetch_add(&pr->calls[run][0][t * p->n_kv + g], 1);
        for (size_t i = ((size_t)t * p->n_head + g * group) * p->hd; i < ((size_t)t * p->n_head + (g + 1) * group) * p->hd; i++)
            p->q[i] = pr->q[run][i] * 2.0f;
    }
}

static void prep_kv(void *ctx, int run, int g, int t0, int nt) {
    struct prepared *pr = ctx;
    const struct problem *p = pr->p[run];
    size_t kvd = (size_t)p->n_kv * p->hd;
    for (int t = t0; t < t0 + nt; t++) {
        atomic_fetch_add(&pr->calls[run][1][t * p->n_kv + g], 1);
        size_t at = (size_t)(p->n_pos - p->n + t) * kvd + (size_t)g * p->hd;
        if (p->kv_elem == 2) {
            f32_to_fp16_row(p->kf + at, (uint16_t *)p->k + at, p->hd);
            f32_to_fp16_row(p->vf + at, (uint16_t *)p->v + at, p->hd);
        } else {
            memcpy((float *)p->k + at, p->kf + at, (size_t)p->hd * 4);
            memcpy((float *)p->v + at, p->vf + at, (size_t)p->hd * 4);
        }
    }
}

/* The outputs hook: once per part, and the part already final. */
static void prep_out(void *ctx, int run, int g, int t0, int nt) {
    struct prepared *pr = ctx;
    const struct problem *p = pr->p[run];
    int group = p->n_head / p->n_kv;
    for (int t = t0; t < t0 + nt; t++) {
        atomic_fetch_add(&pr->calls[run][2][t * p->n_kv + g], 1);
        size_t at = ((size_t)t * p->n_head + (size_t)g * group) * p->hd;
        if (memcmp(pr->want[run] + at, pr->got[run] + at, sizeof(float) * (size_t)group * p->hd))
            atomic_fetch_add(&pr->early, 1);
    }
}

static void test_prepared(struct threadpool *pool) {
    const struct { int n_head, n_kv, hd, n_pos, n; } shapes[][2] = {
        { { 32, 4, 128, 150, 70 }, { 32, 4, 128, 9, 1 } }, /* a prompt deep in a cache, and a decode */
        { { 8, 1, 72, 200, 130 }, { 8, 1, 72, 131, 131 } }, /* many blocks of one KV head */
        { { 4, 2, 64, 1, 1 }, { 4, 2, 64, 3, 2 } },       /* the first tokens of a cache */
    };
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (size_t elem = 2; elem <= 4; elem += 2)
            for (int threaded = 0; threaded < 2; threaded++) {
                struct problem p[2];
                struct prepared pr = { .p = { &p[0], &p[1] } };
                struct attn_run want_runs[2], got_runs[2];
                float *want[2], *got[2];
                for (int r = 0; r < 2; r++) {
                    problem_make(&p[r], shapes[si][r].n_head, shapes[si][r].n_kv, shapes[si][r].hd, shapes[si][r].n_pos,
                                 shapes[si][r].n, elem);
                    size_t outn = (size_t)p[r].n * p[r].n_head * p[r].hd;
                    want[r] = calloc(outn, 4);
                    got[r] = calloc(outn, 4);
                    want_runs[r] = run_of(&p[r], want[r], 0, p[r].n);
                    got_runs[r] = run_of(&p[r], got[r], 0, p[r].n);
                }
                struct attn_tiles *t = attn_tiles_new(p[0].n_head, p[0].n_kv, p[0].hd, 256, threadpool_size(pool));
                attn_tiled(pool, NULL, t, want_runs, 2);
                for (int r = 0; r < 2; r++) {
                    size_t qn = (size_t)p[r].n * p[r].n_head * p[r].hd, kvd = (size_t)p[r].n_kv * p[r].hd;
                    size_t fresh = (size_t)(p[r].n_pos - p[r].n) * kvd, fresh_n = (size_t)p[r].n * kvd;
                    pr.q[r] = malloc(qn * 4);
                    for (size_t i = 0; i < qn; i++) {
                        pr.q[r][i] = p[r].q[i] * 0.5f;
                        p[r].q[i] = NAN;
                    }
                    memset((char *)p[r].k + fresh * elem, 0xff, fresh_n * elem); /* NaN in f16 and f32 */
                    memset((char *)p[r].v + fresh * elem, 0xff, fresh_n * elem);
                    for (int k = 0; k < 3; k++) pr.calls[r][k] = calloc((size_t)p[r].n * p[r].n_kv, sizeof(_Atomic int));
                    pr.want[r] = want[r];
                    pr.got[r] = got[r];
                }
                atomic_init(&pr.early, 0);
                struct attn_prepare prep = { .queries = prep_q, .keys = prep_kv, .ctx = &pr, .outputs = prep_out };
                attn_tiled_prepared(threaded ? pool : NULL, NULL, t, got_runs, 2, &prep);
                for (int r = 0; r < 2; r++) {
                    size_t outn = (size_t)p[r].n * p[r].n_head * p[r].hd;
                    int bad_calls = 0;
                    for (int i = 0; i < p[r].n * p[r].n_kv; i++)
                        bad_calls += pr.calls[r][0][i] != 1 || pr.calls[r][1][i] != 1 || pr.calls[r][2][i] != 1;
                    CHECKF(bad_calls == 0, "shape %zu run %d f%zu threaded %d: %d parts not readied exactly once", si,
                           r, 8 * elem, threaded, bad_calls);
                    CHECKF(memcmp(want[r], got[r], outn * 4) == 0,
                           "shape %zu run %d f%zu threaded %d: readied in the kernel differs from readied before", si,
                           r, 8 * elem, threaded);
                    free(want[r]); free(got[r]); free(pr.q[r]); free(pr.calls[r][0]); free(pr.calls[r][1]); free(pr.calls[r][2]);
                    problem_free(&p[r]);
                }
                CHECKF(atomic_load(&pr.early) == 0, "shape %zu f%zu threaded %d: %d outputs reported before final", si,
                       8 * elem, threaded, atomic_load(&pr.early));
                attn_tiles_free(t);
            }
}

/* AVX-512's softmax, stats and weights (16 lanes, 8 at the end) against
 * AVX2's (8 lanes) bit for bit: the same operations lane for lane. */
static void test_same_bits(const struct attn_kernels *a, const struct attn_kernels *b) {
    enum { KEYS = 64, COLS = 72 };
    static float s[4][KEYS * COLS];
    float max[4][COLS], sum[4][COLS], al[4][COLS];
    const int masks[][2] = { { -1000, 1 }, { 0, 1 }, { -16, 2 }, { -40, 8 }, { 5, 3 }, { 13, 1 } };
    int off = 0;
    for (int mi = 0; mi < 6; mi++)
        for (int mp = 8; mp <= COLS; mp += 8)
            for (int keys = 1; keys <= KEYS; keys += 9) {
                fill(s[0], (size_t)keys * mp, 40.0f);
                for (int i = 0; i < mp; i++) {
                    max[0][i] = i % 3 ? uniform() * 3.0f : -INFINITY;
                    sum[0][i] = 1.0f + uniform();
                }
                for (int k = 1; k < 4; k++) {
                    memcpy(s[k], s[0], sizeof s[0]);
                    memcpy(max[k], max[0], sizeof max[0]);
                    memcpy(sum[k], sum[0], sizeof sum[0]);
                }
                a->softmax(s[0], keys, mp, 0.125f, masks[mi][0], masks[mi][1], max[0], sum[0], al[0]);
                b->softmax(s[1], keys, mp, 0.125f, masks[mi][0], masks[mi][1], max[1], sum[1], al[1]);
                a->stats(s[2], keys, mp, 0.125f, masks[mi][0], masks[mi][1], max[2], sum[2], al[2]);
                b->stats(s[3], keys, mp, 0.125f, masks[mi][0], masks[mi][1], max[3], sum[3], al[3]);
                off += memcmp(s[0], s[1], sizeof(float) * (size_t)keys * mp) != 0;
                off += memcmp(s[2], s[3], sizeof(float) * (size_t)keys * mp) != 0;
                for (int k = 0; k < 4; k += 2)
                    off += memcmp(max[k], max[k + 1], sizeof(float) * mp) || memcmp(sum[k], sum[k + 1], sizeof(float) * mp) ||
                           memcmp(al[k], al[k + 1], sizeof(float) * mp);
                for (int i = 0; i < mp; i++) sum[0][i] = 1.0f / sum[0][i];
                memcpy(s[1], s[2], sizeof s[2]);
                a->weights(s[2], keys, mp, 0.125f, masks[mi][0], masks[mi][1], max[0], sum[0]);
                b->weights(s[1], keys, mp, 0.125f, masks[mi][0], masks[mi][1], max[0], sum[0]);
                off += memcmp(s[1], s[2], sizeof(float) * (size_t)keys * mp) != 0;
            }
    CHECKF(off == 0, "avx512 softmax/stats/weights against avx2's: %d cases differ", off);
}

int main(void) {
    const struct attn_kernels *ref = attn_kernels_isa(ISA_SCALAR);
    test_softmax(ref, ref, "scalar"); /* the scalar stats against the scalar softmax */
    if (attn_kernels_isa(ISA_AVX2) && attn_kernels_isa(ISA_AVX512))
        test_same_bits(attn_kernels_isa(ISA_AVX512), attn_kernels_isa(ISA_AVX2));
    for (int i = 0; i < 3; i++) {
        const struct attn_kernels *ak = attn_kernels_isa(isas[i]);
        if (!ak) continue;
        printf("%s: tiled attention kernels against the scalar ones\n", isa_name(isas[i]));
        test_scores(ref, ak, isa_name(isas[i]));
        test_softmax(ref, ak, isa_name(isas[i]));
        test_weights(ref, ak, isa_name(isas[i]));
        test_accumulate(ref, ak, isa_name(isas[i]));
    }
    struct threadpool *pool = threadpool_new(2, false);
    test_tiled(pool);
    test_two_sequences(pool);
    test_prepared(pool);
    threadpool_free(pool);
    return test_finish();
}
