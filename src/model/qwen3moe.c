/* The qwen3moe forward pass, top to bottom:
 *   embed -> per layer: RMSNorm, q/k/v, per-head q/k RMSNorm, NEOX RoPE,
 *   KV cache, causal softmax attention, output projection, residual;
 *   RMSNorm, router softmax + top-k (renormalised), experts, residual
 *   -> output norm -> lm head.
 * Most of the time goes to the expert matmuls (experts_cpu.c) and, at
 * decode, to the lm head. */
#include "model/model.h"

#include "core/error.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "model/attn_kernels.h"
#include "moe/executor.h"
#include "moe/experts.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct context {
    struct model *m;
    struct threadpool *pool;
    int n_ctx, n_batch, n_past;
    enum kv_type kv_type;
    size_t kv_elem;             /* 2 (f16) or 4 (f32) */
    void *k_cache, *v_cache;    /* (layer, n_ctx, kv_dim) */
    float *x;                   /* (n_batch, n_embd) residual stream */
    float *xn;                  /* (n_batch, n_embd) normalised input of a block */
    float *q;                   /* (n_batch, n_head*head_dim) */
    float *k, *v;               /* (n_batch, kv_dim) */
    float *attn;                /* (n_batch, n_head*head_dim) attention output */
    float *tmp;                 /* (n_batch, n_embd) block output */
    float *router;              /* (n_batch, n_expert) probabilities */
    int32_t *expert_ids;        /* (n_batch, top_k) */
    float *expert_w;            /* (n_batch, top_k) */
    float *scores;              /* (threads, n_ctx, group) attention scores */
    float *attn_q;              /* (threads, group, head_dim) queries rounded to the cache type */
    float *last_logits;         /* (n_vocab) */
    void *act;                  /* quantized activations for matmul */
    float *rope_cos, *rope_sin; /* (n_batch, head_dim/2) for the current batch */
    struct moe_scratch *moe;
    struct moe_executor *exec;
    route_observer_fn on_route;
    void *route_user;
    struct op_times times;
};

static void rms_norm(const float *x, const float *w, float *y, int n, float eps) {
    /* Sum of squares in double, scale in float: the reference does the same. */
    double sum = 0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    float scale = 1.0f / sqrtf((float)(sum / n) + eps);
    for (int i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
}

static size_t max_scratch(const struct model *m, int M) {
    size_t best = matmul_scratch_size(&m->output, M);
    for (int l = 0; l < m->hp.n_layers; l++) {
        const struct layer_weights *L = &m->layers[l];
        const struct matrix *all[] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->gate_inp };
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
            size_t s = matmul_scratch_size(all[i], M);
            if (s > best) best = s;
        }
    }
    return best;
}

struct context *context_new(struct model *m, const struct context_params *p) {
    struct context *c = calloc(1, sizeof *c);
    if (!c) { moex_errorf("out of memory"); return NULL; }
    const struct model_hparams *hp = &m->hp;
    c->m = m;
    c->pool = p->pool;
    c->n_ctx = p->n_ctx > 0 ? p->n_ctx : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
    c->n_batch = p->n_batch > 0 ? p->n_batch : 512;
    c->kv_type = p->kv_type;
    c->kv_elem = p->kv_type == KV_F32 ? 4 : 2;
    size_t B = (size_t)c->n_batch, D = (size_t)hp->n_embd;
    size_t qd = (size_t)hp->n_head * hp->head_dim, kvd = (size_t)hp->n_head_kv * hp->head_dim;
    size_t kv_bytes = (size_t)hp->n_layers * c->n_ctx * kvd * c->kv_elem;
    int threads = threadpool_size(c->pool);
    c->k_cache = malloc(kv_bytes);
    c->v_cache = malloc(kv_bytes);
    c->x = malloc(B * D * 4);
    c->xn = malloc(B * D * 4);
    c->q = malloc(B * qd * 4);
    c->k = malloc(B * kvd * 4);
    c->v = malloc(B * kvd * 4);
    c->attn = malloc(B * qd * 4);
    c->tmp = malloc(B * D * 4);
    c->router = malloc(B * hp->n_expert * 4);
    c->expert_ids = malloc(B * hp->n_expert_used * 4);
    c->expert_w = malloc(B * hp->n_expert_used * 4);
    int group = hp->n_head / hp->n_head_kv;
    c->scores = malloc((size_t)threads * c->n_ctx * group * 4);
    c->attn_q = malloc((size_t)threads * group * hp->head_dim * 4);
    c->last_logits = malloc((size_t)hp->n_vocab * 4);
    c->act = malloc(max_scratch(m, c->n_batch));
    c->rope_cos = malloc(B * hp->head_dim / 2 * 4);
    c->rope_sin = malloc(B * hp->head_dim / 2 * 4);
    struct expert_layer shape = { NULL, NULL, NULL, hp->n_expert, hp->n_ff_exp, hp->n_embd };
    c->moe = moe_scratch_new(&shape, c->n_batch, hp->n_expert_used);
    struct moe_exec_options cpu_only = { 0 };
    c->exec = moe_executor_new(m, c->pool, c->n_batch, p->experts ? p->experts : &cpu_only);
    if (!c->exec || model_interleave(m, c->pool)) {
        context_free(c);
        return NULL;
    }
    if (!c->k_cache || !c->v_cache || !c->x || !c->xn || !c->q || !c->k || !c->v || !c->attn || !c->tmp ||
        !c->router || !c->expert_ids || !c->expert_w || !c->scores || !c->attn_q || !c->last_logits || !c->act ||
        !c->rope_cos || !c->rope_sin || !c->moe) {
        context_free(c);
        moex_errorf("out of memory for a context of %d tokens (KV cache %.1f MiB)", c->n_ctx,
                    2.0 * kv_bytes / (1 << 20));
        return NULL;
    }
    return c;
}

