/* Loading a model: the architecture row named by the file, its
 * hyper-parameters and tensors bound through the helpers below, then the
 * checks every architecture shares (MoE layer shapes, block count against
 * the tensors present) and the tokenizer. */
#include "model/model_load.h"

#include "arch/arch.h"
#include "gguf/gguf.h"
#include "text/tokenizer.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- hyper-parameters */

static const struct gguf_kv *arch_key(const struct model *m, const char *key, char *full, size_t size) {
    snprintf(full, size, "%s.%s", m->arch->name, key);
    return gguf_find_kv(m->file, full);
}

static bool is_int_type(enum gguf_vtype t) {
    return t == GGUF_U8 || t == GGUF_I8 || t == GGUF_U16 || t == GGUF_I16 || t == GGUF_U32 || t == GGUF_I32 ||
           t == GGUF_U64 || t == GGUF_I64;
}

static int int_value(const struct model *m, const char *full, enum gguf_vtype type, uint64_t u, int64_t lo,
                     int64_t hi, int *out) {
    bool is_signed = type == GGUF_I8 || type == GGUF_I16 || type == GGUF_I32 || type == GGUF_I64;
    int64_t v = (int64_t)u;
    if ((!is_signed && u > (uint64_t)INT64_MAX) || v < lo || v > hi) {
        if (!is_signed) return moex_errorf("%s: key '%s' is %llu, expected %lld..%lld", m->file->path, full,
                                           (unsigned long long)u, (long long)lo, (long long)hi);
        return moex_errorf("%s: key '%s' is %lld, expected %lld..%lld", m->file->path, full, (long long)v,
                           (long long)lo, (long long)hi);
    }
    *out = (int)v;
    return 0;
}

static int get_int(const struct model *m, const char *key, int64_t lo, int64_t hi, const int *def, int *out) {
    char full[160];
    const struct gguf_kv *kv = arch_key(m, key, full, sizeof full);
    if (!kv) {
        if (def) { *out = *def; return 0; }
        return moex_errorf("%s: metadata key '%s' is missing", m->file->path, full);
    }
    if (!is_int_type(kv->type))
        return moex_errorf("%s: key '%s' is stored as %s, expected an integer", m->file->path, full,
                           gguf_vtype_name(kv->type));
    return int_value(m, full, kv->type, kv->v.u64, lo, hi, out);
}

int model_get_int(const struct model *m, const char *key, int64_t lo, int64_t hi, int *out) {
    return get_int(m, key, lo, hi, NULL, out);
}

int model_get_int_or(const struct model *m, const char *key, int64_t lo, int64_t hi, int def, int *out) {
    return get_int(m, key, lo, hi, &def, out);
}

int model_get_float_or(const struct model *m, const char *key, float lo, float hi, float def, float *out) {
    char full[160];
    const struct gguf_kv *kv = arch_key(m, key, full, sizeof full);
    if (!kv) { *out = def; return 0; }
    if (kv->type != GGUF_F32)
        return moex_errorf("%s: key '%s' is stored as %s, expected f32", m->file->path, full,
                           gguf_vtype_name(kv->type));
    float v = (float)kv->v.f64;
    if (!isfinite(v) || !(v > lo) || !(v <= hi)) {
        if (hi >= FLT_MAX)
            return moex_errorf("%s: key '%s' is %g, expected a finite value above %g", m->file->path, full, (double)v,
                               (double)lo);
        return moex_errorf("%s: key '%s' is %g, expected a finite value above %g and at most %g", m->file->path, full,
                           (double)v, (double)lo, (double)hi);
    }
    *out = v;
    return 0;
}

