/* The qwen35moe writer of moex synth: the keys, tensor names, shapes and
 * order of the files convert_hf_to_gguf.py writes for Qwen3.5/3.6-MoE (no
 * MTP block). The tensors qwen3moe also has take their rows from the routing
 * design (synth_design.h): embedding, output, norms, router, experts and the
 * attention layers' q/k/v/o, so expert popularity and its skew are as in a
 * qwen3moe file; routing locality comes from the attention layers only (one
 * in attn_interval). The delta-net layers and the shared expert get
 * well-scaled random weights whose outputs are small next to the residual,
 * so that they do not undo the design. */
#include "arch/tensor_names.h"
#include "synth/synth_arch.h"

#include "core/error.h"
#include "gguf/gguf.h"
#include "synth/synth_design.h"
#include "synth/synth_vocab.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARCH "qwen35moe"

/* What a delta-net layer and the shared expert add to the residual, relative
 * to a unit-scale projection. */
#define SMALL_OUT 0.05f

/* Tensors beyond the design's kinds. */
enum q35_kind {
    QK_ATTN_Q = SK_COUNT,    /* per head: the design's query rows, then gate rows */
    QK_ATTN_GATE, QK_ATTN_QKV, QK_SSM_A, QK_SSM_ALPHA, QK_SSM_BETA, QK_SSM_CONV, QK_SSM_DT, QK_SSM_NORM, QK_SSM_OUT,
    QK_SH_DOWN, QK_SH_GATE_INP, QK_SH_GATE, QK_SH_UP,
};

static bool is_delta_net(const struct synth_params *p, int layer) { return (layer + 1) % p->attn_interval != 0; }

/* name: the preset; dims as in Qwen3.5-35B-A3B's config (16/2 heads of 256,
 * a quarter of them rotating; delta net 16 key / 32 value heads of 128). */
struct q35_preset {
    const char *name;
    int layers, embd, heads, heads_kv, head_dim, n_rot, experts, used, ff, ff_shexp;
    int k_heads, v_heads, state, vocab, ctx;
    enum synth_type type;
};

static const struct q35_preset presets[] = {
    { "qwen35-tiny", 4, 256, 4, 2, 64, 16, 8, 2, 256, 256, 2, 4, 64, 0, 4096, SYNTH_F16 },
    { "qwen35-35b-a3b", 40, 2048, 16, 2, 256, 64, 256, 8, 512, 512, 16, 32, 128, 248320, 262144, SYNTH_Q4_K_M },
    { "qwen35-a3b-l8", 8, 2048, 16, 2, 256, 64, 256, 8, 512, 512, 16, 32, 128, 248320, 262144, SYNTH_Q4_K_M },
};

static const struct synth_preset_doc docs[] = {
    { "qwen35-tiny", "qwen35moe, 4 layers (3 delta net + 1 attention), dim 256, 8 experts top-2 and a shared "
                     "expert, built-in vocab (f16)" },
    { "qwen35-35b-a3b", "Qwen3.5/3.6-35B-A3B: 40 layers, dim 2048, 256 experts top-8, expert and shared ffn 512, "
                        "vocab 248320 (q4_k_m)" },
    { "qwen35-a3b-l8", "the same with 8 layers" },
};

static int preset(const char *name, struct synth_params *p) {
    for (size_t i = 0; i < sizeof presets / sizeof *presets; i++) {
        const struct q35_preset *s = &presets[i];
        if (strcmp(name, s->name)) continue;
        *p = (struct synth_params){
            .arch = ARCH, .n_layers = s->layers, .n_embd = s->embd, .n_head = s->heads, .n_head_kv = s->heads_kv,
            .head_dim = s->head_dim, .n_expert = s->experts, .n_expert_used = s->used, .n_ff_exp = s->ff,
            .n_vocab = s->vocab, .n_ctx = s->ctx, .rope_base = 1e7f, .rms_eps = 1e-6f, .attn_interval = 4,
            .n_rot = s->n_rot, .ssm_conv = 4, .ssm_state = s->state, .ssm_k_heads = s->k_heads,
            .ssm_v_heads = s->v_heads, .n_ff_shexp = s->ff_shexp, .type = s->type, .skew = SYNTH_DEFAULT_SKEW,
            .locality = SYNTH_DEFAULT_LOCALITY, .seed = 1,
        };
        return 0;
    }
    return 1;
}

