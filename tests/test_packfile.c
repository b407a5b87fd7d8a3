/* Pack files: slots filled from a file are bit for bit the slots a live
 * pack fills, for every source type; every kind of damage or mismatch is
 * refused with its own status and message, and a run with a refused file
 * computes what a run without it does; admissions load from the file; the
 * checksum is XXH64. Uses the oracle models (F32 ... Q8_0) and tiny synth
 * models. */
#include "dev_host.h"
#include "exec_run.h"
#include "harness.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/threadpool.h"
#include "core/xxh64.h"
#include "dev/dev.h"
#include "dev/sim.h"
#include "model/model.h"
#include "synth/synth.h"
#include "moe/executor.h"
#include "moe/pack_experts.h"
#include "pack/packfile.h"
#include "pack/packfile_format.h"

#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct threadpool *pool;
static const int32_t ids[16] = { 1, 5, 9, 14, 2, 7, 11, 3, 8, 13, 4, 6, 10, 12, 15, 16 };
enum { N_IDS = 16 };

static const char *tmp(const char *name) {
    static char buf[8][4096];
    static int next;
    char *out = buf[next++ & 7];
    snprintf(out, sizeof buf[0], "%s/%s", test_tmpdir(), name);
    return out;
}

static int write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

/* ---------------------------------------------------------------- runs */

/* One prefill batch, then 4 greedy decode steps. */
static struct exec_run run_model(struct model *m, const struct moe_exec_options *o) {
    struct exec_run_params p = { .pool = pool, .n_ctx = 64, .n_batch = 32, .kv_type = KV_F32, .steps = 4 };
    return exec_run(m, o, &p, ids, N_IDS);
}

static bool same_run(const struct model *m, const struct exec_run *a, const struct exec_run *b) {
    return a->ok && b->ok && memcmp(a->logits, b->logits, sizeof(float) * (size_t)N_IDS * m->hp.n_vocab) == 0 &&
           memcmp(a->greedy, b->greedy, sizeof a->greedy) == 0;
}

static struct moe_exec_options dev_options(const char *device, double fraction, const char *pack) {
    return (struct moe_exec_options){ .device = device, .hot_fraction = fraction, .min_m = 1, .pinned_share = -1,
                                      .pack_path = pack };
}

static struct moe_exec_options cpu_options(double fraction, const char *pack) {
    return dev_options("cpu", fraction, pack);
}

static int pack_model(struct model *m, const struct moe_exec_options *o, bool all, const char *path) {
    struct moe_pack_result r;
    struct atomic_file *f = atomic_file_create(path);
    int rc = f ? moe_pack_experts(&m->moe, o, pool, all, f, NULL, NULL, NULL, NULL, &r) : -1;
    if (rc != 0) fprintf(stderr, "pack %s: %s\n", path, moex_error());
    return rc;
}

/* ---------------------------------------------------------------- xxh64 */

static void test_xxh64(void) {
    CHECK(xxh64("", 0, 0) == 0xEF46DB3751D8E999ull);
    CHECK(xxh64("abc", 3, 0) == 0x44BC2CF5AD770999ull);
    uint8_t buf[1000];
    for (int i = 0; i < 1000; i++) buf[i] = (uint8_t)(i * 131 + 7);
    uint64_t whole = xxh64(buf, sizeof buf, 42);
    for (size_t split = 0; split < sizeof buf; split += 37) {
        struct xxh64_state s;
        xxh64_init(&s, 42);
        xxh64_update(&s, buf, split);
        xxh64_update(&s, buf + split, 1);
        xxh64_update(&s, buf + split + 1, sizeof buf - split - 1);
        CHECKF(xxh64_digest(&s) == whole, "split at %zu", split);
    }
    CHECK(xxh64(buf, sizeof buf, 43) != whole);
}

/* ---------------------------------------------------------------- round trip */

/* Every entry loaded into a slot equals a live pack of the same weight, and
 * a run from the file equals a run that packs live. */
