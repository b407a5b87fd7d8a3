#include "arch/attn_tiled.h"

#include "quant/attn_kernels.h"
#include "core/spin.h"
#include "core/threadpool.h"
#include "quant/quant.h"

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum {
    KEY_BLOCK = 64,   /* keys per tile: K and V tiles of 64 x head_dim floats stay in L1/L2 */
    QUERY_COLS = 64,  /* query columns (tokens x heads of one group) per item, when the run has them */
    KEPT_KEYS = 2048, /* an f16 cache's second pass reuses the first's scores up to this many keys */
    COL_ALIGN = 16,   /* the widest ISA's lanes: every ISA's column padding fits the tiles */
};

static int round_up(int x, int m) { return (x + m - 1) / m * m; }

struct attn_tiles {
    int n_head, n_head_kv, head_dim, group;
    int hdp;          /* head_dim rounded up to 16: the row length of the V tile and of o */
    int max_tokens;   /* tokens per item at most */
    int max_cols;     /* max_tokens * group, padded to COL_ALIGN */
    int kept_keys;    /* keys whose scores the first pass keeps: KEPT_KEYS, or fewer for a short cache */
    int threads;
    size_t per_thread; /* floats of one thread's tiles */
    float *mem;       /* (threads, per_thread) */
    _Atomic int *ready; /* (max_ready) per run: per KV head its older keys, then per (block of tokens,
                           KV head) its new ones: todo, being stored, stored */
    int max_ready;
    float *shadow;      /* (shadow_floats) per run that several blocks of tokens share, per KV head:
                           its keys (positions, head_dim) then its values (positions, hdp), as floats */
    size_t shadow_floats;
};

enum { KEYS_TODO, KEYS_STORING, KEYS_STORED };

/* One thread's tiles, carved out of its share of mem. */
struct tile_set {
    float *qt;              /* (head_dim, cols) the queries, transposed, zero past the real columns */
    float *k;               /* (KEY_BLOCK, head_dim) a key block, rows past the block's keys zero */
    float *v;               /* (KEY_BLOCK, hdp) a value block, columns past head_dim zero */
    float *s;               /* (KEY_BLOCK, cols) scores, then weights */
    float *kept;            /* (kept_keys, cols) the first pass's scores, when the keys are that few */
    float *o;               /* (cols, hdp) unnormalised outputs */
    float *max, *sum, *alpha; /* (cols) */
};

static size_t carve(const struct attn_tiles *t, float *base, struct tile_set *ts) {
    size_t at = 0, cols = (size_t)t->max_cols;
#define TAKE(field, n)                                                     \
    do {                                                                   \
        if (ts) ts->field = base + at;                                     \
        at += ((size_t)(n) + COL_ALIGN - 1) / COL_ALIGN * COL_ALIGN;       \
    } while (0)
    TAKE(qt, (size_t)t->head_dim * cols);
    TAKE(k, (size_t)KEY_BLOCK * t->head_dim);
    TAKE(v, (size_t)KEY_BLOCK * t->hdp);
    TAKE(s, (size_t)KEY_BLOCK * cols);
    TAKE(kept, (size_t)t->kept_keys * cols);
    TAKE(o, cols * t->hdp);
    TAKE(max, cols);
    TAKE(sum, cols);
    TAKE(alpha, cols);
#undef TAKE
    return at;
}

struct attn_tiles *attn_tiles_new(int n_head, int n_head_kv, int head_dim, int n_ctx, int threads) {
    if (n_head <= 0 || n_head_kv <= 0 || n_head % n_head_kv || head_dim <= 0) return NULL;
    struct attn_tiles *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->n_head = n_head;
    t->n_head_kv = n_head_kv;
    t->head_dim = head_dim;
    t->group = n_head / n_head_kv;
    t->hdp = round_up(head_dim, 16);
    t->max_tokens = QUERY_COLS / t->group > 1 ? QUERY_COLS / t->group : 1;
    t->max_cols = round_up(t->max_tokens * t->group, COL_ALIGN);
    t->kept_keys = n_ctx > 0 && n_ctx < KEPT_KEYS ? round_up(n_ctx, KEY_BLOCK) : KEPT_KEYS;
    t->threads = threads > 0 ? threads : 1;
    t->per_thread = carve(t, NULL, NULL);
    t->mem = aligned_alloc(64, t->per_thread * t->threads * sizeof(float));
    if (!t->mem) {
        free(t);
        return NULL;
    }
    return t;
}

