/* The lfm2moe writer of moex synth: llama.cpp's metadata keys for lfm2moe
 * (per-layer head_count_kv, 0 for the short-convolution layers), the
 * tensors in the order its files list them (alphabetical within a layer),
 * tied embeddings with token_embd_norm as the final norm. The embedding,
 * norms, attention layers, routers and experts are the routing design's
 * (synth_design.h), so expert popularity has the design's skew; the short
 * convolutions and dense FFNs add small random terms, and the selection bias
 * is small enough to keep the skew. */
#include "arch/tensor_names.h"
#include "synth/synth_arch.h"

#include "core/error.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "synth/synth_design.h"
#include "synth/synth_vocab.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ARCH "lfm2moe"
#define L_CACHE 3
#define GATING_SIGMOID 2          /* llama.cpp's expert_gating_func for sigmoid */
#define CONV_OUT_STD 0.05f        /* std of a short conv's (and a dense FFN's) output per coordinate */
#define SELECTION_BIAS_STD 0.01f  /* exp_probs_b: small next to the spread of sigmoid(router) */

/* LFM2-8B-A1B's attention layers (its config's layer_types). */
#define LFM2_8B_ATTENTION ((1u << 2) | (1u << 6) | (1u << 10) | (1u << 14) | (1u << 18) | (1u << 21))

struct preset {
    const char *name;
    int layers, embd, heads, heads_kv, ff, dense, experts, used, ff_exp, vocab, ctx;
    uint64_t attention;
    enum synth_type type;
};

/* lfm2-tiny: tests (the oracle's shapes: conv, conv, attention, conv; one
 * dense layer); lfm2-8b-a1b: LiquidAI LFM2-8B-A1B. */
static const struct preset presets[] = {
    { "lfm2-tiny", 4, 256, 4, 2, 512, 1, 8, 2, 256, 512, 4096, 1u << 2, SYNTH_F16 },
    { "lfm2-8b-a1b", 24, 2048, 32, 8, 7168, 2, 32, 4, 1792, 65536, 128000, LFM2_8B_ATTENTION, SYNTH_Q4_K_M },
};

static const struct synth_preset_doc docs[] = {
    { "lfm2-tiny", "lfm2moe, 4 layers (conv, conv, attention, conv; 1 dense), dim 256, 8 experts top-2, "
                   "vocab 512 (f16)" },
    { "lfm2-8b-a1b", "LFM2-8B-A1B: 24 layers (attention at 2, 6, 10, 14, 18, 21; 2 dense, ffn 7168), dim 2048, "
                     "32 experts top-4, expert ffn 1792, 32/8 heads of 64, vocab 65536 (q4_k_m, ~5 GB)" },
};

static int preset(const char *name, struct synth_params *p) {
    for (size_t i = 0; i < sizeof presets / sizeof *presets; i++) {
        const struct preset *s = &presets[i];
        if (strcmp(name, s->name)) continue;
        *p = (struct synth_params){
            .arch = ARCH, .n_layers = s->layers, .n_embd = s->embd, .n_head = s->heads, .n_head_kv = s->heads_kv,
            .head_dim = s->embd / s->heads, .n_expert = s->experts, .n_expert_used = s->used, .n_ff_exp = s->ff_exp,
            .n_ff = s->ff, .n_dense = s->dense, .attention_layers = s->attention, .n_vocab = s->vocab,
            .n_ctx = s->ctx, .rope_base = 1e6f, .rms_eps = 1e-5f, .type = s->type, .skew = SYNTH_DEFAULT_SKEW,
            .locality = SYNTH_DEFAULT_LOCALITY, .seed = 1,
        };
        return 0;
    }
    return 1;
}

static int check(const struct synth_params *p) {
    if (p->n_dense < 0 || p->n_dense >= p->n_layers)
        return moex_errorf("synth: lfm2moe needs 0 to %d leading dense layers, not %d", p->n_layers - 1, p->n_dense);
    if (p->n_dense > 0 && (p->n_ff < 1 || p->n_ff > 1 << 20))
        return moex_errorf("synth: dense FFN width %d is out of range [1, %d]", p->n_ff, 1 << 20);
    if (p->head_dim * p->n_head != p->n_embd)
        return moex_errorf("synth: lfm2moe's head size is dim / heads (%d x %d != %d)", p->head_dim, p->n_head,
                           p->n_embd);
    return 0;
}

static bool is_attention(const struct synth_params *p, int l) { return l < 64 && (p->attention_layers >> l & 1); }

/* The tensors' own tags: the design's kinds, then these. */
enum {
    K_CONV = SK_COUNT, K_IN_PROJ, K_OUT_PROJ,     /* short convolution */
    K_FFN_GATE, K_FFN_UP, K_FFN_DOWN,             /* dense FFN */
    K_EXP_PROBS_B, K_FINAL_NORM,
};

