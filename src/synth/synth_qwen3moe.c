/* The qwen3moe writer of moex synth: llama.cpp's metadata keys for
 * qwen3moe, the tensors in the order its files list them, and their rows
 * from the routing design (synth_design.h). */
#include "synth/synth_arch.h"

#include "core/error.h"
#include "gguf/gguf.h"
#include "synth/synth_design.h"
#include "synth/synth_vocab.h"

#include <stdlib.h>

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

const struct synth_arch synth_qwen3moe = {
    .name = ARCH,
    .default_preset = "small",
    .write = write_qwen3moe,
};
