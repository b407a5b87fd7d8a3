/* GGUF writer -> reader round trips (every metadata type, tensors of several
 * types and alignments, streamed in odd chunks), the typed getters, the
 * info printer, and the facts of the oracle models and tokenizer file. */
#include "harness.h"
#include "gguf/gguf.h"
#include "gguf/gguf_types.h"
#include "quant/quant.h"
#include "core/error.h"

#include <glob.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint8_t pattern_byte(uint64_t tensor, uint64_t i) {
    return (uint8_t)((i * 131 + tensor * 17 + (i >> 8)) & 0xff);
}

/* The arrays written by write_sample, kept to compare against. */
static const uint8_t arr_u8[] = {0, 1, 255};
static const int8_t arr_i8[] = {-128, 0, 127};
static const uint16_t arr_u16[] = {0, 65535, 1234};
static const int16_t arr_i16[] = {-32768, 32767, -1};
static const uint32_t arr_u32[] = {0, 4294967295u, 77};
static const int32_t arr_i32[] = {INT32_MIN, INT32_MAX, -5};
static const float arr_f32[] = {1.5f, -0.0f, 3.25e-20f, INFINITY};
static const bool arr_bool[] = {true, false, true, true};
static const uint64_t arr_u64[] = {UINT64_MAX, 0, 1ull << 40};
static const int64_t arr_i64[] = {INT64_MIN, INT64_MAX, -7};
static const double arr_f64[] = {3.141592653589793, -1e300, 5e-324};
static const char *const arr_str[] = {"alpha", "", "with\nnewline", "ünïcödé"};

struct sample_tensor {
    const char *name;
    uint32_t type;
    int n_dims;
    int64_t ne[4];
    uint64_t nbytes;
};

static const struct sample_tensor sample_tensors[] = {
    {"a.f32", 0, 1, {7, 1, 1, 1}, 28},
    {"b.f16", 1, 2, {3, 5, 1, 1}, 30},
    {"c.q8_0", 8, 2, {64, 3, 1, 1}, 2 * 34 * 3},
    {"d.q4_k", 12, 3, {256, 2, 2, 1}, 144 * 4},
    {"e.bf16", 30, 4, {2, 3, 1, 2}, 24},
    {"f.i8", 24, 1, {1, 1, 1, 1}, 1},
};
#define N_SAMPLE_TENSORS (sizeof sample_tensors / sizeof sample_tensors[0])

/* Writes a file with every metadata type and the sample tensors; alignment 0
 * leaves general.alignment unset. Data goes in chunks of chunk bytes. */