void attn_tiles_free(struct attn_tiles *t) {
    if (!t) return;
    free(t->ready);
    free(t->shadow);
    free(t->mem);
    free(t);
}

/* Rows pos0..pos0+n-1 of one KV head (offset off in a position's row) as
 * floats, dst_stride apart, each zero from width to dst_stride. */
static void load_rows(const struct attn_run *r, const void *cache, int pos0, int n, size_t off, int width,
                      int dst_stride, float *dst) {
    for (int j = 0; j < n; j++) {
        size_t at = (size_t)(pos0 + j) * r->kv_stride + off;
        float *row = dst + (size_t)j * dst_stride;
        if (r->kv_elem == 2) fp16_to_f32_row((const uint16_t *)cache + at, row, width);
        else memcpy(row, (const float *)cache + at, (size_t)width * sizeof(float));
        for (int d = width; d < dst_stride; d++) row[d] = 0;
    }
}

/* qt (hd, mp): column i = the query of token t0 + i/group, head
 * g*group + i%group; zero past m = nt*group; rounded to f16 when asked
 * (half: hd*mp scratch halves). */
static void load_queries(const struct attn_tiles *t, const struct attn_run *r, int g, int t0, int nt, int mp,
                         int round, float *qt, uint16_t *half) {
    const int hd = t->head_dim, group = t->group, m = nt * group;
    const size_t row = (size_t)t->n_head * hd;
    const float *q = r->q + (size_t)t0 * row + (size_t)g * group * hd;
    for (int d = 0; d < hd; d++) { /* a row of qt per dim: the m query lines it reads stay in L1 */
        float *qd = qt + (size_t)d * mp;
        for (int tt = 0; tt < nt; tt++)
            for (int hh = 0; hh < group; hh++) *qd++ = q[(size_t)tt * row + (size_t)hh * hd + d];
        for (int i = m; i < mp; i++) *qd++ = 0;
    }
    if (round) {
        f32_to_fp16_row(qt, half, (int64_t)hd * mp);
        fp16_to_f32_row(half, qt, (int64_t)hd * mp);
    }
}

/* Tokens t0..t0+nt-1 of run r, query heads of KV head g, against keys
 * 0..pos0+t0+nt-1 in blocks of KEY_BLOCK; a column (a token's head) sees
 * the keys up to its token's position.
 * With an f16 cache, as llama.cpp computes over one, the queries are
 * rounded to f16 and the weights normalised before they are rounded to
 * f16, which takes the final maximum and sum: a first pass finds them, a
 * second one applies the weights (the oracle's F16 greedy run needs it).
 * shadow_k and shadow_v, when set, are head g's keys and values of the
 * run's cache already as floats (positions head_dim and hdp apart). */