void context_free(struct context *c) {
    if (!c) return;
    free(c->k_cache); free(c->v_cache); free(c->x); free(c->xn); free(c->q); free(c->k); free(c->v);
    free(c->attn); free(c->tmp); free(c->router); free(c->expert_ids); free(c->expert_w); free(c->scores); free(c->attn_q);
    free(c->last_logits); free(c->act); free(c->rope_cos); free(c->rope_sin);
    moe_scratch_free(c->moe);
    moe_executor_free(c->exec);
    free(c);
}

int context_n_past(const struct context *c) { return c->n_past; }
int context_n_ctx(const struct context *c) { return c->n_ctx; }
void context_truncate(struct context *c, int n_past) { if (n_past < c->n_past) c->n_past = n_past < 0 ? 0 : n_past; }
struct model *context_model(struct context *c) { return c->m; }
struct moe_executor *context_executor(struct context *c) { return c->exec; }
const struct op_times *context_op_times(const struct context *c) { return &c->times; }
void context_reset_op_times(struct context *c) { memset(&c->times, 0, sizeof c->times); }
void context_set_route_observer(struct context *c, route_observer_fn fn, void *user) {
    c->on_route = fn;
    c->route_user = user;
}

/* NEOX RoPE tables for positions pos0..pos0+n-1: pair i of a head rotates by
 * pos * base^(-2i/head_dim), the power built by repeated multiplication in
 * float exactly as the reference does. */
static void rope_tables(struct context *c, int pos0, int n) {
    int half = c->m->hp.head_dim / 2;
    float theta_scale = powf(c->m->hp.rope_base, -2.0f / (float)c->m->hp.head_dim);
    for (int t = 0; t < n; t++) {
        float theta = (float)(pos0 + t);
        for (int i = 0; i < half; i++) {
            c->rope_cos[t * half + i] = cosf(theta);
            c->rope_sin[t * half + i] = sinf(theta);
            theta *= theta_scale;
        }
    }
}

