/* The tensors a synthetic model is made of: their names and shapes. */
#include "synth/synth_design.h"

#include <stdio.h>

static const char *const kind_names[SK_COUNT] = {
    [SK_OUTPUT] = "output.weight", [SK_OUTPUT_NORM] = "output_norm.weight", [SK_TOKEN_EMBD] = "token_embd.weight",
    [SK_ATTN_K] = "attn_k", [SK_ATTN_K_NORM] = "attn_k_norm", [SK_ATTN_NORM] = "attn_norm",
    [SK_ATTN_OUTPUT] = "attn_output", [SK_ATTN_Q] = "attn_q", [SK_ATTN_Q_NORM] = "attn_q_norm",
    [SK_ATTN_V] = "attn_v", [SK_FFN_DOWN_EXPS] = "ffn_down_exps", [SK_FFN_GATE_EXPS] = "ffn_gate_exps",
    [SK_FFN_GATE_INP] = "ffn_gate_inp", [SK_FFN_NORM] = "ffn_norm", [SK_FFN_UP_EXPS] = "ffn_up_exps",
};

void synth_kind_name(enum synth_kind k, int layer, char *out, int out_size) {
    if (k < SK_FIRST_LAYER_KIND) snprintf(out, (size_t)out_size, "%s", kind_names[k]);
    else snprintf(out, (size_t)out_size, "blk.%d.%s.weight", layer, kind_names[k]);
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
