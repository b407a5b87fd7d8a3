/* Binding qwen3moe tensors and hyper-parameters from a GGUF file. */
#include "model/model.h"

#include "core/error.h"
#include "gguf/gguf.h"
#include "text/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int get_hparam(const struct gguf_file *f, const char *arch, const char *key, int *out) {
    char full[128];
    uint32_t v;
    snprintf(full, sizeof full, "%s.%s", arch, key);
    if (gguf_get_u32(f, full, &v) != 0 || v == 0 || v > (1u << 24))
        return moex_errorf("%s: metadata key '%s' is missing or invalid", f->path, full);
    *out = (int)v;
    return 0;
}

/* Finds a tensor and checks its type and shape: ne0..ne2 (0 = not checked,
 * -1 = the dimension must be absent). */
static const struct gguf_tensor *want(const struct gguf_file *f, const char *name, int64_t ne0,
                                      int64_t ne1, int64_t ne2) {
    const struct gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t) {
        moex_errorf("%s: tensor '%s' is missing", f->path, name);
        return NULL;
    }
    const struct qtype_traits *tr = quant_traits((enum qtype)t->type);
    if (!tr || !tr->supported) {
        moex_errorf("%s: tensor '%s' has type %s, which moex does not support", f->path, name,
                    quant_type_name((enum qtype)t->type));
        return NULL;
    }
    int64_t want_ne[3] = { ne0, ne1, ne2 };
    for (int d = 0; d < 3; d++) {
        int64_t expect = want_ne[d] < 0 ? 1 : want_ne[d];
        if (want_ne[d] != 0 && t->ne[d] != expect) {
            moex_errorf("%s: tensor '%s' has shape [%lld, %lld, %lld], expected [%lld, %lld, %lld]", f->path,
                        name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                        (long long)(ne0 < 0 ? 1 : ne0), (long long)(ne1 < 0 ? 1 : ne1),
                        (long long)(ne2 < 0 ? 1 : ne2));
            return NULL;
        }
    }
    return t;
}

static const float *want_f32(const struct gguf_file *f, const char *name, int64_t n) {
    const struct gguf_tensor *t = want(f, name, n, -1, -1);
    if (t && t->type != QT_F32) {
        moex_errorf("%s: tensor '%s' must be F32, it is %s", f->path, name, quant_type_name((enum qtype)t->type));
        return NULL;
    }
    return t ? (const float *)t->data : NULL;
}

static int bind_matrix(const struct gguf_file *f, const char *name, int64_t cols, int64_t rows,
                       int64_t n_expert, struct matrix *m) {
    const struct gguf_tensor *t = want(f, name, cols, rows, n_expert ? n_expert : -1);
    if (!t) return -1;
    m->data = t->data;
    m->type = (enum qtype)t->type;
    m->cols = cols;
    m->rows = rows * (n_expert ? n_expert : 1);
    m->row_bytes = quant_row_size(m->type, cols);
    if (!m->row_bytes)
        return moex_errorf("%s: tensor '%s': row length %lld is not a multiple of the %s block", f->path, name,
                           (long long)cols, quant_type_name(m->type));
    return 0;
}

struct matrix expert_matrix(const struct matrix *stack, int rows_per_expert, int e) {
    struct matrix m = *stack;
    m.rows = rows_per_expert;
    m.data = (const char *)stack->data + (size_t)e * rows_per_expert * stack->row_bytes;
    if (m.r16) m.r16 = (const char *)stack->r16 + (size_t)e * rows_per_expert * stack->row_bytes;
    return m;
}

static int load_hparams(struct model *m) {
    const struct gguf_file *f = m->file;
    char *arch = gguf_get_str(f, "general.architecture");
    if (!arch) return moex_errorf("%s: general.architecture is missing", f->path);
    if (strcmp(arch, "qwen3moe") != 0) {
        moex_errorf("%s: architecture '%s' is not supported (moex runs qwen3moe)", f->path, arch);
        free(arch);
        return -1;
    }
    struct model_hparams *hp = &m->hp;
    int ok = get_hparam(f, arch, "block_count", &hp->n_layers) == 0 &&
             get_hparam(f, arch, "embedding_length", &hp->n_embd) == 0 &&
             get_hparam(f, arch, "attention.head_count", &hp->n_head) == 0 &&
             get_hparam(f, arch, "attention.head_count_kv", &hp->n_head_kv) == 0 &&
             get_hparam(f, arch, "expert_count", &hp->n_expert) == 0 &&
             get_hparam(f, arch, "expert_used_count", &hp->n_expert_used) == 0 &&
             get_hparam(f, arch, "expert_feed_forward_length", &hp->n_ff_exp) == 0 &&
             get_hparam(f, arch, "context_length", &hp->n_ctx_train) == 0;
    if (ok) {
        char key[128];
        snprintf(key, sizeof key, "%s.attention.key_length", arch);
        uint32_t v;
        hp->head_dim = gguf_get_u32(f, key, &v) == 0 ? (int)v : hp->n_embd / hp->n_head;
        snprintf(key, sizeof key, "%s.rope.freq_base", arch);
        if (gguf_get_f32(f, key, &hp->rope_base) != 0) hp->rope_base = 10000.0f;
        snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch);
        if (gguf_get_f32(f, key, &hp->rms_eps) != 0) hp->rms_eps = 1e-6f;
    }
    free(arch);
    if (!ok) return -1;
    if (hp->n_head % hp->n_head_kv != 0)
        return moex_errorf("%s: head_count %d is not a multiple of head_count_kv %d", f->path, hp->n_head,
                           hp->n_head_kv);
    if (hp->n_head / hp->n_head_kv > 64)
        return moex_errorf("%s: %d query heads per KV head; moex supports up to 64", f->path,
                           hp->n_head / hp->n_head_kv);
    if (hp->n_expert_used > hp->n_expert)
        return moex_errorf("%s: expert_used_count %d exceeds expert_count %d", f->path, hp->n_expert_used,
                           hp->n_expert);
    if (hp->head_dim <= 0 || hp->head_dim % 2 || hp->head_dim > 1024)
        return moex_errorf("%s: attention.key_length %d is invalid", f->path, hp->head_dim);
    return 0;
}

