/* moex synth --arch lfm2moe: the lfm2-tiny preset has the oracle file's
 * shapes, so with --type q4_k_m / q8_0 its tensors must have the names,
 * shapes and types llama-quantize gave the oracle's (made by llama.cpp), and
 * its lfm2moe.* keys the same names and GGUF types; the file loads and runs
 * in moex; the bytes do not depend on the thread count; the routing keeps
 * the design's Zipf skew; the 8B preset's types follow llama.cpp's rules
 * (attn_v counted over attention layers only). */
#include "harness.h"

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "moe/routing_stats.h"
#include "quant/quant.h"
#include "synth/synth.h"

#include <stdlib.h>
#include <string.h>

static const char *write_model(struct synth_params *p, const char *name) {
    static char path[4][4096];
    static int next;
    char *out = path[next++ & 3];
    snprintf(out, sizeof path[0], "%s/%s", test_tmpdir(), name);
    int rc = synth_write(p, out);
    CHECKF(rc == 0, "%s: %s", name, moex_error());
    return rc == 0 ? out : NULL;
}

/* Tensors and lfm2moe.* keys of ours against the oracle file of that type. */
static void compare_with_oracle(const char *ours_path, const char *oracle_file) {
    struct gguf_file *o = gguf_open(oracle_path(oracle_file)), *f = gguf_open(ours_path);
    CHECKF(o && f, "%s", moex_error());
    if (!o || !f) { gguf_close(o); gguf_close(f); return; }
    CHECKF(o->n_tensors == f->n_tensors, "%s: %llu tensors, ours %llu", oracle_file,
           (unsigned long long)o->n_tensors, (unsigned long long)f->n_tensors);
    for (uint64_t i = 0; i < o->n_tensors && i < f->n_tensors; i++) {
        const struct gguf_tensor *a = &o->tensors[i], *b = &f->tensors[i];
        bool vocab_rows = !strcmp(a->name, "token_embd.weight");   /* our vocabulary is smaller */
        bool same = !strcmp(a->name, b->name) && a->type == b->type && a->n_dims == b->n_dims &&
                    a->ne[0] == b->ne[0] && (vocab_rows || a->ne[1] == b->ne[1]) && a->ne[2] == b->ne[2];
        CHECKF(same, "%s tensor %llu: %s %s [%lld %lld %lld], ours %s %s [%lld %lld %lld]", oracle_file,
               (unsigned long long)i, a->name, gguf_type_name(a->type), (long long)a->ne[0], (long long)a->ne[1],
               (long long)a->ne[2], b->name, gguf_type_name(b->type), (long long)b->ne[0], (long long)b->ne[1],
               (long long)b->ne[2]);
    }
    for (uint64_t i = 0; i < o->n_kv; i++) {
        const struct gguf_kv *a = &o->kv[i];
        if (strncmp(a->key, "lfm2moe.", 8) != 0) continue;
        const struct gguf_kv *b = gguf_find_kv(f, a->key);
        CHECKF(b && b->type == a->type && b->array_type == a->array_type, "%s: key %s", oracle_file, a->key);
    }
    gguf_close(o);
    gguf_close(f);
}

static void test_oracle_shapes(void) {
    struct synth_params p;
    CHECK(synth_preset("lfm2-tiny", &p) == 0 && !strcmp(p.arch, "lfm2moe"));
    p.n_threads = 2;
    p.type = SYNTH_Q4_K_M;
    const char *q4 = write_model(&p, "lfm2-q4km.gguf");
    if (q4) compare_with_oracle(q4, "lfm2moe-o2/models/lfm2moe-o2-Q4_K_M.gguf");
    p.type = SYNTH_Q8_0;
    const char *q8 = write_model(&p, "lfm2-q8.gguf");
    if (q8) compare_with_oracle(q8, "lfm2moe-o2/models/lfm2moe-o2-Q8_0.gguf");

    /* It loads and runs: 3 MoE layers (one dense), one attention layer. */
    struct model *m = q4 ? model_load(q4) : NULL;
    CHECKF(m != NULL, "%s", moex_error());
    if (m) {
        CHECK(m->moe.n_layers == 3 && m->moe_layers[0].layer == 1);
        CHECK(m->state[2].kind == LAYER_ATTENTION && m->state[0].kind == LAYER_SHORTCONV);
        struct context_params cp = { .n_ctx = 64, .n_batch = 16 };
        struct context *c = context_new(m, &cp);
        int32_t ids[20];
        for (int i = 0; i < 20; i++) ids[i] = 10 + 7 * i;
        float *logits = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
        CHECK(c && logits && context_eval(c, ids, 20, logits, false) == 0);
        bool finite = logits != NULL;
        for (int i = 0; finite && i < m->hp.n_vocab; i++) finite = logits[i] == logits[i] && logits[i] < 1e30f;
        CHECK(finite);
        free(logits);
        context_free(c);
        model_free(m);
    }

    /* The same bytes with another thread count. */
    p.n_threads = 1;
    const char *q4_1 = write_model(&p, "lfm2-q8-1t.gguf");
    size_t n_a = 0, n_b = 0;
    char *a = q8 ? read_whole_file(q8, &n_a) : NULL, *b = q4_1 ? read_whole_file(q4_1, &n_b) : NULL;
    CHECK(a && b && n_a == n_b && memcmp(a, b, n_a) == 0);
    free(a);
    free(b);
}