static void round_trip(struct model *m, const char *label, const char *device) {
    char path[4096];
    snprintf(path, sizeof path, "%s", tmp("rt.mxpk"));
    struct moe_exec_options o = dev_options(device, 1.0, NULL);
    CHECKF(pack_model(m, &o, false, path) == 0, "%s", label);
    struct packfile *pf = NULL;
    CHECKF(packfile_open(path, &pf) == PACKFILE_OK, "%s: %s", label, moex_error());
    if (!pf) return;
    const struct packfile_info *in = packfile_info(pf);
    const struct model_hparams *hp = &m->hp;
    CHECK(in->n_entries == 3 * hp->n_layers * hp->n_expert && in->all_experts == false);
    CHECK(in->n_pinned == hp->n_layers * hp->n_expert && in->plan_slots == in->n_pinned);
    CHECK(packfile_verify_data(pf) == PACKFILE_OK);
    struct packfile_identity id;
    uint32_t types[3] = { m->moe.layers[0].gate.type, m->moe.layers[0].up.type, m->moe.layers[0].down.type };
    CHECK(packfile_model_identity(m->file, &id) == PACKFILE_OK);
    CHECKF(packfile_check_model(pf, &id, hp->n_layers, hp->n_expert, hp->n_embd, hp->n_ff_exp, types) == PACKFILE_OK,
           "%s: %s", label, moex_error());

    struct dev *d = NULL;
    int64_t slot_values = (int64_t)hp->n_embd * hp->n_ff_exp;
    int max_n = hp->n_embd > hp->n_ff_exp ? hp->n_embd : hp->n_ff_exp;
    CHECK(dev_open(device, &(struct dev_options){ .n_threads = 1 }, &d) == DEV_OK);
    CHECK(dev_pool_alloc(d, 2, slot_values, max_n) == DEV_OK);
    const struct dev_caps *caps = dev_caps(d);
    CHECK(in->layout == dev_layout(d) && !strcmp(in->device, device));
    CHECK(packfile_check_layout(pf, device, dev_layout(d), caps->k_multiple, caps->n_multiple, slot_values, max_n) ==
          PACKFILE_OK);
    int differ = 0;
    for (int i = 0; i < in->n_entries; i++) {
        const struct packfile_entry *en = packfile_entry(pf, i);
        const struct moe_layer_desc *L = &m->moe.layers[en->layer];
        const struct matrix *w = en->matrix == PACKFILE_GATE ? &L->gate
                                 : en->matrix == PACKFILE_UP ? &L->up : &L->down;
        const char *src = (const char *)w->data + (size_t)en->expert * en->N * w->row_bytes;
        struct host_slot h0, h1;
        if (dev_pack(d, 0, w->type, src, en->K, en->N) != DEV_OK ||
            dev_load_packed(d, 1, in->layout, en->codes, en->scales, en->K, en->N) != DEV_OK ||
            dev_slot_read(d, 0, &h0) != DEV_OK || dev_slot_read(d, 1, &h1) != DEV_OK) {
            differ++;
            continue;
        }
        size_t code_bytes = pack_bytes(in->layout, en->K, en->N);
        int N = h1.N;
        differ += h1.K != en->K || N != en->N || h1.code_bytes != code_bytes ||
                  memcmp(h0.codes, h1.codes, code_bytes) != 0 || memcmp(h0.scales, h1.scales, sizeof(float) * (size_t)N) != 0 ||
                  packfile_entry_hash(h1.codes, code_bytes, h1.scales, N) != en->checksum;
        host_slot_free(&h0);
        host_slot_free(&h1);
    }
    CHECKF(differ == 0, "%s: %d of %d loaded weights differ from a live pack", label, differ, in->n_entries);
    struct dev_counters dc;
    dev_get_counters(d, &dc);
    CHECK(dc.loads == (uint64_t)in->n_entries && dc.load_bytes > 0);
    dev_close(d);
    packfile_close(pf);

    struct moe_exec_options live = dev_options(device, 1.0, NULL), from_file = dev_options(device, 1.0, path);
    struct exec_run a = run_model(m, &live), b = run_model(m, &from_file);
    CHECKF(same_run(m, &a, &b), "%s, %s: a run from the pack file differs from a live one", label, device);
    int n_experts = hp->n_layers * hp->n_expert;
    CHECKF(b.report.status == PACKFILE_OK && b.report.plan_used && b.report.experts_loaded == n_experts &&
           b.report.experts_packed == 0, "%s: status %d, %d loaded, %d packed: %s", label, b.report.status,
           b.report.experts_loaded, b.report.experts_packed, b.report.message);
    CHECK(a.pre.packs == (uint64_t)n_experts && a.pre.loads == 0 && b.pre.loads == (uint64_t)n_experts && b.pre.packs == 0);
    CHECK(a.report.experts_packed == n_experts && a.report.experts_loaded == 0);
    free(a.logits);
    free(b.logits);
    unlink(path);
}

