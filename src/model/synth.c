/* moex synth as a library call: presets, the llama.cpp metadata of qwen3moe,
 * the tensor types (llama.cpp's rules for the Q4_K_M mix), and the streaming
 * loop that generates, quantizes and writes the tensors slab by slab on a
 * thread pool. */
#include "model/synth.h"

#include "core/error.h"
#include "core/progress.h"
#include "core/threadpool.h"
#include "gguf/gguf.h"
#include "model/synth_design.h"
#include "model/synth_vocab.h"
#include "quant/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARCH "qwen3moe"
#define SLAB_BYTES ((size_t)16 << 20)   /* output bytes generated per round trip to the writer */

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

static const char *const type_names[SYNTH_TYPE_COUNT] = { "f16", "q8_0", "q4_k", "q6_k", "q4_k_m" };

int synth_preset(const char *name, struct synth_params *p) {
    for (size_t i = 0; i < sizeof presets / sizeof *presets; i++) {
        const struct preset *s = &presets[i];
        if (strcmp(name, s->name)) continue;
        *p = (struct synth_params){
            .n_layers = s->layers, .n_embd = s->embd, .n_head = s->heads, .n_head_kv = s->heads_kv,
            .head_dim = s->head_dim, .n_expert = s->experts, .n_expert_used = s->used, .n_ff_exp = s->ff,
            .n_vocab = s->vocab, .n_ctx = s->ctx, .rope_base = 1e6f, .rms_eps = 1e-6f, .type = s->type,
            .skew = SYNTH_DEFAULT_SKEW, .locality = SYNTH_DEFAULT_LOCALITY, .seed = 1,
        };
        return 0;
    }
    return moex_errorf("synth: unknown preset '%s' (tiny, small, q30b, q30b-l8)", name);
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

static uint32_t q4_k_m_type(const struct synth_params *p, const char *name) {
    int layer = 0;
    if (sscanf(name, "blk.%d.", &layer) != 1) layer = 0;
    bool eight = p->n_expert == 8; /* llama.cpp special-cases 8-expert models */
    if (!strcmp(name, "output.weight")) return QT_Q6_K;
    if (strstr(name, "attn_v.weight")) return eight ? QT_Q8_0 : use_more_bits(layer, p->n_layers) ? QT_Q6_K : QT_Q4_K;
    if (strstr(name, "attn_k.weight")) return eight ? QT_Q8_0 : QT_Q4_K;
    if (strstr(name, "attn_output.weight")) return eight ? QT_Q5_K : QT_Q4_K;
    if (strstr(name, "ffn_down")) return use_more_bits(layer, p->n_layers) ? QT_Q6_K : QT_Q4_K;
    return QT_Q4_K;
}

uint32_t synth_tensor_type(const struct synth_params *p, const char *name, int64_t ne0) {
    if (strstr(name, "_norm.weight") || strstr(name, "ffn_gate_inp")) return QT_F32;
    uint32_t t;
    switch (p->type) {
    case SYNTH_Q8_0: t = QT_Q8_0; break;
    case SYNTH_Q4_K: t = QT_Q4_K; break;
    case SYNTH_Q6_K: /* llama.cpp's Q6_K: 8-expert models keep attn_k and attn_v in Q8_0 */
        t = p->n_expert == 8 && (strstr(name, "attn_k.weight") || strstr(name, "attn_v.weight")) ? QT_Q8_0 : QT_Q6_K;
        break;
    case SYNTH_Q4_K_M: t = q4_k_m_type(p, name); break;
    default: t = QT_F16; break;
    }
    /* Rows a block cannot tile: llama.cpp moves k-quants to Q5_0/Q5_1/Q8_0,
     * moex (which has no Q5_0) to Q8_0, then to F16. */
    if (quant_row_size((enum qtype)t, ne0) == 0) t = QT_Q8_0;
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
    return 0;
}

static void set_metadata(const struct synth_params *p, const struct synth_vocab *v, struct gguf_writer *w) {
    char desc[256];
    snprintf(desc, sizeof desc, "moex synth: random-weight qwen3moe; expert popularity zipf skew %g, locality %g, seed %llu",
             p->skew, p->locality, (unsigned long long)p->seed);
    gguf_set_str(w, "general.architecture", ARCH);
    gguf_set_str(w, "general.name", p->name ? p->name : "moex-synth");
    gguf_set_str(w, "general.description", desc);
    gguf_set_u32(w, "general.alignment", GGUF_DEFAULT_ALIGNMENT);
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
    synth_vocab_set_keys(v, w);
    gguf_set_u32(w, "general.quantization_version", 2);
    gguf_set_u32(w, "general.file_type", synth_file_type(p->type));
    gguf_set_f32(w, "moex.synth.skew", (float)p->skew);
    gguf_set_f32(w, "moex.synth.locality", (float)p->locality);
    gguf_set_u64(w, "moex.synth.seed", p->seed);
}

/* The tensors in file order (llama.cpp's quantized files list them so). */
struct tensor_plan {
    enum synth_kind kind;
    int layer;
    uint32_t type;
    int n_dims;
    int64_t ne[3];
    int64_t rows;
    size_t row_bytes;
};

static int plan_tensors(const struct synth_params *p, int n_vocab, struct tensor_plan **out, int *n_out,
                        uint64_t *total_bytes) {
    int n = 3 + p->n_layers * (SK_COUNT - SK_FIRST_LAYER_KIND);
    struct tensor_plan *t = malloc((size_t)n * sizeof *t);
    if (!t) return moex_errorf("synth: out of memory");
    int i = 0;
    *total_bytes = 0;
    for (int l = -1; l < p->n_layers; l++) {
        int first = l < 0 ? 0 : SK_FIRST_LAYER_KIND, end = l < 0 ? SK_FIRST_LAYER_KIND : SK_COUNT;
        for (int k = first; k < end; k++, i++) {
            char name[64];
            t[i].kind = (enum synth_kind)k;
            t[i].layer = l < 0 ? 0 : l;
            synth_kind_name(t[i].kind, t[i].layer, name, sizeof name);
            t[i].n_dims = synth_kind_shape(p, n_vocab, t[i].kind, t[i].ne);
            t[i].type = synth_tensor_type(p, name, t[i].ne[0]);
            t[i].rows = t[i].ne[1] * t[i].ne[2];
            t[i].row_bytes = quant_row_size((enum qtype)t[i].type, t[i].ne[0]);
            *total_bytes += t[i].row_bytes * (uint64_t)t[i].rows;
        }
    }
    *out = t;
    *n_out = n;
    return 0;
}

struct slab_job {
    const struct synth_design *design;
    const struct tensor_plan *t;
    from_float_fn from_float;
    int64_t row0;
    uint8_t *out;
    float *scratch;           /* (threads, max row length) */
    int64_t scratch_stride;
};

static void slab_rows(void *arg, int64_t begin, int64_t end, int thread_index) {
    struct slab_job *j = arg;
    float *row = j->scratch + thread_index * j->scratch_stride;
    for (int64_t r = begin; r < end; r++) {
        synth_design_row(j->design, j->t->kind, j->t->layer, j->row0 + r, row);
        j->from_float(row, j->out + (size_t)r * j->t->row_bytes, j->t->ne[0]);
    }
}

static int write_tensors(const struct synth_params *p, const struct synth_design *d, const struct tensor_plan *plan,
                         int n, uint64_t total, struct gguf_writer *w) {
    struct threadpool *pool = threadpool_new(p->n_threads, false);
    if (!pool) return -1;
    int threads = threadpool_size(pool);
    int64_t stride = 0;
    size_t max_row = 0;
    for (int i = 0; i < n; i++) {
        if (plan[i].ne[0] > stride) stride = plan[i].ne[0];
        if (plan[i].row_bytes > max_row) max_row = plan[i].row_bytes;
    }
    size_t slab_cap = max_row > SLAB_BYTES ? max_row : SLAB_BYTES;
    uint8_t *slab = malloc(slab_cap);
    float *scratch = malloc((size_t)threads * (size_t)stride * sizeof *scratch);
    int rc = slab && scratch ? 0 : moex_errorf("synth: out of memory");
    struct progress bar;
    if (p->progress) progress_begin(&bar, "synth", total);
    uint64_t done = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        const struct tensor_plan *t = &plan[i];
        struct slab_job job = { d, t, quant_traits((enum qtype)t->type)->from_float, 0, slab, scratch, stride };
        int64_t per_slab = (int64_t)(slab_cap / t->row_bytes);
        int64_t grain = t->ne[0] >= 4096 ? 1 : 4096 / t->ne[0];
        for (job.row0 = 0; job.row0 < t->rows && rc == 0; job.row0 += per_slab) {
            int64_t rows = t->rows - job.row0 < per_slab ? t->rows - job.row0 : per_slab;
            threadpool_parallel_for(pool, rows, grain, slab_rows, &job);
            rc = gguf_writer_write_data(w, slab, (size_t)rows * t->row_bytes);
            done += (uint64_t)rows * t->row_bytes;
            if (p->progress) progress_update(&bar, done);
        }
    }
    if (p->progress) progress_end(&bar);
    free(slab);
    free(scratch);
    threadpool_free(pool);
    return rc;
}

