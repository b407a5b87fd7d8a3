/* qwen35moe (Qwen3.5-35B-A3B, Qwen3.6-35B-A3B), top to bottom:
 *   embed -> per layer: RMSNorm, then either
 *     gated delta net (3 of every full_attention_interval layers): qkv
 *       projection, causal conv + SiLU, q/k L2 norm, decay and write gates,
 *       the delta rule over a per-head state, RMSNorm gated by silu(z),
 *       output projection; or
 *     gated attention (every full_attention_interval-th layer): q projection
 *       with a per-head output gate, per-head q/k RMSNorm, partial rotary
 *       (IMRoPE, text positions), KV cache, causal softmax attention,
 *       * sigmoid(gate), output projection;
 *   residual; RMSNorm, router softmax + top-k (renormalised), experts, plus
 *   the shared expert scaled by sigmoid(gate . x); residual
 *   -> output norm -> lm head.
 * The MTP (NextN) block after the last layer is validated and loaded but
 * not run: plain decoding uses block_count - nextn_predict_layers layers,
 * as llama.cpp does. */
#include "arch/arch.h"

#include "arch/block_attention.h"
#include "arch/block_delta_net.h"
#include "arch/block_io.h"
#include "arch/block_moe.h"
#include "arch/block_norm.h"
#include "arch/block_shared_expert.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "gguf/gguf.h"
#include "model/context_impl.h"
#include "model/model_load.h"
#include "arch/tensor_names.h"

#include <float.h>
#include <stdlib.h>

struct qwen35moe_layer {
    const float *attn_norm;            /* (n_embd) */
    struct delta_net_weights dn;       /* delta-net layers */
    struct attn_weights attn;          /* attention layers and the MTP block */
    const float *post_attention_norm;  /* (n_embd) */
    struct moe_router router;          /* experts: m->moe_layers[layer] (the MTP block's: mtp_experts) */
    struct shared_expert shexp;
};

/* The MTP block's own tensors (besides its attention and MoE weights). */
struct qwen35moe_mtp {
    struct matrix eh_proj;             /* (n_embd, 2 n_embd) */
    const float *enorm, *hnorm;        /* (n_embd) */
    const float *shared_head_norm;     /* (n_embd), optional */
    struct moe_layer_desc experts;
};

struct qwen35moe {
    int n_block;                       /* block_count: the trunk, then n_nextn MTP blocks */
    int n_nextn;
    int attn_interval;                 /* full_attention_interval */
    int n_rot;                         /* rope.dimension_count */
    int sections[4];                   /* rope.dimension_sections */
    int n_ff_shexp;
    struct delta_net_shape dn;
    struct qwen35moe_mtp *mtp;         /* (n_nextn) in the same allocation */
    struct qwen35moe_layer layers[];   /* (n_block) */
};

static bool is_delta_net(const struct qwen35moe *q, int layer) {
    return (layer + 1) % q->attn_interval != 0;
}

/* ---------------------------------------------------------------- hyper-parameters */

