/* lfm2moe (LiquidAI LFM2-8B-A1B and its kind), top to bottom:
 *   embed -> per layer: RMSNorm, then either a short convolution (most
 *   layers: in_proj -> B, C, x; C * causal depthwise conv(B * x); out_proj)
 *   or attention (a layer whose head_count_kv is not 0: q/k/v, per-head q/k
 *   RMSNorm, NEOX RoPE, KV cache, causal softmax attention, output
 *   projection), residual; RMSNorm, a dense SwiGLU FFN (the first
 *   leading_dense_block_count layers) or the MoE FFN (router sigmoid per
 *   expert, top-k on sigmoid + exp_probs_b, weights the chosen sigmoids
 *   renormalised, experts), residual -> token_embd_norm -> lm head (the
 *   embedding, tied).
 * Most of the time goes to the expert matmuls (the executor), the short
 * convolutions' in_proj and, at decode, the lm head (65536 x 2048). */
#include "arch/arch.h"

#include "arch/block_attention.h"
#include "arch/block_ffn.h"
#include "arch/block_io.h"
#include "arch/block_moe.h"
#include "arch/block_norm.h"
#include "arch/block_proj.h"
#include "arch/block_shortconv.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "gguf/gguf.h"
#include "model/context_impl.h"
#include "model/model_load.h"
#include "arch/tensor_names.h"

#include <float.h>
#include <stdlib.h>

/* llama.cpp's expert_gating_func values. */
enum { GATING_FUNC_SOFTMAX = 1, GATING_FUNC_SIGMOID = 2 };

struct lfm2moe_layer {
    int n_head_kv;                     /* 0: a short-convolution layer */
    const float *attn_norm;            /* (n_embd) the "operator norm" before conv or attention */
    struct shortconv_weights conv;     /* short-conv layers */
    struct attn_weights attn;          /* attention layers */
    const float *ffn_norm;             /* (n_embd) */
    struct ffn_weights ffn;            /* dense layers */
    struct moe_router router;          /* MoE layers */
    int moe_layer;                     /* index into m->moe_layers; -1 for a dense layer */
};

struct lfm2moe_weights {
    int n_dense;                       /* leading dense layers */
    int l_cache;                       /* short-conv kernel length */
    int vocab_size;                    /* lfm2moe.vocab_size; 0 when absent */
    enum moe_gating gating;
    struct lfm2moe_layer layers[];     /* (n_layers) */
};

/* ---------------------------------------------------------------- hyper-parameters */

static int load_hparams(struct model *m) {
    struct model_hparams *hp = &m->hp;
    const char *path = m->file->path;
    const int64_t max = MODEL_DIM_MAX;
    if (model_get_int(m, "block_count", 1, 4096, &hp->n_layers)) return -1;
    struct lfm2moe_weights *w = calloc(1, sizeof *w + (size_t)hp->n_layers * sizeof w->layers[0]);
    if (!w) return moex_errorf("out of memory");
    m->weights = w;
    int *kv = malloc((size_t)hp->n_layers * sizeof *kv);
    if (!kv) return moex_errorf("out of memory");
    int gating_func = 0;
    int rc = model_get_int(m, "embedding_length", 1, max, &hp->n_embd) ||
             model_get_int(m, "feed_forward_length", 1, max, &hp->n_ff) ||
             model_get_int(m, "attention.head_count", 1, max, &hp->n_head) ||
             model_get_int_array(m, "attention.head_count_kv", 0, max, hp->n_layers, kv) ||
             model_get_int(m, "expert_count", 1, max, &hp->n_expert) ||
             model_get_int(m, "expert_used_count", 1, max, &hp->n_expert_used) ||
             model_get_int(m, "expert_feed_forward_length", 1, max, &hp->n_ff_exp) ||
             model_get_int(m, "context_length", 1, max, &hp->n_ctx_train) ||
             model_get_int_or(m, "leading_dense_block_count", 0, hp->n_layers, 0, &w->n_dense) ||
             model_get_int(m, "expert_gating_func", GATING_FUNC_SOFTMAX, GATING_FUNC_SIGMOID, &gating_func) ||
             model_get_int(m, "shortconv.l_cache", 2, SHORTCONV_MAX_L_CACHE, &w->l_cache) ||
             model_get_int_or(m, "vocab_size", 1, max, 0, &w->vocab_size) ||
             model_get_float_or(m, "rope.freq_base", 0, FLT_MAX, 10000.0f, &hp->rope_base) ||
             model_get_float_or(m, "attention.layer_norm_rms_epsilon", 0, 1, 1e-5f, &hp->rms_eps)
                 ? -1 : 0;
    if (rc == 0) rc = model_get_int_or(m, "attention.key_length", 1, max, hp->n_embd / hp->n_head, &hp->head_dim);
    if (rc == 0) rc = model_get_int_or(m, "attention.value_length", 1, max, hp->head_dim, &hp->value_dim);
    /* Every attention layer has the same KV heads (hp->n_head_kv). */
    for (int l = 0; l < hp->n_layers && rc == 0; l++) {
        w->layers[l].n_head_kv = kv[l];
        if (kv[l] == 0) continue;
        if (hp->n_head_kv && kv[l] != hp->n_head_kv)
            rc = moex_errorf("%s: attention layers have %d and %d KV heads; moex needs one head_count_kv for all",
                             path, hp->n_head_kv, kv[l]);
        hp->n_head_kv = kv[l];
    }
    free(kv);
    if (rc) return -1;
    w->gating = gating_func == GATING_FUNC_SIGMOID ? MOE_GATING_SIGMOID : MOE_GATING_SOFTMAX;
    if (hp->n_head_kv == 0) hp->n_head_kv = hp->n_head;   /* no attention layer: only products use it */
    if (model_check_attention_moe(m)) return -1;
    if (w->n_dense == hp->n_layers)
        return moex_errorf("%s: all %d layers are dense (leading_dense_block_count); an MoE model has experts",
                           path, hp->n_layers);
    return 0;
}

