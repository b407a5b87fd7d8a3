#include "arch/block_attention.h"

#include "arch/attn_tiled.h"
#include "arch/block_norm.h"
#include "arch/block_proj.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "model/context_impl.h"
#include "model/model_load.h"
#include "arch/tensor_names.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int attn_bind(struct model *m, struct attn_weights *w, int l, int n_head_kv) {
    const struct model_hparams *hp = &m->hp;
    int D = hp->n_embd, hd = hp->head_dim, q_dim = hp->n_head * hd, kv_dim = n_head_kv * hd;
    if (model_want_matrix(m, &w->wq, D, q_dim, TN_LAYER(TN_ATTN_Q), l) ||
        model_want_matrix(m, &w->wk, D, kv_dim, TN_LAYER(TN_ATTN_K), l) ||
        model_want_matrix(m, &w->wv, D, kv_dim, TN_LAYER(TN_ATTN_V), l) ||
        model_want_matrix(m, &w->wo, q_dim, D, TN_LAYER(TN_ATTN_OUTPUT), l) ||
        !(w->q_norm = model_want_vector(m, hd, TN_LAYER(TN_ATTN_Q_NORM), l)) ||
        !(w->k_norm = model_want_vector(m, hd, TN_LAYER(TN_ATTN_K_NORM), l)))
        return -1;
    return attn_describe(m, w, l);
}

struct attn_shape attn_shape_of(const struct model_hparams *hp) {
    return (struct attn_shape){ .n_embd = hp->n_embd, .n_head = hp->n_head, .n_head_kv = hp->n_head_kv,
                                .head_dim = hp->head_dim, .rope_base = hp->rope_base, .rms_eps = hp->rms_eps };
}

int attn_describe(struct model *m, const struct attn_weights *w, int l) {
    return model_describe_dense(m, DENSE_ATTN_Q, l, &w->wq) || model_describe_dense(m, DENSE_ATTN_K, l, &w->wk) ||
                   model_describe_dense(m, DENSE_ATTN_V, l, &w->wv) || model_describe_dense(m, DENSE_ATTN_O, l, &w->wo)
               ? -1
               : 0;
}

struct attn_scratch {
    float *q;                   /* (n_batch, n_head*head_dim) */
    float *q_gate;              /* (n_batch, 2*n_head*head_dim) the projection, with an output gate */
    float *gate;                /* (n_batch, n_head*head_dim) the gate, with an output gate */
    float *k, *v;               /* (n_batch, n_head_kv*head_dim) */
    float *out;                 /* (n_batch, n_head*head_dim) attention output */
    struct attn_tiles *tiles;   /* the attention kernel's per-thread tiles */
    float *rope_cos, *rope_sin; /* (n_batch, n_rot/2) for the current batch */
};

static int rotated(const struct attn_shape *sh) { return sh->n_rot > 0 ? sh->n_rot : sh->head_dim; }

struct attn_scratch *attn_scratch_new(const struct attn_shape *sh, int n_batch, int n_ctx, int threads) {
    struct attn_scratch *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    size_t B = (size_t)n_batch, qd = (size_t)sh->n_head * sh->head_dim, kvd = (size_t)sh->n_head_kv * sh->head_dim;
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
    s->tiles = attn_tiles_new(sh->n_head, sh->n_head_kv, sh->head_dim, n_ctx, threads);
    s->rope_cos = malloc(B * rotated(sh) / 2 * 4);
    s->rope_sin = malloc(B * rotated(sh) / 2 * 4);
    if (!s->q || !s->k || !s->v || !s->out || !s->tiles || !s->rope_cos || !s->rope_sin) {
        attn_scratch_free(s);
        return NULL;
    }
    return s;
}

