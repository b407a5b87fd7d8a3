#include "arch/block_attention.h"

#include "arch/attn_kernels.h"
#include "arch/block_norm.h"
#include "arch/block_proj.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "model/context_impl.h"
#include "model/model_load.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int attn_bind(struct model *m, struct attn_weights *w, int l, int n_head_kv) {
    const struct model_hparams *hp = &m->hp;
    int D = hp->n_embd, hd = hp->head_dim, q_dim = hp->n_head * hd, kv_dim = n_head_kv * hd;
    if (model_want_matrix(m, &w->wq, D, q_dim, "blk.%d.attn_q.weight", l) ||
        model_want_matrix(m, &w->wk, D, kv_dim, "blk.%d.attn_k.weight", l) ||
        model_want_matrix(m, &w->wv, D, kv_dim, "blk.%d.attn_v.weight", l) ||
        model_want_matrix(m, &w->wo, q_dim, D, "blk.%d.attn_output.weight", l) ||
        !(w->q_norm = model_want_vector(m, hd, "blk.%d.attn_q_norm.weight", l)) ||
        !(w->k_norm = model_want_vector(m, hd, "blk.%d.attn_k_norm.weight", l)))
        return -1;
    return attn_describe(m, w, l);
}

int attn_describe(struct model *m, const struct attn_weights *w, int l) {
    return model_describe_dense(m, DENSE_ATTN_Q, l, &w->wq) || model_describe_dense(m, DENSE_ATTN_K, l, &w->wk) ||
                   model_describe_dense(m, DENSE_ATTN_V, l, &w->wv) || model_describe_dense(m, DENSE_ATTN_O, l, &w->wo)
               ? -1
               : 0;
}

struct attn_scratch {
    int n_ctx;
    float *q;                   /* (n_batch, n_head*head_dim) */
    float *q_gate;              /* (n_batch, 2*n_head*head_dim) the projection, with an output gate */
    float *gate;                /* (n_batch, n_head*head_dim) the gate, with an output gate */
    float *k, *v;               /* (n_batch, n_head_kv*head_dim) */
    float *out;                 /* (n_batch, n_head*head_dim) attention output */
    float *scores;              /* (threads, n_ctx, group) attention scores */
    float *q_rounded;           /* (threads, group, head_dim) queries rounded to the cache type */
    float *rope_cos, *rope_sin; /* (n_batch, n_rot/2) for the current batch */
};

static int rotated(const struct attn_shape *sh) { return sh->n_rot > 0 ? sh->n_rot : sh->head_dim; }

struct attn_scratch *attn_scratch_new(const struct attn_shape *sh, int n_batch, int n_ctx, int threads) {
    struct attn_scratch *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    size_t B = (size_t)n_batch, qd = (size_t)sh->n_head * sh->head_dim, kvd = (size_t)sh->n_head_kv * sh->head_dim;
    size_t group = (size_t)(sh->n_head / sh->n_head_kv);
    s->n_ctx = n_ctx;
    s->q = malloc(B * qd * 4);
    if (sh->output_gate) {
        s->q_gate = malloc(B * qd * 2 * 4);
        s->gate = malloc(B * qd * 4);
        if (!s->q_gate || !s->gate) {
            attn_scratch_free(s);
            return NULL;
        }
    }
    s->k = malloc(B * kvd * 4);
    s->v = malloc(B * kvd * 4);
    s->out = malloc(B * qd * 4);
    s->scores = malloc((size_t)threads * n_ctx * group * 4);
    s->q_rounded = malloc((size_t)threads * group * sh->head_dim * 4);
    s->rope_cos = malloc(B * rotated(sh) / 2 * 4);
    s->rope_sin = malloc(B * rotated(sh) / 2 * 4);
    if (!s->q || !s->k || !s->v || !s->out || !s->scores || !s->q_rounded || !s->rope_cos || !s->rope_sin) {
        attn_scratch_free(s);
        return NULL;
    }
    return s;
}

