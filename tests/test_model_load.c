/* Model loading errors name the file and the tensor or key at fault. The
 * broken models are copies of the oracle F32 model with one thing changed. */
#include "harness.h"

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/model.h"

#include <stdlib.h>
#include <string.h>

enum change { NONE, DROP_TENSOR, RESHAPE_TENSOR, RETYPE_TENSOR, DROP_KEY, WRONG_ARCH, HEADS_KV };

/* Writes a copy of src with `change` applied to `what`. */
static int write_variant(const struct gguf_file *src, const char *path, enum change change, const char *what) {
    struct gguf_writer *w = gguf_writer_new();
    for (uint64_t i = 0; i < src->n_kv; i++) {
        const struct gguf_kv *kv = &src->kv[i];
        if (change == DROP_KEY && !strcmp(kv->key, what)) continue;
        if (change == WRONG_ARCH && !strcmp(kv->key, "general.architecture")) { gguf_set_str(w, kv->key, "llama"); continue; }
        if (change == HEADS_KV && !strcmp(kv->key, what)) { gguf_set_u32(w, kv->key, 3); continue; }
        gguf_copy_kv(w, kv);
    }
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

int main(void) {
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
    expect_error(src, DROP_KEY, "qwen3moe.expert_count", "qwen3moe.expert_count");
    expect_error(src, WRONG_ARCH, "", "architecture 'llama' is not supported");
    expect_error(src, HEADS_KV, "qwen3moe.attention.head_count_kv", "not a multiple of head_count_kv");
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
