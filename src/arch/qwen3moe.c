/* qwen3moe (Qwen3-30B-A3B and its kind), top to bottom:
 *   embed -> per layer: RMSNorm, attention (q/k/v, per-head q/k RMSNorm,
 *   NEOX RoPE, KV cache, causal softmax attention, output projection),
 *   residual; RMSNorm, router softmax + top-k (renormalised), experts,
 *   residual -> output norm -> lm head.
 * Most of the time goes to the expert matmuls (the executor) and, at
 * decode, to the lm head. */
#include "arch/arch.h"

#include "arch/block_attention.h"
#include "arch/block_io.h"
#include "arch/block_moe.h"
#include "arch/block_norm.h"
#include "core/threadpool.h"
#include "gguf/gguf.h"
#include "model/context_impl.h"
#include "model/model_load.h"
#include "arch/tensor_names.h"

#include <float.h>
#include <stdlib.h>

struct qwen3moe_layer {
    const float *attn_norm;            /* (n_embd) */
    struct attn_weights attn;
    const float *ffn_norm;             /* (n_embd) */
    struct moe_router router;          /* experts: m->moe_layers[layer] */
};

/* ---------------------------------------------------------------- hyper-parameters */

static int load_hparams(struct model *m) {
    struct model_hparams *hp = &m->hp;
    const int64_t max = MODEL_DIM_MAX;
    if (model_get_int(m, "block_count", 1, max, &hp->n_layers) ||
        model_get_int(m, "embedding_length", 1, max, &hp->n_embd) ||
        model_get_int(m, "attention.head_count", 1, max, &hp->n_head) ||
        model_get_int(m, "attention.head_count_kv", 1, max, &hp->n_head_kv) ||
        model_get_int(m, "expert_count", 1, MODEL_EXPERTS_MAX, &hp->n_expert) ||
        model_get_int(m, "expert_used_count", 1, MODEL_EXPERTS_MAX, &hp->n_expert_used) ||
        model_get_int(m, "expert_feed_forward_length", 1, max, &hp->n_ff_exp) ||
        model_get_int(m, "context_length", 1, max, &hp->n_ctx_train) ||
        model_get_int_or(m, "attention.key_length", 1, max, hp->n_embd / hp->n_head, &hp->head_dim) ||
        model_get_int_or(m, "attention.value_length", 1, max, hp->head_dim, &hp->value_dim) ||
        model_get_float_or(m, "rope.freq_base", 0, FLT_MAX, 10000.0f, &hp->rope_base) ||
        model_get_float_or(m, "attention.layer_norm_rms_epsilon", 0, 1, 1e-6f, &hp->rms_eps))
        return -1;
    if (model_check_attention_moe(m)) return -1;
    return 0;
}

static void layer_state(const struct model *m, int layer, struct layer_state *out) {
    (void)layer;
    int64_t kv_dim = (int64_t)m->hp.n_head_kv * m->hp.head_dim;
    *out = (struct layer_state){ LAYER_ATTENTION, kv_dim, kv_dim, 0, 0 };
}

/* ---------------------------------------------------------------- tensors */

static int bind(struct model *m) {
    const struct model_hparams *hp = &m->hp;
    if (io_bind(m, TN_OUTPUT_NORM)) return -1;
    struct qwen3moe_layer *layers = calloc((size_t)hp->n_layers, sizeof *layers);
    m->weights = layers;
    if (!layers || model_alloc_moe(m, hp->n_layers)) return moex_errorf("out of memory");
    int D = hp->n_embd;
    for (int l = 0; l < hp->n_layers; l++) {
        struct qwen3moe_layer *L = &layers[l];
        L->router = (struct moe_router){ .gating = MOE_GATING_SOFTMAX, .renormalise = true };
        if (!(L->attn_norm = model_want_vector(m, D, TN_LAYER(TN_ATTN_NORM), l)) ||
            attn_bind(m, &L->attn, l, hp->n_head_kv) ||
            !(L->ffn_norm = model_want_vector(m, D, TN_LAYER(TN_FFN_NORM), l)) ||
            moe_bind(m, &L->router, l, l))
            return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- forward */

struct workspace {
    struct attn_shape shape;
    struct attn_scratch *attn;
    struct moe_block_scratch *moe;
};

static void workspace_free(void *p) {
    struct workspace *ws = p;
    if (!ws) return;
    attn_scratch_free(ws->attn);
    moe_block_scratch_free(ws->moe);
    free(ws);
}

static void *workspace_new(const struct context *c) {
    const struct model_hparams *hp = &c->m->hp;
    struct workspace *ws = calloc(1, sizeof *ws);
    if (!ws) return NULL;
    ws->shape = attn_shape_of(hp);
    ws->attn = attn_scratch_new(&ws->shape, c->n_batch, c->n_ctx, threadpool_size(c->pool));
    ws->moe = moe_block_scratch_new(&c->m->moe_layers[0], c->n_batch);
    if (!ws->attn || !ws->moe) {
        workspace_free(ws);
        return NULL;
    }
    return ws;
}

static int forward(struct context *c, const int32_t *tokens, int n, float *logits, bool all_logits) {
    const struct model *m = c->m;
    const struct model_hparams *hp = &m->hp;
    const struct qwen3moe_layer *layers = m->weights;
    struct workspace *ws = c->ws;
    int D = hp->n_embd;
    embed_tokens(&m->token_embd, tokens, n, c->x);
    attn_rope_prepare_runs(ws->attn, &ws->shape, c);
    const void *xq = attn_input_norm(c, &layers[0].attn, c->x, NULL, layers[0].attn_norm, c->xn, n, D, hp->rms_eps);
    for (int l = 0; l < hp->n_layers; l++) {
        const struct qwen3moe_layer *L = &layers[l];
        attention_layer(c, &ws->shape, &L->attn, ws->attn, l, n, c->xn, xq, c->tmp);
        moe_ffn_norm(c, &L->router, l, ws->moe, c->x, c->tmp, L->ffn_norm, hp->rms_eps, c->xn, n, c->tmp);
        /* the residual, and the next layer's norm (quantized for its q, k, v) */
        const struct qwen3moe_layer *next = l + 1 < hp->n_layers ? &layers[l + 1] : NULL;
        xq = attn_input_norm(c, next ? &next->attn : NULL, c->x, c->tmp, next ? next->attn_norm : NULL, c->xn, n, D,
                             hp->rms_eps);
    }
    output_head(c, m->output_norm, &m->output, n, logits, all_logits);
    return 0;
}

extern const struct synth_arch synth_qwen3moe;

const struct arch arch_qwen3moe = {
    .name = "qwen3moe",
    .synth = &synth_qwen3moe,
    .load_hparams = load_hparams,
    .layer_state = layer_state,
    .bind = bind,
    .workspace_new = workspace_new,
    .workspace_free = workspace_free,
    .forward = forward,
};
