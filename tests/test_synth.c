/* moex synth: the files hold every key, tensor name, shape, type and
 * alignment llama.cpp needs for qwen3moe (checked against the llama.cpp-made
 * oracle models where those exist), the same parameters give the same bytes,
 * the tokenizer copy keeps the right entries, and the models run. */
#include "harness.h"

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "synth/synth.h"
#include "quant/quant.h"
#include "text/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *tmp_path(const char *name) {
    static char buf[8][4096];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", test_tmpdir(), name);
    return p;
}

static struct gguf_file *make(const struct synth_params *p, const char *name) {
    const char *path = tmp_path(name);
    if (synth_write(p, path) != 0) {
        fprintf(stderr, "synth_write(%s): %s\n", name, moex_error());
        return NULL;
    }
    struct gguf_file *f = gguf_open(path);
    if (!f) fprintf(stderr, "gguf_open(%s): %s\n", name, moex_error());
    return f;
}

static int u32_is(const struct gguf_file *f, const char *key, uint32_t want) {
    const struct gguf_kv *kv = gguf_find_kv(f, key);
    return kv && kv->type == GGUF_U32 && kv->v.u64 == want;
}

static int f32_is(const struct gguf_file *f, const char *key, float want) {
    const struct gguf_kv *kv = gguf_find_kv(f, key);
    return kv && kv->type == GGUF_F32 && (float)kv->v.f64 == want;
}

static int str_is(const struct gguf_file *f, const char *key, const char *want) {
    const struct gguf_kv *kv = gguf_find_kv(f, key);
    return kv && kv->type == GGUF_STRING && kv->v.str.len == strlen(want) && !memcmp(kv->v.str.data, want, kv->v.str.len);
}

/* The keys llama.cpp reads to load a qwen3moe model, with the values p asks for. */
static void check_keys(const struct gguf_file *f, const struct synth_params *p, int n_vocab) {
    CHECK(str_is(f, "general.architecture", "qwen3moe"));
    CHECK(u32_is(f, "general.alignment", 32) && f->alignment == 32);
    CHECK(u32_is(f, "general.file_type", synth_file_type(p->type)));
    CHECK(u32_is(f, "general.quantization_version", 2));
    CHECK(u32_is(f, "qwen3moe.block_count", (uint32_t)p->n_layers));
    CHECK(u32_is(f, "qwen3moe.context_length", (uint32_t)p->n_ctx));
    CHECK(u32_is(f, "qwen3moe.embedding_length", (uint32_t)p->n_embd));
    CHECK(u32_is(f, "qwen3moe.feed_forward_length", (uint32_t)(p->n_ff_exp * p->n_expert_used)));
    CHECK(u32_is(f, "qwen3moe.expert_feed_forward_length", (uint32_t)p->n_ff_exp));
    CHECK(u32_is(f, "qwen3moe.attention.head_count", (uint32_t)p->n_head));
    CHECK(u32_is(f, "qwen3moe.attention.head_count_kv", (uint32_t)p->n_head_kv));
    CHECK(u32_is(f, "qwen3moe.attention.key_length", (uint32_t)p->head_dim));
    CHECK(u32_is(f, "qwen3moe.attention.value_length", (uint32_t)p->head_dim));
    CHECK(u32_is(f, "qwen3moe.expert_count", (uint32_t)p->n_expert));
    CHECK(u32_is(f, "qwen3moe.expert_used_count", (uint32_t)p->n_expert_used));
    CHECK(f32_is(f, "qwen3moe.rope.freq_base", p->rope_base));
    CHECK(f32_is(f, "qwen3moe.attention.layer_norm_rms_epsilon", p->rms_eps));
    CHECK(str_is(f, "tokenizer.ggml.model", "gpt2"));
    CHECK(str_is(f, "tokenizer.ggml.pre", "qwen2"));
    const struct gguf_kv *tokens = gguf_find_kv(f, "tokenizer.ggml.tokens");
    const struct gguf_kv *types = gguf_find_kv(f, "tokenizer.ggml.token_type");
    const struct gguf_kv *merges = gguf_find_kv(f, "tokenizer.ggml.merges");
    CHECK(tokens && tokens->type == GGUF_ARRAY && tokens->array_type == GGUF_STRING && tokens->array_len == (uint64_t)n_vocab);
    CHECK(types && types->type == GGUF_ARRAY && types->array_type == GGUF_I32 && types->array_len == (uint64_t)n_vocab);
    CHECK(merges && merges->type == GGUF_ARRAY && merges->array_type == GGUF_STRING && merges->array_len > 0);
    uint32_t id;
    CHECK(gguf_get_u32(f, "tokenizer.ggml.eos_token_id", &id) == 0 && id < (uint32_t)n_vocab);
    CHECK(gguf_get_u32(f, "tokenizer.ggml.bos_token_id", &id) == 0 && id < (uint32_t)n_vocab);
    CHECK(gguf_get_u32(f, "tokenizer.ggml.padding_token_id", &id) == 0 && id < (uint32_t)n_vocab);
    char *tmpl = gguf_get_str(f, "tokenizer.chat_template");
    CHECK(tmpl && strstr(tmpl, "<|im_start|>"));
    free(tmpl);
}