static void test_round_trips(void) {
    static const char *oracle[] = { "F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K" };
    for (size_t i = 0; i < sizeof oracle / sizeof *oracle; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "models/qwen3moe-o1-%s.gguf", oracle[i]);
        struct model *m = model_load(oracle_path(rel));
        CHECKF(m != NULL, "%s: %s", rel, moex_error());
        if (!m) continue;
        round_trip(m, oracle[i], "cpu");
        /* The NPU model's envelope; AMX tiles where the device opens (AMX
         * hardware, or builds with MOEX_EMULATE_AMX). */
        if (!strcmp(oracle[i], "Q4_K_M")) round_trip(m, oracle[i], "sim");
        struct dev *amx = NULL;
        if (!strcmp(oracle[i], "Q4_K_M") && dev_open("amx", NULL, &amx) == DEV_OK) {
            dev_close(amx);
            round_trip(m, oracle[i], "amx");
        } else {
            moex_clear_error();
        }
        model_free(m);
    }
    struct synth_params p;
    synth_preset("tiny", &p);
    p.n_threads = 2;
    CHECK(synth_write(&p, tmp("tiny.gguf")) == 0);
    struct model *m = model_load(tmp("tiny.gguf"));
    CHECK(m != NULL);
    if (m) round_trip(m, "synth tiny", "cpu");
    model_free(m);
    unlink(tmp("tiny.gguf"));
}

/* The writer and reader know nothing of devices: an AMX-tiled file reads
 * back byte for byte (no AMX device is needed for that). */
