/* moex synth as a library call: the table of architecture writers, the
 * presets, the tensor types (llama.cpp's rules for the Q4_K_M mix), the
 * checks every shape passes, and the dispatch to the architecture's writer. */
#include "arch/tensor_names.h"
#include "synth/synth.h"

#include "arch/arch.h"
#include "core/error.h"
#include "synth/synth_arch.h"
#include "synth/synth_vocab.h"
#include "quant/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The writers are the architecture table's (arch_table.c): each row points to its own. */
static const struct synth_arch *writer_at(int i) {
    const struct arch *a = arch_at(i);
    return a ? a->synth : NULL;
}

static const struct synth_arch *find_arch(const char *name) {
    const struct arch *a = arch_find(name ? name : "qwen3moe");
    return a ? a->synth : NULL;
}

void synth_arch_names(char *out, int size) {
    int used = 0;
    out[0] = 0;
    for (int i = 0; i < arch_count() && used < size; i++)
        if (writer_at(i)) used += snprintf(out + used, (size_t)(size - used), "%s%s", used ? ", " : "", writer_at(i)->name);
}

void synth_preset_names(char *out, int size) {
    int used = 0;
    out[0] = 0;
    for (int i = 0; i < arch_count(); i++)
        for (int k = 0; writer_at(i) && k < writer_at(i)->n_presets && used < size; k++)
            used += snprintf(out + used, (size_t)(size - used), "%s%s", used ? ", " : "", writer_at(i)->presets[k].name);
}

const char *synth_presets_help(void) {
    static char text[4096];
    if (text[0]) return text;
    int used = 0;
    for (int i = 0; i < arch_count(); i++) {
        const struct synth_arch *w = writer_at(i);
        for (int k = 0; w && k < w->n_presets && used < (int)sizeof text; k++)
            used += snprintf(text + used, sizeof text - (size_t)used, "  %-16s %s%s\n", w->presets[k].name,
                             w->presets[k].summary, !strcmp(w->presets[k].name, w->default_preset) ?
                             (i == 0 ? " (the default)" : "; --arch's default") : "");
    }
    return text;
}

const char *synth_arch_default_preset(const char *arch) {
    const struct synth_arch *a = find_arch(arch);
    return a ? a->default_preset : NULL;
}

static const char *const type_names[SYNTH_TYPE_COUNT] = { "f16", "q8_0", "q4_k", "q6_k", "q4_k_m" };

int synth_preset(const char *name, struct synth_params *p) {
    for (int i = 0; i < arch_count(); i++) {
        const struct synth_arch *w = writer_at(i);
        int rc = w && w->preset ? w->preset(name, p) : 1;
        if (rc <= 0) return rc;
    }
    char names[512];
    synth_preset_names(names, sizeof names);
    return moex_errorf("synth: unknown preset '%s' (%s)", name, names);
}

int synth_parse_type(const char *s, enum synth_type *t) {
    for (int i = 0; i < SYNTH_TYPE_COUNT; i++)
        if (!strcmp(s, type_names[i])) { *t = (enum synth_type)i; return 0; }
    return -1;
}

const char *synth_type_name(enum synth_type t) { return (unsigned)t < SYNTH_TYPE_COUNT ? type_names[t] : "?"; }

uint32_t synth_file_type(enum synth_type t) {
    /* llama_ftype: MOSTLY_F16 1, MOSTLY_Q8_0 7, MOSTLY_Q4_K_S 14 (the nearest
     * to all-Q4_K), MOSTLY_Q4_K_M 15, MOSTLY_Q6_K 18. */
    static const uint32_t ftype[SYNTH_TYPE_COUNT] = { 1, 7, 14, 18, 15 };
    return (unsigned)t < SYNTH_TYPE_COUNT ? ftype[t] : 0;
}

/* llama.cpp's use_more_bits: the first and last eighth of the layers and
 * every third one between get more bits. */
static int use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* llama.cpp counts attn_v tensors, not layers: in a hybrid only the
 * attention layers have one. */
static void attn_v_index(const struct synth_params *p, int layer, int *i, int *n) {
    *i = layer;
    *n = p->n_layers;
    if (!p->attention_layers) return;
    *i = *n = 0;
    for (int l = 0; l < p->n_layers && l < 64; l++)
        if (p->attention_layers >> l & 1) { *i += l < layer; ++*n; }
}

static uint32_t q4_k_m_type(const struct synth_params *p, const char *name) {
    int layer = 0;
    if (sscanf(name, "blk.%d.", &layer) != 1) layer = 0;
    bool eight = p->n_expert == 8; /* llama.cpp special-cases 8-expert models */
    if (!strcmp(name, TN_OUTPUT)) return QT_Q6_K;
    /* attn_qkv (a delta net's input) counts as attn_v */
    if (strstr(name, TN_ATTN_V) || strstr(name, TN_ATTN_QKV)) {
        int i, n;
        attn_v_index(p, layer, &i, &n);
        return eight ? QT_Q8_0 : use_more_bits(i, n) ? QT_Q6_K : QT_Q4_K;
    }
    if (strstr(name, TN_ATTN_K)) return eight ? QT_Q8_0 : QT_Q4_K;
    if (strstr(name, TN_ATTN_OUTPUT)) return eight ? QT_Q5_K : QT_Q4_K;
    if (strstr(name, "ffn_down")) return use_more_bits(layer, p->n_layers) ? QT_Q6_K : QT_Q4_K;
    return QT_Q4_K;
}