static int check(const struct synth_params *p) {
    if (p->attn_interval < 1 || p->attn_interval > p->n_layers)
        return moex_errorf("synth: qwen35moe needs an attention layer: interval %d with %d layers", p->attn_interval,
                           p->n_layers);
    if (p->n_rot < 2 || p->n_rot > p->head_dim || p->n_rot % 2)
        return moex_errorf("synth: rotary dims %d must be even and at most head-dim %d", p->n_rot, p->head_dim);
    if (p->ssm_conv < 2 || p->ssm_state < 2 || p->ssm_k_heads < 1 || p->ssm_v_heads % p->ssm_k_heads ||
        p->n_ff_shexp < 1)
        return moex_errorf("synth: invalid delta-net or shared-expert shape (conv %d, state %d, heads %d/%d, "
                           "shared ffn %d)", p->ssm_conv, p->ssm_state, p->ssm_k_heads, p->ssm_v_heads, p->n_ff_shexp);
    return 0;
}

static void set_metadata(const struct synth_params *p, const struct synth_vocab *v, struct gguf_writer *w) {
    /* IMRoPE sections of Qwen3.5 (mrope_section 11, 11, 10, and none for the extra axis). */
    static const int32_t sections[4] = { 11, 11, 10, 0 };
    synth_set_general(p, w);
    gguf_set_u32(w, ARCH ".block_count", (uint32_t)p->n_layers);
    gguf_set_u32(w, ARCH ".context_length", (uint32_t)p->n_ctx);
    gguf_set_u32(w, ARCH ".embedding_length", (uint32_t)p->n_embd);
    gguf_set_u32(w, ARCH ".attention.head_count", (uint32_t)p->n_head);
    gguf_set_u32(w, ARCH ".attention.head_count_kv", (uint32_t)p->n_head_kv);
    gguf_set_arr(w, ARCH ".rope.dimension_sections", GGUF_I32, sections, 4);
    gguf_set_f32(w, ARCH ".rope.freq_base", p->rope_base);
    gguf_set_f32(w, ARCH ".attention.layer_norm_rms_epsilon", p->rms_eps);
    gguf_set_u32(w, ARCH ".expert_count", (uint32_t)p->n_expert);
    gguf_set_u32(w, ARCH ".expert_used_count", (uint32_t)p->n_expert_used);
    gguf_set_u32(w, ARCH ".attention.key_length", (uint32_t)p->head_dim);
    gguf_set_u32(w, ARCH ".attention.value_length", (uint32_t)p->head_dim);
    gguf_set_u32(w, ARCH ".expert_feed_forward_length", (uint32_t)p->n_ff_exp);
    gguf_set_u32(w, ARCH ".expert_shared_feed_forward_length", (uint32_t)p->n_ff_shexp);
    gguf_set_u32(w, ARCH ".ssm.conv_kernel", (uint32_t)p->ssm_conv);
    gguf_set_u32(w, ARCH ".ssm.state_size", (uint32_t)p->ssm_state);
    gguf_set_u32(w, ARCH ".ssm.group_count", (uint32_t)p->ssm_k_heads);
    gguf_set_u32(w, ARCH ".ssm.time_step_rank", (uint32_t)p->ssm_v_heads);
    gguf_set_u32(w, ARCH ".ssm.inner_size", (uint32_t)(p->ssm_v_heads * p->ssm_state));
    gguf_set_u32(w, ARCH ".full_attention_interval", (uint32_t)p->attn_interval);
    gguf_set_u32(w, ARCH ".rope.dimension_count", (uint32_t)p->n_rot);
    synth_set_trailer(p, v, w);
    /* The built-in vocabulary is Qwen's: the Qwen3.5 files name its split "qwen35". */
    if (!v->src) gguf_set_str(w, "tokenizer.ggml.pre", "qwen35");
}

struct plan {
    struct synth_tensor *t;
    int n, cap;
};