static void test_amx_layout_file(void) {
    struct model *m = model_load(oracle_path("models/qwen3moe-o1-Q8_0.gguf"));
    CHECK(m != NULL);
    if (!m) return;
    const struct model_hparams *hp = &m->hp;
    int K = hp->n_embd, N = hp->n_ff_exp, max_n = K > N ? K : N;
    struct packfile_info info = {
        .layout = PACK_AMX, .device = "amx", .k_multiple = 64, .n_multiple = 16,
        .slot_values = (int64_t)K * N, .slot_max_n = max_n, .code_stride = (uint64_t)K * N,
        .scale_stride = (uint64_t)max_n * 4, .n_layers = hp->n_layers, .n_expert = hp->n_expert, .n_embd = K,
        .n_ff = N, .source_type = { m->moe.layers[0].gate.type, m->moe.layers[0].up.type,
                                    m->moe.layers[0].down.type },
        .plan_slots = 1, .n_pinned = 1,
    };
    int32_t pinned[1] = { 3 }, extra[1] = { 9 };
    struct packfile_writer *w = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s", tmp("amx.mxpk"));
    CHECK(packfile_writer_begin(atomic_file_create(path), &info, pinned, extra, 1, &w) == PACKFILE_OK);
    int8_t *codes[2][3];
    float *scales[2][3];
    for (int e = 0; e < 2 && w; e++) {
        int key = e ? extra[0] : pinned[0];
        const struct moe_layer_desc *L = &m->moe.layers[key / hp->n_expert];
        const struct matrix *mats[3] = { &L->gate, &L->up, &L->down };
        for (int i = 0; i < 3; i++) {
            int k = i < 2 ? K : N, n = i < 2 ? N : K;
            codes[e][i] = malloc(pack_bytes(PACK_AMX, k, n));
            scales[e][i] = malloc(sizeof(float) * (size_t)n);
            const char *src = (const char *)mats[i]->data + (size_t)(key % hp->n_expert) * n * mats[i]->row_bytes;
            CHECK(pack_matrix(NULL, PACK_PATH_BEST, mats[i]->type, src, k, n, PACK_AMX, codes[e][i], scales[e][i]) ==
                  PACK_OK);
            CHECK(packfile_writer_add(w, key / hp->n_expert, key % hp->n_expert, (enum packfile_matrix)i, codes[e][i],
                                      scales[e][i]) == PACKFILE_OK);
        }
    }
    CHECK(packfile_writer_finish(w) == PACKFILE_OK);
    struct packfile *pf = NULL;
    CHECK(packfile_open(path, &pf) == PACKFILE_OK);
    if (pf) {
        CHECK(packfile_info(pf)->layout == PACK_AMX && packfile_verify_data(pf) == PACKFILE_OK);
        CHECK(packfile_has_expert(pf, 0, 3) && packfile_has_expert(pf, 1, 1) && !packfile_has_expert(pf, 0, 4));
        for (int e = 0; e < 2; e++)
            for (int i = 0; i < 3; i++) {
                int key = e ? extra[0] : pinned[0];
                const struct packfile_entry *en =
                    packfile_entry(pf, packfile_find(pf, key / hp->n_expert, key % hp->n_expert, i));
                CHECK(en && memcmp(en->codes, codes[e][i], pack_bytes(PACK_AMX, en->K, en->N)) == 0 &&
                      memcmp(en->scales, scales[e][i], sizeof(float) * (size_t)en->N) == 0);
            }
        /* A cpu device (rows layout) refuses it. */
        CHECK(packfile_check_layout(pf, "cpu", PACK_ROWS, 1, 1, info.slot_values, max_n) == PACKFILE_E_LAYOUT);
        packfile_close(pf);
    }
    /* A code of -128 with checksums that hold: refused when the data is checked. */
    codes[1][2][5] = -128;
    CHECK(packfile_writer_begin(atomic_file_create(path), &info, pinned, extra, 1, &w) == PACKFILE_OK);
    for (int e = 0; e < 2 && w; e++)
        for (int i = 0; i < 3; i++) {
            int key = e ? extra[0] : pinned[0];
            CHECK(packfile_writer_add(w, key / hp->n_expert, key % hp->n_expert, (enum packfile_matrix)i, codes[e][i],
                                      scales[e][i]) == PACKFILE_OK);
        }
    CHECK(packfile_writer_finish(w) == PACKFILE_OK);
    pf = NULL;
    CHECK(packfile_open(path, &pf) == PACKFILE_OK);
    CHECKF(pf && packfile_verify_data(pf) == PACKFILE_E_CORRUPT && strstr(moex_error(), "-128") &&
               strstr(moex_error(), "layer 1 expert 1 down"),
           "%s", moex_error());
    packfile_close(pf);
    for (int e = 0; e < 2; e++)
        for (int i = 0; i < 3; i++) { free(codes[e][i]); free(scales[e][i]); }
    unlink(path);
    model_free(m);
}

/* ---------------------------------------------------------------- refusals */

struct damage {
    const char *what;
    int status;            /* from packfile_open, or after it (data, layout, model) */
    const char *message;   /* a part of moex_error() */
};

/* Opens path the way a run does: structure, layout for the cpu device, the
 * model, then every entry's data. The first refusal. */
static int check_like_a_run(struct model *m, const char *path) {
    struct packfile *pf = NULL;
    int rc = packfile_open(path, &pf);
    if (rc != PACKFILE_OK) return rc;
    const struct model_hparams *hp = &m->hp;
    int64_t sv = (int64_t)hp->n_embd * hp->n_ff_exp;
    int max_n = hp->n_embd > hp->n_ff_exp ? hp->n_embd : hp->n_ff_exp;
    struct packfile_identity id;
    uint32_t types[3] = { m->moe.layers[0].gate.type, m->moe.layers[0].up.type, m->moe.layers[0].down.type };
    rc = packfile_check_layout(pf, "cpu", PACK_ROWS, 1, 1, sv, max_n);
    if (rc == PACKFILE_OK) rc = packfile_model_identity(m->file, &id);
    if (rc == PACKFILE_OK) rc = packfile_check_model(pf, &id, hp->n_layers, hp->n_expert, hp->n_embd, hp->n_ff_exp, types);
    if (rc == PACKFILE_OK) rc = packfile_verify_data(pf);
    packfile_close(pf);
    return rc;
}

static void fix_header_checksum(uint8_t *file) {
    pf_put64(file + PF_H_CHECKSUM, xxh64(file, PF_H_CHECKSUM, 0));
}

