/* moex synth --arch qwen35moe: at the oracle model's shape, with its
 * tokenizer copied, the file has the llama.cpp-made oracle file's keys (same
 * types; the architecture's values equal), tensors (names, order, shapes)
 * and, for Q8_0 and Q4_K_M, tensor types; the presets have the real model's
 * shapes; the model loads and runs in moex, and its router prefers some
 * experts (the design's skew survives the delta-net layers). */
#include "harness.h"

#include "core/error.h"
#include "core/threadpool.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "synth/synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ORACLE "qwen35moe-o3/models/qwen35moe-o3-"

static struct synth_params oracle_shape(enum synth_type type) {
    struct synth_params p;
    CHECK(synth_preset("qwen35-tiny", &p) == 0);
    p.n_ff_exp = 128;
    p.n_ff_shexp = 128;
    p.n_ctx = 262144;
    p.type = type;
    p.vocab_from = oracle_path(ORACLE "F32.gguf");
    return p;
}

static bool same_value(const struct gguf_kv *a, const struct gguf_kv *b) {
    if (a->type != b->type) return false;
    if (a->type == GGUF_STRING) return a->v.str.len == b->v.str.len && !memcmp(a->v.str.data, b->v.str.data, a->v.str.len);
    if (a->type == GGUF_ARRAY)
        return a->array_type == b->array_type && a->array_len == b->array_len &&
               (a->array_type == GGUF_STRING ||
                !memcmp(a->array_data, b->array_data, a->array_len * gguf_vtype_size(a->array_type)));
    return a->v.u64 == b->v.u64;
}

static void compare_with_oracle(const char *type_name, enum synth_type type) {
    char path[4096];
    snprintf(path, sizeof path, "%s/q35-%s.gguf", test_tmpdir(), type_name);
    struct synth_params p = oracle_shape(type);
    CHECKF(synth_write(&p, path) == 0, "%s", moex_error());
    struct gguf_file *ours = gguf_open(path);
    char oracle[256];
    snprintf(oracle, sizeof oracle, ORACLE "%s.gguf", type_name);
    struct gguf_file *ref = gguf_open(oracle_path(oracle));
    CHECK(ours && ref);
    if (!ours || !ref) { gguf_close(ours); gguf_close(ref); return; }
    for (uint64_t i = 0; i < ref->n_kv; i++) {
        const struct gguf_kv *r = &ref->kv[i], *o = gguf_find_kv(ours, r->key);
        CHECKF(o && o->type == r->type, "%s: key %s missing or of another type", type_name, r->key);
        if (o && !strncmp(r->key, "qwen35moe.", 10))
            CHECKF(same_value(o, r), "%s: key %s has another value", type_name, r->key);
    }
    CHECKF(ours->n_tensors == ref->n_tensors, "%s: %llu tensors, oracle %llu", type_name,
           (unsigned long long)ours->n_tensors, (unsigned long long)ref->n_tensors);
    int mismatches = 0;
    for (uint64_t i = 0; i < ours->n_tensors && i < ref->n_tensors; i++) {
        const struct gguf_tensor *o = &ours->tensors[i], *r = &ref->tensors[i];
        bool same = !strcmp(o->name, r->name) && o->n_dims == r->n_dims && o->type == r->type;
        for (int d = 0; d < GGUF_MAX_DIMS; d++) same = same && o->ne[d] == r->ne[d];
        if (!same && mismatches++ < 8)
            fprintf(stderr, "%s: tensor %llu: ours %s %s [%lld %lld %lld], oracle %s %s [%lld %lld %lld]\n", type_name,
                    (unsigned long long)i, o->name, gguf_type_name(o->type), (long long)o->ne[0], (long long)o->ne[1],
                    (long long)o->ne[2], r->name, gguf_type_name(r->type), (long long)r->ne[0], (long long)r->ne[1],
                    (long long)r->ne[2]);
    }
    CHECKF(mismatches == 0, "%s: %d tensors differ from the oracle file's", type_name, mismatches);
    gguf_close(ours);
    gguf_close(ref);
}

static void count_route(void *user, int layer, int n_tokens, int top_k, const int32_t *ids, const float *w) {
    (void)w;
    int *counts = user; /* (layers, 8) */
    for (int i = 0; i < n_tokens * top_k; i++) counts[layer * 8 + ids[i]]++;
}

static int cmp_desc(const void *a, const void *b) { return *(const int *)b - *(const int *)a; }

static void check_runs(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/q35-run.gguf", test_tmpdir());
    struct synth_params p;
    CHECK(synth_preset("qwen35-tiny", &p) == 0);
    p.type = SYNTH_Q4_K_M;
    CHECKF(synth_write(&p, path) == 0, "%s", moex_error());
    struct model *m = model_load(path);
    CHECKF(m != NULL, "%s", moex_error());
    if (!m) return;
    CHECK(m->hp.n_layers == 4 && m->hp.n_expert == 8);
    struct threadpool *pool = threadpool_new(2, false);
    enum { N = 256 };
    struct context_params cp = { N, N, KV_F16, pool, NULL, NULL };
    struct context *c = context_new(m, &cp);
    int counts[4 * 8] = { 0 };
    context_set_route_observer(c, count_route, counts);
    int32_t ids[N];
    uint64_t x = 7;
    for (int i = 0; i < N; i++) { x = x * 6364136223846793005ull + 1442695040888963407ull; ids[i] = (int32_t)(x >> 33) % 1000; }
    float *logits = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
    CHECK(c && context_eval(c, ids, N, logits, false) == 0);
    int finite = 1;
    for (int i = 0; i < m->hp.n_vocab; i++) finite &= isfinite(logits[i]);
    CHECK(finite);
    /* The top quarter of the experts takes more than its quarter. */
    for (int l = 0; l < 4; l++) {
        int *row = counts + l * 8;
        qsort(row, 8, sizeof *row, cmp_desc);
        double top = (double)(row[0] + row[1]) / (2.0 * N);
        printf("layer %d: the top 2 of 8 experts take %.2f of the selections\n", l, top);
        CHECKF(top > 0.3, "layer %d: top quarter %.2f", l, top);
    }
    free(logits);
    context_free(c);
    threadpool_free(pool);
    model_free(m);
}

int main(void) {
    /* The presets at the real model's shapes. */
    struct synth_params p;
    CHECK(synth_preset("qwen35-35b-a3b", &p) == 0 && !strcmp(p.arch, "qwen35moe"));
    CHECK(p.n_layers == 40 && p.n_embd == 2048 && p.n_expert == 256 && p.n_expert_used == 8 && p.n_ff_exp == 512);
    CHECK(p.n_ff_shexp == 512 && p.n_vocab == 248320 && p.n_head == 16 && p.n_head_kv == 2 && p.head_dim == 256);
    CHECK(p.n_rot == 64 && p.ssm_k_heads == 16 && p.ssm_v_heads == 32 && p.ssm_state == 128 && p.attn_interval == 4);
    CHECK(synth_check(&p) == 0);
    CHECK(synth_preset("qwen35-a3b-l8", &p) == 0 && p.n_layers == 8 && p.n_expert == 256);
    p.attn_interval = 0;
    CHECK(synth_check(&p) != 0);
    compare_with_oracle("Q8_0", SYNTH_Q8_0);
    compare_with_oracle("Q4_K_M", SYNTH_Q4_K_M);
    check_runs();
    return test_finish();
}