static void add(const struct synth_params *p, struct plan *pl, const char *suffix, int kind, int layer, int n_dims,
                int64_t ne0, int64_t ne1, int64_t ne2) {
    char name[64];
    if (layer < 0) snprintf(name, sizeof name, "%s", suffix);
    else snprintf(name, sizeof name, "blk.%d.%s", layer, suffix);
    const int64_t ne[3] = { ne0, ne1, ne2 };
    synth_tensor_init(p, &pl->t[pl->n++], name, kind, layer < 0 ? 0 : layer, n_dims, ne);
}

/* The tensors in file order: the ends, then each layer's in name order. */
static struct synth_tensor *plan_tensors(const struct synth_params *p, int n_vocab, int *n_out) {
    struct plan pl = { malloc((size_t)(3 + 22 * p->n_layers) * sizeof *pl.t), 0, 0 };
    if (!pl.t) { moex_errorf("synth: out of memory"); return NULL; }
    int64_t D = p->n_embd, hd = p->head_dim, q = (int64_t)p->n_head * hd, kv = (int64_t)p->n_head_kv * hd;
    int64_t E = p->n_expert, F = p->n_ff_exp, FS = p->n_ff_shexp, S = p->ssm_state, H = p->ssm_v_heads;
    int64_t vd = H * S, ch = (2 * p->ssm_k_heads + H) * S;
    add(p, &pl, TN_OUTPUT, SK_OUTPUT, -1, 2, D, n_vocab, 1);
    add(p, &pl, TN_OUTPUT_NORM, SK_OUTPUT_NORM, -1, 1, D, 1, 1);
    add(p, &pl, TN_TOKEN_EMBD, SK_TOKEN_EMBD, -1, 2, D, n_vocab, 1);
    for (int l = 0; l < p->n_layers; l++) {
        bool dn = is_delta_net(p, l);
        if (dn) add(p, &pl, TN_ATTN_GATE, QK_ATTN_GATE, l, 2, D, vd, 1);
        else {
            add(p, &pl, TN_ATTN_K, SK_ATTN_K, l, 2, D, kv, 1);
            add(p, &pl, TN_ATTN_K_NORM, SK_ATTN_K_NORM, l, 1, hd, 1, 1);
        }
        add(p, &pl, TN_ATTN_NORM, SK_ATTN_NORM, l, 1, D, 1, 1);
        if (dn) add(p, &pl, TN_ATTN_QKV, QK_ATTN_QKV, l, 2, D, ch, 1);
        else {
            add(p, &pl, TN_ATTN_OUTPUT, SK_ATTN_OUTPUT, l, 2, q, D, 1);
            add(p, &pl, TN_ATTN_Q, QK_ATTN_Q, l, 2, D, 2 * q, 1);
            add(p, &pl, TN_ATTN_Q_NORM, SK_ATTN_Q_NORM, l, 1, hd, 1, 1);
            add(p, &pl, TN_ATTN_V, SK_ATTN_V, l, 2, D, kv, 1);
        }
        add(p, &pl, TN_FFN_DOWN_EXPS, SK_FFN_DOWN_EXPS, l, 3, F, D, E);
        add(p, &pl, TN_FFN_DOWN_SHEXP, QK_SH_DOWN, l, 2, FS, D, 1);
        add(p, &pl, TN_FFN_GATE_EXPS, SK_FFN_GATE_EXPS, l, 3, D, F, E);
        add(p, &pl, TN_FFN_GATE_INP, SK_FFN_GATE_INP, l, 2, D, E, 1);
        add(p, &pl, TN_FFN_GATE_INP_SHEXP, QK_SH_GATE_INP, l, 1, D, 1, 1);
        add(p, &pl, TN_FFN_GATE_SHEXP, QK_SH_GATE, l, 2, D, FS, 1);
        add(p, &pl, TN_FFN_UP_EXPS, SK_FFN_UP_EXPS, l, 3, D, F, E);
        add(p, &pl, TN_FFN_UP_SHEXP, QK_SH_UP, l, 2, D, FS, 1);
        add(p, &pl, TN_POST_ATTENTION_NORM, SK_FFN_NORM, l, 1, D, 1, 1);
        if (dn) {
            add(p, &pl, TN_SSM_A, QK_SSM_A, l, 1, H, 1, 1);
            add(p, &pl, TN_SSM_ALPHA, QK_SSM_ALPHA, l, 2, D, H, 1);
            add(p, &pl, TN_SSM_BETA, QK_SSM_BETA, l, 2, D, H, 1);
            add(p, &pl, TN_SSM_CONV1D, QK_SSM_CONV, l, 2, p->ssm_conv, ch, 1);
            add(p, &pl, TN_SSM_DT_BIAS, QK_SSM_DT, l, 1, H, 1, 1);
            add(p, &pl, TN_SSM_NORM, QK_SSM_NORM, l, 1, S, 1, 1);
            add(p, &pl, TN_SSM_OUT, QK_SSM_OUT, l, 2, vd, D, 1);
        }
    }
    *n_out = pl.n;
    return pl.t;
}