static int load_hparams(struct model *m) {
    struct model_hparams *hp = &m->hp;
    const char *path = m->file->path;
    const int64_t max = MODEL_DIM_MAX;
    int n_block, n_nextn, interval, n_rot, n_ff_shexp, conv, state, groups, v_heads, inner;
    if (model_get_int(m, "block_count", 1, max, &n_block) ||
        model_get_int_or(m, "nextn_predict_layers", 0, n_block - 1, 0, &n_nextn) ||
        model_get_int(m, "embedding_length", 1, max, &hp->n_embd) ||
        model_get_int(m, "attention.head_count", 1, max, &hp->n_head) ||
        model_get_int(m, "attention.head_count_kv", 1, max, &hp->n_head_kv) ||
        model_get_int(m, "expert_count", 1, max, &hp->n_expert) ||
        model_get_int(m, "expert_used_count", 1, max, &hp->n_expert_used) ||
        model_get_int(m, "expert_feed_forward_length", 1, max, &hp->n_ff_exp) ||
        model_get_int(m, "expert_shared_feed_forward_length", 1, max, &n_ff_shexp) ||
        model_get_int(m, "context_length", 1, max, &hp->n_ctx_train) ||
        model_get_int_or(m, "attention.key_length", 1, max, hp->n_embd / hp->n_head, &hp->head_dim) ||
        model_get_int_or(m, "attention.value_length", 1, max, hp->head_dim, &hp->value_dim) ||
        model_get_int_or(m, "rope.dimension_count", 2, hp->head_dim, hp->head_dim, &n_rot) ||
        model_get_float_or(m, "rope.freq_base", 0, FLT_MAX, 10000.0f, &hp->rope_base) ||
        model_get_float_or(m, "attention.layer_norm_rms_epsilon", 0, 1, 1e-6f, &hp->rms_eps) ||
        model_get_int_or(m, "full_attention_interval", 1, max, 4, &interval) ||
        model_get_int(m, "ssm.conv_kernel", 1, 64, &conv) ||
        model_get_int(m, "ssm.state_size", 1, 1024, &state) ||
        model_get_int(m, "ssm.group_count", 1, max, &groups) ||
        model_get_int(m, "ssm.time_step_rank", 1, max, &v_heads) ||
        model_get_int(m, "ssm.inner_size", 1, max, &inner))
        return -1;
    hp->n_layers = n_block - n_nextn;
    if (model_check_attention_moe(m)) return -1;
    if (n_rot % 2)
        return moex_errorf("%s: rope.dimension_count %d is odd", path, n_rot);
    if (v_heads % groups != 0)
        return moex_errorf("%s: ssm.time_step_rank %d (value heads) is not a multiple of ssm.group_count %d (key heads)",
                           path, v_heads, groups);
    int64_t want_inner = (int64_t)v_heads * state;
    if (inner != want_inner)
        return moex_errorf("%s: ssm.inner_size %d is not ssm.time_step_rank x ssm.state_size = %lld", path, inner,
                           (long long)want_inner);
    int channels;
    if (model_product(m, "ssm conv channels", 2 * groups + v_heads, state, MODEL_DIM_MAX, &channels)) return -1;

    size_t size = sizeof(struct qwen35moe) + (size_t)n_block * sizeof(struct qwen35moe_layer) +
                  (size_t)n_nextn * sizeof(struct qwen35moe_mtp);
    struct qwen35moe *q = calloc(1, size);
    if (!q) return moex_errorf("out of memory");
    m->weights = q;
    q->n_block = n_block;
    q->n_nextn = n_nextn;
    q->attn_interval = interval;
    q->n_rot = n_rot;
    q->n_ff_shexp = n_ff_shexp;
    q->mtp = (struct qwen35moe_mtp *)(q->layers + n_block);
    q->dn = (struct delta_net_shape){ { groups, v_heads, state }, conv, hp->rms_eps };
    /* IMRoPE sections: which position (time, height, width, extra) each
     * rotated pair takes. For text all three are the position and the extra
     * one is 0, so only pairs of the extra section stand still. */
    q->sections[0] = n_rot / 2;
    if (gguf_find_kv(m->file, "qwen35moe.rope.dimension_sections") &&
        model_get_int_array(m, "rope.dimension_sections", 0, max, 4, q->sections))
        return -1;
    if (q->sections[0] + q->sections[1] + q->sections[2] + q->sections[3] == 0)
        return moex_errorf("%s: rope.dimension_sections are all 0", path);
    return 0;
}

static void layer_state(const struct model *m, int layer, struct layer_state *out) {
    const struct qwen35moe *q = m->weights;
    if (is_delta_net(q, layer)) {
        *out = (struct layer_state){ LAYER_DELTANET, 0, 0, delta_net_conv_floats(&q->dn), delta_net_state_floats(&q->dn) };
    } else {
        int64_t kv_dim = (int64_t)m->hp.n_head_kv * m->hp.head_dim;
        *out = (struct layer_state){ LAYER_ATTENTION, kv_dim, kv_dim, 0, 0 };
    }
}

