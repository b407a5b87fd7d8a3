/* Model loading errors name the file and the tensor or key at fault. The
 * broken models are copies of the oracle F32 model with one thing changed:
 * a tensor, or a key's value or GGUF type (D1: hyper-parameter products
 * checked in 64 bits; D11: bad floats, keys of the wrong type, value_length,
 * block_count against the tensors). */
#include "harness.h"

#include "core/error.h"
#include "gguf/gguf.h"
#include "arch/arch.h"
#include "model/model_load.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum change { NONE, DROP_TENSOR, RESHAPE_TENSOR, RETYPE_TENSOR, DROP_KEY, WRONG_ARCH, HEADS_KV, SET_KEYS };

/* For SET_KEYS: keys replaced (or added) with a value of the given type. */
struct key_value {
    const char *key;
    enum gguf_vtype type;   /* GGUF_U32, GGUF_F32 or GGUF_STRING */
    uint32_t u;
    float f;
};
static const struct key_value *set_keys;
static int n_set_keys;

static void set_key(struct gguf_writer *w, const struct key_value *kv) {
    if (kv->type == GGUF_U32) gguf_set_u32(w, kv->key, kv->u);
    else if (kv->type == GGUF_F32) gguf_set_f32(w, kv->key, kv->f);
    else gguf_set_str(w, kv->key, "1e-6");
}

static const struct key_value *key_change(const char *key) {
    for (int i = 0; i < n_set_keys; i++)
        if (!strcmp(set_keys[i].key, key)) return &set_keys[i];
    return NULL;
}

/* Writes a copy of src with `change` applied to `what`. */
static int write_variant(const struct gguf_file *src, const char *path, enum change change, const char *what) {
    struct gguf_writer *w = gguf_writer_new();
    for (uint64_t i = 0; i < src->n_kv; i++) {
        const struct gguf_kv *kv = &src->kv[i];
        if (change == DROP_KEY && !strcmp(kv->key, what)) continue;
        if (change == WRONG_ARCH && !strcmp(kv->key, "general.architecture")) { gguf_set_str(w, kv->key, "llama"); continue; }
        if (change == HEADS_KV && !strcmp(kv->key, what)) { gguf_set_u32(w, kv->key, 3); continue; }
        const struct key_value *to = change == SET_KEYS ? key_change(kv->key) : NULL;
        if (to) set_key(w, to);
        else gguf_copy_kv(w, kv);
    }
    for (int i = 0; change == SET_KEYS && i < n_set_keys; i++)
        if (!gguf_find_kv(src, set_keys[i].key)) set_key(w, &set_keys[i]);
    for (uint64_t i = 0; i < src->n_tensors; i++) {
        const struct gguf_tensor *t = &src->tensors[i];
        int64_t ne[4] = { t->ne[0], t->ne[1], t->ne[2], t->ne[3] };
        uint32_t type = t->type;
        bool hit = !strcmp(t->name, what);
        if (hit && change == DROP_TENSOR) continue;
        if (hit && change == RESHAPE_TENSOR) { ne[0] = t->ne[1]; ne[1] = t->ne[0]; }
        if (hit && change == RETYPE_TENSOR) type = 10; /* Q2_K: valid GGUF, not supported by moex */
        if (hit && change == RETYPE_TENSOR && ne[0] % 256) return -1;
        if (gguf_add_tensor(w, t->name, type, t->n_dims, ne) != 0) return -1;
    }
    int rc = gguf_writer_begin(w, path);
    for (uint64_t i = 0; rc == 0 && i < src->n_tensors; i++) {
        const struct gguf_tensor *t = &src->tensors[i];
        bool hit = !strcmp(t->name, what);
        if (hit && change == DROP_TENSOR) continue;
        if (hit && change == RETYPE_TENSOR) {
            /* Q2_K: 84 bytes per 256 values. */
            uint64_t n = (uint64_t)t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3] / 256 * 84;
            void *zeros = calloc(1, n);
            rc = gguf_writer_write_data(w, zeros, n);
            free(zeros);
            continue;
        }
        rc = gguf_writer_write_data(w, t->data, t->nbytes);
    }
    if (rc == 0) rc = gguf_writer_finish(w);
    gguf_writer_free(w);
    return rc;
}