static void check_one(const struct gguf_file *f, const char *name, int n_dims, int64_t ne0, int64_t ne1, int64_t ne2) {
    const struct gguf_tensor *t = gguf_find_tensor(f, name);
    CHECKF(t != NULL, "%s missing", name);
    if (!t) return;
    CHECKF(t->n_dims == n_dims && t->ne[0] == ne0 && t->ne[1] == ne1 && t->ne[2] == ne2, "%s: %d dims %lld %lld %lld", name,
           t->n_dims, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2]);
    CHECKF(quant_row_size((enum qtype)t->type, t->ne[0]) > 0, "%s: type %u cannot tile rows of %lld", name, t->type,
           (long long)t->ne[0]);
    CHECKF(t->offset % f->alignment == 0, "%s: offset %llu", name, (unsigned long long)t->offset);
    if (strstr(name, "norm") || strstr(name, "gate_inp")) CHECKF(t->type == QT_F32, "%s should be F32", name);
}

/* Every tensor llama.cpp's qwen3moe loader asks for, with its shape, in a
 * type that tiles its rows, at an aligned offset; nothing else. */
static void check_tensors(const struct gguf_file *f, const struct synth_params *p, int n_vocab) {
    int64_t D = p->n_embd, nq = (int64_t)p->n_head * p->head_dim, nkv = (int64_t)p->n_head_kv * p->head_dim;
    int64_t hd = p->head_dim, E = p->n_expert, F = p->n_ff_exp;
    check_one(f, "token_embd.weight", 2, D, n_vocab, 1);
    check_one(f, "output_norm.weight", 1, D, 1, 1);
    check_one(f, "output.weight", 2, D, n_vocab, 1);
    for (int l = 0; l < p->n_layers; l++) {
        char name[64];
#define LAYER(kind, nd, a, b, c) do { snprintf(name, sizeof name, "blk.%d." kind ".weight", l); check_one(f, name, nd, a, b, c); } while (0)
        LAYER("attn_norm", 1, D, 1, 1);
        LAYER("attn_q", 2, D, nq, 1);
        LAYER("attn_k", 2, D, nkv, 1);
        LAYER("attn_v", 2, D, nkv, 1);
        LAYER("attn_output", 2, nq, D, 1);
        LAYER("attn_q_norm", 1, hd, 1, 1);
        LAYER("attn_k_norm", 1, hd, 1, 1);
        LAYER("ffn_norm", 1, D, 1, 1);
        LAYER("ffn_gate_inp", 2, D, E, 1);
        LAYER("ffn_gate_exps", 3, D, F, E);
        LAYER("ffn_up_exps", 3, D, F, E);
        LAYER("ffn_down_exps", 3, F, D, E);
#undef LAYER
    }
    CHECKF(f->n_tensors == 3 + 12 * (uint64_t)p->n_layers, "%llu tensors", (unsigned long long)f->n_tensors);
    CHECK(f->data_offset % f->alignment == 0);
}