static int write_sample(const char *path, uint32_t alignment, size_t chunk) {
    struct gguf_writer *w = gguf_writer_new();
    if (!w) return -1;
    gguf_set_str(w, "general.architecture", "testarch");
    if (alignment) gguf_set_u32(w, "general.alignment", alignment);
    gguf_set_u8(w, "s.u8", 200);
    gguf_set_i8(w, "s.i8", -100);
    gguf_set_u16(w, "s.u16", 60000);
    gguf_set_i16(w, "s.i16", -30000);
    gguf_set_u32(w, "s.u32", 4000000000u);
    gguf_set_i32(w, "s.i32", -2000000000);
    gguf_set_u64(w, "s.u64", UINT64_MAX - 1);
    gguf_set_i64(w, "s.i64", INT64_MIN + 1);
    gguf_set_f32(w, "s.f32", 0.1f);
    gguf_set_f64(w, "s.f64", 0.1);
    gguf_set_bool(w, "s.true", true);
    gguf_set_bool(w, "s.false", false);
    gguf_set_str(w, "s.str", "hello, gguf");
    gguf_set_str(w, "s.empty", "");
    gguf_set_str(w, "s.odd", "x"); /* puts the next array at an odd address */
    gguf_set_arr(w, "a.u8", GGUF_U8, arr_u8, 3);
    gguf_set_arr(w, "a.i8", GGUF_I8, arr_i8, 3);
    gguf_set_arr(w, "a.u16", GGUF_U16, arr_u16, 3);
    gguf_set_arr(w, "a.i16", GGUF_I16, arr_i16, 3);
    gguf_set_arr(w, "a.u32", GGUF_U32, arr_u32, 3);
    gguf_set_arr(w, "a.i32", GGUF_I32, arr_i32, 3);
    gguf_set_arr(w, "a.f32", GGUF_F32, arr_f32, 4);
    gguf_set_arr(w, "a.bool", GGUF_BOOL, arr_bool, 4);
    gguf_set_arr(w, "a.u64", GGUF_U64, arr_u64, 3);
    gguf_set_arr(w, "a.i64", GGUF_I64, arr_i64, 3);
    gguf_set_arr(w, "a.f64", GGUF_F64, arr_f64, 3);
    gguf_set_arr_str(w, "a.str", arr_str, 4);
    gguf_set_arr(w, "a.empty_u32", GGUF_U32, NULL, 0);
    gguf_set_arr_str(w, "a.empty_str", NULL, 0);
    gguf_set_u32(w, "s.replaced", 1);
    gguf_set_u32(w, "s.replaced", 2); /* same key again replaces the value */
    for (size_t i = 0; i < N_SAMPLE_TENSORS; i++) {
        const struct sample_tensor *t = &sample_tensors[i];
        if (gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne)) goto fail;
    }
    if (gguf_writer_begin(w, path)) goto fail;
    /* All tensors' bytes as one stream, cut into chunks that straddle tensors. */
    uint64_t total = 0;
    for (size_t i = 0; i < N_SAMPLE_TENSORS; i++) total += sample_tensors[i].nbytes;
    uint8_t *all = malloc(total);
    uint64_t at = 0;
    for (size_t i = 0; i < N_SAMPLE_TENSORS; i++)
        for (uint64_t j = 0; j < sample_tensors[i].nbytes; j++) all[at++] = pattern_byte(i, j);
    for (uint64_t pos = 0; pos < total;) {
        size_t n = total - pos < chunk ? (size_t)(total - pos) : chunk;
        if (gguf_writer_write_data(w, all + pos, n)) { free(all); goto fail; }
        pos += n;
    }
    free(all);
    if (gguf_writer_finish(w)) goto fail;
    gguf_writer_free(w);
    return 0;
fail:
    gguf_writer_free(w);
    return -1;
}

static bool str_is(struct gguf_str s, const char *want) {
    return s.len == strlen(want) && memcmp(s.data, want, s.len) == 0;
}

static void check_array(const struct gguf_file *f, const char *key, enum gguf_vtype type,
                        const void *want, uint64_t n) {
    const struct gguf_kv *kv = gguf_find_kv(f, key);
    CHECKF(kv && kv->type == GGUF_ARRAY && kv->array_type == type && kv->array_len == n, "%s", key);
    if (!kv || kv->array_len != n) return;
    size_t elem = gguf_vtype_size(type);
    CHECKF(n == 0 || (uintptr_t)kv->array_data % elem == 0, "%s is not aligned for its elements", key);
    CHECKF(n == 0 || memcmp(kv->array_data, want, n * elem) == 0, "%s values differ", key);
}

