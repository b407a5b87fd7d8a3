/* The public API the command line is built on (include/moex.h only): output
 * files, synthetic models and their checks, file descriptions, vocab-only
 * loads, teacher-forced logits, the executor's per-phase counters and op
 * times, model facts, routing statistics, pack files, the board model and
 * the probe. */
#include "moex_tools.h"

#include "harness.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[4096], model_path[4096 + 32];

/* The test model on 2 unpinned threads, its experts on device. */
static void model_params(struct moex_model_params *mp, const char *device) {
    moex_model_params_default(mp);
    mp->path = model_path;
    mp->n_threads = 2;
    mp->pin_threads = false;
    mp->device.device = device;
}

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static void test_files(void) {
    char path[4096 + 32];
    snprintf(path, sizeof path, "%s/out.bin", dir);
    unlink(path);
    moex_file *f = moex_file_create(path);
    CHECK(f && moex_file_write(f, "abc", 3) == 0);
    CHECK(!exists(path)); /* nothing at the destination before the commit */
    CHECK(f && moex_file_commit(f) == 0);
    size_t size = 0;
    char *back = read_whole_file(path, &size);
    CHECK(back && size == 3 && !memcmp(back, "abc", 3));
    free(back);
    f = moex_file_create(path);
    CHECK(f && moex_file_write(f, "xyz!", 4) == 0);
    moex_file_discard(f); /* the old file stays as it was */
    back = read_whole_file(path, &size);
    CHECK(back && size == 3 && !memcmp(back, "abc", 3));
    free(back);
    CHECK(moex_file_create("/nonexistent/dir/x") == NULL && strstr(moex_last_error(), "/nonexistent/dir"));
}

static void test_synth(void) {
    struct moex_synth_params p;
    moex_synth_params_default(&p);
    struct moex_synth_shape shape;
    CHECK(moex_synth_check(&p, &shape) == MOEX_SYNTH_OK && shape.n_layers == 6 && !strcmp(shape.arch, "qwen3moe"));
    p.preset = "huge";
    CHECK(moex_synth_check(&p, NULL) == MOEX_SYNTH_BAD_PRESET && strstr(moex_last_error(), "huge"));
    p.preset = "tiny";
    p.arch = "lfm2moe";
    CHECK(moex_synth_check(&p, NULL) == MOEX_SYNTH_OTHER_ARCH && strstr(moex_last_error(), "tiny"));
    p.preset = NULL;
    CHECK(moex_synth_check(&p, &shape) == MOEX_SYNTH_OK && !strcmp(shape.arch, "lfm2moe"));
    p.arch = "gpt2";
    CHECK(moex_synth_check(&p, NULL) == MOEX_SYNTH_BAD_ARCH && strstr(moex_last_error(), "gpt2"));
    p.arch = NULL;
    p.preset = "tiny";
    p.type = "q3_k";
    CHECK(moex_synth_check(&p, NULL) == MOEX_SYNTH_BAD_TYPE);
    p.type = "q4_k";
    p.n_expert_used = 9;
    CHECK(moex_synth_check(&p, NULL) == MOEX_SYNTH_BAD_SHAPE && strstr(moex_last_error(), "top-k 9"));
    p.n_expert_used = 0;
    p.n_vocab = 100;
    CHECK(moex_synth_check(&p, NULL) == MOEX_SYNTH_BAD_VOCAB);
    p.n_vocab = 0;
    p.n_layers = 3;
    CHECK(moex_synth_check(&p, &shape) == MOEX_SYNTH_OK && shape.n_layers == 3 && !strcmp(shape.type, "q4_k"));
    p.n_threads = 2;
    CHECK(moex_synth_write(&p, model_path) == 0);
    char *info = moex_file_info(model_path, false);
    CHECK(info && strstr(info, "qwen3moe") && strstr(info, "blk.2.ffn_down_exps.weight") && !strstr(info, "blk.3."));
    free(info);
    CHECK(moex_file_info("/nonexistent.gguf", false) == NULL && strstr(moex_last_error(), "nonexistent"));
    CHECK(moex_check_sim_figures("rk3588,cores=2") == 0 && moex_check_sim_figures("rk3588,nokey=1") == -1);
}