static int same_kv(const struct gguf_kv *a, const struct gguf_kv *b) {
    if (a->type != b->type) return 0;
    switch (a->type) {
    case GGUF_STRING: return a->v.str.len == b->v.str.len && !memcmp(a->v.str.data, b->v.str.data, a->v.str.len);
    case GGUF_F32: case GGUF_F64: return a->v.f64 == b->v.f64;
    case GGUF_BOOL: return a->v.b == b->v.b;
    case GGUF_ARRAY:
        if (a->array_type != b->array_type || a->array_len != b->array_len) return 0;
        if (a->array_type == GGUF_STRING) {
            for (uint64_t i = 0; i < a->array_len; i++)
                if (a->array_strs[i].len != b->array_strs[i].len ||
                    memcmp(a->array_strs[i].data, b->array_strs[i].data, a->array_strs[i].len))
                    return 0;
            return 1;
        }
        return !memcmp(a->array_data, b->array_data, a->array_len * gguf_vtype_size(a->array_type));
    default: return a->v.u64 == b->v.u64;
    }
}

/* The oracle models were written by llama.cpp's tools: with the same shapes,
 * tokenizer and type, our file has the same tensors (names, order, shapes,
 * types) and the same metadata values. */
static void check_against_oracle(const char *oracle_file, enum synth_type type, const char *name) {
    struct gguf_file *o = gguf_open(oracle_path(oracle_file));
    CHECKF(o != NULL, "%s: %s", oracle_file, moex_error());
    if (!o) return;
    struct synth_params p;
    synth_preset("tiny", &p);
    p.type = type;
    p.n_vocab = 2048;
    p.n_ctx = 40960;
    p.vocab_from = oracle_path("tokenizer/qwen3-vocab.gguf");
    struct gguf_file *f = make(&p, name);
    CHECK(f != NULL);
    if (f) {
        check_keys(f, &p, 2048);
        check_tensors(f, &p, 2048);
        CHECKF(f->n_tensors == o->n_tensors, "%s: %llu tensors, oracle %llu", name, (unsigned long long)f->n_tensors,
               (unsigned long long)o->n_tensors);
        for (uint64_t i = 0; i < o->n_tensors && i < f->n_tensors; i++) {
            const struct gguf_tensor *a = &f->tensors[i], *b = &o->tensors[i];
            CHECKF(!strcmp(a->name, b->name) && a->n_dims == b->n_dims && !memcmp(a->ne, b->ne, sizeof a->ne) &&
                       a->type == b->type,
                   "%s: tensor %llu is %s type %s, oracle %s type %s", name, (unsigned long long)i, a->name,
                   quant_type_name((enum qtype)a->type), b->name, quant_type_name((enum qtype)b->type));
        }
        for (uint64_t i = 0; i < o->n_kv; i++) {
            const struct gguf_kv *b = &o->kv[i];
            if (!strcmp(b->key, "general.name") || !strcmp(b->key, "general.description")) continue;
            const struct gguf_kv *a = gguf_find_kv(f, b->key);
            CHECKF(a && same_kv(a, b), "%s: key %s differs from the oracle's", name, b->key);
        }
        gguf_close(f);
    }
    gguf_close(o);
}

static int files_equal(const char *a, const char *b) {
    size_t na, nb;
    void *da = read_whole_file(a, &na), *db = read_whole_file(b, &nb);
    int eq = da && db && na == nb && !memcmp(da, db, na);
    free(da);
    free(db);
    return eq;
}