/* Expert selections over random tokens: the top quarter of the experts gets
 * about the Zipf share the design asks for. */
static void count_routes(void *user, int layer, int n_tokens, int top_k, const int32_t *ids, const float *w) {
    (void)w;
    uint64_t *counts = user;
    for (int i = 0; i < n_tokens * top_k; i++) counts[layer * 32 + ids[i]]++;
}

static int cmp_desc(const void *x, const void *y) {
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a < b) - (a > b);
}

static void test_routing_skew(void) {
    struct synth_params p;
    synth_preset("lfm2-tiny", &p);
    p.n_expert = 32;
    p.n_expert_used = 4;
    p.n_ff_exp = 64;
    p.n_threads = 2;
    const char *path = write_model(&p, "lfm2-route.gguf");
    struct model *m = path ? model_load(path) : NULL;
    if (!m) return;
    struct context_params cp = { .n_ctx = 256, .n_batch = 256, .kv_type = KV_F32 };
    struct context *c = context_new(m, &cp);
    uint64_t counts[3 * 32] = { 0 };
    context_set_route_observer(c, count_routes, counts);
    int32_t ids[256];
    uint64_t x = 99;
    for (int q = 0; q < 4; q++) {
        for (int i = 0; i < 256; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            ids[i] = (int32_t)((x >> 33) % (uint64_t)(m->hp.n_vocab - 8));
        }
        context_truncate(c, 0);
        CHECK(context_eval(c, ids, 256, NULL, false) == 0);
    }
    double want = 0, got = 0;
    double shares[32];
    routing_zipf_shares(32, 4, p.skew, shares);
    for (int e = 0; e < 8; e++) want += shares[e];
    for (int l = 0; l < 3; l++) {
        uint64_t *k = counts + l * 32, total = 0, top = 0;
        qsort(k, 32, sizeof *k, cmp_desc);
        for (int e = 0; e < 32; e++) total += k[e];
        for (int e = 0; e < 8; e++) top += k[e];
        got += (double)top / (double)total / 3;
    }
    printf("lfm2moe routing: top quarter of experts %.3f of selections (Zipf %.3f, uniform 0.25)\n", got, want);
    CHECKF(got > 0.25 + 0.6 * (want - 0.25) && got < want + 0.1, "top-quarter share %.3f, Zipf %.3f", got, want);
    context_free(c);
    model_free(m);
}

/* LFM2-8B-A1B in Q4_K_M: attn_v gets Q6_K at the 3rd and 6th attention
 * layers (llama.cpp's use_more_bits over 6 attn_v tensors), ffn_down by
 * layer; conv kernels and selection biases stay F32. */
static void test_8b_types(void) {
    struct synth_params p;
    CHECK(synth_preset("lfm2-8b-a1b", &p) == 0);
    CHECK(p.n_layers == 24 && p.n_embd == 2048 && p.n_expert == 32 && p.n_expert_used == 4 && p.n_ff_exp == 1792 &&
          p.n_vocab == 65536 && p.n_dense == 2 && p.head_dim == 64 && p.type == SYNTH_Q4_K_M);
    CHECK(synth_check(&p) == 0);
    static const struct { const char *name; int64_t ne0; uint32_t type; } want[] = {
        { "blk.2.attn_v.weight", 2048, QT_Q4_K },  { "blk.6.attn_v.weight", 2048, QT_Q4_K },
        { "blk.10.attn_v.weight", 2048, QT_Q6_K }, { "blk.14.attn_v.weight", 2048, QT_Q4_K },
        { "blk.18.attn_v.weight", 2048, QT_Q4_K }, { "blk.21.attn_v.weight", 2048, QT_Q6_K },
        { "blk.0.ffn_down.weight", 7168, QT_Q6_K }, { "blk.4.ffn_down_exps.weight", 1792, QT_Q4_K },
        { "blk.5.ffn_down_exps.weight", 1792, QT_Q6_K }, { "blk.3.shortconv.conv.weight", 3, QT_F32 },
        { "blk.3.shortconv.in_proj.weight", 2048, QT_Q4_K }, { "blk.3.exp_probs_b.bias", 32, QT_F32 },
        { "token_embd_norm.weight", 2048, QT_F32 }, { "output.weight", 2048, QT_Q6_K },
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        uint32_t t = synth_tensor_type(&p, want[i].name, want[i].ne0);
        CHECKF(t == want[i].type, "%s: %s, llama.cpp %s", want[i].name, gguf_type_name(t), gguf_type_name(want[i].type));
    }
    p.n_dense = p.n_layers;
    CHECK(synth_check(&p) != 0);
}

int main(void) {
    test_8b_types();
    test_oracle_shapes();
    test_routing_skew();
    return test_finish();
}