void attn_scratch_free(struct attn_scratch *s) {
    if (!s) return;
    free(s->q); free(s->q_gate); free(s->gate); free(s->k); free(s->v); free(s->out);
    free(s->scores); free(s->q_rounded); free(s->rope_cos); free(s->rope_sin);
    free(s);
}

/* Whether rotated pair i takes the text position under IMRoPE (ggml's
 * sector rule: axes interleave, time/height/width every third pair while
 * their section lasts) or the extra axis's 0. */
static bool imrope_turns(const int *sec, int i) {
    int all = sec[0] + sec[1] + sec[2] + sec[3], sector = i % all;
    return (sector % 3 == 0 && sector < 3 * sec[0]) || (sector % 3 == 1 && sector < 3 * sec[1]) ||
           (sector % 3 == 2 && sector < 3 * sec[2]);
}

/* NEOX RoPE tables: pair i of a head rotates by pos * base^(-2i/n_rot),
 * the power built by repeated multiplication in float exactly as the
 * reference does. */
static void rope_rows(struct attn_scratch *s, const struct attn_shape *sh, int row0, int pos0, int n) {
    int half = rotated(sh) / 2;
    float theta_scale = powf(sh->rope_base, -2.0f / (float)rotated(sh));
    for (int t = 0; t < n; t++) {
        float theta = (float)(pos0 + t);
        float *cs = s->rope_cos + (size_t)(row0 + t) * half, *sn = s->rope_sin + (size_t)(row0 + t) * half;
        for (int i = 0; i < half; i++) {
            float th = !sh->imrope_sections || imrope_turns(sh->imrope_sections, i) ? theta : 0.0f;
            cs[i] = cosf(th);
            sn[i] = sinf(th);
            theta *= theta_scale;
        }
    }
}

void attn_rope_prepare(struct attn_scratch *s, const struct attn_shape *sh, int pos0, int n) {
    rope_rows(s, sh, 0, pos0, n);
}

/* RMSNorm of a head, then its first n_rot dims turn in NEOX pairs (i, i + n_rot/2). */
static void norm_rope_head(float *v, const float *w, const float *cs, const float *sn, int hd, int n_rot, float eps) {
    rms_norm(v, w, v, hd, eps);
    int half = n_rot / 2;
    for (int i = 0; i < half; i++) {
        float x0 = v[i], x1 = v[i + half];
        v[i] = x0 * cs[i] - x1 * sn[i];
        v[i + half] = x0 * sn[i] + x1 * cs[i];
    }
}

static void store_kv(void *cache, size_t elem, size_t offset, const float *src, size_t n) {
    if (elem == 4) memcpy((float *)cache + offset, src, n * 4);
    else f32_to_fp16_row(src, (uint16_t *)cache + offset, (int64_t)n);
}

/* Runs (sequences) whose attention goes in one job. */
enum { ATTN_MAX_RUNS = 64 };

struct attn_job {
    const struct attn_shape *sh;
    struct attn_scratch *s;
    const struct layer_slice *kv;
    size_t kv_elem;
    int n_past;
    int row0;                   /* the run's first row in s->q and s->out */
};

/* One (token, KV head) per item: the query heads of the group share each
 * key and value row as it is read. Causal softmax over the cache. With an
 * f16 cache, q and the probabilities are rounded to f16 before their dot
 * products, as the reference computes with f16 caches. */