static void check_sample(const struct gguf_file *f, uint64_t want_alignment) {
    CHECK(f->version == 3);
    CHECK(f->alignment == want_alignment);
    CHECK(f->data_offset % want_alignment == 0);
    CHECK(f->n_tensors == N_SAMPLE_TENSORS);
    const struct gguf_kv *kv;
    kv = gguf_find_kv(f, "s.u8");    CHECK(kv && kv->type == GGUF_U8 && kv->v.u64 == 200);
    kv = gguf_find_kv(f, "s.i8");    CHECK(kv && kv->type == GGUF_I8 && kv->v.i64 == -100);
    kv = gguf_find_kv(f, "s.u16");   CHECK(kv && kv->type == GGUF_U16 && kv->v.u64 == 60000);
    kv = gguf_find_kv(f, "s.i16");   CHECK(kv && kv->type == GGUF_I16 && kv->v.i64 == -30000);
    kv = gguf_find_kv(f, "s.u32");   CHECK(kv && kv->type == GGUF_U32 && kv->v.u64 == 4000000000u);
    kv = gguf_find_kv(f, "s.i32");   CHECK(kv && kv->type == GGUF_I32 && kv->v.i64 == -2000000000);
    kv = gguf_find_kv(f, "s.u64");   CHECK(kv && kv->type == GGUF_U64 && kv->v.u64 == UINT64_MAX - 1);
    kv = gguf_find_kv(f, "s.i64");   CHECK(kv && kv->type == GGUF_I64 && kv->v.i64 == INT64_MIN + 1);
    kv = gguf_find_kv(f, "s.f32");   CHECK(kv && kv->type == GGUF_F32 && kv->v.f64 == (double)0.1f);
    kv = gguf_find_kv(f, "s.f64");   CHECK(kv && kv->type == GGUF_F64 && kv->v.f64 == 0.1);
    kv = gguf_find_kv(f, "s.true");  CHECK(kv && kv->type == GGUF_BOOL && kv->v.b == true);
    kv = gguf_find_kv(f, "s.false"); CHECK(kv && kv->type == GGUF_BOOL && kv->v.b == false);
    kv = gguf_find_kv(f, "s.str");   CHECK(kv && kv->type == GGUF_STRING && str_is(kv->v.str, "hello, gguf"));
    kv = gguf_find_kv(f, "s.empty"); CHECK(kv && kv->type == GGUF_STRING && kv->v.str.len == 0);
    kv = gguf_find_kv(f, "s.replaced"); CHECK(kv && kv->v.u64 == 2);
    CHECK(gguf_find_kv(f, "s.missing") == NULL);
    check_array(f, "a.u8", GGUF_U8, arr_u8, 3);
    check_array(f, "a.i8", GGUF_I8, arr_i8, 3);
    check_array(f, "a.u16", GGUF_U16, arr_u16, 3);
    check_array(f, "a.i16", GGUF_I16, arr_i16, 3);
    check_array(f, "a.u32", GGUF_U32, arr_u32, 3);
    check_array(f, "a.i32", GGUF_I32, arr_i32, 3);
    check_array(f, "a.f32", GGUF_F32, arr_f32, 4);
    check_array(f, "a.bool", GGUF_BOOL, arr_bool, 4);
    check_array(f, "a.u64", GGUF_U64, arr_u64, 3);
    check_array(f, "a.i64", GGUF_I64, arr_i64, 3);
    check_array(f, "a.f64", GGUF_F64, arr_f64, 3);
    check_array(f, "a.empty_u32", GGUF_U32, NULL, 0);
    kv = gguf_find_kv(f, "a.str");
    CHECK(kv && kv->type == GGUF_ARRAY && kv->array_type == GGUF_STRING && kv->array_len == 4);
    if (kv && kv->array_len == 4)
        for (int i = 0; i < 4; i++) CHECKF(str_is(kv->array_strs[i], arr_str[i]), "a.str[%d]", i);
    kv = gguf_find_kv(f, "a.empty_str");
    CHECK(kv && kv->type == GGUF_ARRAY && kv->array_type == GGUF_STRING && kv->array_len == 0);

    for (size_t i = 0; i < N_SAMPLE_TENSORS; i++) {
        const struct sample_tensor *want = &sample_tensors[i];
        const struct gguf_tensor *t = gguf_find_tensor(f, want->name);
        CHECKF(t == &f->tensors[i], "tensor %s in declaration order", want->name);
        if (!t) continue;
        CHECK(t->type == want->type && t->n_dims == want->n_dims && t->nbytes == want->nbytes);
        for (int d = 0; d < 4; d++) CHECK(t->ne[d] == want->ne[d]);
        CHECKF(t->offset % want_alignment == 0, "%s offset %llu", want->name, (unsigned long long)t->offset);
        CHECK((const uint8_t *)t->data == f->map + f->data_offset + t->offset);
        CHECK((uint64_t)((const uint8_t *)t->data - f->map) % want_alignment == 0);
        uint64_t bad = 0;
        for (uint64_t j = 0; j < t->nbytes; j++) bad += ((const uint8_t *)t->data)[j] != pattern_byte(i, j);
        CHECKF(bad == 0, "%s: %llu bytes differ", want->name, (unsigned long long)bad);
    }
    CHECK(gguf_find_tensor(f, "missing") == NULL);
}