static void attend(const struct attn_tiles *t, const struct attn_kernels *ak, const struct attn_run *r, int g, int t0,
                   int nt, const struct tile_set *ts, const float *shadow_k, const float *shadow_v) {
    const int hd = t->head_dim, hdp = t->hdp, group = t->group;
    const int m = nt * group, mp = round_up(m, ak->lanes);
    const int passes = r->kv_elem == 2 ? 2 : 1;
    load_queries(t, r, g, t0, nt, mp, passes == 2, ts->qt, (uint16_t *)ts->o /* free until the last pass */);
    for (int i = 0; i < mp; i++) {
        ts->max[i] = -INFINITY;
        ts->sum[i] = 0;
    }
    memset(ts->o, 0, sizeof(float) * (size_t)mp * hdp);
    const float scale = 1.0f / sqrtf((float)hd);
    const int first = r->pos0 + t0, end = first + nt;
    const size_t off = (size_t)g * hd;
    for (int pass = 0; pass < passes; pass++) {
        if (pass == 1)
            for (int i = 0; i < mp; i++) {
                ts->sum[i] = 1.0f / ts->sum[i];
                ts->alpha[i] = 1.0f;
            }
        for (int k0 = 0; k0 < end; k0 += KEY_BLOCK) {
            const int nk = end - k0 < KEY_BLOCK ? end - k0 : KEY_BLOCK, nk8 = round_up(nk, 8);
            const int masked0 = (k0 - first) * group;
            /* Two passes keep the first one's scores where they fit: its
             * stats leave them as they are for the second. */
            const int keep = passes == 2 && end <= t->kept_keys;
            float *s = keep ? ts->kept + (size_t)k0 * mp : ts->s;
            if ((pass == 0 || !keep) && shadow_k) /* rows nk..nk8: later keys or zeros, their scores unread */
                ak->scores(ts->qt, mp, hd, shadow_k + (size_t)k0 * hd, nk8, s);
            else if (pass == 0 || !keep) {
                load_rows(r, r->k, k0, nk, off, hd, hd, ts->k);
                memset(ts->k + (size_t)nk * hd, 0, sizeof(float) * (size_t)(nk8 - nk) * hd);
                ak->scores(ts->qt, mp, hd, ts->k, nk8, s);
            }
            if (pass == 0 && passes == 2) ak->stats(s, nk, mp, scale, masked0, group, ts->max, ts->sum, ts->alpha);
            else if (pass == 0) ak->softmax(s, nk, mp, scale, masked0, group, ts->max, ts->sum, ts->alpha);
            else ak->weights(s, nk, mp, scale, masked0, group, ts->max, ts->sum);
            if (pass == passes - 1) {
                const float *v = shadow_v ? shadow_v + (size_t)k0 * hdp : ts->v;
                if (!shadow_v) load_rows(r, r->v, k0, nk, off, hd, hdp, ts->v);
                ak->accumulate(s, mp, nk, v, hdp, ts->alpha, ts->o);
            }
        }
    }
    const size_t row = (size_t)t->n_head * hd;
    float *out = r->out + (size_t)t0 * row + (size_t)g * group * hd;
    for (int i = 0; i < m; i++) {
        float *oi = out + (size_t)(i / group) * row + (size_t)(i % group) * hd;
        const float inv = passes == 1 ? 1.0f / ts->sum[i] : 1.0f;
        for (int d = 0; d < hd; d++) oi[d] = ts->o[(size_t)i * hdp + d] * inv;
    }
}

struct tiled_job {
    const struct attn_tiles *t;
    const struct attn_kernels *ak;
    const struct attn_run *runs;
    int n_runs, tokens; /* tokens per item */
    const struct attn_prepare *prep;
    const struct attn_prepare *done; /* its outputs hook, or NULL */
    int first_ready[ATTN_RUNS_MAX + 1]; /* the runs' first entry in t->ready */
    /* A run whose blocks of tokens share its keys gets them as floats once
     * (t->shadow), not once per item: its first float there, or SIZE_MAX,
     * and its positions (rows per KV head, with room past the last). */
    size_t shadow_at[ATTN_RUNS_MAX];
    int shadow_rows[ATTN_RUNS_MAX];
};

static int blocks_of(const struct attn_run *r, int tokens) { return (r->n + tokens - 1) / tokens; }

static bool shadowed(const struct tiled_job *j, int ri) { return ri < ATTN_RUNS_MAX && j->shadow_at[ri] != SIZE_MAX; }

/* Run ri's shadow keys of KV head g, or NULL; its values follow them. */
static float *shadow_of(const struct tiled_job *j, int ri, int g) {
    if (!shadowed(j, ri)) return NULL;
    const size_t rows = (size_t)j->shadow_rows[ri];
    return j->t->shadow + j->shadow_at[ri] + (size_t)g * rows * (size_t)(j->t->head_dim + j->t->hdp);
}

/* Positions p0..p1-1 of run ri, KV head g, from the cache into its shadow. */
static void to_shadow(const struct tiled_job *j, int ri, int g, int p0, int p1) {
    const struct attn_run *r = &j->runs[ri];
    const int hd = j->t->head_dim, hdp = j->t->hdp;
    float *k = shadow_of(j, ri, g), *v = k + (size_t)j->shadow_rows[ri] * hd;
    const size_t off = (size_t)g * hd;
    load_rows(r, r->k, p0, p1 - p0, off, hd, hd, k + (size_t)p0 * hd);
    load_rows(r, r->v, p0, p1 - p0, off, hd, hdp, v + (size_t)p0 * hdp);
}