/* Loads and runs a few tokens: logits finite and spread over the vocabulary. */
enum { RUN_TOKENS = 48 };

/* The logits [RUN_TOKENS][*V] of a fixed batch of ids from an empty context;
 * NULL if the model does not load or run. */
static float *run_logits(const char *path, int *V) {
    struct model *m = model_load(path);
    CHECKF(m != NULL, "%s: %s", path, moex_error());
    if (!m) return NULL;
    struct context_params cp = { .n_ctx = 256, .n_batch = 64, .kv_type = KV_F32 };
    struct context *c = context_new(m, &cp);
    CHECK(c != NULL);
    int n = RUN_TOKENS;
    *V = m->hp.n_vocab;
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    float *logits = malloc((size_t)n * *V * sizeof *logits);
    for (int i = 0; i < n; i++) ids[i] = (int32_t)((i * 7919 + 13) % (*V - 3));
    int rc = c ? context_eval(c, ids, n, logits, true) : -1;
    CHECK(rc == 0);
    context_free(c);
    model_free(m);
    free(ids);
    if (rc != 0) {
        free(logits);
        return NULL;
    }
    return logits;
}

static void check_runs(const char *path) {
    int V, n = RUN_TOKENS;
    float *logits = run_logits(path, &V);
    if (!logits) return;
    int finite = 1;
    double spread = 0;
    for (int t = 0; t < n; t++) {
        double s = 0, s2 = 0;
        for (int v = 0; v < V; v++) {
            float x = logits[(size_t)t * V + v];
            finite &= isfinite(x);
            s += x;
            s2 += (double)x * x;
        }
        spread += sqrt(s2 / V - (s / V) * (s / V)) / n;
    }
    CHECK(finite);
    CHECKF(spread > 1.0 && spread < 10.0, "%s: logit std over the vocabulary %.2f", path, spread);
    free(logits);
}

static void test_tiny_all_types(void) {
    for (int t = 0; t < SYNTH_TYPE_COUNT; t++) {
        struct synth_params p;
        CHECK(synth_preset("tiny", &p) == 0);
        p.type = (enum synth_type)t;
        char name[64];
        snprintf(name, sizeof name, "tiny-%s.gguf", synth_type_name(p.type));
        struct gguf_file *f = make(&p, name);
        CHECK(f != NULL);
        if (!f) continue;
        uint32_t n_vocab = 0;
        const struct gguf_kv *tokens = gguf_find_kv(f, "tokenizer.ggml.tokens");
        if (tokens) n_vocab = (uint32_t)tokens->array_len;
        CHECK(n_vocab == 512);
        check_keys(f, &p, (int)n_vocab);
        check_tensors(f, &p, (int)n_vocab);
        gguf_close(f);
        check_runs(tmp_path(name));
    }
}

/* q4_k_m on rows that Q4_K / Q5_K cannot tile, as in the small oracle
 * models: expert down rows of 128 get Q5_0 (Q8_0 where Q6_K was due) and an
 * attn_output row of 160 gets Q5_1. The file runs, and the best kernels of
 * this machine give the scalar kernels' logits up to summation order. */