static void test_round_trip(void) {
    static const struct { uint32_t alignment, want; size_t chunk; } cases[] = {
        {0, 32, 1}, {32, 32, 7}, {64, 64, 1000}, {1, 1, 13}, {256, 256, 1 << 20},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/round-%zu.gguf", test_tmpdir(), c);
        CHECKF(write_sample(path, cases[c].alignment, cases[c].chunk) == 0, "write: %s", moex_error());
        struct gguf_file *f = gguf_open(path);
        CHECKF(f != NULL, "open: %s", moex_error());
        if (f) {
            check_sample(f, cases[c].want);
            CHECK(f->file_size % cases[c].want == 0); /* padded after the last tensor too */
            gguf_close(f);
        }
        /* The same bytes through the memory reader. */
        size_t size = 0;
        uint8_t *bytes = read_whole_file(path, &size);
        CHECK(bytes != NULL);
        f = gguf_open_memory(bytes, size, "mem.gguf");
        CHECKF(f != NULL, "open_memory: %s", moex_error());
        if (f) { check_sample(f, cases[c].want); gguf_close(f); }
        /* Version 2 has the same layout. */
        bytes[4] = 2;
        f = gguf_open_memory(bytes, size, "v2.gguf");
        CHECKF(f && f->version == 2, "v2: %s", moex_error());
        gguf_close(f);
        free(bytes);
    }
}

/* gguf_copy_kv of every key, plus the tensors, reproduces the file. */
static void test_copy(void) {
    char src[4200], dst[4200];
    snprintf(src, sizeof src, "%s/copy-src.gguf", test_tmpdir());
    snprintf(dst, sizeof dst, "%s/copy-dst.gguf", test_tmpdir());
    CHECK(write_sample(src, 64, 100) == 0);
    struct gguf_file *f = gguf_open(src);
    CHECK(f != NULL);
    if (!f) return;
    struct gguf_writer *w = gguf_writer_new();
    for (uint64_t i = 0; i < f->n_kv; i++) gguf_copy_kv(w, &f->kv[i]);
    for (uint64_t i = 0; i < f->n_tensors; i++)
        CHECK(gguf_add_tensor(w, f->tensors[i].name, f->tensors[i].type, f->tensors[i].n_dims, f->tensors[i].ne) == 0);
    CHECK(gguf_writer_begin(w, dst) == 0);
    for (uint64_t i = 0; i < f->n_tensors; i++)
        CHECK(gguf_writer_write_data(w, f->tensors[i].data, f->tensors[i].nbytes) == 0);
    CHECK(gguf_writer_finish(w) == 0);
    gguf_writer_free(w);
    size_t a_size = 0, b_size = 0;
    uint8_t *a = read_whole_file(src, &a_size), *b = read_whole_file(dst, &b_size);
    CHECK(a && b && a_size == b_size && memcmp(a, b, a_size) == 0);
    free(a);
    free(b);
    gguf_close(f);
}

static void test_writer_errors(void) {
    char path[4200];
    snprintf(path, sizeof path, "%s/werr.gguf", test_tmpdir());
    const int64_t ne[2] = {32, 2};
    struct gguf_writer *w = gguf_writer_new();
    CHECK(gguf_add_tensor(w, "t", 8, 2, ne) == 0);
    CHECK(gguf_add_tensor(w, "t", 8, 2, ne) == -1 && strstr(moex_error(), "duplicate"));
    CHECK(gguf_add_tensor(w, "u", 99, 2, ne) == -1 && strstr(moex_error(), "unknown tensor type"));
    CHECK(gguf_add_tensor(w, "u", 31, 2, ne) == -1);
    CHECK(gguf_add_tensor(w, "u", 12, 2, ne) == -1 && strstr(moex_error(), "block size"));
    CHECK(gguf_add_tensor(w, "u", 0, 5, ne) == -1);
    CHECK(gguf_add_tensor(w, "", 0, 1, ne) == -1);
    const int64_t bad_ne[1] = {0};
    CHECK(gguf_add_tensor(w, "u", 0, 1, bad_ne) == -1);
    CHECK(gguf_writer_begin(w, path) == 0);
    uint8_t bytes[68] = {0};
    CHECK(gguf_writer_write_data(w, bytes, 10) == 0);
    CHECK(gguf_writer_finish(w) == -1 && strstr(moex_error(), "got 10 of its 68 bytes"));
    gguf_writer_free(w);

    w = gguf_writer_new();
    CHECK(gguf_add_tensor(w, "t", 8, 2, ne) == 0);
    CHECK(gguf_writer_begin(w, path) == 0);
    CHECK(gguf_writer_write_data(w, bytes, 68) == 0);
    CHECK(gguf_writer_write_data(w, bytes, 1) == -1 && strstr(moex_error(), "beyond"));
    gguf_writer_free(w);

    static const uint32_t bad_alignments[] = {0, 3, 48};
    for (int i = 0; i < 3; i++) {
        w = gguf_writer_new();
        gguf_set_u32(w, "general.alignment", bad_alignments[i]);
        CHECK(gguf_writer_begin(w, path) == -1 && strstr(moex_error(), "power of two"));
        gguf_writer_free(w);
    }
    w = gguf_writer_new();
    gguf_set_arr(w, "k", GGUF_STRING, NULL, 0);
    CHECK(gguf_writer_begin(w, path) == -1 && strstr(moex_error(), "fixed-size"));
    gguf_writer_free(w);
    w = gguf_writer_new();
    gguf_set_u32(w, "", 1);
    CHECK(gguf_writer_begin(w, path) == -1 && strstr(moex_error(), "empty key"));
    gguf_writer_free(w);
    w = gguf_writer_new();
    char nodir[4300];
    snprintf(nodir, sizeof nodir, "%s/no/such/dir.gguf", test_tmpdir());
    CHECK(gguf_writer_begin(w, nodir) == -1 && strstr(moex_error(), "cannot create"));
    gguf_writer_free(w);
}