/* ---------------------------------------------------------------- tensors */

static int bind_delta_net(struct model *m, const struct qwen35moe *q, struct delta_net_weights *w, int l) {
    int D = m->hp.n_embd, hd = q->dn.dims.head_dim, H = q->dn.dims.n_v_heads;
    int vd = H * hd, ch = (2 * q->dn.dims.n_k_heads + H) * hd;
    if (model_want_matrix(m, &w->qkv, D, ch, TN_LAYER(TN_ATTN_QKV), l) ||
        model_want_matrix(m, &w->z, D, vd, TN_LAYER(TN_ATTN_GATE), l) ||
        model_want_matrix(m, &w->beta, D, H, TN_LAYER(TN_SSM_BETA), l) ||
        model_want_matrix(m, &w->alpha, D, H, TN_LAYER(TN_SSM_ALPHA), l) ||
        model_want_matrix(m, &w->conv, q->dn.conv_kernel, ch, TN_LAYER(TN_SSM_CONV1D), l) ||
        !(w->dt_bias = model_want_vector(m, H, TN_LAYER(TN_SSM_DT_BIAS), l)) ||
        !(w->a = model_want_vector(m, H, TN_LAYER(TN_SSM_A), l)) ||
        !(w->norm = model_want_vector(m, hd, TN_LAYER(TN_SSM_NORM), l)) ||
        model_want_matrix(m, &w->out, vd, D, TN_LAYER(TN_SSM_OUT), l))
        return -1;
    if (w->conv.type != QT_F32)
        return moex_errorf("%s: tensor 'blk.%d.ssm_conv1d.weight' must be F32, it is %s", m->file->path, l,
                           quant_type_name(w->conv.type));
    /* beta and alpha are per-head gates, a few channels wide, and as
     * sensitive as a router: they stay on the CPU's kernels */
    const struct matrix *proj[3] = { &w->qkv, &w->z, &w->out };
    for (int i = 0; i < 3; i++)
        if (model_describe_dense(m, DENSE_DELTA_NET, l, proj[i])) return -1;
    return 0;
}

static int bind_attention(struct model *m, struct attn_weights *w, int l) {
    const struct model_hparams *hp = &m->hp;
    int D = hp->n_embd, hd = hp->head_dim, q_dim = hp->n_head * hd, kv_dim = hp->n_head_kv * hd;
    if (model_want_matrix(m, &w->wq, D, 2 * q_dim, TN_LAYER(TN_ATTN_Q), l) || /* per head [query | gate] */
        model_want_matrix(m, &w->wk, D, kv_dim, TN_LAYER(TN_ATTN_K), l) ||
        model_want_matrix(m, &w->wv, D, kv_dim, TN_LAYER(TN_ATTN_V), l) ||
        model_want_matrix(m, &w->wo, q_dim, D, TN_LAYER(TN_ATTN_OUTPUT), l) ||
        !(w->q_norm = model_want_vector(m, hd, TN_LAYER(TN_ATTN_Q_NORM), l)) ||
        !(w->k_norm = model_want_vector(m, hd, TN_LAYER(TN_ATTN_K_NORM), l)))
        return -1;
    return attn_describe(m, w, l);
}

