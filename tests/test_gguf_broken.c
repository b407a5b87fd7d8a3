/* Malformed GGUF files: hand-made broken files must each be refused with a
 * message naming the file and the problem; every prefix of a valid file must
 * be refused; random byte flips must never crash (run under ASan). Buffers
 * are allocated at their exact size so that any over-read is caught. */
#include "harness.h"
#include "gguf/gguf.h"
#include "core/error.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- a byte builder for hand-made files ---- */

struct bb {
    uint8_t data[8192];
    size_t len;
};

static void put(struct bb *b, const void *p, size_t n) {
    if (b->len + n > sizeof b->data) abort(); /* a bug in this test */
    memcpy(b->data + b->len, p, n);
    b->len += n;
}
static void u8(struct bb *b, uint8_t v) { put(b, &v, 1); }
static void u32(struct bb *b, uint32_t v) { put(b, &v, 4); }
static void u64(struct bb *b, uint64_t v) { put(b, &v, 8); }
static void str(struct bb *b, const char *s) { u64(b, strlen(s)); put(b, s, strlen(s)); }
static void pad(struct bb *b, size_t align) { while (b->len % align) u8(b, 0); }
static void zeros(struct bb *b, size_t n) { while (n--) u8(b, 0); }

static void header(struct bb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    b->len = 0;
    put(b, "GGUF", 4);
    u32(b, version);
    u64(b, n_tensors);
    u64(b, n_kv);
}

static void kv_u32(struct bb *b, const char *key, uint32_t v) { str(b, key); u32(b, GGUF_U32); u32(b, v); }

static void tensor_info(struct bb *b, const char *name, uint32_t n_dims, const uint64_t *ne,
                        uint32_t type, uint64_t offset) {
    str(b, name);
    u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) u64(b, ne[d]);
    u32(b, type);
    u64(b, offset);
}

/* A file with one kv and one F32 tensor of n values, data included. */
static void one_tensor(struct bb *b, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                       uint64_t offset, size_t data_bytes) {
    header(b, 3, 1, 1);
    kv_u32(b, "x.count", 1);
    tensor_info(b, "blk.0.attn_q.weight", n_dims, ne, type, offset);
    pad(b, 32);
    zeros(b, data_bytes);
}

/* Opens the bytes both from memory and from a file; both must fail with a
 * message that names the file and contains phrase. */
static void expect_refused(const struct bb *b, const char *name, const char *phrase) {
    uint8_t *copy = malloc(b->len ? b->len : 1);
    memcpy(copy, b->data, b->len);
    moex_clear_error();
    struct gguf_file *f = gguf_open_memory(copy, b->len, name);
    CHECKF(f == NULL, "%s was accepted", name);
    gguf_close(f);
    CHECKF(strstr(moex_error(), name) && strstr(moex_error(), phrase),
           "%s: message \"%s\" lacks \"%s\"", name, moex_error(), phrase);
    free(copy);

    char path[4200];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir(), name);
    FILE *out = fopen(path, "wb");
    CHECK(out && fwrite(b->data, 1, b->len, out) == b->len);
    if (out) fclose(out);
    moex_clear_error();
    f = gguf_open(path);
    CHECKF(f == NULL, "%s was accepted from a file", name);
    gguf_close(f);
    CHECKF(strstr(moex_error(), path) && strstr(moex_error(), phrase),
           "%s: message \"%s\" lacks the path or \"%s\"", name, moex_error(), phrase);
}