static void norm_rope_head(float *v, const float *w, const float *cs, const float *sn, int hd, float eps) {
    rms_norm(v, w, v, hd, eps);
    int half = hd / 2;
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

struct attn_job {
    struct context *c;
    int layer, n_tokens;
};

/* One (token, KV head) per item: the query heads of the group share each
 * key and value row as it is read. Causal softmax over the cache. With an
 * f16 cache, q and the probabilities are rounded to f16 before their dot
 * products, as the reference computes with f16 caches. */
static void attention_items(void *arg, int64_t begin, int64_t end, int thread_index) {
    struct attn_job *j = arg;
    struct context *c = j->c;
    const struct model_hparams *hp = &c->m->hp;
    int hd = hp->head_dim, group = hp->n_head / hp->n_head_kv;
    size_t kvd = (size_t)hp->n_head_kv * hd;
    size_t layer_off = (size_t)j->layer * c->n_ctx * kvd;
    float scale = 1.0f / sqrtf((float)hd);
    float *scores = c->scores + (size_t)thread_index * c->n_ctx * group; /* (n_ctx, group) */
    float *qh = c->attn_q + (size_t)thread_index * group * hd;         /* (group, hd) */
    const struct attn_kernels *ak = attn_kernels();
    for (int64_t item = begin; item < end; item++) {
        int t = (int)(item / hp->n_head_kv), g = (int)(item % hp->n_head_kv);
        int n_keys = c->n_past + t + 1;
        const float *q = c->q + (size_t)t * hp->n_head * hd + (size_t)g * group * hd;
        float *out = c->attn + (size_t)t * hp->n_head * hd + (size_t)g * group * hd;
        size_t off = layer_off + (size_t)g * hd;
        if (c->kv_elem == 2) {
            f32_to_fp16_row(q, (uint16_t *)out, group * hd); /* out is free until wsum */
            fp16_to_f32_row((const uint16_t *)out, qh, group * hd);
            const uint16_t *kc = (const uint16_t *)c->k_cache + off;
            for (int p = 0; p < n_keys; p++) ak->dot_f16(qh, group, hd, kc + (size_t)p * kvd, scores + (size_t)p * group);
        } else {
            const float *kc = (const float *)c->k_cache + off;
            for (int p = 0; p < n_keys; p++) ak->dot_f32(q, group, hd, kc + (size_t)p * kvd, scores + (size_t)p * group);
        }
        /* the probabilities, in place (rounded to f16 for an f16 cache) */
        ak->softmax(scores, n_keys, group, scale, c->kv_elem == 2);
        if (c->kv_elem == 2)
            ak->wsum_f16(scores, group, n_keys, (const uint16_t *)c->v_cache + off, kvd, hd, out);
        else
            ak->wsum_f32(scores, group, n_keys, (const float *)c->v_cache + off, kvd, hd, out);
    }
}

/* Router: softmax over experts, top-k by probability, weights renormalised
 * to sum to one (qwen3moe's norm_topk_prob). */
static void route(struct context *c, int n) {
    const struct model_hparams *hp = &c->m->hp;
    int E = hp->n_expert, K = hp->n_expert_used;
    for (int t = 0; t < n; t++) {
        float *p = c->router + (size_t)t * E;
        float max = -INFINITY;
        for (int e = 0; e < E; e++) if (p[e] > max) max = p[e];
        double sum = 0;
        for (int e = 0; e < E; e++) { p[e] = expf(p[e] - max); sum += p[e]; }
        float inv = (float)(1.0 / sum);
        for (int e = 0; e < E; e++) p[e] *= inv;
        int32_t *ids = c->expert_ids + (size_t)t * K;
        float *w = c->expert_w + (size_t)t * K;
        for (int k = 0; k < K; k++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int j = 0; j < k; j++) taken |= ids[j] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e;
            }
            ids[k] = best;
            w[k] = p[best];
        }
        float wsum = 0;
        for (int k = 0; k < K; k++) wsum += w[k];
        for (int k = 0; k < K; k++) w[k] /= wsum;
    }
}

