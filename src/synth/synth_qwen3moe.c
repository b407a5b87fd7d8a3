/* The qwen3moe writer of moex synth: llama.cpp's metadata keys for
 * qwen3moe, the tensors in the order its files list them, and their rows
 * from the routing design (synth_design.h). */
#include "synth/synth_arch.h"

#include "core/error.h"
#include "gguf/gguf.h"
#include "synth/synth_design.h"
#include "synth/synth_vocab.h"

#include <stdlib.h>
#include <string.h>

#define ARCH "qwen3moe"

static void set_metadata(const struct synth_params *p, const struct synth_vocab *v, struct gguf_writer *w) {
    synth_set_general(p, w);
    gguf_set_u32(w, ARCH ".block_count", (uint32_t)p->n_layers);
    gguf_set_u32(w, ARCH ".context_length", (uint32_t)p->n_ctx);
    gguf_set_u32(w, ARCH ".embedding_length", (uint32_t)p->n_embd);
    /* Qwen3-30B-A3B's intermediate_size (6144) is top-k x expert FFN; so is the oracle files' 512. */
    gguf_set_u32(w, ARCH ".feed_forward_length", (uint32_t)(p->n_expert_used * p->n_ff_exp));
    gguf_set_u32(w, ARCH ".attention.head_count", (uint32_t)p->n_head);
    gguf_set_u32(w, ARCH ".attention.head_count_kv", (uint32_t)p->n_head_kv);
    gguf_set_f32(w, ARCH ".rope.freq_base", p->rope_base);
    gguf_set_f32(w, ARCH ".attention.layer_norm_rms_epsilon", p->rms_eps);
    gguf_set_u32(w, ARCH ".expert_count", (uint32_t)p->n_expert);
    gguf_set_u32(w, ARCH ".expert_used_count", (uint32_t)p->n_expert_used);
    gguf_set_u32(w, ARCH ".attention.key_length", (uint32_t)p->head_dim);
    gguf_set_u32(w, ARCH ".attention.value_length", (uint32_t)p->head_dim);
    gguf_set_u32(w, ARCH ".expert_feed_forward_length", (uint32_t)p->n_ff_exp);
    synth_set_trailer(p, v, w);
}

/* The tensors in file order (llama.cpp's quantized files list them so). */
static struct synth_tensor *plan_tensors(const struct synth_params *p, int n_vocab, int *n_out) {
    int n = 3 + p->n_layers * (SK_COUNT - SK_FIRST_LAYER_KIND);
    struct synth_tensor *t = malloc((size_t)n * sizeof *t);
    if (!t) { moex_errorf("synth: out of memory"); return NULL; }
    int i = 0;
    for (int l = -1; l < p->n_layers; l++) {
        int first = l < 0 ? 0 : SK_FIRST_LAYER_KIND, end = l < 0 ? SK_FIRST_LAYER_KIND : SK_COUNT;
        for (int k = first; k < end; k++, i++) {
            char name[64];
            int64_t ne[3] = { 1, 1, 1 };
            int layer = l < 0 ? 0 : l;
            synth_kind_name((enum synth_kind)k, layer, name, sizeof name);
            int n_dims = synth_kind_shape(p, n_vocab, (enum synth_kind)k, ne);
            synth_tensor_init(p, &t[i], name, k, layer, n_dims, ne);
        }
    }
    *n_out = n;
    return t;
}

static void design_row(const void *design, const struct synth_tensor *t, int64_t row, float *out) {
    synth_design_row(design, (enum synth_kind)t->kind, t->layer, row, out);
}

static int write_qwen3moe(const struct synth_params *p, const struct synth_vocab *v, const char *path) {
    struct synth_design *design = synth_design_new(p, v->n_tokens, v->types);
    struct synth_tensor *plan = NULL;
    struct gguf_writer *w = NULL;
    int n = 0, rc = -1;
    if (!design || !(plan = plan_tensors(p, v->n_tokens, &n))) goto done;
    if (!(w = gguf_writer_new())) { moex_errorf("synth: out of memory"); goto done; }
    set_metadata(p, v, w);
    rc = synth_write_file(p, w, plan, n, design_row, design, path);
done:
    gguf_writer_free(w);
    free(plan);
    synth_design_free(design);
    return rc;
}

struct preset {
    const char *name;
    int layers, embd, heads, heads_kv, head_dim, experts, used, ff, vocab, ctx;
    enum synth_type type;
};

/* tiny: unit tests (dims multiples of 256, so every quantization type fits);
 * small: the default model, tens of MB; q30b: Qwen3-30B-A3B's shapes. */
static const struct preset presets[] = {
    { "tiny", 2, 256, 4, 2, 64, 8, 2, 256, 512, 4096, SYNTH_F16 },
    { "small", 6, 512, 8, 2, 64, 32, 4, 256, 0, 4096, SYNTH_Q4_K_M },
    { "q30b", 48, 2048, 32, 4, 128, 128, 8, 768, 151936, 40960, SYNTH_Q4_K_M },
    { "q30b-l8", 8, 2048, 32, 4, 128, 128, 8, 768, 151936, 40960, SYNTH_Q4_K_M },
};

static const struct synth_preset_doc docs[] = {
    { "tiny", "2 layers, dim 256, 8 experts top-2, vocab 512 (f16)" },
    { "small", "6 layers, dim 512, 32 experts top-4, built-in vocab (q4_k_m)" },
    { "q30b", "Qwen3-30B-A3B: 48 layers, dim 2048, 128 experts top-8, expert ffn 768, 32/4 heads of 128, "
              "vocab 151936, ctx 40960 (q4_k_m, ~17 GB)" },
    { "q30b-l8", "the same with 8 layers" },
};

static int preset(const char *name, struct synth_params *p) {
    for (size_t i = 0; i < sizeof presets / sizeof *presets; i++) {
        const struct preset *s = &presets[i];
        if (strcmp(name, s->name)) continue;
        *p = (struct synth_params){
            .n_layers = s->layers, .n_embd = s->embd, .n_head = s->heads, .n_head_kv = s->heads_kv,
            .head_dim = s->head_dim, .n_expert = s->experts, .n_expert_used = s->used, .n_ff_exp = s->ff,
            .n_vocab = s->vocab, .n_ctx = s->ctx, .rope_base = 1e6f, .rms_eps = 1e-6f, .type = s->type,
            .skew = SYNTH_DEFAULT_SKEW, .locality = SYNTH_DEFAULT_LOCALITY, .seed = 1, .arch = ARCH,
        };
        return 0;
    }
    return 1;
}

const struct synth_arch synth_qwen3moe = {
    .name = ARCH,
    .default_preset = "small",
    .preset = preset,
    .presets = docs,
    .n_presets = sizeof docs / sizeof *docs,
    .write = write_qwen3moe,
};