static void expect_error(const struct gguf_file *src, enum change change, const char *what, const char *phrase) {
    char path[4096];
    snprintf(path, sizeof path, "%s/variant.gguf", test_tmpdir());
    CHECKF(write_variant(src, path, change, what) == 0, "writing variant for %s: %s", what, moex_error());
    moex_clear_error();
    struct model *m = model_load(path);
    CHECKF(m == NULL, "loading with a broken %s should fail", what);
    const char *msg = moex_error();
    CHECKF(strstr(msg, path) != NULL, "message names the file: %s", msg);
    CHECKF(strstr(msg, phrase) != NULL, "message '%s' should contain '%s'", msg, phrase);
    printf("%s -> %s\n", what, msg);
    model_free(m);
    remove(path);
}

/* The model with keys changed must be refused with a message containing phrase. */
static void expect_key_error(const struct gguf_file *src, const struct key_value *kv, int n, const char *phrase) {
    set_keys = kv;
    n_set_keys = n;
    expect_error(src, SET_KEYS, "", phrase);
    n_set_keys = 0;
}

#define KEY(k) "qwen3moe." k

/* The per-layer array getter: arrays of any integer type, a scalar
 * repeated, and refusals of the wrong length, type or range. */
static void test_int_array(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/arrays.gguf", test_tmpdir());
    struct gguf_writer *w = gguf_writer_new();
    const uint32_t kv[3] = { 0, 8, 8 };
    const int16_t neg[3] = { 1, -1, 1 };
    const float fl[3] = { 1, 2, 3 };
    gguf_set_str(w, "general.architecture", "qwen3moe");
    gguf_set_arr(w, KEY("kv"), GGUF_U32, kv, 3);
    gguf_set_u32(w, KEY("scalar"), 4);
    gguf_set_arr(w, KEY("neg"), GGUF_I16, neg, 3);
    gguf_set_arr(w, KEY("floats"), GGUF_F32, fl, 3);
    CHECK(gguf_writer_begin(w, path) == 0 && gguf_writer_finish(w) == 0);
    gguf_writer_free(w);
    struct model m = { 0 };
    m.arch = arch_find("qwen3moe");
    m.file = gguf_open(path);
    CHECK(m.arch && m.file);
    if (!m.arch || !m.file) return;
    int out[3] = { -7, -7, -7 };
    CHECK(model_get_int_array(&m, "kv", 0, 64, 3, out) == 0 && out[0] == 0 && out[1] == 8 && out[2] == 8);
    CHECK(model_get_int_array(&m, "scalar", 0, 64, 3, out) == 0 && out[0] == 4 && out[1] == 4 && out[2] == 4);
    CHECK(model_get_int_array(&m, "kv", 0, 64, 2, out) == -1 && strstr(moex_error(), "has 3 values, expected 2"));
    CHECK(model_get_int_array(&m, "kv", 1, 64, 3, out) == -1 && strstr(moex_error(), "'qwen3moe.kv' is 0, expected 1..64"));
    CHECK(model_get_int_array(&m, "neg", 0, 64, 3, out) == -1 && strstr(moex_error(), "is -1, expected 0..64"));
    CHECK(model_get_int_array(&m, "floats", 0, 64, 3, out) == -1 && strstr(moex_error(), "expected integers"));
    CHECK(model_get_int_array(&m, "none", 0, 64, 3, out) == -1 && strstr(moex_error(), "'qwen3moe.none' is missing"));
    gguf_close(m.file);
    remove(path);
}