static void test_refusals(void) {
    struct model *m = model_load(oracle_path("models/qwen3moe-o1-Q4_K_M.gguf"));
    CHECK(m != NULL);
    if (!m) return;
    char good[4096];
    snprintf(good, sizeof good, "%s", tmp("good.mxpk"));
    struct moe_exec_options o = cpu_options(1.0, NULL);
    CHECK(pack_model(m, &o, false, good) == 0);
    size_t size = 0;
    uint8_t *file = read_whole_file(good, &size);
    CHECK(file && size > PF_HEADER_BYTES);
    if (!file) { model_free(m); return; }
    CHECK(check_like_a_run(m, good) == PACKFILE_OK);
    struct exec_run base = run_model(m, &o);
    CHECK(base.ok);

    uint64_t plan_at = pf_get64(file + PF_H_SECTIONS + 8), index_at = pf_get64(file + PF_H_SECTIONS + 32 + 8);
    uint64_t data_at = pf_get64(file + PF_H_SECTIONS + 64 + 8);
    uint64_t code_stride = pf_get64(file + PF_H_CODE_STRIDE);
    uint32_t n_entries = pf_get32(file + PF_H_N_ENTRIES);
    uint64_t scales_at = (data_at + n_entries * code_stride + PF_ALIGN - 1) / PF_ALIGN * PF_ALIGN;
    struct case_ {
        struct damage d;
        uint64_t flip;     /* byte to flip, or ~0 */
        size_t keep;       /* bytes to keep (truncation), or 0 */
        int patch;         /* 1: the version before; 2: layout AMX with a valid header; 3: the version after */
    } cases[] = {
        { { "a flipped header byte", PACKFILE_E_CHECKSUM, "bad checksum in section header" }, PF_H_BUDGET + 1, 0, 0 },
        { { "a flipped plan byte", PACKFILE_E_CHECKSUM, "bad checksum in section plan" }, plan_at + 2, 0, 0 },
        { { "a flipped index byte", PACKFILE_E_CHECKSUM, "bad checksum in section index" }, index_at + 64 * 5 + 20,
          0, 0 },
        { { "a flipped code byte", PACKFILE_E_CHECKSUM, "bad checksum in section data: layer 0 expert 2 up" },
          data_at + 7 * code_stride + 1000, 0, 0 },
        { { "a flipped scale byte", PACKFILE_E_CHECKSUM, "bad checksum in section data: layer 1 expert 0 down" },
          scales_at + 26 * pf_get32(file + PF_H_SCALE_STRIDE) + 5, 0, 0 },
        { { "a truncated file", PACKFILE_E_TRUNCATED, "truncated" }, ~0ull, size / 2, 0 },
        { { "a truncated header", PACKFILE_E_TRUNCATED, "shorter than the 512-byte header" }, ~0ull, 100, 0 },
        { { "an older version", PACKFILE_E_VERSION, "pack file version 2; this moex reads version 3" }, ~0ull, 0, 1 },
        { { "a newer version", PACKFILE_E_VERSION, "pack file version 4" }, ~0ull, 0, 3 },
        { { "another device layout", PACKFILE_E_LAYOUT, "packed for device cpu (layout amx" }, ~0ull, 0, 2 },
    };
    int seen_status[16] = { 0 };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const struct case_ *c = &cases[i];
        uint8_t *copy = malloc(size);
        memcpy(copy, file, size);
        size_t n = c->keep ? c->keep : size;
        if (c->flip != ~0ull) copy[c->flip] ^= 0x10;
        if (c->patch == 1 || c->patch == 3) pf_put32(copy + PF_H_VERSION, c->patch == 1 ? PF_VERSION - 1 : PF_VERSION + 1);
        if (c->patch == 2) {
            pf_put32(copy + PF_H_LAYOUT, PACK_AMX);
            fix_header_checksum(copy);
        }
        char path[4096];
        snprintf(path, sizeof path, "%s", tmp("bad.mxpk"));
        CHECK(write_file(path, copy, n) == 0);
        int rc = check_like_a_run(m, path);
        CHECKF(rc == c->d.status && strstr(moex_error(), c->d.message), "%s: status %d, message: %s", c->d.what, rc,
               moex_error());
        seen_status[-rc]++;
        /* A run with the file: refused, the same numbers as without it. */
        struct moe_exec_options with = cpu_options(1.0, path);
        struct exec_run r = run_model(m, &with);
        CHECKF(r.report.status == c->d.status && strstr(r.report.message, c->d.message), "%s: run reports %d: %s",
               c->d.what, r.report.status, r.report.message);
        CHECKF(same_run(m, &base, &r), "%s: a run with the refused file computes other numbers", c->d.what);
        free(r.logits);
        free(copy);
        unlink(path);
    }
    CHECK(seen_status[-PACKFILE_E_CHECKSUM] == 5 && seen_status[-PACKFILE_E_TRUNCATED] == 2 &&
          seen_status[-PACKFILE_E_VERSION] == 2 && seen_status[-PACKFILE_E_LAYOUT] == 1);

    /* Not a pack file at all. */
    CHECK(check_like_a_run(m, oracle_path("models/qwen3moe-o1-Q4_K_M.gguf")) == PACKFILE_E_NOT_PACK &&
          strstr(moex_error(), "not a moex pack file"));
    CHECK(check_like_a_run(m, tmp("missing.mxpk")) == PACKFILE_E_IO && strstr(moex_error(), "cannot open"));

    /* Another model: same shape, other types (the Q8_0 oracle model). */
    struct model *q8 = model_load(oracle_path("models/qwen3moe-o1-Q8_0.gguf"));
    CHECK(q8 != NULL);
    if (q8) {
        int rc = check_like_a_run(q8, good);
        CHECKF(rc == PACKFILE_E_MODEL && strstr(moex_error(), "packed from another model"), "%d: %s", rc, moex_error());
        struct moe_exec_options with = cpu_options(1.0, good);
        struct exec_run a = run_model(q8, &o), b = run_model(q8, &with);
        CHECK(b.report.status == PACKFILE_E_MODEL && same_run(q8, &a, &b));
        free(a.logits);
        free(b.logits);
        model_free(q8);
    }
    /* Another model: same shape and types, other weights (synth seeds). */
    struct synth_params p;
    synth_preset("tiny", &p);
    p.n_threads = 2;
    CHECK(synth_write(&p, tmp("seed1.gguf")) == 0);
    p.seed = 2;
    CHECK(synth_write(&p, tmp("seed2.gguf")) == 0);
    struct model *s1 = model_load(tmp("seed1.gguf")), *s2 = model_load(tmp("seed2.gguf"));
    CHECK(s1 && s2);
    if (s1 && s2) {
        CHECK(pack_model(s1, &o, false, tmp("seed1.mxpk")) == 0);
        CHECK(check_like_a_run(s1, tmp("seed1.mxpk")) == PACKFILE_OK);
        CHECK(check_like_a_run(s2, tmp("seed1.mxpk")) == PACKFILE_E_MODEL &&
              strstr(moex_error(), "packed from another model file"));
        struct moe_exec_options with = cpu_options(1.0, tmp("seed1.mxpk"));
        struct exec_run a = run_model(s2, &o), b = run_model(s2, &with);
        CHECK(b.report.status == PACKFILE_E_MODEL && same_run(s2, &a, &b));
        free(a.logits);
        free(b.logits);
    }
    model_free(s1);
    model_free(s2);
    unlink(tmp("seed1.gguf"));
    unlink(tmp("seed2.gguf"));
    unlink(tmp("seed1.mxpk"));

    /* Any single flipped byte: refused, or (padding) the same weights. */
    struct packfile *orig = NULL;
    CHECK(packfile_open(good, &orig) == PACKFILE_OK);
    uint64_t state = 0x9E3779B97F4A7C15ull;
    int refused = 0, harmless = 0, wrong = 0;
    for (int t = 0; t < 300 && orig; t++) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        size_t at = (size_t)(state % size);
        uint8_t *copy = malloc(size);
        memcpy(copy, file, size);
        copy[at] ^= (uint8_t)(1u << (state >> 60 & 7));
        struct packfile *pf = NULL;
        if (packfile_open_memory(copy, size, "flip", &pf) != PACKFILE_OK || packfile_verify_data(pf) != PACKFILE_OK) {
            refused++;
        } else {
            bool same = packfile_info(pf)->n_entries == packfile_info(orig)->n_entries;
            for (int i = 0; same && i < packfile_info(pf)->n_entries; i++) {
                const struct packfile_entry *x = packfile_entry(pf, i), *y = packfile_entry(orig, i);
                same = x->layer == y->layer && x->expert == y->expert && x->matrix == y->matrix &&
                       memcmp(x->codes, y->codes, pack_bytes(PACK_ROWS, x->K, x->N)) == 0 &&
                       memcmp(x->scales, y->scales, sizeof(float) * (size_t)x->N) == 0;
            }
            if (same) harmless++;
            else wrong++;
            if (!same) fprintf(stderr, "a flip at byte %zu is accepted with other weights\n", at);
        }
        packfile_close(pf);
        free(copy);
    }
    printf("random single-byte flips: %d refused, %d in padding (same weights)\n", refused, harmless);
    CHECKF(wrong == 0 && refused > 100, "random flips: %d refused, %d in padding, %d accepted with other weights",
           refused, harmless, wrong);
    packfile_close(orig);
    free(base.logits);
    free(file);
    unlink(good);
    model_free(m);
}

