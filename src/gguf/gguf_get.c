/* Typed metadata getters. Integers convert between widths and signedness
 * when the value fits; anything else is a type error with a message naming
 * the file and the key. */
#include "gguf/gguf.h"
#include "core/error.h"

#include <stdlib.h>
#include <string.h>

static const struct gguf_kv *find(const struct gguf_file *f, const char *key) {
    const struct gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) moex_errorf("%s: key '%s' not found", f->path, key);
    return kv;
}

static int wrong_type(const struct gguf_file *f, const struct gguf_kv *kv, const char *wanted) {
    return moex_errorf("%s: key '%s' is %s, not %s", f->path, kv->key, gguf_vtype_name(kv->type), wanted);
}

/* The value as an unsigned 64-bit integer: -1 if it is not an integer or is
 * negative. */
static int as_u64(const struct gguf_file *f, const struct gguf_kv *kv, uint64_t *out) {
    switch (kv->type) {
    case GGUF_U8: case GGUF_U16: case GGUF_U32: case GGUF_U64:
        *out = kv->v.u64;
        return 0;
    case GGUF_I8: case GGUF_I16: case GGUF_I32: case GGUF_I64:
        if (kv->v.i64 < 0)
            return moex_errorf("%s: key '%s' is negative (%lld)", f->path, kv->key, (long long)kv->v.i64);
        *out = (uint64_t)kv->v.i64;
        return 0;
    default:
        return wrong_type(f, kv, "an integer");
    }
}

int gguf_get_u64(const struct gguf_file *f, const char *key, uint64_t *out) {
    const struct gguf_kv *kv = find(f, key);
    if (!kv) return -1;
    return as_u64(f, kv, out);
}

int gguf_get_u32(const struct gguf_file *f, const char *key, uint32_t *out) {
    const struct gguf_kv *kv = find(f, key);
    uint64_t v = 0;
    if (!kv || as_u64(f, kv, &v)) return -1;
    if (v > UINT32_MAX)
        return moex_errorf("%s: key '%s' is %llu, too large for 32 bits", f->path, key, (unsigned long long)v);
    *out = (uint32_t)v;
    return 0;
}

int gguf_get_f32(const struct gguf_file *f, const char *key, float *out) {
    const struct gguf_kv *kv = find(f, key);
    if (!kv) return -1;
    switch (kv->type) {
    case GGUF_F32: case GGUF_F64: *out = (float)kv->v.f64; return 0;
    case GGUF_U8: case GGUF_U16: case GGUF_U32: case GGUF_U64: *out = (float)kv->v.u64; return 0;
    case GGUF_I8: case GGUF_I16: case GGUF_I32: case GGUF_I64: *out = (float)kv->v.i64; return 0;
    default: return wrong_type(f, kv, "a number");
    }
}

int gguf_get_bool(const struct gguf_file *f, const char *key, bool *out) {
    const struct gguf_kv *kv = find(f, key);
    if (!kv) return -1;
    if (kv->type != GGUF_BOOL) return wrong_type(f, kv, "bool");
    *out = kv->v.b;
    return 0;
}

char *gguf_get_str(const struct gguf_file *f, const char *key) {
    const struct gguf_kv *kv = find(f, key);
    if (!kv) return NULL;
    if (kv->type != GGUF_STRING) {
        wrong_type(f, kv, "str");
        return NULL;
    }
    char *s = malloc(kv->v.str.len + 1);
    if (!s) {
        moex_errorf("%s: out of memory copying key '%s'", f->path, key);
        return NULL;
    }
    memcpy(s, kv->v.str.data, kv->v.str.len);
    s[kv->v.str.len] = 0;
    return s;
}