static void layer_state(const struct model *m, int layer, struct layer_state *out) {
    const struct lfm2moe_weights *w = m->weights;
    int kv_heads = w->layers[layer].n_head_kv;
    if (kv_heads) {
        int64_t kv_dim = (int64_t)kv_heads * m->hp.head_dim;
        *out = (struct layer_state){ LAYER_ATTENTION, kv_dim, kv_dim, 0, 0 };
    } else {
        *out = (struct layer_state){ LAYER_SHORTCONV, 0, 0, (int64_t)shortconv_state_floats(m->hp.n_embd, w->l_cache), 0 };
    }
}

/* ---------------------------------------------------------------- tensors */

static int bind_layer(struct model *m, struct lfm2moe_weights *w, int l) {
    const struct model_hparams *hp = &m->hp;
    struct lfm2moe_layer *L = &w->layers[l];
    int D = hp->n_embd;
    if (!(L->attn_norm = model_want_vector(m, D, TN_LAYER(TN_ATTN_NORM), l)) ||
        !(L->ffn_norm = model_want_vector(m, D, TN_LAYER(TN_FFN_NORM), l)))
        return -1;
    if (L->n_head_kv == 0) {
        L->conv.l_cache = w->l_cache;
        /* The kernel is (n_embd, l_cache) floats: ne = [l_cache, n_embd]. */
        if (!(L->conv.kernel = model_want_floats(m, w->l_cache, D, TN_LAYER(TN_SHORTCONV_CONV), l)) ||
            model_want_matrix(m, &L->conv.in_proj, D, 3 * D, TN_LAYER(TN_SHORTCONV_IN_PROJ), l) ||
            model_want_matrix(m, &L->conv.out_proj, D, D, TN_LAYER(TN_SHORTCONV_OUT_PROJ), l) ||
            model_describe_dense(m, DENSE_SHORTCONV, l, &L->conv.in_proj) ||
            model_describe_dense(m, DENSE_SHORTCONV, l, &L->conv.out_proj))
            return -1;
    } else if (attn_bind(m, &L->attn, l, L->n_head_kv)) {
        return -1;
    }
    if (l < w->n_dense) {
        L->moe_layer = -1;
        return model_want_matrix(m, &L->ffn.gate, D, hp->n_ff, TN_LAYER(TN_FFN_GATE), l) ||
               model_want_matrix(m, &L->ffn.up, D, hp->n_ff, TN_LAYER(TN_FFN_UP), l) ||
               model_want_matrix(m, &L->ffn.down, hp->n_ff, D, TN_LAYER(TN_FFN_DOWN), l) ||
                       ffn_describe(m, &L->ffn, DENSE_FFN, l)
                   ? -1
                   : 0;
    }
    L->moe_layer = l - w->n_dense;
    L->router = (struct moe_router){ .gating = w->gating, .renormalise = true };
    if (!(L->router.selection_bias = model_want_vector(m, hp->n_expert, TN_LAYER(TN_EXP_PROBS_B), l)) ||
        moe_bind(m, &L->router, l, L->moe_layer))
        return -1;
    return 0;
}

static int bind(struct model *m) {
    struct model_hparams *hp = &m->hp;
    struct lfm2moe_weights *w = m->weights;
    /* The final norm is named token_embd_norm in LFM2 files; the head is
     * tied to the embedding. */
    if (io_bind(m, TN_TOKEN_EMBD_NORM)) return -1;
    if (w->vocab_size && w->vocab_size != hp->n_vocab)
        return moex_errorf("%s: lfm2moe.vocab_size is %d but token_embd.weight has %d rows", m->file->path,
                           w->vocab_size, hp->n_vocab);
    if (model_alloc_moe(m, hp->n_layers - w->n_dense)) return moex_errorf("out of memory");
    for (int l = 0; l < hp->n_layers; l++)
        if (bind_layer(m, w, l)) return -1;
    return 0;
}

/* ---------------------------------------------------------------- forward */