static int set_metadata(const struct synth_params *p, int n_vocab, const struct synth_vocab *v,
                        struct gguf_writer *w) {
    int32_t *kv = malloc((size_t)p->n_layers * sizeof *kv);
    if (!kv) return moex_errorf("synth: out of memory");
    for (int l = 0; l < p->n_layers; l++) kv[l] = is_attention(p, l) ? p->n_head_kv : 0;
    synth_set_general(p, w);
    gguf_set_u32(w, ARCH ".block_count", (uint32_t)p->n_layers);
    gguf_set_u32(w, ARCH ".context_length", (uint32_t)p->n_ctx);
    gguf_set_u32(w, ARCH ".embedding_length", (uint32_t)p->n_embd);
    gguf_set_u32(w, ARCH ".feed_forward_length", (uint32_t)(p->n_ff > 0 ? p->n_ff : p->n_ff_exp));
    gguf_set_u32(w, ARCH ".attention.head_count", (uint32_t)p->n_head);
    gguf_set_arr(w, ARCH ".attention.head_count_kv", GGUF_I32, kv, (uint64_t)p->n_layers);
    gguf_set_f32(w, ARCH ".rope.freq_base", p->rope_base);
    gguf_set_f32(w, ARCH ".attention.layer_norm_rms_epsilon", p->rms_eps);
    gguf_set_u32(w, ARCH ".expert_count", (uint32_t)p->n_expert);
    gguf_set_u32(w, ARCH ".expert_used_count", (uint32_t)p->n_expert_used);
    gguf_set_u32(w, ARCH ".expert_feed_forward_length", (uint32_t)p->n_ff_exp);
    gguf_set_u32(w, ARCH ".leading_dense_block_count", (uint32_t)p->n_dense);
    gguf_set_u32(w, ARCH ".expert_gating_func", GATING_SIGMOID);
    gguf_set_u32(w, ARCH ".vocab_size", (uint32_t)n_vocab);
    gguf_set_u32(w, ARCH ".shortconv.l_cache", L_CACHE);
    synth_set_trailer(p, v, w);
    free(kv);
    return 0;
}

struct plan {
    struct synth_tensor *t;
    int n, cap;
};

static void add(const struct synth_params *p, struct plan *pl, const char *name, int kind, int layer, int n_dims,
                int64_t ne0, int64_t ne1, int64_t ne2) {
    const int64_t ne[3] = { ne0, ne1, ne2 };
    synth_tensor_init(p, &pl->t[pl->n++], name, kind, layer, n_dims, ne);
}

/* A design kind under its own name. */
static void add_kind(const struct synth_params *p, struct plan *pl, int n_vocab, enum synth_kind k, int layer) {
    char name[64];
    int64_t ne[3] = { 1, 1, 1 };
    synth_kind_name(k, layer, name, sizeof name);
    int n_dims = synth_kind_shape(p, n_vocab, k, ne);
    synth_tensor_init(p, &pl->t[pl->n++], name, k, layer, n_dims, ne);
}

/* The tensors in file order: the embedding and final norm, then per layer
 * alphabetically, as llama.cpp's converter and quantizer write them. */