uint32_t synth_tensor_type(const struct synth_params *p, const char *name, int64_t ne0) {
    /* llama-quantize leaves norms, routers, biases, conv kernels and the
     * delta net's decay vector alone. */
    size_t len = strlen(name);
    if (strstr(name, "_norm.weight") || strstr(name, "ffn_gate_inp") || strstr(name, ".bias") ||
        strstr(name, TN_SHORTCONV_CONV) || strstr(name, "ssm_conv1d") ||
        (len > 6 && !strcmp(name + len - 6, ".ssm_a")))
        return QT_F32;
    uint32_t t;
    switch (p->type) {
    case SYNTH_Q8_0: t = QT_Q8_0; break;
    case SYNTH_Q4_K: t = QT_Q4_K; break;
    case SYNTH_Q6_K: /* llama.cpp's Q6_K: 8-expert models keep attn_k and attn_v in Q8_0 */
        t = p->n_expert == 8 && (strstr(name, TN_ATTN_K) || strstr(name, TN_ATTN_V) ||
                                 strstr(name, TN_ATTN_QKV)) ? QT_Q8_0 : QT_Q6_K;
        break;
    case SYNTH_Q4_K_M: t = q4_k_m_type(p, name); break;
    default: t = QT_F16; break;
    }
    /* Rows a block cannot tile: llama-quantize's fallback moves Q4_K to
     * Q5_0, Q5_K to Q5_1, Q6_K to Q8_0; what still does not tile to F16. */
    if (quant_row_size((enum qtype)t, ne0) == 0) t = t == QT_Q4_K ? QT_Q5_0 : t == QT_Q5_K ? QT_Q5_1 : QT_Q8_0;
    if (quant_row_size((enum qtype)t, ne0) == 0) t = QT_F16;
    return t;
}

int synth_check(const struct synth_params *p) {
    struct { const char *what; int64_t v, lo, hi; } limits[] = {
        { "layers", p->n_layers, 1, 1024 },       { "dim", p->n_embd, 16, 65536 },
        { "heads", p->n_head, 1, 1024 },          { "kv-heads", p->n_head_kv, 1, 1024 },
        { "head-dim", p->head_dim, 2, 1024 },     { "experts", p->n_expert, 1, 4096 },
        { "top-k", p->n_expert_used, 1, 4096 },   { "expert-ffn", p->n_ff_exp, 1, 1 << 20 },
        { "vocab", p->n_vocab, 0, 1 << 24 },      { "ctx", p->n_ctx, 1, 1 << 24 },
    };
    for (size_t i = 0; i < sizeof limits / sizeof *limits; i++)
        if (limits[i].v < limits[i].lo || limits[i].v > limits[i].hi)
            return moex_errorf("synth: %s %lld is out of range [%lld, %lld]", limits[i].what, (long long)limits[i].v,
                               (long long)limits[i].lo, (long long)limits[i].hi);
    if (p->head_dim % 2) return moex_errorf("synth: head-dim %d must be even (RoPE rotates pairs)", p->head_dim);
    if (p->n_head % p->n_head_kv)
        return moex_errorf("synth: heads %d is not a multiple of kv-heads %d", p->n_head, p->n_head_kv);
    if (p->n_expert_used > p->n_expert)
        return moex_errorf("synth: top-k %d is more than the %d experts", p->n_expert_used, p->n_expert);
    if (!(p->rope_base > 1) || !(p->rms_eps > 0)) return moex_errorf("synth: rope base must be > 1 and rms eps > 0");
    if (!(p->skew >= 0 && p->skew <= 10)) return moex_errorf("synth: skew %g is out of range [0, 10]", p->skew);
    if (!(p->locality >= 0 && p->locality <= 1)) return moex_errorf("synth: locality %g is out of range [0, 1]", p->locality);
    if ((unsigned)p->type >= SYNTH_TYPE_COUNT) return moex_errorf("synth: unknown type %d", (int)p->type);
    const struct synth_arch *a = find_arch(p->arch);
    if (!a) {
        char names[128];
        synth_arch_names(names, sizeof names);
        return moex_errorf("synth: unknown architecture '%s' (%s)", p->arch, names);
    }
    return a->check ? a->check(p) : 0;
}

int synth_write(const struct synth_params *p, const char *path) {
    if (synth_check(p)) return -1;
    struct synth_vocab vocab;
    if (synth_vocab_build(p->vocab_from, p->n_vocab, &vocab)) return -1;
    int rc = find_arch(p->arch)->write(p, &vocab, path);
    synth_vocab_free(&vocab);
    return rc;
}