static void test_getters(void) {
    char path[4200];
    snprintf(path, sizeof path, "%s/getters.gguf", test_tmpdir());
    struct gguf_writer *w = gguf_writer_new();
    gguf_set_u8(w, "u8", 7);
    gguf_set_i32(w, "neg", -3);
    gguf_set_i64(w, "pos64", 5);
    gguf_set_u64(w, "big", 1ull << 40);
    gguf_set_f64(w, "f64", 2.5);
    gguf_set_u32(w, "u32", 9);
    gguf_set_bool(w, "b", true);
    gguf_set_str(w, "s", "text");
    CHECK(gguf_writer_begin(w, path) == 0 && gguf_writer_finish(w) == 0);
    gguf_writer_free(w);
    struct gguf_file *f = gguf_open(path);
    CHECK(f != NULL);
    if (!f) return;
    CHECK(f->n_tensors == 0);
    uint32_t u32 = 0;
    uint64_t u64 = 0;
    float f32 = 0;
    bool b = false;
    CHECK(gguf_get_u32(f, "u8", &u32) == 0 && u32 == 7);
    CHECK(gguf_get_u32(f, "pos64", &u32) == 0 && u32 == 5);
    CHECK(gguf_get_u32(f, "neg", &u32) == -1 && strstr(moex_error(), "negative"));
    CHECK(gguf_get_u32(f, "big", &u32) == -1 && strstr(moex_error(), "32 bits"));
    CHECK(gguf_get_u64(f, "big", &u64) == 0 && u64 == 1ull << 40);
    CHECK(gguf_get_u32(f, "s", &u32) == -1 && strstr(moex_error(), "not an integer"));
    CHECK(gguf_get_u32(f, "missing", &u32) == -1 && strstr(moex_error(), "not found"));
    CHECK(gguf_get_f32(f, "f64", &f32) == 0 && f32 == 2.5f);
    CHECK(gguf_get_f32(f, "u32", &f32) == 0 && f32 == 9.0f);
    CHECK(gguf_get_f32(f, "s", &f32) == -1);
    CHECK(gguf_get_bool(f, "b", &b) == 0 && b);
    CHECK(gguf_get_bool(f, "u8", &b) == -1);
    char *s = gguf_get_str(f, "s");
    CHECK(s && strcmp(s, "text") == 0);
    free(s);
    CHECK(gguf_get_str(f, "u8") == NULL);
    CHECK(gguf_get_str(f, "missing") == NULL);
    CHECK(strcmp(gguf_vtype_name(GGUF_F64), "f64") == 0 && strcmp(gguf_vtype_name((enum gguf_vtype)99), "?") == 0);
    CHECK(strcmp(gguf_type_name(12), "Q4_K") == 0 && strcmp(gguf_type_name(23), "IQ4_XS") == 0);
    CHECK(strcmp(gguf_type_name(1000), "?") == 0);
    gguf_close(f);
}