static void test_hand_made(void) {
    struct bb b;
    const uint64_t ne64[1] = {64};

    /* The baseline is valid, so each case below fails for its own reason. */
    one_tensor(&b, 1, ne64, 0, 0, 256);
    struct gguf_file *f = gguf_open_memory(b.data, b.len, "valid.gguf");
    CHECKF(f != NULL, "baseline: %s", moex_error());
    gguf_close(f);

    b = (struct bb){0};
    expect_refused(&b, "empty.gguf", "truncated");

    one_tensor(&b, 1, ne64, 0, 0, 256);
    memcpy(b.data, "GGML", 4);
    expect_refused(&b, "magic.gguf", "bad magic");

    header(&b, 1, 0, 0);
    expect_refused(&b, "v1.gguf", "unsupported GGUF version 1");
    header(&b, 4, 0, 0);
    expect_refused(&b, "v4.gguf", "unsupported GGUF version 4");
    header(&b, 0x03000000u, 0, 0);
    expect_refused(&b, "bigendian.gguf", "big-endian");

    one_tensor(&b, 1, ne64, 0, 0, 100);
    expect_refused(&b, "past-eof.gguf", "data ends at byte");

    const uint64_t ne5[5] = {32, 1, 1, 1, 1};
    one_tensor(&b, 5, ne5, 0, 0, 128);
    expect_refused(&b, "ndims5.gguf", "has 5 dimensions");
    one_tensor(&b, 0, ne5, 0, 0, 128);
    expect_refused(&b, "ndims0.gguf", "has 0 dimensions");

    const uint64_t ne_overflow[3] = {1ull << 32, 1ull << 32, 4};
    one_tensor(&b, 3, ne_overflow, 0, 0, 0);
    expect_refused(&b, "dims-overflow.gguf", "overflows 64 bits");
    const uint64_t ne_bytes_overflow[1] = {1ull << 62};
    one_tensor(&b, 1, ne_bytes_overflow, 28 /* F64 */, 0, 0);
    expect_refused(&b, "bytes-overflow.gguf", "overflows 64 bits");
    const uint64_t ne_zero[2] = {32, 0};
    one_tensor(&b, 2, ne_zero, 0, 0, 0);
    expect_refused(&b, "dim-zero.gguf", "dimension 1 is 0 (must be 1 to");
    const uint64_t ne_negative[2] = {32, (uint64_t)-5};
    one_tensor(&b, 2, ne_negative, 0, 0, 0);
    /* Dimensions are unsigned in the file: said as read, never negative. */
    expect_refused(&b, "dim-negative.gguf", "is 18446744073709551611 (must be 1 to 9223372036854775807)");

    one_tensor(&b, 1, ne64, 99, 0, 256);
    expect_refused(&b, "type-unknown.gguf", "unknown tensor type 99");
    one_tensor(&b, 1, ne64, 1u << 31, 0, 256);
    expect_refused(&b, "type-huge.gguf", "unknown tensor type");
    one_tensor(&b, 1, ne64, 31, 0, 256);
    expect_refused(&b, "type-removed.gguf", "removed from GGUF");
    const uint64_t ne33[1] = {33};
    one_tensor(&b, 1, ne33, 2 /* Q4_0 */, 0, 256);
    expect_refused(&b, "row-block.gguf", "not a multiple of the Q4_0 block size 32");

    one_tensor(&b, 1, ne64, 0, 4, 512);
    expect_refused(&b, "misaligned.gguf", "not a multiple of the alignment 32");
    one_tensor(&b, 1, ne64, 0, UINT64_MAX - 31, 256);
    expect_refused(&b, "offset-overflow.gguf", "past the end of the file");

    header(&b, 3, 0, 1);
    u64(&b, UINT64_MAX);
    zeros(&b, 16);
    expect_refused(&b, "key-huge.gguf", "runs past the end of the file");
    header(&b, 3, 0, 1);
    str(&b, "general.name");
    u32(&b, GGUF_STRING);
    u64(&b, 1ull << 62);
    put(&b, "abc", 3);
    expect_refused(&b, "string-huge.gguf", "runs past the end of the file");
    header(&b, 3, 0, 1);
    str(&b, "tokenizer.ggml.scores");
    u32(&b, GGUF_ARRAY);
    u32(&b, GGUF_F32);
    u64(&b, 1ull << 62);
    zeros(&b, 64);
    expect_refused(&b, "array-huge.gguf", "runs past the end of the file");
    header(&b, 3, 0, 1);
    str(&b, "tokenizer.ggml.tokens");
    u32(&b, GGUF_ARRAY);
    u32(&b, GGUF_STRING);
    u64(&b, UINT64_MAX);
    zeros(&b, 64);
    expect_refused(&b, "strings-huge.gguf", "runs past the end of the file");
    header(&b, 3, 0, 1);
    str(&b, "nested");
    u32(&b, GGUF_ARRAY);
    u32(&b, GGUF_ARRAY);
    u64(&b, 0);
    expect_refused(&b, "nested.gguf", "array of arrays");
    header(&b, 3, 0, 1);
    str(&b, "weird");
    u32(&b, 13);
    u32(&b, 0);
    expect_refused(&b, "vtype.gguf", "unknown value type 13");
    header(&b, 3, 0, 1);
    str(&b, "weird");
    u32(&b, GGUF_ARRAY);
    u32(&b, 77);
    u64(&b, 0);
    expect_refused(&b, "array-vtype.gguf", "unknown value type 77");
    header(&b, 3, 0, 1);
    str(&b, "flag");
    u32(&b, GGUF_BOOL);
    u8(&b, 2);
    expect_refused(&b, "bool.gguf", "must be 0 or 1");
    header(&b, 3, 0, 1);
    str(&b, "flags");
    u32(&b, GGUF_ARRAY);
    u32(&b, GGUF_BOOL);
    u64(&b, 3);
    u8(&b, 1);
    u8(&b, 0);
    u8(&b, 9);
    expect_refused(&b, "bool-array.gguf", "must be 0 or 1");

    header(&b, 3, 0, 1);
    str(&b, "");
    u32(&b, GGUF_U32);
    u32(&b, 1);
    expect_refused(&b, "key-empty.gguf", "empty name");
    header(&b, 3, 0, 1);
    u64(&b, 3);
    put(&b, "a\0b", 3);
    u32(&b, GGUF_U32);
    u32(&b, 1);
    expect_refused(&b, "key-nul.gguf", "NUL byte");
    header(&b, 3, 0, 2);
    kv_u32(&b, "general.alignment", 32);
    kv_u32(&b, "general.alignment", 64);
    expect_refused(&b, "key-dup.gguf", "duplicate key 'general.alignment'");

    header(&b, 3, 0, 1);
    kv_u32(&b, "general.alignment", 0);
    expect_refused(&b, "align0.gguf", "non-zero power of two");
    header(&b, 3, 0, 1);
    kv_u32(&b, "general.alignment", 3);
    expect_refused(&b, "align3.gguf", "non-zero power of two");
    /* A power of two, but 2^40: a writer would pad a terabyte (found by fuzzing). */
    header(&b, 3, 0, 1);
    str(&b, "general.alignment");
    u32(&b, GGUF_I64);
    u32(&b, 0);
    u32(&b, 1u << 8);
    expect_refused(&b, "align-huge.gguf", "is larger than");
    header(&b, 3, 0, 1);
    str(&b, "general.alignment");
    u32(&b, GGUF_I32);
    u32(&b, (uint32_t)-32);
    expect_refused(&b, "align-neg.gguf", "non-zero power of two");
    header(&b, 3, 0, 1);
    str(&b, "general.alignment");
    u32(&b, GGUF_STRING);
    str(&b, "32");
    expect_refused(&b, "align-str.gguf", "must be an integer");

    header(&b, 3, 2, 0);
    tensor_info(&b, "same", 1, ne64, 0, 0);
    tensor_info(&b, "same", 1, ne64, 0, 256);
    pad(&b, 32);
    zeros(&b, 512);
    expect_refused(&b, "tensor-dup.gguf", "duplicate tensor name 'same'");
    /* Tensors may share bytes (the format does not forbid it). */
    header(&b, 3, 2, 0);
    tensor_info(&b, "first", 1, ne64, 0, 0);
    tensor_info(&b, "second", 1, ne64, 0, 0);
    pad(&b, 32);
    zeros(&b, 256);
    f = gguf_open_memory(b.data, b.len, "overlap.gguf");
    CHECKF(f && f->tensors[0].data == f->tensors[1].data, "overlap: %s", moex_error());
    gguf_close(f);
    header(&b, 3, 1, 0);
    tensor_info(&b, "", 1, ne64, 0, 0);
    pad(&b, 32);
    zeros(&b, 256);
    expect_refused(&b, "tensor-noname.gguf", "empty name");

    header(&b, 3, 0, UINT64_MAX);
    zeros(&b, 64);
    expect_refused(&b, "nkv-huge.gguf", "metadata keys but only");
    header(&b, 3, 1ull << 40, 0);
    zeros(&b, 64);
    expect_refused(&b, "ntensors-huge.gguf", "tensors but only");

    moex_clear_error();
    CHECK(gguf_open("/nonexistent/dir/model.gguf") == NULL && strstr(moex_error(), "/nonexistent/dir/model.gguf"));
    CHECK(gguf_open(test_tmpdir()) == NULL && strstr(moex_error(), "a directory, not a GGUF model file"));
    CHECK(gguf_open("/dev/null") == NULL && strstr(moex_error(), "/dev/null: not a regular file"));
    /* A file of another format says which and what to do. */
    static const struct { const char *bytes; size_t n; const char *says; } others[] = {
        { "MOEXPACK\2\0\0\0", 12, "a moex pack file, not a model" },
        { "PK\3\4\0\0\0\0", 8, "a zip archive (a PyTorch checkpoint?): convert the model to GGUF" },
        { "\x10\0\0\0\0\0\0\0{\"__metadata__\"", 22, "a safetensors file?" },
        { "hello world\n", 12, "moex runs GGUF model files" },
    };
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        moex_clear_error();
        struct gguf_file *f = gguf_open_memory(others[i].bytes, others[i].n, "other");
        CHECKF(f == NULL && strstr(moex_error(), "not a GGUF file") && strstr(moex_error(), others[i].says),
               "'%s' for %s", moex_error(), others[i].says);
        gguf_close(f);
    }
}