/* ---------------------------------------------------------------- plans and admissions */

/* A budget the file's plan was not made for: the run plans anew and its
 * admissions load from a file holding every expert. */
static void test_admissions_load(void) {
    struct model *m = model_load(oracle_path("models/qwen3moe-o1-Q4_K_M.gguf"));
    CHECK(m != NULL);
    if (!m) return;
    char path[4096];
    snprintf(path, sizeof path, "%s", tmp("all.mxpk"));
    struct moe_exec_options o = cpu_options(1.0, NULL);
    CHECK(pack_model(m, &o, true, path) == 0);
    /* A slow CPU (by decree) makes prefill admit experts. */
    struct moe_exec_options live = cpu_options(0.5, NULL), from_file = cpu_options(0.5, path);
    live.cpu_row_ns = from_file.cpu_row_ns = 1e9;
    struct exec_run a = run_model(m, &live), b = run_model(m, &from_file);
    CHECK(same_run(m, &a, &b));
    CHECKF(b.report.status == PACKFILE_OK && !b.report.plan_used && strstr(b.report.message, "planned anew"), "%s",
           b.report.message);
    CHECKF(a.pre.admissions > 0 && a.pre.packs == a.pre.admissions && a.pre.loads == 0, "admissions %llu",
           (unsigned long long)a.pre.admissions);
    CHECKF(b.pre.admissions == a.pre.admissions && b.pre.loads == b.pre.admissions && b.pre.packs == 0,
           "loads %llu packs %llu", (unsigned long long)b.pre.loads, (unsigned long long)b.pre.packs);
    CHECK(b.pre.load_ns > 0);
    free(a.logits);
    free(b.logits);
    /* A budget that pins nothing without statistics cannot be packed, unless all. */
    struct moe_exec_options half = cpu_options(0.5, NULL);
    struct moe_pack_result r;
    CHECK(moe_pack_experts(&m->moe, &half, pool, false, atomic_file_create(tmp("none.mxpk")), NULL, NULL, NULL, NULL, &r) == -1 &&
          strstr(moex_error(), "pins no expert"));
    struct stat st;
    CHECK(stat(tmp("none.mxpk"), &st) != 0);
    unlink(path);
    model_free(m);
}