/* Does what a flag stands for, once: the first item to need it does it,
 * the others wait for it. Nobody waits while holding one, and an item
 * takes its run's flags in order, so the items cannot deadlock. */
static bool claim(_Atomic int *state) {
    int todo = KEYS_TODO;
    if (atomic_compare_exchange_strong_explicit(state, &todo, KEYS_STORING, memory_order_acquire, memory_order_acquire))
        return true;
    unsigned spins = 0;
    while (atomic_load_explicit(state, memory_order_acquire) != KEYS_STORED) spin_pause(&spins);
    return false;
}

static void done(_Atomic int *state) { atomic_store_explicit(state, KEYS_STORED, memory_order_release); }

/* Keys and values of blocks 0..b of run ri, KV head g, in the cache (and
 * with the cache's older positions in the run's shadow, when it has one). */
static void need_keys(const struct tiled_job *j, int ri, int b, int g) {
    const struct attn_run *r = &j->runs[ri];
    _Atomic int *flags = &j->t->ready[j->first_ready[ri]];
    const int n_kv = j->t->n_head_kv;
    if (shadowed(j, ri) && claim(&flags[g])) {
        const int old_end = j->prep ? r->pos0 : r->pos0 + r->n, hd = j->t->head_dim, hdp = j->t->hdp;
        to_shadow(j, ri, g, 0, old_end);
        /* past the last position: zeros, for the scores of a block's padding rows */
        float *k = shadow_of(j, ri, g), *v = k + (size_t)j->shadow_rows[ri] * hd;
        const size_t end = (size_t)(r->pos0 + r->n), pad = (size_t)j->shadow_rows[ri] - end;
        memset(k + end * hd, 0, sizeof(float) * pad * hd);
        memset(v + end * hdp, 0, sizeof(float) * pad * hdp);
        done(&flags[g]);
    }
    if (!j->prep) return;
    for (int bb = 0; bb <= b; bb++) {
        _Atomic int *state = &flags[n_kv + bb * n_kv + g];
        if (claim(state)) {
            const int t0 = bb * j->tokens, nt = r->n - t0 < j->tokens ? r->n - t0 : j->tokens;
            j->prep->keys(j->prep->ctx, ri, g, t0, nt);
            if (shadowed(j, ri)) to_shadow(j, ri, g, r->pos0 + t0, r->pos0 + t0 + nt);
            done(state);
        }
    }
}

/* Item i: within a run, the blocks of tokens from the last (the most keys)
 * to the first, so that the dynamic chunks of the pool start with the
 * longest work; within a block, the KV heads. */
static void tiled_items(void *arg, int64_t begin, int64_t end, int thread_index) {
    const struct tiled_job *j = arg;
    const struct attn_tiles *t = j->t;
    struct tile_set ts;
    carve(t, t->mem + (size_t)thread_index * t->per_thread, &ts);
    for (int64_t item = begin; item < end; item++) {
        int64_t local = item;
        int ri = 0, blocks = blocks_of(&j->runs[0], j->tokens);
        while (local >= (int64_t)blocks * t->n_head_kv) {
            local -= (int64_t)blocks * t->n_head_kv;
            blocks = blocks_of(&j->runs[++ri], j->tokens);
        }
        const struct attn_run *r = &j->runs[ri];
        const int b = blocks - 1 - (int)(local / t->n_head_kv), g = (int)(local % t->n_head_kv);
        const int t0 = b * j->tokens, nt = r->n - t0 < j->tokens ? r->n - t0 : j->tokens;
        if (j->prep) j->prep->queries(j->prep->ctx, ri, g, t0, nt);
        if (j->prep || shadowed(j, ri)) need_keys(j, ri, b, g);
        float *sk = shadow_of(j, ri, g);
        attend(t, j->ak, r, g, t0, nt, &ts, sk, sk ? sk + (size_t)j->shadow_rows[ri] * t->head_dim : NULL);
        if (j->done) j->done->outputs(j->done->ctx, ri, g, t0, nt);
    }
}

/* Room for the readiness flags: per run and KV head, and per (run, block
 * of tokens, KV head); false when out of memory. */