int model_get_int_array(const struct model *m, const char *key, int64_t lo, int64_t hi, int n, int *out) {
    char full[160];
    const struct gguf_kv *kv = arch_key(m, key, full, sizeof full);
    if (!kv) return moex_errorf("%s: metadata key '%s' is missing", m->file->path, full);
    if (is_int_type(kv->type)) {
        if (int_value(m, full, kv->type, kv->v.u64, lo, hi, &out[0])) return -1;
        for (int i = 1; i < n; i++) out[i] = out[0];
        return 0;
    }
    if (kv->type != GGUF_ARRAY || !is_int_type(kv->array_type))
        return moex_errorf("%s: key '%s' is stored as %s, expected integers", m->file->path, full,
                           kv->type == GGUF_ARRAY ? "an array of another type" : gguf_vtype_name(kv->type));
    if (kv->array_len != (uint64_t)n)
        return moex_errorf("%s: key '%s' has %llu values, expected %d (one per layer)", m->file->path, full,
                           (unsigned long long)kv->array_len, n);
    for (int i = 0; i < n; i++) {
        uint64_t u;
        switch (kv->array_type) {
        case GGUF_U8: u = ((const uint8_t *)kv->array_data)[i]; break;
        case GGUF_I8: u = (uint64_t)(int64_t)((const int8_t *)kv->array_data)[i]; break;
        case GGUF_U16: u = ((const uint16_t *)kv->array_data)[i]; break;
        case GGUF_I16: u = (uint64_t)(int64_t)((const int16_t *)kv->array_data)[i]; break;
        case GGUF_U32: u = ((const uint32_t *)kv->array_data)[i]; break;
        case GGUF_I32: u = (uint64_t)(int64_t)((const int32_t *)kv->array_data)[i]; break;
        default: u = ((const uint64_t *)kv->array_data)[i]; break;
        }
        if (int_value(m, full, kv->array_type, u, lo, hi, &out[i])) return -1;
    }
    return 0;
}

int model_product(const struct model *m, const char *what, int64_t a, int64_t b, int64_t hi, int *out) {
    /* Both factors are validated ints, so the product fits in 64 bits. */
    int64_t p = a * b;
    if (a < 0 || b < 0 || p > hi)
        return moex_errorf("%s: %s = %lld x %lld = %lld is more than %lld", m->file->path, what, (long long)a,
                           (long long)b, (long long)p, (long long)hi);
    *out = (int)p;
    return 0;
}

/* ---------------------------------------------------------------- tensors */

bool model_has_tensor(const struct model *m, const char *fmt, ...) {
    char name[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return gguf_find_tensor(m->file, name) != NULL;
}

/* Finds a tensor and checks its type and shape: ne0..ne2 (-1 = the
 * dimension must be absent). */
static const struct gguf_tensor *want(const struct model *m, const char *name, int64_t ne0, int64_t ne1,
                                      int64_t ne2) {
    const struct gguf_file *f = m->file;
    const struct gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t) {
        moex_errorf("%s: tensor '%s' is missing", f->path, name);
        return NULL;
    }
    const struct qtype_traits *tr = quant_traits((enum qtype)t->type);
    if (!tr || !tr->supported) {
        char types[128] = "";
        for (int q = 0, n = 0; q < QT_MAX; q++) {
            const struct qtype_traits *qt = quant_traits((enum qtype)q);
            if (qt && qt->supported) n += snprintf(types + n, sizeof types - (size_t)n, " %s", quant_type_name((enum qtype)q));
            if (n >= (int)sizeof types) break;
        }
        moex_errorf("%s: tensor '%s' has type %s, which moex does not support (it runs%s): requantize the model "
                    "to one of those (llama.cpp's llama-quantize, e.g. to Q4_K_M)", f->path, name,
                    quant_type_name((enum qtype)t->type), types);
        return NULL;
    }
    int64_t want_ne[4] = { ne0 < 0 ? 1 : ne0, ne1 < 0 ? 1 : ne1, ne2 < 0 ? 1 : ne2, 1 };
    for (int d = 0; d < 4; d++)
        if (t->ne[d] != want_ne[d]) {
            moex_errorf("%s: tensor '%s' has shape [%lld, %lld, %lld], expected [%lld, %lld, %lld]", f->path, name,
                        (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)want_ne[0],
                        (long long)want_ne[1], (long long)want_ne[2]);
            return NULL;
        }
    return t;
}