static void test_vocab_only(void) {
    struct moex_model_params mp;
    moex_model_params_default(&mp);
    mp.path = model_path;
    mp.vocab_only = true;
    moex_model *m = moex_model_load(&mp);
    CHECK(m != NULL);
    if (!m) return;
    int n = 0;
    int32_t *ids = moex_tokenize_alloc(m, "hello world", 11, false, true, &n);
    CHECK(ids && n > 0);
    size_t total = 0, len;
    for (int i = 0; ids && i < n; i++) {
        const char *piece = moex_token_piece(m, ids[i], &len);
        CHECK(piece != NULL);
        total += len;
    }
    CHECK(total == 11);
    CHECK(moex_token_piece(m, -1, &len) == NULL && moex_token_piece(m, 1 << 30, &len) == NULL);
    CHECK(moex_token_is_normal(m, ids ? ids[0] : 0) && !moex_token_is_normal(m, moex_token_eos(m)));
    free(ids);
    CHECK(moex_context_new(m, NULL) == NULL && strstr(moex_last_error(), "vocab_only"));
    /* nor packs nor measures: it has no weights and no threads */
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab-only.mxpk", test_tmpdir());
    struct moex_pack_result pr;
    CHECK(moex_pack(m, false, moex_file_create(path), &pr) == -1 && strstr(moex_last_error(), "vocab_only"));
    FILE *left = fopen(path, "rb");
    CHECK(left == NULL); /* the refused output was discarded */
    if (left) fclose(left);
    struct moex_bandwidth bw;
    CHECK(moex_measure_bandwidth(m, 1, &bw) == -1 && strstr(moex_last_error(), "vocab_only"));
    moex_model_free(m);
}

static void test_eval_and_counters(moex_model *m) {
    struct moex_model_info info;
    moex_model_get_info(m, &info);
    CHECK(!strcmp(info.arch, "qwen3moe") && info.n_layers == 3 && info.n_threads == 2);
    CHECK(info.decode_bytes > 0 && info.decode_bytes < info.weight_bytes && info.n_params == moex_model_n_params(m));
    struct moex_context_params cp;
    moex_context_params_default(&cp);
    cp.n_ctx = 32;
    moex_context *a = moex_context_new(m, &cp), *b = moex_context_new(m, &cp);
    CHECK(a && b);
    if (!a || !b) { moex_context_free(a); moex_context_free(b); return; }
    int V = moex_model_n_vocab(m);
    int32_t tokens[8] = { 5, 17, 99, 3, 250, 42, 7, 11 };
    float *all = malloc(sizeof *all * 8 * (size_t)V);
    CHECK(all && moex_eval_all_logits(a, tokens, 8, all) == 0 && moex_n_past(a) == 8);
    CHECK(all && !memcmp(moex_logits(a), all + 7 * (size_t)V, sizeof *all * (size_t)V));
    /* position by position: the same logits as the batch gave, to rounding */
    double worst = 0;
    for (int i = 0; i < 8 && all; i++) {
        CHECK(moex_eval(b, &tokens[i], 1) == 0);
        const float *l = moex_logits(b);
        for (int v = 0; l && v < V; v++) {
            double d = l[v] - all[(size_t)i * V + v];
            if (d < 0) d = -d;
            if (d > worst) worst = d;
        }
    }
    CHECKF(worst < 1e-2, "largest difference %g", worst);
    free(all);

    struct moex_phase_counters pre, dec;
    moex_context_phase_counters(a, MOEX_PHASE_PREFILL, &pre);
    moex_context_phase_counters(b, MOEX_PHASE_DECODE, &dec);
    CHECK(pre.batches > 0 && pre.rows_cpu == 8 * 3 * 2 && pre.rows_device == 0 && pre.wall_ns > 0);
    CHECK(dec.batches > 0 && dec.rows_cpu == 8 * 3 * 2 && pre.modelled_ns == pre.wall_ns);
    CHECK(!moex_context_device_modelled(a));
    struct moex_op_times t;
    moex_context_op_times(a, &t);
    CHECK(t.n >= 6 && !strcmp(t.op[t.n - 1].name, "other") && t.barriers > 0);
    for (int k = 0; k < t.n; k++)
        if (!strcmp(t.op[k].name, "attention matmuls") || !strcmp(t.op[k].name, "experts") ||
            !strcmp(t.op[k].name, "lm head"))
            CHECKF(t.op[k].ns > 0 && t.op[k].common, "%s: %lld ns", t.op[k].name, (long long)t.op[k].ns);
    moex_context_reset_op_times(a);
    moex_context_op_times(a, &t);
    for (int k = 0; k < t.n; k++) CHECKF(t.op[k].ns == 0, "%s after a reset", t.op[k].name);
    CHECK(t.barriers == 0);
    char *profile = moex_context_profile_text(a);
    CHECK(profile && strstr(profile, "| prefill |") && strstr(profile, "| decode |"));
    free(profile);
    CHECK(moex_context_note(a)[0] == 0);
    struct moex_memory mem;
    moex_context_memory(a, &mem);
    CHECK(mem.kv > 0 && mem.scratch > 0);
    moex_context_free(b);

    /* routing statistics: recorded, written, read back by a device run */
    moex_routing *r = moex_routing_new(a);
    CHECK(r != NULL);
    if (r) {
        moex_truncate(a, 0);
        moex_routing_begin_sequence(r);
        moex_routing_set_half(r, 0);
        CHECK(moex_eval(a, tokens, 4) == 0);
        moex_routing_set_half(r, 1);
        CHECK(moex_eval(a, tokens + 4, 4) == 0);
        char path[4096 + 32];
        snprintf(path, sizeof path, "%s/routing.stats", dir);
        moex_file *f = moex_file_create(path);
        CHECK(f && moex_routing_write(r, f) == 0 && exists(path));
        char *report = moex_routing_report(r);
        CHECK(report && strstr(report, "8 tokens in 1 sequences") && strstr(report, "mean"));
        free(report);
        moex_routing_free(r);
        struct moex_model_params mp;
        model_params(&mp, "cpu");
        mp.device.stats_path = path;
        mp.device.hot_fraction = 0.5;
        moex_model *dm = moex_model_load(&mp);
        moex_context *dc = dm ? moex_context_new(dm, &cp) : NULL;
        CHECKF(dc != NULL, "%s", moex_last_error());
        moex_context_free(dc);
        moex_model_free(dm);
    }
    moex_context_free(a);
}