/* The reader's private type table agrees with src/quant on every type both
 * know, so validation and computation never disagree on a tensor's size. */
static void test_type_table(void) {
    for (uint32_t t = 0; t < QT_MAX; t++) {
        const struct gguf_type_desc *d = gguf_type_desc(t);
        CHECKF(d != NULL, "type %u missing", t);
        const char *qname = quant_type_name((enum qtype)t);
        if (d && strcmp(qname, "?") != 0) CHECKF(strcmp(qname, d->name) == 0, "type %u: %s vs %s", t, qname, d->name);
        const struct qtype_traits *q = quant_traits((enum qtype)t);
        if (!q || !d) continue;
        CHECKF(q->block_size == d->block_size && q->type_size == (size_t)d->type_size, "type %u (%s) layout", t, d->name);
        CHECK(quant_row_size((enum qtype)t, 4096) == (size_t)(4096 / d->block_size * d->type_size));
    }
    CHECK(gguf_type_desc(QT_MAX) == NULL);
}

/* Runs gguf_print_info into a string. */
static char *info_text(const struct gguf_file *f, bool all) {
    FILE *tmp = tmpfile();
    if (!tmp) return NULL;
    int rc = gguf_print_info(tmp, f, all);
    long n = ftell(tmp);
    rewind(tmp);
    char *text = calloc(1, (size_t)n + 1);
    if (text && fread(text, 1, (size_t)n, tmp) != (size_t)n) text[0] = 0;
    fclose(tmp);
    CHECK(rc == 0);
    return text;
}

static void check_model(const char *path, uint32_t want_gate_type, uint32_t want_file_type) {
    struct gguf_file *f = gguf_open(path);
    CHECKF(f != NULL, "%s", moex_error());
    if (!f) return;
    uint32_t v = 0;
    char *arch = gguf_get_str(f, "general.architecture");
    CHECKF(arch && strcmp(arch, "qwen3moe") == 0, "%s: arch", path);
    free(arch);
    CHECK(f->version == 3 && f->alignment == 32 && f->n_tensors == 27);
    CHECK(gguf_get_u32(f, "qwen3moe.block_count", &v) == 0 && v == 2);
    CHECK(gguf_get_u32(f, "qwen3moe.embedding_length", &v) == 0 && v == 256);
    CHECK(gguf_get_u32(f, "qwen3moe.attention.head_count", &v) == 0 && v == 4);
    CHECK(gguf_get_u32(f, "qwen3moe.attention.head_count_kv", &v) == 0 && v == 2);
    CHECK(gguf_get_u32(f, "qwen3moe.attention.key_length", &v) == 0 && v == 64);
    CHECK(gguf_get_u32(f, "qwen3moe.expert_count", &v) == 0 && v == 8);
    CHECK(gguf_get_u32(f, "qwen3moe.expert_used_count", &v) == 0 && v == 2);
    CHECK(gguf_get_u32(f, "qwen3moe.expert_feed_forward_length", &v) == 0 && v == 256);
    CHECK(gguf_get_u32(f, "general.file_type", &v) == 0 && v == want_file_type);
    float base = 0, eps = 0;
    CHECK(gguf_get_f32(f, "qwen3moe.rope.freq_base", &base) == 0 && base == 1e6f);
    CHECK(gguf_get_f32(f, "qwen3moe.attention.layer_norm_rms_epsilon", &eps) == 0 && eps == 1e-6f);
    const struct gguf_kv *tokens = gguf_find_kv(f, "tokenizer.ggml.tokens");
    CHECK(tokens && tokens->type == GGUF_ARRAY && tokens->array_type == GGUF_STRING && tokens->array_len == 2048);
    if (tokens && tokens->array_len == 2048) {
        CHECK(str_is(tokens->array_strs[2045], "<|endoftext|>"));
        CHECK(str_is(tokens->array_strs[2047], "<|im_end|>"));
    }
    const struct gguf_tensor *t = gguf_find_tensor(f, "blk.0.ffn_gate_exps.weight");
    CHECK(t && t->n_dims == 3 && t->ne[0] == 256 && t->ne[1] == 256 && t->ne[2] == 8 && t->ne[3] == 1);
    CHECKF(t && t->type == want_gate_type, "%s: gate type %u", path, t ? t->type : 0);
    t = gguf_find_tensor(f, "token_embd.weight");
    CHECK(t && t->n_dims == 2 && t->ne[0] == 256 && t->ne[1] == 2048);
    t = gguf_find_tensor(f, "blk.1.ffn_gate_inp.weight");
    CHECK(t && t->type == 0 && t->ne[0] == 256 && t->ne[1] == 8);
    t = gguf_find_tensor(f, "blk.1.attn_k_norm.weight");
    CHECK(t && t->type == 0 && t->n_dims == 1 && t->ne[0] == 64);
    CHECK(gguf_find_tensor(f, "blk.2.attn_q.weight") == NULL);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const struct gguf_tensor *x = &f->tensors[i];
        CHECK((const uint8_t *)x->data + x->nbytes <= f->map + f->file_size);
    }
    char *text = info_text(f, false);
    CHECK(text && strstr(text, "architecture: \"qwen3moe\"") && strstr(text, "blk.0.ffn_gate_exps.weight") &&
          strstr(text, "256 x 256 x 8") && strstr(text, "(2048 items)") && strstr(text, "totals: 27 tensors") &&
          strstr(text, "4593152 parameters"));
    free(text);
    gguf_close(f);
}