/* ---------------------------------------------------------------- the device side */

static void test_dev_load(void) {
    struct dev *d = NULL;
    CHECK(dev_open("sim", NULL, &d) == DEV_OK);
    if (!d) return;
    int K = 256, N = 128;
    CHECK(dev_pool_alloc(d, 4, (int64_t)K * N, 256) == DEV_OK);
    int8_t *codes = malloc((size_t)K * N);
    float scales[128];
    for (int i = 0; i < K * N; i++) codes[i] = (int8_t)(i % 255 - 127);
    for (int n = 0; n < N; n++) scales[n] = 0.01f * (float)(n + 1);
    struct host_slot h;
    CHECK(dev_slot_read(d, 0, &h) == DEV_E_STATE);
    CHECK(dev_load_packed(d, 0, PACK_AMX, codes, scales, K, N) == DEV_E_LAYOUT);
    scales[3] = NAN;
    CHECK(dev_load_packed(d, 0, PACK_ROWS, codes, scales, K, N) == DEV_E_VALUE);
    scales[3] = 0.04f;
    /* -128 is outside the format's -127..127. */
    codes[K * N - 1] = -128;
    CHECK(dev_load_packed(d, 0, PACK_ROWS, codes, scales, K, N) == DEV_E_VALUE && strstr(moex_error(), "-128"));
    codes[K * N - 1] = 127;
    CHECK(dev_load_packed(d, 9, PACK_ROWS, codes, scales, K, N) == DEV_E_ARG);
    struct sim *sim = dev_sim(d);
    uint64_t clock0 = sim_clock_ns(sim);
    CHECK(dev_load_packed(d, 1, PACK_ROWS, codes, scales, K, N) == DEV_OK);
    CHECK(dev_slot_read(d, 1, &h) == DEV_OK && h.K == K && h.N == N && memcmp(h.codes, codes, (size_t)K * N) == 0 &&
          memcmp(h.scales, scales, sizeof scales) == 0);
    host_slot_free(&h);
    struct dev_counters dc;
    dev_get_counters(d, &dc);
    /* The NPU model charges the DMA fill of the bytes on its clock. */
    uint64_t bytes = (uint64_t)K * N + sizeof scales;
    CHECK(dc.loads == 1 && dc.load_bytes == bytes && dc.failed_packs == 4);
    CHECK(dc.load_ns == (uint64_t)sim_fill_ns(sim, bytes) && sim_clock_ns(sim) - clock0 == dc.load_ns);
    CHECK(dev_import_codes(d, 0, 1, -1, 0) == DEV_E_ARG);
    free(codes);
    dev_close(d);
}