/* ---- prefixes and byte flips of a valid file ---- */

/* A small valid file made by the writer, whose last tensor ends exactly at
 * an alignment boundary, so that no prefix is a valid file. */
static uint8_t *small_valid_file(size_t *size) {
    char path[4200];
    snprintf(path, sizeof path, "%s/small.gguf", test_tmpdir());
    struct gguf_writer *w = gguf_writer_new();
    static const char *const tokens[] = {"a", "bc", "<|x|>"};
    static const int32_t types[] = {1, 1, 3};
    static const float scores[] = {0.5f, -1.0f, 2.0f};
    gguf_set_str(w, "general.architecture", "qwen3moe");
    gguf_set_u32(w, "qwen3moe.block_count", 1);
    gguf_set_f32(w, "qwen3moe.rope.freq_base", 1e6f);
    gguf_set_bool(w, "tokenizer.ggml.add_bos_token", false);
    gguf_set_arr_str(w, "tokenizer.ggml.tokens", tokens, 3);
    gguf_set_arr(w, "tokenizer.ggml.token_type", GGUF_I32, types, 3);
    gguf_set_arr(w, "tokenizer.ggml.scores", GGUF_F32, scores, 3);
    gguf_set_u64(w, "x.u64", 12345);
    gguf_set_u32(w, "general.alignment", 64);
    const int64_t ne_a[2] = {32, 2}, ne_b[1] = {16};
    gguf_add_tensor(w, "blk.0.attn_q.weight", 8 /* Q8_0 */, 2, ne_a);
    gguf_add_tensor(w, "output_norm.weight", 0, 1, ne_b);
    uint8_t data[68 + 64];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 7);
    int rc = gguf_writer_begin(w, path);
    rc |= gguf_writer_write_data(w, data, sizeof data);
    rc |= gguf_writer_finish(w);
    gguf_writer_free(w);
    CHECKF(rc == 0, "%s", moex_error());
    return read_whole_file(path, size);
}

