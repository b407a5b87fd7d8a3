/* The tensors a synthetic model is made of: their names and shapes. */
#include "arch/tensor_names.h"
#include "synth/synth_design.h"

#include <stdio.h>

static const char *const kind_names[SK_COUNT] = {
    [SK_OUTPUT] = TN_OUTPUT, [SK_OUTPUT_NORM] = TN_OUTPUT_NORM, [SK_TOKEN_EMBD] = TN_TOKEN_EMBD,
    [SK_ATTN_K] = TN_ATTN_K, [SK_ATTN_K_NORM] = TN_ATTN_K_NORM, [SK_ATTN_NORM] = TN_ATTN_NORM,
    [SK_ATTN_OUTPUT] = TN_ATTN_OUTPUT, [SK_ATTN_Q] = TN_ATTN_Q, [SK_ATTN_Q_NORM] = TN_ATTN_Q_NORM,
    [SK_ATTN_V] = TN_ATTN_V, [SK_FFN_DOWN_EXPS] = TN_FFN_DOWN_EXPS, [SK_FFN_GATE_EXPS] = TN_FFN_GATE_EXPS,
    [SK_FFN_GATE_INP] = TN_FFN_GATE_INP, [SK_FFN_NORM] = TN_FFN_NORM, [SK_FFN_UP_EXPS] = TN_FFN_UP_EXPS,
};

void synth_kind_name(enum synth_kind k, int layer, char *out, int out_size) {
    if (k < SK_FIRST_LAYER_KIND) snprintf(out, (size_t)out_size, "%s", kind_names[k]);
    else snprintf(out, (size_t)out_size, "blk.%d.%s", layer, kind_names[k]);
}

int synth_kind_shape(const struct synth_params *p, int n_vocab, enum synth_kind k, int64_t ne[3]) {
    int64_t D = p->n_embd, nq = (int64_t)p->n_head * p->head_dim, nkv = (int64_t)p->n_head_kv * p->head_dim;
    ne[1] = ne[2] = 1;
    switch (k) {
    case SK_OUTPUT: case SK_TOKEN_EMBD: ne[0] = D; ne[1] = n_vocab; return 2;
    case SK_OUTPUT_NORM: case SK_ATTN_NORM: case SK_FFN_NORM: ne[0] = D; return 1;
    case SK_ATTN_K_NORM: case SK_ATTN_Q_NORM: ne[0] = p->head_dim; return 1;
    case SK_ATTN_K: case SK_ATTN_V: ne[0] = D; ne[1] = nkv; return 2;
    case SK_ATTN_Q: ne[0] = D; ne[1] = nq; return 2;
    case SK_ATTN_OUTPUT: ne[0] = nq; ne[1] = D; return 2;
    case SK_FFN_GATE_INP: ne[0] = D; ne[1] = p->n_expert; return 2;
    case SK_FFN_GATE_EXPS: case SK_FFN_UP_EXPS: ne[0] = D; ne[1] = p->n_ff_exp; ne[2] = p->n_expert; return 3;
    case SK_FFN_DOWN_EXPS: ne[0] = p->n_ff_exp; ne[1] = D; ne[2] = p->n_expert; return 3;
    default: ne[0] = 0; return 0;
    }
}

/* A query or key row: a constant (times the head's jitter) read from u0, so
 * that after the per-head RMSNorm every query and key is the same vector and
 * the q/k norm weights alone shape the score over distance. A long head's
 * query sits on the pairs the norm weights ignore: its scores are flat. */