/* A file's codes reach slots without a copy where the device computes from
 * host pages (cpu), and are read into the device's memory where it cannot
 * (sim); either way the slots then hold the file's bytes. */
static void test_dev_import(void) {
    const int K = 256, N = 128; /* a slot of 32 KiB: whole pages */
    const char *path = tmp("import.bin");
    int8_t *file = malloc((size_t)2 * K * N);
    for (int i = 0; i < 2 * K * N; i++) file[i] = (int8_t)(i * 7 % 255 - 127);
    CHECK(write_file(path, (const uint8_t *)file, (size_t)2 * K * N) == 0);
    float scales[128];
    for (int n = 0; n < N; n++) scales[n] = 0.5f;
    static const char *names[] = { "cpu", "sim" };
    for (int i = 0; i < 2; i++) {
        struct dev *d = NULL;
        CHECK(dev_open(names[i], NULL, &d) == DEV_OK);
        if (!d) continue;
        CHECK(dev_pool_alloc(d, 2, (int64_t)K * N, N) == DEV_OK && dev_slot_code_stride(d) == (size_t)K * N);
        int fd = open(path, O_RDONLY);
        CHECK(fd >= 0 && dev_import_codes(d, 0, 2, fd, 0) == DEV_OK);
        if (fd >= 0) close(fd);
        CHECK(dev_load_packed(d, 1, PACK_ROWS, NULL, scales, K, N) == DEV_OK);
        struct host_slot h;
        CHECK(dev_slot_read(d, 1, &h) == DEV_OK && h.code_bytes == (size_t)K * N &&
              memcmp(h.codes, file + (size_t)K * N, (size_t)K * N) == 0);
        host_slot_free(&h);
        struct dev_counters c;
        dev_get_counters(d, &c);
        bool zero_copy = dev_caps(d)->maps_host_pages;
        CHECK(zero_copy == (i == 0));
        CHECKF(c.imported_bytes == (zero_copy ? (uint64_t)2 * K * N : 0) && c.upload_bytes == (zero_copy ? 0 : (uint64_t)2 * K * N),
               "%s: imported %llu bytes, uploaded %llu", names[i], (unsigned long long)c.imported_bytes,
               (unsigned long long)c.upload_bytes);
        if (zero_copy) CHECK(dev_import_codes(d, 0, 1, 0, 100) == DEV_E_ARG); /* mapping needs page-aligned offsets */
        dev_close(d);
    }
    unlink(path);
    free(file);
}

int main(void) {
    pool = threadpool_new(2, false);
    test_xxh64();
    test_dev_load();
    test_dev_import();
    test_round_trips();
    test_amx_layout_file();
    test_refusals();
    test_admissions_load();
    threadpool_free(pool);
    return test_finish();
}