void attn_scratch_free(struct attn_scratch *s) {
    if (!s) return;
    free(s->q); free(s->q_gate); free(s->gate); free(s->k); free(s->v); free(s->out);
    attn_tiles_free(s->tiles); free(s->rope_cos); free(s->rope_sin);
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

/* The batch rows and cache of each run of one attention call, for the
 * preparation its items do (attn_tiled_prepared): q/k norm and rotation,
 * keys and values into the cache. */
struct prep_runs {
    struct context *c;
    const struct attn_shape *sh;
    const struct attn_weights *w;
    struct attn_scratch *s;
    int first[ATTN_RUNS_MAX], pos0[ATTN_RUNS_MAX];
    struct layer_slice *kv[ATTN_RUNS_MAX];
    enum qtype out_act; /* the output projection's input type, when the items quantize for it */
    char *out_q;        /* (n, out_q_stride) */
    size_t out_q_stride;
};

static void prep_queries(void *ctx, int run, int g, int t0, int nt) {
    const struct prep_runs *p = ctx;
    const struct attn_shape *sh = p->sh;
    int hd = sh->head_dim, n_rot = rotated(sh), half = n_rot / 2, group = sh->n_head / sh->n_head_kv;
    size_t qd = (size_t)sh->n_head * hd;
    for (int t = p->first[run] + t0; t < p->first[run] + t0 + nt; t++) {
        const float *cs = p->s->rope_cos + (size_t)t * half, *sn = p->s->rope_sin + (size_t)t * half;
        for (int h = g * group; h < (g + 1) * group; h++)
            norm_rope_head(p->s->q + t * qd + (size_t)h * hd, p->w->q_norm, cs, sn, hd, n_rot, sh->rms_eps);
    }
}

static void prep_keys(void *ctx, int run, int g, int t0, int nt) {
    const struct prep_runs *p = ctx;
    const struct attn_shape *sh = p->sh;
    int hd = sh->head_dim, n_rot = rotated(sh), half = n_rot / 2;
    size_t kvd = (size_t)sh->n_head_kv * hd, head = (size_t)g * hd;
    for (int i = t0; i < t0 + nt; i++) {
        size_t t = (size_t)(p->first[run] + i);
        const float *cs = p->s->rope_cos + t * half, *sn = p->s->rope_sin + t * half;
        float *k = p->s->k + t * kvd + head;
        norm_rope_head(k, p->w->k_norm, cs, sn, hd, n_rot, sh->rms_eps);
        size_t off = (size_t)(p->pos0[run] + i) * kvd + head;
        store_kv(p->kv[run]->k, p->c->kv_elem, off, k, (size_t)hd);
        store_kv(p->kv[run]->v, p->c->kv_elem, off, p->s->v + t * kvd + head, (size_t)hd);
    }
}

/* A group's outputs of some tokens, quantized into their slices of the
 * output projection's input rows (blocks of the activation type do not
 * cross a group's slice: out_slices). */
static void quantize_outputs(void *ctx, int run, int g, int t0, int nt) {
    const struct prep_runs *p = ctx;
    const struct attn_shape *sh = p->sh;
    const int64_t width = (int64_t)(sh->n_head / sh->n_head_kv) * sh->head_dim;
    const size_t qd = (size_t)sh->n_head * sh->head_dim, at = quant_row_size(p->out_act, width * g);
    for (int t = p->first[run] + t0; t < p->first[run] + t0 + nt; t++)
        quant_quantize_act(p->out_act, p->s->out + t * qd + (size_t)(width * g), p->out_q + t * p->out_q_stride + at,
                           width);
}

/* Whether the attention items can quantize their outputs for wo: no gate
 * between them, and a group's slice a whole number of blocks. */
static bool out_slices(const struct attn_shape *sh, const struct matrix *wo) {
    const enum qtype act = quant_traits(wo->type)->vec_dot_type;
    const int width = sh->n_head / sh->n_head_kv * sh->head_dim;
    return !sh->output_gate && width % quant_traits(act)->block_size == 0;
}

bool attn_input_type(const struct attn_weights *w, enum qtype *act) {
    *act = quant_traits(w->wq.type)->vec_dot_type;
    return quant_traits(w->wk.type)->vec_dot_type == *act && quant_traits(w->wv.type)->vec_dot_type == *act;
}

const void *attn_input_norm(struct context *c, const struct attn_weights *w, float *x, const float *add,
                            const float *norm, float *xn, int n, int n_embd, float eps) {
    enum qtype act;
    if (!w || !norm || !attn_input_type(w, &act)) {
        residual_norm_rows(c->pool, x, add, norm, xn, n, n_embd, eps);
        return NULL;
    }
    residual_norm_quantize_rows(c->pool, x, add, norm, xn, n, n_embd, eps, act, c->act);
    return c->act;
}

/* The q, k, v projections of all n rows (and the gate split off q); xq:
 * xn quantized already, or NULL. */
static void project_qkv(struct context *c, const struct attn_shape *sh, const struct attn_weights *w,
                        struct attn_scratch *s, int n, const float *xn, const void *xq) {
    int hd = sh->head_dim;
    size_t qd = (size_t)sh->n_head * hd;
    const struct matrix *qkv[3] = { &w->wq, &w->wk, &w->wv };
    float *qkv_out[3] = { sh->output_gate ? s->q_gate : s->q, s->k, s->v };
    project_rows_preq(c, qkv, qkv_out, 3, xn, xq, n);
    if (sh->output_gate) /* per head: [query | gate] */
        for (int t = 0; t < n; t++)
            for (int h = 0; h < sh->n_head; h++) {
                const float *src = s->q_gate + ((size_t)t * sh->n_head + h) * 2 * hd;
                memcpy(s->q + t * qd + (size_t)h * hd, src, (size_t)hd * 4);
                memcpy(s->gate + t * qd + (size_t)h * hd, src + hd, (size_t)hd * 4);
            }
}

/* The output gate and projection of all n rows; the attention's items
 * quantized the rows into c->act already when `quantized`. */
static void gate_output(struct context *c, const struct attn_shape *sh, const struct attn_weights *w,
                        struct attn_scratch *s, int n, bool quantized, float *out) {
    size_t qd = (size_t)sh->n_head * sh->head_dim;
    if (quantized) {
        dense_matmul_preq(c, &w->wo, s->out, c->act, n, out);
        return;
    }
    if (sh->output_gate)
        for (size_t i = 0; i < (size_t)n * qd; i++) s->out[i] *= 1.0f / (1.0f + expf(-s->gate[i]));
    dense_matmul(c, &w->wo, s->out, n, out);
}

/* Attention of runs[0..n_runs) after the projections, their caches those
 * of layer `layer` of their sequences (or kv, when there is one run): each
 * item of the attention kernel readies its own queries and the keys it
 * needs, so the q/k norm, rotation and cache stores run in the kernel's
 * parallel region. */
static bool attend_runs(struct context *c, const struct attn_shape *sh, const struct attn_weights *w,
                        struct attn_scratch *s, const struct batch_run *runs, int n_runs, int layer,
                        struct layer_slice *kv) {
    size_t qd = (size_t)sh->n_head * sh->head_dim, kvd = (size_t)sh->n_head_kv * sh->head_dim;
    struct prep_runs p = { .c = c, .sh = sh, .w = w, .s = s };
    struct attn_prepare prep = { .queries = prep_queries, .keys = prep_keys, .ctx = &p };
    const bool quantize = out_slices(sh, &w->wo);
    if (quantize) {
        p.out_act = quant_traits(w->wo.type)->vec_dot_type;
        p.out_q = c->act;
        p.out_q_stride = quant_row_size(p.out_act, (int64_t)qd);
        prep.outputs = quantize_outputs;
    }
    struct attn_run ar[ATTN_RUNS_MAX];
    for (int r0 = 0; r0 < n_runs; r0 += ATTN_RUNS_MAX) {
        int n = n_runs - r0 < ATTN_RUNS_MAX ? n_runs - r0 : ATTN_RUNS_MAX;
        for (int r = 0; r < n; r++) {
            const struct batch_run *run = &runs[r0 + r];
            p.first[r] = run->first;
            p.pos0[r] = run->pos0;
            p.kv[r] = kv ? kv : &c->seqs[run->seq].layers[layer];
            ar[r] = (struct attn_run){ s->q + (size_t)run->first * qd, s->out + (size_t)run->first * qd, run->n,
                                       run->pos0, p.kv[r]->k, p.kv[r]->v, kvd, c->kv_elem };
        }
        attn_tiled_prepared(c->pool, NULL, s->tiles, ar, n, &prep);
    }
    return quantize;
}

static void attention_of(struct context *c, const struct attn_shape *sh, const struct attn_weights *w,
                         struct attn_scratch *s, const struct batch_run *runs, int n_runs, int layer,
                         struct layer_slice *kv, int n, const float *xn, const void *xq, float *out) {
    int64_t t0 = time_ns();
    project_qkv(c, sh, w, s, n, xn, xq);
    int64_t t1 = time_ns();
    bool quantized = attend_runs(c, sh, w, s, runs, n_runs, layer, kv);
    int64_t t2 = time_ns();
    gate_output(c, sh, w, s, n, quantized, out);
    int64_t t3 = time_ns();
    c->times.ns[OP_ATTN_MATMUL] += (t1 - t0) + (t3 - t2);
    c->times.ns[OP_ATTENTION] += t2 - t1;
}

void attention(struct context *c, const struct attn_shape *sh, const struct attn_weights *w, struct attn_scratch *s,
               struct layer_slice *kv, int n, const float *xn, float *out) {
    struct batch_run run = { .first = 0, .n = n, .pos0 = c->n_past };
    attention_of(c, sh, w, s, &run, 1, -1, kv, n, xn, NULL, out);
}

void attention_layer(struct context *c, const struct attn_shape *sh, const struct attn_weights *w,
                     struct attn_scratch *s, int layer, int n, const float *xn, const void *xq, float *out) {
    attention_of(c, sh, w, s, c->runs, c->n_runs, layer, NULL, n, xn, xq, out);
}

void attn_rope_prepare_runs(struct attn_scratch *s, const struct attn_shape *sh, const struct context *c) {
    for (int r = 0; r < c->n_runs; r++) rope_rows(s, sh, c->runs[r].first, c->runs[r].pos0, c->runs[r].n);
}