/* Router, experts and shared expert: the MoE half of every block. */
static int bind_ffn(struct model *m, const struct qwen35moe *q, struct qwen35moe_layer *L, struct moe_layer_desc *E,
                    int l) {
    const struct model_hparams *hp = &m->hp;
    int D = hp->n_embd;
    *E = (struct moe_layer_desc){ .layer = l, .n_expert = hp->n_expert, .n_used = hp->n_expert_used,
                                  .n_ff = hp->n_ff_exp, .n_embd = D };
    L->router = (struct moe_router){ .gating = MOE_GATING_SOFTMAX, .renormalise = true };
    if (!(L->post_attention_norm = model_want_vector(m, D, TN_LAYER(TN_POST_ATTENTION_NORM), l)) ||
        model_want_matrix(m, &L->router.gate_inp, D, hp->n_expert, TN_LAYER(TN_FFN_GATE_INP), l) ||
        model_want_experts(m, &E->gate, D, hp->n_ff_exp, hp->n_expert, TN_LAYER(TN_FFN_GATE_EXPS), l) ||
        model_want_experts(m, &E->up, D, hp->n_ff_exp, hp->n_expert, TN_LAYER(TN_FFN_UP_EXPS), l) ||
        model_want_experts(m, &E->down, hp->n_ff_exp, D, hp->n_expert, TN_LAYER(TN_FFN_DOWN_EXPS), l) ||
        model_want_matrix(m, &L->shexp.gate_inp, D, 1, TN_LAYER(TN_FFN_GATE_INP_SHEXP), l) ||
        model_want_matrix(m, &L->shexp.ffn.gate, D, q->n_ff_shexp, TN_LAYER(TN_FFN_GATE_SHEXP), l) ||
        model_want_matrix(m, &L->shexp.ffn.up, D, q->n_ff_shexp, TN_LAYER(TN_FFN_UP_SHEXP), l) ||
        model_want_matrix(m, &L->shexp.ffn.down, q->n_ff_shexp, D, TN_LAYER(TN_FFN_DOWN_SHEXP), l))
        return -1;
    return ffn_describe(m, &L->shexp.ffn, DENSE_SHARED_EXPERT, l);
}

/* The MTP block: a full-attention MoE block plus its NextN tensors. */
static int bind_mtp(struct model *m, struct qwen35moe *q, int l) {
    struct qwen35moe_layer *L = &q->layers[l];
    struct qwen35moe_mtp *t = &q->mtp[l - m->hp.n_layers];
    int D = m->hp.n_embd;
    if (!(L->attn_norm = model_want_vector(m, D, TN_LAYER(TN_ATTN_NORM), l)) || bind_attention(m, &L->attn, l) ||
        bind_ffn(m, q, L, &t->experts, l) ||
        model_want_matrix(m, &t->eh_proj, 2 * D, D, TN_LAYER(TN_NEXTN_EH_PROJ), l) ||
        !(t->enorm = model_want_vector(m, D, TN_LAYER(TN_NEXTN_ENORM), l)) ||
        !(t->hnorm = model_want_vector(m, D, TN_LAYER(TN_NEXTN_HNORM), l)))
        return -1;
    if (model_has_tensor(m, TN_LAYER(TN_NEXTN_SHARED_HEAD_NORM), l) &&
        !(t->shared_head_norm = model_want_vector(m, D, TN_LAYER(TN_NEXTN_SHARED_HEAD_NORM), l)))
        return -1;
    return 0;
}

static int bind(struct model *m) {
    struct model_hparams *hp = &m->hp;
    struct qwen35moe *q = m->weights;
    if (io_bind(m, TN_OUTPUT_NORM)) return -1;
    if (model_alloc_moe(m, hp->n_layers)) return -1;
    for (int l = 0; l < hp->n_layers; l++) {
        struct qwen35moe_layer *L = &q->layers[l];
        if (!(L->attn_norm = model_want_vector(m, hp->n_embd, TN_LAYER(TN_ATTN_NORM), l)) ||
            (is_delta_net(q, l) ? bind_delta_net(m, q, &L->dn, l) : bind_attention(m, &L->attn, l)) ||
            bind_ffn(m, q, L, &m->moe_layers[l], l))
            return -1;
    }
    for (int l = hp->n_layers; l < q->n_block; l++)
        if (bind_mtp(m, q, l)) return -1;
    return 0;
}

/* ---------------------------------------------------------------- forward */