struct q35_design {
    const struct synth_design *d;
    const struct synth_params *p;
};

static void design_row(const void *design, const struct synth_tensor *t, int64_t row, float *out) {
    const struct q35_design *qd = design;
    const struct synth_design *d = qd->d;
    int64_t n = t->ne[0];
    uint64_t stream = SYNTH_STREAM_EXTRA + ((uint64_t)t->kind << 24 | (uint64_t)t->layer);
    float unit = 1.0f / sqrtf((float)n);
    switch (t->kind) {
    case QK_ATTN_Q: {
        /* Head h's rows: the design's query rows h*hd.., then its gate rows. */
        int64_t hd = qd->p->head_dim, head = row / (2 * hd), j = row % (2 * hd);
        if (j < hd) synth_design_row(d, SK_ATTN_Q, t->layer, head * hd + j, out);
        else synth_noise_row(d, stream, row, unit, out, n);
        return;
    }
    case QK_SSM_A: /* a = -exp(A_log) for decay rates around 1..4 */
        synth_noise_row(d, stream, row, 1.0f, out, n);
        for (int64_t i = 0; i < n; i++) out[i] = -(1.0f + fabsf(out[i]));
        return;
    case QK_SSM_DT: /* softplus(-4) ~ 0.018: slow decay */
        synth_noise_row(d, stream, row, 0.5f, out, n);
        for (int64_t i = 0; i < n; i++) out[i] -= 4.0f;
        return;
    case QK_SSM_NORM:
        synth_noise_row(d, stream, row, 0.1f, out, n);
        for (int64_t i = 0; i < n; i++) out[i] += 1.0f;
        return;
    case QK_SSM_OUT: case QK_SH_DOWN: synth_noise_row(d, stream, row, SMALL_OUT * unit, out, n); return;
    case QK_SSM_CONV: case QK_ATTN_GATE: case QK_ATTN_QKV: case QK_SSM_ALPHA: case QK_SSM_BETA:
    case QK_SH_GATE_INP: case QK_SH_GATE: case QK_SH_UP:
        synth_noise_row(d, stream, row, unit, out, n);
        return;
    default: synth_design_row(d, (enum synth_kind)t->kind, t->layer, row, out); return;
    }
}

static int write_qwen35moe(const struct synth_params *p, const struct synth_vocab *v, const char *path) {
    struct synth_design *design = synth_design_new(p, v->n_tokens, v->types);
    struct synth_tensor *plan = NULL;
    struct gguf_writer *w = NULL;
    int n = 0, rc = -1;
    if (!design || !(plan = plan_tensors(p, v->n_tokens, &n))) goto done;
    if (!(w = gguf_writer_new())) { moex_errorf("synth: out of memory"); goto done; }
    set_metadata(p, v, w);
    struct q35_design qd = { design, p };
    rc = synth_write_file(p, w, plan, n, design_row, &qd, path);
done:
    gguf_writer_free(w);
    free(plan);
    synth_design_free(design);
    return rc;
}

const struct synth_arch synth_qwen35moe = {
    .name = ARCH,
    .default_preset = "qwen35-tiny",
    .preset = preset,
    .presets = docs,
    .n_presets = sizeof docs / sizeof *docs,
    .check = check,
    .write = write_qwen35moe,
};