int synth_write(const struct synth_params *p, const char *path) {
    if (synth_check(p)) return -1;
    struct synth_vocab vocab;
    if (synth_vocab_build(p->vocab_from, p->n_vocab, &vocab)) return -1;
    struct synth_design *design = synth_design_new(p, vocab.n_tokens, vocab.types);
    struct tensor_plan *plan = NULL;
    struct gguf_writer *w = NULL;
    int n = 0, rc = -1;
    uint64_t total = 0;
    if (!design || plan_tensors(p, vocab.n_tokens, &plan, &n, &total)) goto done;
    if (!(w = gguf_writer_new())) { moex_errorf("synth: out of memory"); goto done; }
    set_metadata(p, &vocab, w);
    for (int i = 0; i < n; i++) {
        char name[64];
        synth_kind_name(plan[i].kind, plan[i].layer, name, sizeof name);
        if (gguf_add_tensor(w, name, plan[i].type, plan[i].n_dims, plan[i].ne)) goto done;
    }
    if (gguf_writer_begin(w, path)) goto done;
    if (write_tensors(p, design, plan, n, total, w)) goto done;
    rc = gguf_writer_finish(w);
done:
    gguf_writer_free(w); /* on failure removes the temporary; a file at path stays */
    free(plan);
    synth_design_free(design);
    synth_vocab_free(&vocab);
    return rc;
}