static const float *want_f32(const struct model *m, const char *name, int64_t ne0, int64_t ne1) {
    const struct gguf_tensor *t = want(m, name, ne0, ne1, -1);
    if (t && t->type != QT_F32) {
        moex_errorf("%s: tensor '%s' must be F32, it is %s", m->file->path, name, quant_type_name((enum qtype)t->type));
        return NULL;
    }
    return t ? (const float *)t->data : NULL;
}

const float *model_want_vector(struct model *m, int64_t n, const char *fmt, ...) {
    char name[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return want_f32(m, name, n, -1);
}

const float *model_want_floats(struct model *m, int64_t ne0, int64_t ne1, const char *fmt, ...) {
    char name[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return want_f32(m, name, ne0, ne1);
}

static int bind_matrix(struct model *m, const char *name, int64_t cols, int64_t rows, int64_t n_expert,
                       struct matrix *out) {
    const struct gguf_tensor *t = want(m, name, cols, rows, n_expert ? n_expert : -1);
    if (!t) return -1;
    out->data = t->data;
    out->type = (enum qtype)t->type;
    out->cols = cols;
    out->rows = rows * (n_expert ? n_expert : 1);
    out->row_bytes = quant_row_size(out->type, cols);
    if (!out->row_bytes)
        return moex_errorf("%s: tensor '%s': row length %lld is not a multiple of the %s block", m->file->path, name,
                           (long long)cols, quant_type_name(out->type));
    return 0;
}

int model_want_matrix(struct model *m, struct matrix *out, int64_t cols, int64_t rows, const char *fmt, ...) {
    char name[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    if (bind_matrix(m, name, cols, rows, 0, out)) return -1;
    if (m->n_matrices == m->cap_matrices) {
        int cap = m->cap_matrices ? 2 * m->cap_matrices : 64;
        struct matrix **mats = realloc(m->matrices, sizeof *mats * (size_t)cap);
        if (!mats) return moex_errorf("out of memory");
        m->matrices = mats;
        m->cap_matrices = cap;
    }
    m->matrices[m->n_matrices++] = out;
    return 0;
}

int model_want_experts(struct model *m, struct matrix *out, int64_t cols, int64_t rows, int64_t n_expert,
                       const char *fmt, ...) {
    char name[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return bind_matrix(m, name, cols, rows, n_expert, out);
}

int model_check_attention_moe(const struct model *m) {
    const struct model_hparams *hp = &m->hp;
    const char *path = m->file->path;
    if (hp->n_head % hp->n_head_kv != 0)
        return moex_errorf("%s: head_count %d is not a multiple of head_count_kv %d", path, hp->n_head, hp->n_head_kv);
    if (hp->n_head / hp->n_head_kv > 64)
        return moex_errorf("%s: %d query heads per KV head; moex supports up to 64", path, hp->n_head / hp->n_head_kv);
    if (hp->n_expert_used > hp->n_expert)
        return moex_errorf("%s: expert_used_count %d exceeds expert_count %d", path, hp->n_expert_used, hp->n_expert);
    if (hp->head_dim <= 0 || hp->head_dim % 2 || hp->head_dim > 1024)
        return moex_errorf("%s: attention head size (key_length) %d is invalid", path, hp->head_dim);
    if (hp->value_dim != hp->head_dim)
        return moex_errorf("%s: attention.value_length %d differs from key_length %d; moex's %s needs them equal",
                           path, hp->value_dim, hp->head_dim, m->arch->name);
    return 0;
}

int model_alloc_moe(struct model *m, int n) {
    m->moe_layers = calloc((size_t)(n > 0 ? n : 1), sizeof *m->moe_layers);
    if (!m->moe_layers) return moex_errorf("out of memory");
    m->moe = (struct moe_model_desc){ .n_layers = n, .layers = m->moe_layers, .file = m->file };
    return 0;
}

int model_describe_dense(struct model *m, enum dense_kind kind, int layer, const struct matrix *w) {
    if (layer >= m->hp.n_layers) return 0;
    if (m->n_dense == m->cap_dense) {
        int cap = m->cap_dense ? 2 * m->cap_dense : 64;
        struct dense_desc *list = realloc(m->dense, sizeof *list * (size_t)cap);
        if (!list) return moex_errorf("out of memory");
        m->dense = list;
        m->cap_dense = cap;
    }
    m->dense[m->n_dense++] = (struct dense_desc){ kind, layer, w };
    return 0;
}

/* The dense matmuls in the order the backbone is made resident: the
 * layers' as bound, the lm head last (at prefill it reads one row only,
 * unless every position's logits are asked for). */
static void order_dense(struct model *m) {
    int n = 0;
    for (int i = 0; i < m->n_dense; i++)
        if (m->dense[i].kind != DENSE_LM_HEAD) {
            struct dense_desc d = m->dense[i];
            memmove(&m->dense[n + 1], &m->dense[n], sizeof d * (size_t)(i - n));
            m->dense[n++] = d;
        }
    m->moe.n_dense = m->n_dense;
    m->moe.dense = m->dense;
}

/* ---------------------------------------------------------------- the model */

const char *layer_kind_name(enum layer_kind k) {
    static const char *names[LAYER_KINDS] = { "attention", "short conv", "delta net" };
    return (unsigned)k < LAYER_KINDS ? names[k] : "?";
}

bool model_is_recurrent(const struct model *m) {
    for (int l = 0; l < m->hp.n_layers; l++)
        if (m->state[l].conv_floats || m->state[l].recurrent_floats) return true;
    return false;
}

/* Products the context and the executor index with int. */
static int check_products(const struct model *m) {
    const struct model_hparams *hp = &m->hp;
    int p;
    return model_product(m, "head_count x key_length", hp->n_head, hp->head_dim, MODEL_DIM_MAX, &p) ||
           model_product(m, "head_count x value_length", hp->n_head, hp->value_dim, MODEL_DIM_MAX, &p) ||
           model_product(m, "head_count_kv x key_length", hp->n_head_kv, hp->head_dim, MODEL_DIM_MAX, &p) ||
           model_product(m, "block_count x expert_count", hp->n_layers, hp->n_expert, MODEL_DIM_MAX, &p) ||
           model_product(m, "expert_count x expert_feed_forward_length", hp->n_expert, hp->n_ff_exp, INT32_MAX, &p);
}

/* Every layer has tensors: a block_count past the file's last layer is
 * refused before anything is allocated per layer (a damaged count once
 * made the loader allocate gigabytes for 8 million layers first). */
static int check_layers_present(const struct model *m) {
    int last = -1;
    for (uint64_t i = 0; i < m->file->n_tensors; i++) {
        int layer;
        if (sscanf(m->file->tensors[i].name, "blk.%d.", &layer) == 1 && layer > last) last = layer;
    }
    if (m->hp.n_layers >= 1 && m->hp.n_layers <= last + 1) return 0;
    if (last < 0)
        return moex_errorf("%s: the model has %d layers ('%s.block_count') but the file has no layer tensors (blk.N.*)",
                           m->file->path, m->hp.n_layers, m->arch->name);
    return moex_errorf("%s: the model has %d layers ('%s.block_count') but the file's layer tensors end at blk.%d",
                       m->file->path, m->hp.n_layers, m->arch->name, last);
}

/* Layers beyond block_count in the file mean the count is wrong. */
static int check_block_count(const struct model *m) {
    char key[160];
    int block_count;
    snprintf(key, sizeof key, "%s.block_count", m->arch->name);
    if (model_get_int(m, "block_count", 1, MODEL_DIM_MAX, &block_count)) return -1;
    for (uint64_t i = 0; i < m->file->n_tensors; i++) {
        int layer;
        const char *name = m->file->tensors[i].name;
        if (sscanf(name, "blk.%d.", &layer) == 1 && layer >= block_count)
            return moex_errorf("%s: '%s' is %d but the file has tensor '%s'", m->file->path, key, block_count, name);
    }
    return 0;
}

static int load_arch(struct model *m) {
    const struct gguf_file *f = m->file;
    char *name = gguf_get_str(f, "general.architecture");
    if (!name) return moex_errorf("%s: general.architecture is missing", f->path);
    m->arch = arch_find(name);
    if (!m->arch) {
        char names[256];
        arch_names(names, sizeof names);
        moex_errorf("%s: architecture '%s' is not supported (moex runs %s)", f->path, name, names);
        free(name);
        return -1;
    }
    free(name);
    if (m->arch->load_hparams(m) || check_products(m) || check_layers_present(m)) return -1;
    m->state = calloc((size_t)m->hp.n_layers, sizeof *m->state);
    if (!m->state) return moex_errorf("out of memory");
    for (int l = 0; l < m->hp.n_layers; l++) m->arch->layer_state(m, l, &m->state[l]);
    if (m->arch->bind(m) || check_block_count(m)) return -1;
    order_dense(m);
    if (moe_model_check(&m->moe)) return moex_errorf("%s: %s", f->path, moex_error());
    return 0;
}

/* general.name, else the file's name. */
static void set_name(struct model *m, const char *path) {
    m->name = gguf_get_str(m->file, "general.name");
    if (!m->name) {
        const char *slash = strrchr(path, '/');
        m->name = strdup(slash ? slash + 1 : path);
    }
}

struct model *model_load_vocab(const char *path) {
    struct model *m = calloc(1, sizeof *m);
    if (!m) { moex_errorf("out of memory"); return NULL; }
    if (!(m->file = gguf_open(path)) || !(m->tok = tokenizer_load(m->file))) {
        model_free(m);
        return NULL;
    }
    set_name(m, path);
    m->hp.n_vocab = tokenizer_n_vocab(m->tok);
    return m;
}

struct model *model_load(const char *path) {
    struct model *m = calloc(1, sizeof *m);
    if (!m) { moex_errorf("out of memory"); return NULL; }
    m->file = gguf_open(path);
    if (!m->file || load_arch(m)) {
        model_free(m);
        return NULL;
    }
    for (uint64_t i = 0; i < m->file->n_tensors; i++) {
        const struct gguf_tensor *t = &m->file->tensors[i];
        uint64_t n = 1;
        for (int d = 0; d < t->n_dims; d++) n *= (uint64_t)t->ne[d];
        m->n_params += n;
        m->weight_bytes += t->nbytes;
    }
    set_name(m, path);
    if (gguf_find_kv(m->file, "tokenizer.ggml.tokens")) {
        m->tok = tokenizer_load(m->file);
        if (!m->tok) {
            model_free(m);
            return NULL;
        }
        if (tokenizer_n_vocab(m->tok) > m->hp.n_vocab) {
            moex_errorf("%s: the tokenizer has %d tokens but the embedding only %d rows", path,
                        tokenizer_n_vocab(m->tok), m->hp.n_vocab);
            model_free(m);
            return NULL;
        }
    }
    return m;
}

void model_free(struct model *m) {
    if (!m) return;
    model_interleave_free(m);
    if (m->tok) tokenizer_free(m->tok);
    free(m->state);
    free(m->weights);
    free(m->moe_layers);
    free(m->matrices);
    free(m->dense);
    free(m->name);
    gguf_close(m->file);
    free(m);
}