static void test_hparams(const struct gguf_file *src) {
    /* D1: 2^22 heads of 1024 wrap an int product to 0. */
    const struct key_value huge[] = { { KEY("attention.head_count"), GGUF_U32, 1u << 22, 0 },
                                      { KEY("attention.head_count_kv"), GGUF_U32, 1u << 22, 0 },
                                      { KEY("attention.key_length"), GGUF_U32, 1024, 0 },
                                      { KEY("attention.value_length"), GGUF_U32, 1024, 0 } };
    expect_key_error(src, huge, 4, "head_count x key_length = 4194304 x 1024 = 4294967296 is more than");
    const struct key_value ffn[] = { { KEY("expert_count"), GGUF_U32, 4096, 0 },
                                     { KEY("expert_feed_forward_length"), GGUF_U32, 1u << 24, 0 } };
    expect_key_error(src, ffn, 2, "expert_count x expert_feed_forward_length = 4096 x 16777216");
    /* batch x top-k pairs are ints in the executor */
    struct key_value experts = { KEY("expert_count"), GGUF_U32, 1u << 24, 0 };
    expect_key_error(src, &experts, 1, "key 'qwen3moe.expert_count' is 16777216, expected 1..4096");
    /* D11: floats that are not usable. */
    static const float bad_eps[] = { NAN, -1e-6f, 0.0f, INFINITY };
    for (size_t i = 0; i < sizeof bad_eps / sizeof *bad_eps; i++) {
        struct key_value kv = { KEY("attention.layer_norm_rms_epsilon"), GGUF_F32, 0, bad_eps[i] };
        expect_key_error(src, &kv, 1, "key 'qwen3moe.attention.layer_norm_rms_epsilon' is");
    }
    static const float bad_base[] = { 0.0f, NAN, INFINITY, -10000.0f };
    for (size_t i = 0; i < sizeof bad_base / sizeof *bad_base; i++) {
        struct key_value kv = { KEY("rope.freq_base"), GGUF_F32, 0, bad_base[i] };
        expect_key_error(src, &kv, 1, "key 'qwen3moe.rope.freq_base' is");
    }
    /* Keys of the wrong GGUF type are refused, not defaulted. */
    struct key_value base_u32 = { KEY("rope.freq_base"), GGUF_U32, 1000000, 0 };
    expect_key_error(src, &base_u32, 1, "key 'qwen3moe.rope.freq_base' is stored as u32, expected f32");
    struct key_value eps_str = { KEY("attention.layer_norm_rms_epsilon"), GGUF_STRING, 0, 0 };
    expect_key_error(src, &eps_str, 1, "key 'qwen3moe.attention.layer_norm_rms_epsilon' is stored as str");
    struct key_value heads_f32 = { KEY("attention.head_count"), GGUF_F32, 0, 4.0f };
    expect_key_error(src, &heads_f32, 1, "key 'qwen3moe.attention.head_count' is stored as f32, expected an integer");
    struct key_value no_experts = { KEY("expert_count"), GGUF_U32, 0, 0 };
    expect_key_error(src, &no_experts, 1, "key 'qwen3moe.expert_count' is 0, expected 1..");
    /* value_length is read and checked. */
    struct key_value value = { KEY("attention.value_length"), GGUF_U32, 32, 0 };
    expect_key_error(src, &value, 1, "attention.value_length 32 differs from key_length 64");
    /* block_count against the layers the file has. */
    struct key_value one = { KEY("block_count"), GGUF_U32, 1, 0 };
    expect_key_error(src, &one, 1, "'qwen3moe.block_count' is 1 but the file has tensor 'blk.1.");
    struct key_value three = { KEY("block_count"), GGUF_U32, 3, 0 };
    expect_key_error(src, &three, 1, "the model has 3 layers ('qwen3moe.block_count') but the file's layer tensors "
                                     "end at blk.1");
    /* A damaged count is refused before any per-layer allocation (fuzz_model
     * found one of 8257537 layers that first asked for 2.4 GB). */
    struct key_value layers = { KEY("block_count"), GGUF_U32, 2000000, 0 }; /* x 8 experts: under MODEL_DIM_MAX */
    expect_key_error(src, &layers, 1, "the model has 2000000 layers ('qwen3moe.block_count') but the file's layer "
                                    "tensors end at blk.1");
}