static void attention_items(void *arg, int64_t begin, int64_t end, int thread_index) {
    struct attn_job *j = arg;
    const struct attn_shape *sh = j->sh;
    struct attn_scratch *s = j->s;
    int hd = sh->head_dim, group = sh->n_head / sh->n_head_kv;
    size_t kvd = (size_t)sh->n_head_kv * hd;
    float scale = 1.0f / sqrtf((float)hd);
    float *scores = s->scores + (size_t)thread_index * s->n_ctx * group; /* (n_ctx, group) */
    float *qh = s->q_rounded + (size_t)thread_index * group * hd;      /* (group, hd) */
    const struct attn_kernels *ak = attn_kernels();
    bool f16 = j->kv_elem == 2;
    for (int64_t item = begin; item < end; item++) {
        int t = (int)(item / sh->n_head_kv), g = (int)(item % sh->n_head_kv);
        int n_keys = j->n_past + t + 1;
        size_t row = (size_t)(j->row0 + t);
        const float *q = s->q + row * sh->n_head * hd + (size_t)g * group * hd;
        float *out = s->out + row * sh->n_head * hd + (size_t)g * group * hd;
        size_t off = (size_t)g * hd;
        if (f16) {
            f32_to_fp16_row(q, (uint16_t *)out, group * hd); /* out is free until wsum */
            fp16_to_f32_row((const uint16_t *)out, qh, group * hd);
            const uint16_t *kc = (const uint16_t *)j->kv->k + off;
            for (int p = 0; p < n_keys; p++) ak->dot_f16(qh, group, hd, kc + (size_t)p * kvd, scores + (size_t)p * group);
        } else {
            const float *kc = (const float *)j->kv->k + off;
            for (int p = 0; p < n_keys; p++) ak->dot_f32(q, group, hd, kc + (size_t)p * kvd, scores + (size_t)p * group);
        }
        /* the probabilities, in place (rounded to f16 for an f16 cache) */
        ak->softmax(scores, n_keys, group, scale, f16);
        if (f16)
            ak->wsum_f16(scores, group, n_keys, (const uint16_t *)j->kv->v + off, kvd, hd, out);
        else
            ak->wsum_f32(scores, group, n_keys, (const float *)j->kv->v + off, kvd, hd, out);
    }
}

/* Rows row0..row0+n-1 of the pass, one sequence's run at positions
 * pos0..: q/k norm and rotation, and their keys and values into that
 * sequence's cache kv. */
static void store_run(struct context *c, const struct attn_shape *sh, const struct attn_weights *w,
                      struct attn_scratch *s, struct layer_slice *kv, int pos0, int row0, int n) {
    int hd = sh->head_dim, n_rot = rotated(sh), half = n_rot / 2;
    size_t qd = (size_t)sh->n_head * hd, kvd = (size_t)sh->n_head_kv * hd;
    for (int t = row0; t < row0 + n; t++) {
        const float *cs = s->rope_cos + (size_t)t * half, *sn = s->rope_sin + (size_t)t * half;
        for (int h = 0; h < sh->n_head; h++)
            norm_rope_head(s->q + t * qd + (size_t)h * hd, w->q_norm, cs, sn, hd, n_rot, sh->rms_eps);
        for (int h = 0; h < sh->n_head_kv; h++)
            norm_rope_head(s->k + t * kvd + (size_t)h * hd, w->k_norm, cs, sn, hd, n_rot, sh->rms_eps);
        size_t off = (size_t)(pos0 + t - row0) * kvd;
        store_kv(kv->k, c->kv_elem, off, s->k + t * kvd, kvd);
        store_kv(kv->v, c->kv_elem, off, s->v + t * kvd, kvd);
    }
}

/* Several runs' attention as one job: the items of run r (its tokens times
 * the KV heads) are numbered after those of the runs before it, so that the
 * pool waits once per layer, not once per sequence. */
struct attn_runs_job {
    struct attn_job *runs;             /* (n_runs) each run's sequence cache, first position and rows */
    const int64_t *first_item;         /* (n_runs + 1) */
    int n_runs;
};

static void attention_runs_items(void *arg, int64_t begin, int64_t end, int thread_index) {
    struct attn_runs_job *j = arg;
    int r = 0;
    while (r + 1 < j->n_runs && begin >= j->first_item[r + 1]) r++;
    for (; begin < end && r < j->n_runs; r++) {
        int64_t stop = end < j->first_item[r + 1] ? end : j->first_item[r + 1];
        attention_items(&j->runs[r], begin - j->first_item[r], stop - j->first_item[r], thread_index);
        begin = stop;
    }
}