static void test_tiny_fallback_types(void) {
    struct synth_params p;
    CHECK(synth_preset("tiny", &p) == 0);
    p.type = SYNTH_Q4_K_M;
    p.n_ff_exp = 128;
    p.head_dim = 40;
    struct gguf_file *f = make(&p, "tiny-fallback.gguf");
    CHECK(f != NULL);
    if (!f) return;
    static const struct { const char *name; enum qtype type; } want[] = {
        {"blk.0.ffn_down_exps.weight", QT_Q5_0}, {"blk.1.ffn_down_exps.weight", QT_Q8_0},
        {"blk.0.attn_output.weight", QT_Q5_1}, {"blk.0.ffn_up_exps.weight", QT_Q4_K},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const struct gguf_tensor *t = gguf_find_tensor(f, want[i].name);
        CHECKF(t && t->type == (uint32_t)want[i].type, "%s: %s", want[i].name, t ? quant_type_name((enum qtype)t->type) : "-");
    }
    gguf_close(f);
    const char *path = tmp_path("tiny-fallback.gguf");
    check_runs(path);
    int V = 0, V_scalar = 0;
    float *best = run_logits(path, &V);
    quant_init(ISA_SCALAR);
    float *scalar = run_logits(path, &V_scalar);
    quant_init(ISA_COUNT);
    if (best && scalar && V == V_scalar) {
        /* averaged measures: int8 activation rounding and routing near-ties
         * turn summation-order noise into a few large differences */
        int same_argmax = 0;
        double kl = 0;
        for (int t = 0; t < RUN_TOKENS; t++) {
            const float *a = best + (size_t)t * V, *b = scalar + (size_t)t * V;
            int ia = 0, ib = 0;
            for (int v = 0; v < V; v++) {
                if (a[v] > a[ia]) ia = v;
                if (b[v] > b[ib]) ib = v;
            }
            same_argmax += ia == ib;
            double za = 0, zb = 0;
            for (int v = 0; v < V; v++) {
                za += exp((double)a[v] - a[ia]);
                zb += exp((double)b[v] - b[ib]);
            }
            for (int v = 0; v < V; v++) { /* KL(scalar || best) */
                const double lb = (double)b[v] - b[ib] - log(zb), la = (double)a[v] - a[ia] - log(za);
                kl += exp(lb) * (lb - la) / RUN_TOKENS;
            }
        }
        printf("fallback types, %s vs scalar kernels: argmax %d/%d, mean KL %.2g\n", isa_name(quant_active_isa()),
               same_argmax, RUN_TOKENS, kl);
        CHECK(same_argmax >= RUN_TOKENS * 9 / 10 && kl < 1e-3);
    } else {
        CHECK(0);
    }
    free(best);
    free(scalar);
}

static void test_deterministic(void) {
    struct synth_params p;
    synth_preset("tiny", &p);
    p.type = SYNTH_Q4_K_M;
    p.n_threads = 1;
    CHECK(synth_write(&p, tmp_path("det-a.gguf")) == 0);
    p.n_threads = 3;
    CHECK(synth_write(&p, tmp_path("det-b.gguf")) == 0);
    CHECK(files_equal(tmp_path("det-a.gguf"), tmp_path("det-b.gguf")));
    p.seed = 2;
    CHECK(synth_write(&p, tmp_path("det-c.gguf")) == 0);
    CHECK(!files_equal(tmp_path("det-a.gguf"), tmp_path("det-c.gguf")));
}

/* --vocab-from without --vocab copies the tokenizer as it is. */
static void test_vocab_copy(void) {
    struct gguf_file *src = gguf_open(oracle_path("tokenizer/qwen3-vocab.gguf"));
    CHECK(src != NULL);
    if (!src) return;
    struct synth_params p;
    synth_preset("tiny", &p);
    p.n_layers = 1;
    p.n_embd = 64; /* 151936 embedding rows: keep them short */
    p.n_ff_exp = 64;
    p.n_vocab = 0;
    p.vocab_from = oracle_path("tokenizer/qwen3-vocab.gguf");
    struct gguf_file *f = make(&p, "tiny-qwen3-vocab.gguf");
    CHECK(f != NULL);
    if (f) {
        int n_tok = 0;
        for (uint64_t i = 0; i < src->n_kv; i++) {
            const struct gguf_kv *b = &src->kv[i];
            if (strncmp(b->key, "tokenizer.", 10)) continue;
            n_tok++;
            const struct gguf_kv *a = gguf_find_kv(f, b->key);
            CHECKF(a && same_kv(a, b), "key %s not copied as it is", b->key);
        }
        CHECK(n_tok >= 10);
        const struct gguf_tensor *t = gguf_find_tensor(f, "token_embd.weight");
        CHECK(t && t->ne[1] == 151936);
        struct tokenizer *tk = tokenizer_load(f);
        CHECKF(tk != NULL, "%s", moex_error());
        if (tk) {
            int n = 0;
            int32_t *ids = tokenizer_encode_alloc(tk, "Hello world", 11, false, &n);
            CHECK(ids && n == 2 && ids[0] == 9707 && ids[1] == 1879); /* Qwen's ids */
            free(ids);
            tokenizer_free(tk);
        }
        gguf_close(f);
    }
    gguf_close(src);
}