/* lfm2moe: its own keys and tensors (the oracle's lfm2moe-o2 F32 file). */
static void test_lfm2moe(void) {
    struct gguf_file *src = gguf_open(oracle_path("lfm2moe-o2/models/lfm2moe-o2-F32.gguf"));
    CHECK(src != NULL);
    if (!src) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/same-lfm2.gguf", test_tmpdir());
    CHECK(write_variant(src, path, NONE, "") == 0);
    struct model *m = model_load(path);
    CHECKF(m != NULL, "unchanged lfm2moe copy loads: %s", moex_error());
    if (m) {
        CHECK(m->hp.n_layers == 4 && m->hp.n_head_kv == 2 && m->hp.head_dim == 64 && m->hp.n_ff == 512);
        CHECK(m->moe.n_layers == 3 && m->moe_layers[0].layer == 1 && m->moe_layers[2].layer == 3);
        CHECK(m->state[0].kind == LAYER_SHORTCONV && m->state[0].conv_floats == 2 * 256 && m->state[0].kv_k == 0);
        CHECK(m->state[2].kind == LAYER_ATTENTION && m->state[2].kv_k == 128 && m->state[2].conv_floats == 0);
        CHECK(m->output.data == m->token_embd.data);   /* tied */
    }
    model_free(m);
    remove(path);
    expect_error(src, DROP_TENSOR, "blk.1.shortconv.in_proj.weight", "'blk.1.shortconv.in_proj.weight' is missing");
    expect_error(src, DROP_TENSOR, "blk.2.exp_probs_b.bias", "'blk.2.exp_probs_b.bias' is missing");
    expect_error(src, DROP_TENSOR, "token_embd_norm.weight", "'token_embd_norm.weight' is missing");
    expect_error(src, DROP_TENSOR, "blk.0.ffn_gate.weight", "'blk.0.ffn_gate.weight' is missing");
    expect_error(src, RESHAPE_TENSOR, "blk.3.shortconv.conv.weight", "'blk.3.shortconv.conv.weight' has shape");
    expect_error(src, DROP_KEY, "lfm2moe.shortconv.l_cache", "lfm2moe.shortconv.l_cache");
    struct key_value gating = { "lfm2moe.expert_gating_func", GGUF_U32, 3, 0 };
    expect_key_error(src, &gating, 1, "key 'lfm2moe.expert_gating_func' is 3, expected 1..2");
    struct key_value l_cache = { "lfm2moe.shortconv.l_cache", GGUF_U32, 99, 0 };
    expect_key_error(src, &l_cache, 1, "key 'lfm2moe.shortconv.l_cache' is 99");
    struct key_value vocab = { "lfm2moe.vocab_size", GGUF_U32, 1000, 0 };
    expect_key_error(src, &vocab, 1, "vocab_size is 1000 but token_embd.weight has 2048 rows");
    struct key_value dense = { "lfm2moe.leading_dense_block_count", GGUF_U32, 4, 0 };
    expect_key_error(src, &dense, 1, "all 4 layers are dense");
    /* One head_count_kv for all layers means every layer has attention. */
    struct key_value all_attn = { "lfm2moe.attention.head_count_kv", GGUF_U32, 2, 0 };
    expect_key_error(src, &all_attn, 1, "'blk.0.attn_q.weight' is missing");
    gguf_close(src);
}

