/* libFuzzer target for the GGUF reader: whatever it accepts must be safe to
 * walk in full, describe, and write back; the rewritten file must read back
 * with the same metadata and tensor bytes. */
#include "gguf/gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static FILE *devnull;
static char rewrite_path[64];

static void remove_rewrite(void) { unlink(rewrite_path); }

static unsigned touch(const void *p, uint64_t n) {
    unsigned sum = 0;
    for (uint64_t i = 0; i < n; i++) sum += ((const uint8_t *)p)[i];
    return sum;
}

static unsigned walk(const struct gguf_file *f) {
    unsigned sum = 0;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const struct gguf_kv *kv = &f->kv[i];
        if (gguf_find_kv(f, kv->key) != kv) abort();
        if (kv->type == GGUF_STRING) sum += touch(kv->v.str.data, kv->v.str.len);
        if (kv->type != GGUF_ARRAY) continue;
        if (kv->array_type == GGUF_STRING) {
            for (uint64_t j = 0; j < kv->array_len; j++)
                sum += touch(kv->array_strs[j].data, kv->array_strs[j].len);
        } else {
            size_t elem = gguf_vtype_size(kv->array_type);
            if (kv->array_len && (uintptr_t)kv->array_data % elem) abort();
            sum += touch(kv->array_data, kv->array_len * elem);
        }
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const struct gguf_tensor *t = &f->tensors[i];
        if (gguf_find_tensor(f, t->name) != t) abort();
        if ((const uint8_t *)t->data < f->map + f->data_offset ||
            (const uint8_t *)t->data + t->nbytes > f->map + f->file_size) abort();
        sum += touch(t->data, t->nbytes);
    }
    uint32_t u32;
    uint64_t u64;
    float f32;
    bool b;
    gguf_get_u32(f, "general.alignment", &u32);
    gguf_get_u64(f, "general.file_type", &u64);
    gguf_get_f32(f, "general.alignment", &f32);
    gguf_get_bool(f, "general.alignment", &b);
    free(gguf_get_str(f, "general.architecture"));
    return sum;
}

static bool same_kv(const struct gguf_kv *a, const struct gguf_kv *b) {
    if (strcmp(a->key, b->key) != 0 || a->type != b->type) return false;
    switch (a->type) {
    case GGUF_STRING:
        return a->v.str.len == b->v.str.len && memcmp(a->v.str.data, b->v.str.data, a->v.str.len) == 0;
    case GGUF_ARRAY:
        if (a->array_type != b->array_type || a->array_len != b->array_len) return false;
        if (a->array_type != GGUF_STRING)
            return memcmp(a->array_data, b->array_data, a->array_len * gguf_vtype_size(a->array_type)) == 0;
        for (uint64_t i = 0; i < a->array_len; i++)
            if (a->array_strs[i].len != b->array_strs[i].len ||
                memcmp(a->array_strs[i].data, b->array_strs[i].data, a->array_strs[i].len) != 0) return false;
        return true;
    case GGUF_F32: case GGUF_F64:
        return memcmp(&a->v.f64, &b->v.f64, sizeof a->v.f64) == 0; /* NaN payloads too */
    case GGUF_BOOL:
        return a->v.b == b->v.b;
    default:
        return a->v.u64 == b->v.u64;
    }
}

static void rewrite_and_compare(const struct gguf_file *f) {
    struct gguf_writer *w = gguf_writer_new();
    if (!w) abort();
    for (uint64_t i = 0; i < f->n_kv; i++) gguf_copy_kv(w, &f->kv[i]);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const struct gguf_tensor *t = &f->tensors[i];
        if (gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne)) abort();
    }
    if (gguf_writer_begin(w, rewrite_path)) abort();
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (gguf_writer_write_data(w, f->tensors[i].data, f->tensors[i].nbytes)) abort();
    if (gguf_writer_finish(w)) abort();
    gguf_writer_free(w);

    struct gguf_file *g = gguf_open(rewrite_path);
    if (!g || g->n_kv != f->n_kv || g->n_tensors != f->n_tensors || g->alignment != f->alignment) abort();
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (!same_kv(&f->kv[i], &g->kv[i])) abort();
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const struct gguf_tensor *a = &f->tensors[i], *b = &g->tensors[i];
        if (strcmp(a->name, b->name) != 0 || a->type != b->type || a->nbytes != b->nbytes ||
            memcmp(a->ne, b->ne, sizeof a->ne) != 0 || memcmp(a->data, b->data, a->nbytes) != 0) abort();
    }
    gguf_close(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!devnull) {
        devnull = fopen("/dev/null", "w");
        /* tmpfs where there is one: the writer fsyncs every file it commits. */
        snprintf(rewrite_path, sizeof rewrite_path, "%s/moex-fuzz-gguf-%ld.gguf",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (long)getpid());
        atexit(remove_rewrite);
    }
    struct gguf_file *f = gguf_open_memory(data, size, "fuzz.gguf");
    if (!f) return 0;
    walk(f);
    gguf_print_info(devnull, f, true);
    gguf_print_info(devnull, f, false);
    rewrite_and_compare(f);
    gguf_close(f);
    return 0;
}