struct workspace {
    struct attn_shape shape;
    struct attn_scratch *attn;
    struct delta_net_scratch *dn;
    struct moe_block_scratch *moe;
    struct shared_expert_scratch *shexp;
};

static void workspace_free(void *p) {
    struct workspace *ws = p;
    if (!ws) return;
    attn_scratch_free(ws->attn);
    delta_net_scratch_free(ws->dn);
    moe_block_scratch_free(ws->moe);
    shared_expert_scratch_free(ws->shexp);
    free(ws);
}

static void *workspace_new(const struct context *c) {
    const struct model_hparams *hp = &c->m->hp;
    const struct qwen35moe *q = c->m->weights;
    struct workspace *ws = calloc(1, sizeof *ws);
    if (!ws) return NULL;
    ws->shape = attn_shape_of(hp);
    ws->shape.n_rot = q->n_rot;
    ws->shape.imrope_sections = q->sections;
    ws->shape.output_gate = true;
    int threads = threadpool_size(c->pool);
    ws->attn = attn_scratch_new(&ws->shape, c->n_batch, c->n_ctx, threads);
    ws->dn = delta_net_scratch_new(&q->dn, c->n_batch, threads);
    ws->moe = moe_block_scratch_new(&c->m->moe_layers[0], c->n_batch);
    ws->shexp = shared_expert_scratch_new(q->n_ff_shexp, hp->n_embd, c->n_batch);
    if (!ws->attn || !ws->dn || !ws->moe || !ws->shexp) {
        workspace_free(ws);
        return NULL;
    }
    return ws;
}

static int forward(struct context *c, const int32_t *tokens, int n, float *logits, bool all_logits) {
    const struct model *m = c->m;
    const struct model_hparams *hp = &m->hp;
    const struct qwen35moe *q = m->weights;
    struct workspace *ws = c->ws;
    int D = hp->n_embd;
    int64_t t0 = time_ns();
    embed_tokens(&m->token_embd, tokens, n, c->x);
    attn_rope_prepare_runs(ws->attn, &ws->shape, c);
    c->times.ns[OP_OTHER] += time_ns() - t0;
    const void *xq = attn_input_norm(c, is_delta_net(q, 0) ? NULL : &q->layers[0].attn, c->x, NULL,
                                     q->layers[0].attn_norm, c->xn, n, D, hp->rms_eps);
    for (int l = 0; l < hp->n_layers; l++) {
        const struct qwen35moe_layer *L = &q->layers[l];
        if (is_delta_net(q, l))
            delta_net_layer(c, &q->dn, &L->dn, ws->dn, l, n, c->xn, c->tmp);
        else
            attention_layer(c, &ws->shape, &L->attn, ws->attn, l, n, c->xn, xq, c->tmp);
        moe_ffn_norm(c, &L->router, l, ws->moe, c->x, c->tmp, L->post_attention_norm, hp->rms_eps, c->xn, n, c->tmp);
        shared_expert_add(c, &L->shexp, ws->shexp, c->xn, n, c->tmp);
        /* the residual, and the next layer's norm (quantized for its q, k, v when it attends) */
        const bool next = l + 1 < hp->n_layers;
        xq = attn_input_norm(c, next && !is_delta_net(q, l + 1) ? &q->layers[l + 1].attn : NULL, c->x, c->tmp,
                             next ? q->layers[l + 1].attn_norm : NULL, c->xn, n, D, hp->rms_eps);
    }
    output_head(c, m->output_norm, &m->output, n, logits, all_logits);
    return 0;
}

extern const struct synth_arch synth_qwen35moe;

const struct arch arch_qwen35moe = {
    .name = "qwen35moe",
    .synth = &synth_qwen35moe,
    .load_hparams = load_hparams,
    .layer_state = layer_state,
    .bind = bind,
    .workspace_new = workspace_new,
    .workspace_free = workspace_free,
    .forward = forward,
};