static void test_pack(void) {
    struct moex_model_params mp;
    model_params(&mp, "sim");
    moex_model *m = moex_model_load(&mp);
    CHECK(m != NULL);
    if (!m) return;
    char path[4096 + 32];
    snprintf(path, sizeof path, "%s/api.mxpk", dir);
    struct moex_pack_result r;
    moex_file *f = moex_file_create(path);
    CHECK(f && moex_pack(m, true, f, &r) == 0);
    CHECK(r.experts == 3 * 8 && !strcmp(r.device, "sim") && r.file_bytes > 0 && !strcmp(r.weight_type, "Q4_K"));
    moex_model_free(m);
    mp.device.pack_path = path;
    mp.device.min_m = 1;
    m = moex_model_load(&mp);
    moex_context *c = m ? moex_context_new(m, NULL) : NULL;
    int32_t tokens[4] = { 1, 2, 3, 4 };
    CHECK(c && moex_eval(c, tokens, 4) == 0);
    struct moex_phase_counters pre;
    if (c) moex_context_phase_counters(c, MOEX_PHASE_PREFILL, &pre);
    CHECK(c && pre.rows_device > 0 && moex_context_device_modelled(c));
    CHECK(c && !moex_context_has_board(c) && moex_context_board_dense_ns(c, 1, 0) == -1);
    moex_context_free(c);
    moex_model_free(m);

    /* the board model prices the dense work too */
    mp.device.sim_figures = "rk3588,board=1";
    m = moex_model_load(&mp);
    c = m ? moex_context_new(m, NULL) : NULL;
    CHECKF(c && moex_context_has_board(c), "%s", moex_last_error());
    CHECK(c && moex_eval(c, tokens, 4) == 0);
    double one = c ? moex_context_board_dense_ns(c, 1, 4) : -1, four = c ? moex_context_board_dense_ns(c, 4, 0) : -1;
    CHECKF(one > 0 && four > one, "%g ns for 1 token, %g for 4", one, four);
    moex_context_free(c);
    moex_model_free(m);
}

struct text { char buf[1 << 16]; size_t len; };
static void collect(void *user, const char *text, size_t len) {
    struct text *t = user;
    if (t->len + len < sizeof t->buf) { memcpy(t->buf + t->len, text, len); t->len += len; t->buf[t->len] = 0; }
}

static void test_probe(void) {
    struct text *out = calloc(1, sizeof *out);
    if (!out) return;
    struct moex_probe_shape shape = { 256, 256 };
    int rows[2] = { 1, 16 };
    struct moex_probe_params p = { "sim", &shape, 1, rows, 2, 1, NULL, true, collect, out };
    CHECK(moex_probe(&p) == 0 && strstr(out->buf, "### 256 x 256") && strstr(out->buf, "| 16 |"));
    shape.N = 100; /* not a multiple of the sim's tile */
    CHECK(moex_probe(&p) == -2 && strstr(moex_last_error(), "'256x100'"));
    shape.K = 100;
    CHECK(moex_probe(&p) == -1);
    free(out);
}

int main(void) {
    snprintf(dir, sizeof dir, "%s", test_tmpdir());
    snprintf(model_path, sizeof model_path, "%s/tools.gguf", dir);
    test_files();
    test_synth();
    test_vocab_only();
    struct moex_model_params mp;
    model_params(&mp, "none");
    moex_model *m = moex_model_load(&mp);
    CHECK(m != NULL);
    if (m) test_eval_and_counters(m);
    moex_model_free(m);
    test_pack();
    test_probe();
    return test_finish();
}