/* The q, k, v projections of all n rows (and the gate split off q). */
static void project_qkv(struct context *c, const struct attn_shape *sh, const struct attn_weights *w,
                        struct attn_scratch *s, int n, const float *xn) {
    int hd = sh->head_dim;
    size_t qd = (size_t)sh->n_head * hd;
    const struct matrix *qkv[3] = { &w->wq, &w->wk, &w->wv };
    float *qkv_out[3] = { sh->output_gate ? s->q_gate : s->q, s->k, s->v };
    project_rows(c, qkv, qkv_out, 3, xn, n);
    if (sh->output_gate) /* per head: [query | gate] */
        for (int t = 0; t < n; t++)
            for (int h = 0; h < sh->n_head; h++) {
                const float *src = s->q_gate + ((size_t)t * sh->n_head + h) * 2 * hd;
                memcpy(s->q + t * qd + (size_t)h * hd, src, (size_t)hd * 4);
                memcpy(s->gate + t * qd + (size_t)h * hd, src + hd, (size_t)hd * 4);
            }
}

/* The output gate and projection of all n rows. */
static void gate_output(struct context *c, const struct attn_shape *sh, const struct attn_weights *w,
                        struct attn_scratch *s, int n, float *out) {
    size_t qd = (size_t)sh->n_head * sh->head_dim;
    if (sh->output_gate)
        for (size_t i = 0; i < (size_t)n * qd; i++) s->out[i] *= 1.0f / (1.0f + expf(-s->gate[i]));
    dense_matmul(c, &w->wo, s->out, n, out);
}

void attention(struct context *c, const struct attn_shape *sh, const struct attn_weights *w, struct attn_scratch *s,
               struct layer_slice *kv, int n, const float *xn, float *out) {
    int64_t t0 = time_ns();
    project_qkv(c, sh, w, s, n, xn);
    int64_t t1 = time_ns();
    store_run(c, sh, w, s, kv, c->n_past, 0, n);
    struct attn_job job = { sh, s, kv, c->kv_elem, c->n_past, 0 };
    threadpool_parallel_for(c->pool, (int64_t)n * sh->n_head_kv, 1, attention_items, &job);
    int64_t t2 = time_ns();
    gate_output(c, sh, w, s, n, out);
    int64_t t3 = time_ns();
    c->times.attn_matmul += (t1 - t0) + (t3 - t2);
    c->times.attention += t2 - t1;
}

void attention_layer(struct context *c, const struct attn_shape *sh, const struct attn_weights *w,
                     struct attn_scratch *s, int layer, int n, const float *xn, float *out) {
    int64_t t0 = time_ns();
    project_qkv(c, sh, w, s, n, xn);
    int64_t t1 = time_ns();
    struct attn_job runs[ATTN_MAX_RUNS];
    int64_t first_item[ATTN_MAX_RUNS + 1];
    for (int r0 = 0; r0 < c->n_runs; r0 += ATTN_MAX_RUNS) {
        int n_runs = c->n_runs - r0 < ATTN_MAX_RUNS ? c->n_runs - r0 : ATTN_MAX_RUNS;
        first_item[0] = 0;
        for (int r = 0; r < n_runs; r++) {
            const struct batch_run *run = &c->runs[r0 + r];
            struct layer_slice *kv = &c->seqs[run->seq].layers[layer];
            store_run(c, sh, w, s, kv, run->pos0, run->first, run->n);
            runs[r] = (struct attn_job){ sh, s, kv, c->kv_elem, run->pos0, run->first };
            first_item[r + 1] = first_item[r] + (int64_t)run->n * sh->n_head_kv;
        }
        struct attn_runs_job job = { runs, first_item, n_runs };
        threadpool_parallel_for(c->pool, first_item[n_runs], 1, attention_runs_items, &job);
    }
    int64_t t2 = time_ns();
    gate_output(c, sh, w, s, n, out);
    int64_t t3 = time_ns();
    c->times.attn_matmul += (t1 - t0) + (t3 - t2);
    c->times.attention += t2 - t1;
}

void attn_rope_prepare_runs(struct attn_scratch *s, const struct attn_shape *sh, const struct context *c) {
    for (int r = 0; r < c->n_runs; r++) rope_rows(s, sh, c->runs[r].first, c->runs[r].pos0, c->runs[r].n);
}