int main(void) {
    test_lfm2moe();
    struct gguf_file *src = gguf_open(oracle_path("models/qwen3moe-o1-F32.gguf"));
    CHECK(src != NULL);
    if (!src) return test_finish();
    char path[4096];
    snprintf(path, sizeof path, "%s/same.gguf", test_tmpdir());
    CHECK(write_variant(src, path, NONE, "") == 0);
    struct model *m = model_load(path);
    CHECKF(m != NULL, "unchanged copy loads: %s", moex_error());
    if (m) {
        CHECK(m->hp.n_layers == 2 && m->hp.n_embd == 256 && m->hp.n_expert == 8 && m->hp.n_expert_used == 2);
        CHECK(m->hp.n_head == 4 && m->hp.n_head_kv == 2 && m->hp.head_dim == 64 && m->hp.n_ff_exp == 256);
        CHECK(m->hp.n_vocab == 2048 && m->tok != NULL);
    }
    model_free(m);
    remove(path);

    expect_error(src, DROP_TENSOR, "blk.1.ffn_down_exps.weight", "tensor 'blk.1.ffn_down_exps.weight' is missing");
    expect_error(src, DROP_TENSOR, "blk.0.attn_k_norm.weight", "'blk.0.attn_k_norm.weight' is missing");
    expect_error(src, RESHAPE_TENSOR, "blk.0.attn_k.weight", "'blk.0.attn_k.weight' has shape");
    expect_error(src, RETYPE_TENSOR, "blk.1.ffn_up_exps.weight", "'blk.1.ffn_up_exps.weight' has type Q2_K");
    /* what to do: the types moex runs, and how to get one */
    expect_error(src, RETYPE_TENSOR, "blk.1.ffn_up_exps.weight", "(it runs F32 F16 Q4_0 ");
    expect_error(src, RETYPE_TENSOR, "blk.1.ffn_up_exps.weight", " Q6_K BF16): requantize the model");
    expect_error(src, DROP_KEY, "qwen3moe.expert_count", "qwen3moe.expert_count");
    expect_error(src, WRONG_ARCH, "", "architecture 'llama' is not supported");
    expect_error(src, HEADS_KV, "qwen3moe.attention.head_count_kv", "not a multiple of head_count_kv");
    test_hparams(src);
    test_int_array();
    gguf_close(src);

    /* qwen35moe: delta-net and gated-attention tensors, ssm keys, and the
     * MTP block (validated though never run). */
    src = gguf_open(oracle_path("qwen35moe-o3/models/qwen35moe-o3-F32.gguf"));
    CHECK(src != NULL);
    if (src) {
        expect_error(src, DROP_TENSOR, "blk.0.ssm_a", "tensor 'blk.0.ssm_a' is missing");
        expect_error(src, DROP_TENSOR, "blk.2.ffn_gate_inp_shexp.weight", "'blk.2.ffn_gate_inp_shexp.weight' is missing");
        expect_error(src, DROP_TENSOR, "blk.3.attn_q_norm.weight", "'blk.3.attn_q_norm.weight' is missing");
        expect_error(src, RESHAPE_TENSOR, "blk.1.attn_qkv.weight", "'blk.1.attn_qkv.weight' has shape");
        expect_error(src, RESHAPE_TENSOR, "blk.3.attn_q.weight", "'blk.3.attn_q.weight' has shape");
        expect_error(src, DROP_KEY, "qwen35moe.ssm.state_size", "qwen35moe.ssm.state_size");
        expect_error(src, HEADS_KV, "qwen35moe.ssm.time_step_rank", "not a multiple of ssm.group_count");
        expect_error(src, HEADS_KV, "qwen35moe.ssm.inner_size", "ssm.inner_size 3 is not");
        gguf_close(src);
    }
    src = gguf_open(oracle_path("qwen35moe-o3/models/qwen35moe-o3-mtp-Q8_0.gguf"));
    CHECK(src != NULL);
    if (src) {
        expect_error(src, DROP_TENSOR, "blk.4.nextn.eh_proj.weight", "'blk.4.nextn.eh_proj.weight' is missing");
        expect_error(src, RESHAPE_TENSOR, "blk.4.attn_k.weight", "'blk.4.attn_k.weight' has shape");
        gguf_close(src);
    }

    moex_clear_error();
    CHECK(model_load("/nonexistent/model.gguf") == NULL);
    CHECK(strstr(moex_error(), "/nonexistent/model.gguf") != NULL);
    return test_finish();
}