static bool ready_flags(struct attn_tiles *t, struct tiled_job *job) {
    job->first_ready[0] = 0;
    for (int i = 0; i < job->n_runs; i++)
        job->first_ready[i + 1] = job->first_ready[i] + (1 + blocks_of(&job->runs[i], job->tokens)) * t->n_head_kv;
    int need = job->first_ready[job->n_runs];
    if (need > t->max_ready) {
        _Atomic int *grown = malloc(sizeof *grown * (size_t)need);
        if (!grown) return false;
        free(t->ready);
        t->ready = grown;
        t->max_ready = need;
    }
    for (int i = 0; i < need; i++) atomic_init(&t->ready[i], KEYS_TODO);
    return true;
}

/* A shadow for each run of several blocks of tokens (their items would
 * each convert the same keys), within SHADOW_MAX_BYTES; false when none. */
enum { SHADOW_MAX_BYTES = 256 << 20 };
static bool shadows(struct attn_tiles *t, struct tiled_job *job) {
    size_t need = 0;
    for (int i = 0; i < job->n_runs; i++) {
        job->shadow_at[i] = SIZE_MAX;
        const struct attn_run *r = &job->runs[i];
        if (blocks_of(r, job->tokens) < 2) continue;
        job->shadow_rows[i] = round_up(r->pos0 + r->n, KEY_BLOCK) + 8; /* a block's padding rows past the end */
        job->shadow_at[i] = need;
        need += (size_t)job->shadow_rows[i] * t->n_head_kv * (size_t)(t->head_dim + t->hdp);
    }
    if (need == 0) return false;
    if (need > t->shadow_floats) {
        float *grown = need <= SHADOW_MAX_BYTES / sizeof(float) ? aligned_alloc(64, need * sizeof(float)) : NULL;
        if (!grown) {
            for (int i = 0; i < job->n_runs; i++) job->shadow_at[i] = SIZE_MAX;
            return false;
        }
        free(t->shadow);
        t->shadow = grown;
        t->shadow_floats = need;
    }
    return true;
}

void attn_tiled_prepared(struct threadpool *pool, const struct attn_kernels *ak, struct attn_tiles *t,
                         const struct attn_run *runs, int n_runs, const struct attn_prepare *prep) {
    struct tiled_job job = { .t = t, .ak = ak ? ak : attn_kernels(), .runs = runs, .n_runs = n_runs,
                             .tokens = t->max_tokens, .prep = prep, .done = prep && prep->outputs ? prep : NULL };
    int threads = pool ? threadpool_size(pool) : 1;
    if (threads > t->threads) { /* more threads than tiles: serial */
        pool = NULL;
        threads = 1;
    }
    /* Smaller blocks of tokens while there are fewer than two items per thread. */
    int64_t items;
    for (;;) {
        items = 0;
        for (int i = 0; i < n_runs; i++) items += (int64_t)blocks_of(&runs[i], job.tokens) * t->n_head_kv;
        if (items == 0) return;
        if (job.tokens == 1 || items >= 2 * threads) break;
        job.tokens = (job.tokens + 1) / 2;
    }
    for (int i = 0; i < ATTN_RUNS_MAX; i++) job.shadow_at[i] = SIZE_MAX;
    const bool fits = n_runs <= ATTN_RUNS_MAX, shadowed = fits && shadows(t, &job);
    if ((prep || shadowed) && !(fits && ready_flags(t, &job))) {
        for (int i = 0; i < ATTN_RUNS_MAX; i++) job.shadow_at[i] = SIZE_MAX;
        if (prep) { /* no room to track the blocks: ready everything first, in order */
            for (int ri = 0; ri < n_runs; ri++)
                for (int g = 0; g < t->n_head_kv; g++) {
                    prep->queries(prep->ctx, ri, g, 0, runs[ri].n);
                    prep->keys(prep->ctx, ri, g, 0, runs[ri].n);
                }
            job.prep = NULL;
        }
    }
    threadpool_parallel_for(pool, items, 1, tiled_items, &job);
}

void attn_tiled(struct threadpool *pool, const struct attn_kernels *ak, struct attn_tiles *t, const struct attn_run *runs,
                int n_runs) {
    attn_tiled_prepared(pool, ak, t, runs, n_runs, NULL);
}