struct workspace {
    struct attn_shape shape;
    struct attn_scratch *attn;
    struct ffn_scratch *ffn;
    struct moe_block_scratch *moe;
    float *bcx;                        /* (n_batch, 3*n_embd) short conv's in_proj output */
    float *conv_out;                   /* (n_batch, n_embd) short conv's gated output */
};

static void workspace_free(void *p) {
    struct workspace *ws = p;
    if (!ws) return;
    attn_scratch_free(ws->attn);
    ffn_scratch_free(ws->ffn);
    moe_block_scratch_free(ws->moe);
    free(ws->bcx);
    free(ws->conv_out);
    free(ws);
}

static void *workspace_new(const struct context *c) {
    const struct model_hparams *hp = &c->m->hp;
    const struct lfm2moe_weights *w = c->m->weights;
    struct workspace *ws = calloc(1, sizeof *ws);
    if (!ws) return NULL;
    size_t B = (size_t)c->n_batch, D = (size_t)hp->n_embd;
    ws->shape = attn_shape_of(hp);
    ws->attn = attn_scratch_new(&ws->shape, c->n_batch, c->n_ctx, threadpool_size(c->pool));
    ws->ffn = w->n_dense ? ffn_scratch_new(hp->n_ff, c->n_batch) : NULL;
    ws->moe = moe_block_scratch_new(&c->m->moe_layers[0], c->n_batch);
    ws->bcx = malloc(B * 3 * D * sizeof(float));
    ws->conv_out = malloc(B * D * sizeof(float));
    if (!ws->attn || (w->n_dense && !ws->ffn) || !ws->moe || !ws->bcx || !ws->conv_out) {
        workspace_free(ws);
        return NULL;
    }
    return ws;
}

/* The short convolution of layer l over the pass: its two matmuls over all
 * rows, the convolution over each run with its sequence's state. */
static void shortconv_layer(struct context *c, const struct shortconv_weights *w, struct workspace *ws, int l, int n) {
    int D = c->m->hp.n_embd;
    dense_matmul(c, &w->in_proj, c->xn, n, ws->bcx);
    for (int r = 0; r < c->n_runs; r++) {
        const struct batch_run *run = &c->runs[r];
        shortconv_mix(ws->bcx + (size_t)run->first * 3 * D, run->n, D, w->kernel, w->l_cache,
                      c->seqs[run->seq].layers[l].conv, ws->conv_out + (size_t)run->first * D);
    }
    dense_matmul(c, &w->out_proj, ws->conv_out, n, c->tmp);
}

static int forward(struct context *c, const int32_t *tokens, int n, float *logits, bool all_logits) {
    const struct model *m = c->m;
    const struct model_hparams *hp = &m->hp;
    const struct lfm2moe_weights *w = m->weights;
    struct workspace *ws = c->ws;
    int D = hp->n_embd;
    embed_tokens(&m->token_embd, tokens, n, c->x);
    attn_rope_prepare_runs(ws->attn, &ws->shape, c);
    const struct lfm2moe_layer *L0 = &w->layers[0];
    const void *xq = attn_input_norm(c, L0->n_head_kv ? &L0->attn : NULL, c->x, NULL, L0->attn_norm, c->xn, n, D,
                                     hp->rms_eps);
    for (int l = 0; l < hp->n_layers; l++) {
        const struct lfm2moe_layer *L = &w->layers[l];
        if (L->n_head_kv) {
            attention_layer(c, &ws->shape, &L->attn, ws->attn, l, n, c->xn, xq, c->tmp);
        } else {
            int64_t t1 = time_ns();
            shortconv_layer(c, &L->conv, ws, l, n);
            c->times.ns[OP_SHORTCONV] += time_ns() - t1;
        }
        if (L->moe_layer < 0) {
            residual_norm_rows(c->pool, c->x, c->tmp, L->ffn_norm, c->xn, n, D, hp->rms_eps);
            int64_t t1 = time_ns();
            ffn_swiglu(c, &L->ffn, ws->ffn, c->xn, n, c->tmp);
            c->times.ns[OP_DENSE_FFN] += time_ns() - t1;
        } else {
            moe_ffn_norm(c, &L->router, L->moe_layer, ws->moe, c->x, c->tmp, L->ffn_norm, hp->rms_eps, c->xn, n, c->tmp);
        }
        /* the residual, and the next layer's norm (quantized for its q, k, v when it attends) */
        const struct lfm2moe_layer *next = l + 1 < hp->n_layers ? &w->layers[l + 1] : NULL;
        xq = attn_input_norm(c, next && next->n_head_kv ? &next->attn : NULL, c->x, c->tmp,
                             next ? next->attn_norm : NULL, c->xn, n, D, hp->rms_eps);
    }
    output_head(c, m->output_norm, &m->output, n, logits, all_logits);
    return 0;
}

extern const struct synth_arch synth_lfm2moe;

const struct arch arch_lfm2moe = {
    .name = "lfm2moe",
    .synth = &synth_lfm2moe,
    .load_hparams = load_hparams,
    .layer_state = layer_state,
    .bind = bind,
    .workspace_new = workspace_new,
    .workspace_free = workspace_free,
    .forward = forward,
};