static int load_tensors(struct model *m) {
    const struct gguf_file *f = m->file;
    const struct model_hparams *hp = &m->hp;
    const struct gguf_tensor *emb = gguf_find_tensor(f, "token_embd.weight");
    if (!emb) return moex_errorf("%s: tensor 'token_embd.weight' is missing", f->path);
    m->hp.n_vocab = (int)emb->ne[1];
    if (emb->ne[1] <= 0 || emb->ne[1] > (1 << 24))
        return moex_errorf("%s: tensor 'token_embd.weight' has an invalid vocabulary size", f->path);
    if (bind_matrix(f, "token_embd.weight", hp->n_embd, m->hp.n_vocab, 0, &m->token_embd)) return -1;
    if (!(m->output_norm = want_f32(f, "output_norm.weight", hp->n_embd))) return -1;
    if (gguf_find_tensor(f, "output.weight")) {
        if (bind_matrix(f, "output.weight", hp->n_embd, m->hp.n_vocab, 0, &m->output)) return -1;
    } else {
        m->output = m->token_embd; /* tied embedding */
    }
    m->layers = calloc((size_t)hp->n_layers, sizeof *m->layers);
    if (!m->layers) return moex_errorf("out of memory");
    int q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
    for (int l = 0; l < hp->n_layers; l++) {
        struct layer_weights *L = &m->layers[l];
        char name[96];
#define NAME(s) (snprintf(name, sizeof name, "blk.%d.%s", l, s), name)
        if (!(L->attn_norm = want_f32(f, NAME("attn_norm.weight"), hp->n_embd))) return -1;
        if (bind_matrix(f, NAME("attn_q.weight"), hp->n_embd, q_dim, 0, &L->wq)) return -1;
        if (bind_matrix(f, NAME("attn_k.weight"), hp->n_embd, kv_dim, 0, &L->wk)) return -1;
        if (bind_matrix(f, NAME("attn_v.weight"), hp->n_embd, kv_dim, 0, &L->wv)) return -1;
        if (bind_matrix(f, NAME("attn_output.weight"), q_dim, hp->n_embd, 0, &L->wo)) return -1;
        if (!(L->q_norm = want_f32(f, NAME("attn_q_norm.weight"), hp->head_dim))) return -1;
        if (!(L->k_norm = want_f32(f, NAME("attn_k_norm.weight"), hp->head_dim))) return -1;
        if (!(L->ffn_norm = want_f32(f, NAME("ffn_norm.weight"), hp->n_embd))) return -1;
        if (bind_matrix(f, NAME("ffn_gate_inp.weight"), hp->n_embd, hp->n_expert, 0, &L->gate_inp)) return -1;
        if (bind_matrix(f, NAME("ffn_gate_exps.weight"), hp->n_embd, hp->n_ff_exp, hp->n_expert, &L->gate_exps))
            return -1;
        if (bind_matrix(f, NAME("ffn_up_exps.weight"), hp->n_embd, hp->n_ff_exp, hp->n_expert, &L->up_exps))
            return -1;
        if (bind_matrix(f, NAME("ffn_down_exps.weight"), hp->n_ff_exp, hp->n_embd, hp->n_expert, &L->down_exps))
            return -1;
#undef NAME
        if (L->gate_exps.type != L->up_exps.type)
            return moex_errorf("%s: layer %d: ffn_gate_exps (%s) and ffn_up_exps (%s) must have the same type",
                               f->path, l, quant_type_name(L->gate_exps.type), quant_type_name(L->up_exps.type));
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const struct gguf_tensor *t = &f->tensors[i];
        uint64_t n = 1;
        for (int d = 0; d < t->n_dims; d++) n *= (uint64_t)t->ne[d];
        m->n_params += n;
        m->weight_bytes += t->nbytes;
    }
    return 0;
}

struct model *model_load(const char *path) {
    struct model *m = calloc(1, sizeof *m);
    if (!m) { moex_errorf("out of memory"); return NULL; }
    m->file = gguf_open(path);
    if (!m->file || load_hparams(m) || load_tensors(m)) {
        model_free(m);
        return NULL;
    }
    m->name = gguf_get_str(m->file, "general.name");
    if (!m->name) {
        const char *slash = strrchr(path, '/');
        m->name = strdup(slash ? slash + 1 : path);
    }
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
    free(m->layers);
    free(m->name);
    gguf_close(m->file);
    free(m);
}