static void test_oracle_models(void) {
    static const struct { const char *type; uint32_t gate, file_type; } models[] = {
        {"F32", 0, 0}, {"F16", 1, 1}, {"BF16", 30, 32}, {"Q8_0", 8, 7},
        {"Q4_0", 2, 2}, {"Q4_K_M", 12, 15}, {"Q5_K_M", 13, 17}, {"Q6_K", 14, 18},
    };
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "models/qwen3moe-o1-%s.gguf", models[i].type);
        check_model(oracle_path(rel), models[i].gate, models[i].file_type);
    }
    /* Every model file there opens, including any added later. */
    glob_t g;
    char pattern[4200];
    snprintf(pattern, sizeof pattern, "%s", oracle_path("models/*.gguf"));
    if (glob(pattern, 0, NULL, &g) == 0) {
        CHECK(g.gl_pathc >= 8);
        for (size_t i = 0; i < g.gl_pathc; i++) {
            struct gguf_file *f = gguf_open(g.gl_pathv[i]);
            CHECKF(f != NULL, "%s", moex_error());
            gguf_close(f);
        }
        globfree(&g);
    }

    const char *vocab = oracle_path("tokenizer/qwen3-vocab.gguf");
    struct gguf_file *f = gguf_open(vocab);
    CHECKF(f != NULL, "%s", moex_error());
    if (!f) return;
    CHECK(f->n_tensors == 0);
    const struct gguf_kv *tokens = gguf_find_kv(f, "tokenizer.ggml.tokens");
    const struct gguf_kv *merges = gguf_find_kv(f, "tokenizer.ggml.merges");
    const struct gguf_kv *types = gguf_find_kv(f, "tokenizer.ggml.token_type");
    CHECK(tokens && tokens->array_type == GGUF_STRING && tokens->array_len == 151936);
    CHECK(merges && merges->array_type == GGUF_STRING && merges->array_len == 151387);
    CHECK(types && types->array_type == GGUF_I32 && types->array_len == 151936);
    if (tokens && tokens->array_len == 151936) CHECK(str_is(tokens->array_strs[151645], "<|im_end|>"));
    if (merges && merges->array_len) CHECK(str_is(merges->array_strs[0], "Ġ Ġ"));
    uint32_t eos = 0;
    CHECK(gguf_get_u32(f, "tokenizer.ggml.eos_token_id", &eos) == 0 && eos == 151645);
    char *pre = gguf_get_str(f, "tokenizer.ggml.pre");
    CHECK(pre && strcmp(pre, "qwen2") == 0);
    free(pre);
    char *all = info_text(f, true);
    CHECK(all && strstr(all, "\"<|im_end|>\"") && !strstr(all, "(151936 items)"));
    free(all);
    gguf_close(f);
}

int main(void) {
    test_round_trip();
    test_copy();
    test_writer_errors();
    test_getters();
    test_type_table();
    /* The oracle check may skip the test (exit 77): report failures first. */
    if (test_failures) return test_finish();
    test_oracle_models();
    return test_finish();
}