/* The built-in vocabulary, cut, padded, and loaded by moex's tokenizer. */
static void test_builtin_vocab(void) {
    struct synth_params p;
    synth_preset("tiny", &p);
    p.n_layers = 1;
    p.n_vocab = 0;
    struct gguf_file *f = make(&p, "vocab-all.gguf");
    CHECK(f != NULL);
    if (f) {
        struct tokenizer *tk = tokenizer_load(f);
        CHECKF(tk != NULL, "%s", moex_error());
        if (tk) {
            const char *text = "The morning was cold, and the light came in low over the hills.";
            int n = 0;
            int32_t *ids = tokenizer_encode_alloc(tk, text, strlen(text), false, &n);
            CHECKF(ids && n > 0 && n < 20, "%d tokens", n); /* whole words are tokens */
            char *back = ids ? tokenizer_decode_alloc(tk, ids, n, NULL) : NULL;
            CHECK(back && !strcmp(back, text));
            free(back);
            free(ids);
            ids = tokenizer_encode_alloc(tk, "<|im_start|>user", 16, true, &n);
            CHECK(ids && n >= 2 && tokenizer_token_type(tk, ids[0]) == TOKEN_CONTROL);
            free(ids);
            tokenizer_free(tk);
        }
        gguf_close(f);
    }
    p.n_vocab = 6000; /* more than the built-in text gives: [PAD] tokens, never sampled */
    f = make(&p, "vocab-pad.gguf");
    CHECK(f != NULL);
    if (f) {
        const struct gguf_kv *types = gguf_find_kv(f, "tokenizer.ggml.token_type");
        CHECK(types && types->array_len == 6000 && ((const int32_t *)types->array_data)[5999] == TOKEN_UNUSED);
        struct tokenizer *tk = tokenizer_load(f);
        CHECKF(tk != NULL, "%s", moex_error());
        tokenizer_free(tk);
        gguf_close(f);
    }
    p.n_vocab = 100;
    CHECK(synth_write(&p, tmp_path("vocab-bad.gguf")) != 0);
}