static void forward_layer(struct context *c, int l, int n) {
    const struct model_hparams *hp = &c->m->hp;
    const struct layer_weights *L = &c->m->layers[l];
    int D = hp->n_embd, hd = hp->head_dim, half = hd / 2;
    size_t qd = (size_t)hp->n_head * hd, kvd = (size_t)hp->n_head_kv * hd;
    int64_t t0 = time_ns();

    for (int t = 0; t < n; t++) rms_norm(c->x + (size_t)t * D, L->attn_norm, c->xn + (size_t)t * D, D, hp->rms_eps);
    /* q, k and v read the same input: quantize it once when their types
     * want the same activation type (Q4_K and Q6_K both take Q8_K). */
    const struct matrix *qkv[3] = { &L->wq, &L->wk, &L->wv };
    float *qkv_out[3] = { c->q, c->k, c->v };
    enum qtype act_type = QT_MAX;
    size_t act_stride = 0;
    for (int i = 0; i < 3; i++) {
        enum qtype want = quant_traits(qkv[i]->type)->vec_dot_type;
        if (want != act_type) {
            act_stride = quantize_rows(c->pool, qkv[i]->type, c->xn, n, D, c->act, 0);
            act_type = want;
        }
        matmul_preq(c->pool, qkv[i], c->act, act_stride, n, qkv_out[i], (size_t)qkv[i]->rows);
    }
    for (int t = 0; t < n; t++) {
        const float *cs = c->rope_cos + (size_t)t * half, *sn = c->rope_sin + (size_t)t * half;
        for (int h = 0; h < hp->n_head; h++)
            norm_rope_head(c->q + t * qd + (size_t)h * hd, L->q_norm, cs, sn, hd, hp->rms_eps);
        for (int h = 0; h < hp->n_head_kv; h++)
            norm_rope_head(c->k + t * kvd + (size_t)h * hd, L->k_norm, cs, sn, hd, hp->rms_eps);
        size_t off = ((size_t)l * c->n_ctx + c->n_past + t) * kvd;
        store_kv(c->k_cache, c->kv_elem, off, c->k + t * kvd, kvd);
        store_kv(c->v_cache, c->kv_elem, off, c->v + t * kvd, kvd);
    }
    int64_t t1 = time_ns();
    struct attn_job aj = { c, l, n };
    threadpool_parallel_for(c->pool, (int64_t)n * hp->n_head_kv, 1, attention_items, &aj);
    int64_t t2 = time_ns();
    matmul(c->pool, &L->wo, c->attn, n, c->tmp, c->act);
    for (size_t i = 0; i < (size_t)n * D; i++) c->x[i] += c->tmp[i];
    int64_t t3 = time_ns();

    for (int t = 0; t < n; t++) rms_norm(c->x + (size_t)t * D, L->ffn_norm, c->xn + (size_t)t * D, D, hp->rms_eps);
    matmul(c->pool, &L->gate_inp, c->xn, n, c->router, c->act);
    route(c, n);
    if (c->on_route) c->on_route(c->route_user, l, n, hp->n_expert_used, c->expert_ids, c->expert_w);
    int64_t t4 = time_ns();
    moe_executor_run(c->exec, l, c->moe, c->xn, n, c->expert_ids, c->expert_w, c->tmp);
    for (size_t i = 0; i < (size_t)n * D; i++) c->x[i] += c->tmp[i];
    int64_t t5 = time_ns();
    c->times.attn_matmul += (t1 - t0) + (t3 - t2);
    c->times.attention += t2 - t1;
    c->times.router += t4 - t3;
    c->times.experts += t5 - t4;
}

static int eval_batch(struct context *c, const int32_t *tokens, int n, float *logits, bool all_logits) {
    const struct model_hparams *hp = &c->m->hp;
    int D = hp->n_embd;
    int64_t t0 = time_ns();
    const struct qtype_traits *emb = quant_traits(c->m->token_embd.type);
    for (int t = 0; t < n; t++)
        emb->to_float((const char *)c->m->token_embd.data + (size_t)tokens[t] * c->m->token_embd.row_bytes,
                      c->x + (size_t)t * D, D);
    rope_tables(c, c->n_past, n);
    c->times.other += time_ns() - t0;
    for (int l = 0; l < hp->n_layers; l++) forward_layer(c, l, n);
    int64_t t1 = time_ns();
    /* Only the rows whose logits are wanted go through the lm head. */
    int first = all_logits ? 0 : n - 1;
    for (int t = first; t < n; t++)
        rms_norm(c->x + (size_t)t * D, c->m->output_norm, c->xn + (size_t)(t - first) * D, D, hp->rms_eps);
    float *out = logits ? logits : c->last_logits;
    if (logits || !all_logits) matmul(c->pool, &c->m->output, c->xn, n - first, out, c->act);
    c->times.lm_head += time_ns() - t1;
    c->n_past += n;
    return 0;
}

int context_eval(struct context *c, const int32_t *tokens, int n, float *logits, bool all_logits) {
    const struct model_hparams *hp = &c->m->hp;
    if (n <= 0) return moex_errorf("nothing to evaluate");
    if (c->n_past + n > c->n_ctx)
        return moex_errorf("context is full: %d + %d tokens exceed the context of %d", c->n_past, n, c->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
            return moex_errorf("token id %d is out of range (vocabulary of %d)", tokens[i], hp->n_vocab);
    for (int done = 0; done < n;) {
        int chunk = n - done < c->n_batch ? n - done : c->n_batch;
        bool last = done + chunk == n;
        float *out = logits;
        if (logits && all_logits) out = logits + (size_t)done * hp->n_vocab;
        else if (!last) out = NULL;
        if (eval_batch(c, tokens + done, chunk, out, all_logits)) return -1;
        done += chunk;
    }
    return 0;
}