static struct synth_tensor *plan_tensors(const struct synth_params *p, int n_vocab, int *n_out) {
    struct plan pl = { malloc((size_t)(2 + 13 * p->n_layers) * sizeof *pl.t), 0, 0 };
    if (!pl.t) { moex_errorf("synth: out of memory"); return NULL; }
    int64_t D = p->n_embd;
    char name[64];
    add_kind(p, &pl, n_vocab, SK_TOKEN_EMBD, 0);
    /* Tied embeddings: llama-quantize gives token_embd the output's type. */
    struct synth_tensor *embd = &pl.t[0];
    embd->type = synth_tensor_type(p, TN_OUTPUT, embd->ne[0]);
    embd->row_bytes = quant_row_size((enum qtype)embd->type, embd->ne[0]);
    add(p, &pl, TN_TOKEN_EMBD_NORM, K_FINAL_NORM, 0, 1, D, 1, 1);
#define LAYER_NAME(s) (snprintf(name, sizeof name, "blk.%d." s, l), name)
    for (int l = 0; l < p->n_layers; l++) {
        bool attn = is_attention(p, l), dense = l < p->n_dense;
        if (attn) {
            add_kind(p, &pl, n_vocab, SK_ATTN_K, l);
            add_kind(p, &pl, n_vocab, SK_ATTN_K_NORM, l);
        }
        add_kind(p, &pl, n_vocab, SK_ATTN_NORM, l);
        if (attn) {
            add_kind(p, &pl, n_vocab, SK_ATTN_OUTPUT, l);
            add_kind(p, &pl, n_vocab, SK_ATTN_Q, l);
            add_kind(p, &pl, n_vocab, SK_ATTN_Q_NORM, l);
            add_kind(p, &pl, n_vocab, SK_ATTN_V, l);
        }
        if (dense) {
            add(p, &pl, LAYER_NAME(TN_FFN_DOWN), K_FFN_DOWN, l, 2, p->n_ff, D, 1);
            add(p, &pl, LAYER_NAME(TN_FFN_GATE), K_FFN_GATE, l, 2, D, p->n_ff, 1);
            add_kind(p, &pl, n_vocab, SK_FFN_NORM, l);
            add(p, &pl, LAYER_NAME(TN_FFN_UP), K_FFN_UP, l, 2, D, p->n_ff, 1);
        } else {
            add(p, &pl, LAYER_NAME(TN_EXP_PROBS_B), K_EXP_PROBS_B, l, 1, p->n_expert, 1, 1);
            add_kind(p, &pl, n_vocab, SK_FFN_DOWN_EXPS, l);
            add_kind(p, &pl, n_vocab, SK_FFN_GATE_EXPS, l);
            add_kind(p, &pl, n_vocab, SK_FFN_GATE_INP, l);
            add_kind(p, &pl, n_vocab, SK_FFN_NORM, l);
            add_kind(p, &pl, n_vocab, SK_FFN_UP_EXPS, l);
        }
        if (!attn) {
            add(p, &pl, LAYER_NAME(TN_SHORTCONV_CONV), K_CONV, l, 2, L_CACHE, D, 1);
            add(p, &pl, LAYER_NAME(TN_SHORTCONV_IN_PROJ), K_IN_PROJ, l, 2, D, 3 * D, 1);
            add(p, &pl, LAYER_NAME(TN_SHORTCONV_OUT_PROJ), K_OUT_PROJ, l, 2, D, D, 1);
        }
    }
#undef LAYER_NAME
    *n_out = pl.n;
    return pl.t;
}

struct writer_design {
    const struct synth_design *routing;
};

/* LFM2's own tensors draw from streams above the design's (kept where they
 * were when this writer had its own generator, so files stay the same). */
#define LFM2_STREAMS (1ull << 62)

/* Rows outside the routing design: random, scaled so that each block's
 * input projections see unit-variance activations and its output adds a
 * small term to the residual. */
static void design_row(const void *design, const struct synth_tensor *t, int64_t row, float *out) {
    const struct writer_design *d = design;
    uint64_t stream = (uint64_t)t->kind << 32 | (uint32_t)t->layer;
    int64_t n = t->ne[0];
    switch (t->kind) {
    case K_CONV: synth_noise_row(d->routing, stream | LFM2_STREAMS, row, 0.5f, out, n); break;
    case K_IN_PROJ: case K_FFN_GATE: case K_FFN_UP:
        synth_noise_row(d->routing, stream | LFM2_STREAMS, row, 1.0f / sqrtf((float)n), out, n);
        break;
    case K_OUT_PROJ: case K_FFN_DOWN:
        synth_noise_row(d->routing, stream | LFM2_STREAMS, row, CONV_OUT_STD / sqrtf((float)n), out, n);
        break;
    case K_EXP_PROBS_B: synth_noise_row(d->routing, stream | LFM2_STREAMS, row, SELECTION_BIAS_STD, out, n); break;
    case K_FINAL_NORM:
        /* The design's output norm with random signs: with tied random
         * embeddings a positive norm makes each token predict itself. */
        synth_design_row(d->routing, SK_OUTPUT_NORM, 0, row, out);
        for (int64_t i = 0; i < n; i++) {
            float sign[1];
            synth_noise_row(d->routing, stream | LFM2_STREAMS, i, 1.0f, sign, 1);
            if (sign[0] < 0) out[i] = -out[i];
        }
        break;
    default: synth_design_row(d->routing, (enum synth_kind)t->kind, t->layer, row, out); break;
    }
}

static int write_lfm2moe(const struct synth_params *p, const struct synth_vocab *v, const char *path) {
    struct synth_design *routing = synth_design_new(p, v->n_tokens, v->types);
    struct synth_tensor *plan = NULL;
    struct gguf_writer *w = NULL;
    int n = 0, rc = -1;
    if (!routing || !(plan = plan_tensors(p, v->n_tokens, &n))) goto done;
    if (!(w = gguf_writer_new())) { moex_errorf("synth: out of memory"); goto done; }
    if (set_metadata(p, v->n_tokens, v, w)) goto done;
    struct writer_design d = { routing };
    rc = synth_write_file(p, w, plan, n, design_row, &d, path);
done:
    gguf_writer_free(w);
    free(plan);
    synth_design_free(routing);
    return rc;
}

const struct synth_arch synth_lfm2moe = {
    .name = ARCH,
    .default_preset = "lfm2-tiny",
    .preset = preset,
    .presets = docs,
    .n_presets = sizeof docs / sizeof *docs,
    .check = check,
    .write = write_lfm2moe,
};