/* llama.cpp's Q4_K_M mix on Qwen3-30B-A3B's shapes (no file written). */
static void test_q4_k_m_rule(void) {
    struct synth_params p;
    synth_preset("q30b", &p);
    CHECK(synth_tensor_type(&p, "output.weight", 2048) == QT_Q6_K);
    CHECK(synth_tensor_type(&p, "token_embd.weight", 2048) == QT_Q4_K);
    CHECK(synth_tensor_type(&p, "blk.5.ffn_gate_inp.weight", 2048) == QT_F32);
    CHECK(synth_tensor_type(&p, "blk.5.attn_norm.weight", 2048) == QT_F32);
    int n_q6 = 0;
    for (int l = 0; l < 48; l++) {
        char name[64];
        int more = l < 6 || l >= 42 || (l - 6) % 3 == 2;
        snprintf(name, sizeof name, "blk.%d.ffn_down_exps.weight", l);
        CHECK(synth_tensor_type(&p, name, 768) == (more ? QT_Q6_K : QT_Q4_K));
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", l);
        CHECK(synth_tensor_type(&p, name, 2048) == (more ? QT_Q6_K : QT_Q4_K));
        snprintf(name, sizeof name, "blk.%d.attn_k.weight", l);
        CHECK(synth_tensor_type(&p, name, 2048) == QT_Q4_K);
        snprintf(name, sizeof name, "blk.%d.ffn_up_exps.weight", l);
        CHECK(synth_tensor_type(&p, name, 2048) == QT_Q4_K);
        n_q6 += more;
    }
    CHECK(n_q6 == 24); /* 6 + 6 at the ends, every third of the 36 between */
    /* rows a k-quant cannot tile: llama-quantize's fallbacks */
    CHECK(synth_tensor_type(&p, "blk.0.ffn_up_exps.weight", 96) == QT_Q5_0);
    CHECK(synth_tensor_type(&p, "blk.0.ffn_down_exps.weight", 128) == QT_Q8_0); /* Q6_K in layer 0 */
    CHECK(synth_tensor_type(&p, "blk.0.ffn_up_exps.weight", 100) == QT_F16);
    p.n_expert = 8; /* attn_output is Q5_K */
    CHECK(synth_tensor_type(&p, "blk.3.attn_output.weight", 2048) == QT_Q5_K);
    CHECK(synth_tensor_type(&p, "blk.3.attn_output.weight", 160) == QT_Q5_1);
}

static void test_bad_params(void) {
    struct synth_params p;
    CHECK(synth_preset("nope", &p) != 0);
    synth_preset("tiny", &p);
    CHECK(synth_check(&p) == 0);
    struct synth_params q = p;
    q.n_expert_used = 9;
    CHECK(synth_check(&q) != 0);
    q = p;
    q.head_dim = 63;
    CHECK(synth_check(&q) != 0);
    q = p;
    q.n_head = 3;
    CHECK(synth_check(&q) != 0);
    q = p;
    q.locality = 1.5;
    CHECK(synth_check(&q) != 0);
    q = p;
    q.n_layers = 0;
    CHECK(synth_write(&q, tmp_path("bad.gguf")) != 0);
    q = p;
    q.vocab_from = tmp_path("does-not-exist.gguf");
    CHECK(synth_write(&q, tmp_path("bad.gguf")) != 0);
}

/* Odd shapes: one kv head per query head, a single head, non-256 rows. */
static void test_odd_shapes(void) {
    struct synth_params p;
    synth_preset("tiny", &p);
    p.n_head = p.n_head_kv = 3;
    p.head_dim = 32;
    p.n_embd = 96;
    p.n_ff_exp = 64;
    p.type = SYNTH_Q4_K_M;
    struct gguf_file *f = make(&p, "odd.gguf");
    CHECK(f != NULL);
    if (f) {
        check_tensors(f, &p, 512);
        gguf_close(f);
        check_runs(tmp_path("odd.gguf"));
    }
    p.n_head = p.n_head_kv = 1;
    f = make(&p, "one-head.gguf");
    CHECK(f != NULL);
    gguf_close(f);
    if (f) check_runs(tmp_path("one-head.gguf"));
}

int main(void) {
    test_bad_params();
    test_q4_k_m_rule();
    test_tiny_all_types();
    test_tiny_fallback_types();
    test_deterministic();
    test_builtin_vocab();
    test_odd_shapes();
    check_against_oracle("models/qwen3moe-o1-F16.gguf", SYNTH_F16, "o1-f16.gguf");
    check_against_oracle("models/qwen3moe-o1-Q8_0.gguf", SYNTH_Q8_0, "o1-q8_0.gguf");
    check_against_oracle("models/qwen3moe-o1-Q6_K.gguf", SYNTH_Q6_K, "o1-q6_k.gguf");
    check_against_oracle("models/qwen3moe-o1-Q4_K_M.gguf", SYNTH_Q4_K_M, "o1-q4_k_m.gguf");
    test_vocab_copy();
    return test_finish();
}