/* Touches everything a reader would use, so ASan sees any bad pointer.
 * Returns how many keys and tensors a lookup by name does not find as
 * themselves (0 for a sound file). */
static int walk(const struct gguf_file *f, FILE *devnull) {
    int mismatches = 0;
    unsigned sum = 0;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const struct gguf_kv *kv = &f->kv[i];
        sum += (unsigned)strlen(kv->key);
        if (kv->type == GGUF_STRING)
            for (uint64_t j = 0; j < kv->v.str.len; j++) sum += (uint8_t)kv->v.str.data[j];
        if (kv->type == GGUF_ARRAY && kv->array_type == GGUF_STRING)
            for (uint64_t j = 0; j < kv->array_len; j++)
                for (uint64_t k = 0; k < kv->array_strs[j].len; k++) sum += (uint8_t)kv->array_strs[j].data[k];
        if (kv->type == GGUF_ARRAY && kv->array_type != GGUF_STRING) {
            uint64_t bytes = kv->array_len * gguf_vtype_size(kv->array_type);
            for (uint64_t j = 0; j < bytes; j++) sum += ((const uint8_t *)kv->array_data)[j];
        }
        mismatches += gguf_find_kv(f, kv->key) != kv;
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const struct gguf_tensor *t = &f->tensors[i];
        for (uint64_t j = 0; j < t->nbytes; j++) sum += ((const uint8_t *)t->data)[j];
        mismatches += gguf_find_tensor(f, t->name) != t;
    }
    if (devnull) gguf_print_info(devnull, f, true);
    /* The sum is used so that the reads above are not optimised away. */
    if (devnull) fprintf(devnull, "%u\n", sum);
    return mismatches;
}

static void test_prefixes(const uint8_t *file, size_t size) {
    for (size_t len = 0; len < size; len++) {
        uint8_t *prefix = malloc(len ? len : 1);
        memcpy(prefix, file, len);
        moex_clear_error();
        struct gguf_file *f = gguf_open_memory(prefix, len, "prefix.gguf");
        CHECKF(f == NULL, "prefix of %zu of %zu bytes was accepted", len, size);
        CHECKF(strstr(moex_error(), "prefix.gguf: "), "prefix %zu: message \"%s\"", len, moex_error());
        gguf_close(f);
        free(prefix);
    }
    struct gguf_file *f = gguf_open_memory(file, size, "whole.gguf");
    CHECKF(f != NULL, "%s", moex_error());
    gguf_close(f);
}

static uint64_t rng(void) { return test_rand(); }

static void test_byte_flips(const uint8_t *file, size_t size, FILE *devnull) {
    int accepted = 0, refused = 0;
    for (int iter = 0; iter < 4000; iter++) {
        size_t len = size;
        if (iter % 8 == 7) len = rng() % (size + 1); /* some truncated as well */
        uint8_t *buf = malloc(len ? len : 1);
        memcpy(buf, file, len);
        int flips = 1 + (int)(rng() % 4);
        for (int k = 0; k < flips && len; k++) {
            size_t at = rng() % len;
            switch (rng() % 4) {
            case 0: buf[at] ^= (uint8_t)(1u << (rng() % 8)); break;
            case 1: buf[at] = (uint8_t)rng(); break;
            case 2: buf[at] = 0xff; break;
            default: buf[at] = 0; break;
            }
        }
        moex_clear_error();
        struct gguf_file *f = gguf_open_memory(buf, len, "flipped.gguf");
        if (f) {
            accepted++;
            CHECK(walk(f, devnull) == 0);
            gguf_close(f);
        } else {
            refused++;
            CHECKF(strstr(moex_error(), "flipped.gguf: "), "message \"%s\"", moex_error());
        }
        free(buf);
    }
    printf("byte flips: %d accepted, %d refused\n", accepted, refused);
    CHECK(accepted > 0 && refused > 0);
}

int main(void) {
    test_hand_made();
    size_t size = 0;
    uint8_t *file = small_valid_file(&size);
    CHECK(file != NULL && size > 0 && size % 64 == 0);
    if (file) {
        FILE *devnull = fopen("/dev/null", "w");
        struct gguf_file *f = gguf_open_memory(file, size, "small.gguf");
        CHECKF(f != NULL, "%s", moex_error());
        if (f) { CHECK(walk(f, devnull) == 0); gguf_close(f); }
        test_prefixes(file, size);
        test_byte_flips(file, size, devnull);
        if (devnull) fclose(devnull);
        free(file);
    }
    return test_finish();
}
