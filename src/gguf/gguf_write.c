/* The GGUF writer (version 3). Metadata values are serialized when set;
 * tensor offsets are fixed at gguf_writer_begin, once general.alignment is
 * known; tensor bytes then stream through in declaration order, with the
 * padding the alignment asks for inserted after each tensor. Setters return
 * nothing, so their failures are kept and reported by gguf_writer_begin. */
#include "gguf/gguf.h"
#include "gguf/gguf_types.h"
#include "core/atomic_file.h"
#include "core/error.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct wkv {
    char *key;
    enum gguf_vtype type;
    uint8_t *payload;     /* the value as it is written after the type */
    size_t payload_len;
};

struct wtensor {
    char *name;
    uint32_t type;
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    uint64_t nbytes, offset;
};

struct gguf_writer {
    struct wkv *kv;
    size_t n_kv, cap_kv;
    struct wtensor *tensors;
    size_t n_tensors, cap_tensors;
    char error[512];      /* first setter failure, reported by begin */
    struct atomic_file *out; /* the file appears at path only when finished */
    FILE *fp;             /* out's stream */
    char *path;
    uint64_t alignment;
    size_t current;       /* tensor receiving bytes */
    uint64_t current_done;
    bool begun, failed;
};

/* A growable byte buffer; `oom` sticks once an allocation failed. */
struct buf {
    uint8_t *p;
    size_t len, cap;
    bool oom;
};

static void buf_put(struct buf *b, const void *data, size_t n) {
    if (b->oom) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) { b->oom = true; return; }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void buf_u32(struct buf *b, uint32_t v) { buf_put(b, &v, 4); }
static void buf_u64(struct buf *b, uint64_t v) { buf_put(b, &v, 8); }
static void buf_str(struct buf *b, const char *s, uint64_t len) {
    buf_u64(b, len);
    buf_put(b, s, len);
}

static void setter_error(struct gguf_writer *w, const char *fmt, ...) MOEX_PRINTF(2, 3);
static void setter_error(struct gguf_writer *w, const char *fmt, ...) {
    if (w->error[0]) return; /* the first failure is the one to report */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->error, sizeof w->error, fmt, ap);
    va_end(ap);
}

/* Stores a serialized value under key, replacing an earlier value of the
 * same key in place. Takes ownership of b's bytes. */
static void put_kv(struct gguf_writer *w, const char *key, enum gguf_vtype type, struct buf *b) {
    if (b->oom) {
        free(b->p);
        setter_error(w, "out of memory setting key '%.80s'", key ? key : "");
        return;
    }
    if (!key || !*key) {
        free(b->p);
        setter_error(w, "empty key");
        return;
    }
    if (w->begun) {
        free(b->p);
        setter_error(w, "key '%.80s' set after gguf_writer_begin", key);
        return;
    }
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, key) == 0) {
            free(w->kv[i].payload);
            w->kv[i].type = type;
            w->kv[i].payload = b->p;
            w->kv[i].payload_len = b->len;
            return;
        }
    }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? 2 * w->cap_kv : 16;
        struct wkv *kv = realloc(w->kv, cap * sizeof *kv);
        if (!kv) { free(b->p); setter_error(w, "out of memory setting key '%.80s'", key); return; }
        w->kv = kv;
        w->cap_kv = cap;
    }
    char *copy = strdup(key);
    if (!copy) { free(b->p); setter_error(w, "out of memory setting key '%.80s'", key); return; }
    w->kv[w->n_kv++] = (struct wkv){copy, type, b->p, b->len};
}

static void set_scalar(struct gguf_writer *w, const char *key, enum gguf_vtype type, const void *v) {
    struct buf b = {0};
    buf_put(&b, v, gguf_vtype_size(type));
    put_kv(w, key, type, &b);
}

void gguf_set_u8(struct gguf_writer *w, const char *key, uint8_t v) { set_scalar(w, key, GGUF_U8, &v); }
void gguf_set_i8(struct gguf_writer *w, const char *key, int8_t v) { set_scalar(w, key, GGUF_I8, &v); }
void gguf_set_u16(struct gguf_writer *w, const char *key, uint16_t v) { set_scalar(w, key, GGUF_U16, &v); }
void gguf_set_i16(struct gguf_writer *w, const char *key, int16_t v) { set_scalar(w, key, GGUF_I16, &v); }
void gguf_set_u32(struct gguf_writer *w, const char *key, uint32_t v) { set_scalar(w, key, GGUF_U32, &v); }
void gguf_set_i32(struct gguf_writer *w, const char *key, int32_t v) { set_scalar(w, key, GGUF_I32, &v); }
void gguf_set_u64(struct gguf_writer *w, const char *key, uint64_t v) { set_scalar(w, key, GGUF_U64, &v); }
void gguf_set_i64(struct gguf_writer *w, const char *key, int64_t v) { set_scalar(w, key, GGUF_I64, &v); }
void gguf_set_f32(struct gguf_writer *w, const char *key, float v) { set_scalar(w, key, GGUF_F32, &v); }
void gguf_set_f64(struct gguf_writer *w, const char *key, double v) { set_scalar(w, key, GGUF_F64, &v); }

void gguf_set_bool(struct gguf_writer *w, const char *key, bool v) {
    uint8_t byte = v ? 1 : 0;
    set_scalar(w, key, GGUF_BOOL, &byte);
}

static void set_str_n(struct gguf_writer *w, const char *key, const char *s, uint64_t len) {
    struct buf b = {0};
    buf_str(&b, s, len);
    put_kv(w, key, GGUF_STRING, &b);
}

void gguf_set_str(struct gguf_writer *w, const char *key, const char *v) {
    if (!v) { setter_error(w, "NULL string for key '%.80s'", key ? key : ""); return; }
    set_str_n(w, key, v, strlen(v));
}

void gguf_set_arr(struct gguf_writer *w, const char *key, enum gguf_vtype type, const void *data, uint64_t n) {
    size_t elem = gguf_vtype_size(type);
    if (elem == 0) {
        setter_error(w, "key '%.80s': gguf_set_arr takes fixed-size elements, not %s",
                     key ? key : "", gguf_vtype_name(type));
        return;
    }
    if (n && (!data || n > SIZE_MAX / elem)) {
        setter_error(w, "key '%.80s': bad array", key ? key : "");
        return;
    }
    struct buf b = {0};
    buf_u32(&b, type);
    buf_u64(&b, n);
    if (type == GGUF_BOOL) {
        /* Readers index bool arrays as C bool: write only 0 and 1. */
        const uint8_t *bytes = data;
        for (uint64_t i = 0; i < n; i++) {
            uint8_t v = bytes[i] != 0;
            buf_put(&b, &v, 1);
        }
    } else {
        buf_put(&b, data, (size_t)(n * elem));
    }
    put_kv(w, key, GGUF_ARRAY, &b);
}

void gguf_set_arr_str(struct gguf_writer *w, const char *key, const char *const *strs, uint64_t n) {
    if (n && !strs) { setter_error(w, "key '%.80s': NULL string array", key ? key : ""); return; }
    struct buf b = {0};
    buf_u32(&b, GGUF_STRING);
    buf_u64(&b, n);
    for (uint64_t i = 0; i < n; i++) {
        if (!strs[i]) { free(b.p); setter_error(w, "key '%.80s': NULL string %" PRIu64, key ? key : "", i); return; }
        buf_str(&b, strs[i], strlen(strs[i]));
    }
    put_kv(w, key, GGUF_ARRAY, &b);
}

void gguf_copy_kv(struct gguf_writer *w, const struct gguf_kv *kv) {
    struct buf b = {0};
    switch (kv->type) {
    case GGUF_U8: { uint8_t v = (uint8_t)kv->v.u64; set_scalar(w, kv->key, kv->type, &v); return; }
    case GGUF_U16: { uint16_t v = (uint16_t)kv->v.u64; set_scalar(w, kv->key, kv->type, &v); return; }
    case GGUF_U32: { uint32_t v = (uint32_t)kv->v.u64; set_scalar(w, kv->key, kv->type, &v); return; }
    case GGUF_U64: set_scalar(w, kv->key, kv->type, &kv->v.u64); return;
    case GGUF_I8: { int8_t v = (int8_t)kv->v.i64; set_scalar(w, kv->key, kv->type, &v); return; }
    case GGUF_I16: { int16_t v = (int16_t)kv->v.i64; set_scalar(w, kv->key, kv->type, &v); return; }
    case GGUF_I32: { int32_t v = (int32_t)kv->v.i64; set_scalar(w, kv->key, kv->type, &v); return; }
    case GGUF_I64: set_scalar(w, kv->key, kv->type, &kv->v.i64); return;
    case GGUF_F32: { float v = (float)kv->v.f64; set_scalar(w, kv->key, kv->type, &v); return; }
    case GGUF_F64: set_scalar(w, kv->key, kv->type, &kv->v.f64); return;
    case GGUF_BOOL: gguf_set_bool(w, kv->key, kv->v.b); return;
    case GGUF_STRING: set_str_n(w, kv->key, kv->v.str.data, kv->v.str.len); return;
    case GGUF_ARRAY:
        if (kv->array_type != GGUF_STRING) {
            gguf_set_arr(w, kv->key, kv->array_type, kv->array_data, kv->array_len);
            return;
        }
        buf_u32(&b, GGUF_STRING);
        buf_u64(&b, kv->array_len);
        for (uint64_t i = 0; i < kv->array_len; i++)
            buf_str(&b, kv->array_strs[i].data, kv->array_strs[i].len);
        put_kv(w, kv->key, GGUF_ARRAY, &b);
        return;
    default:
        setter_error(w, "key '%.80s' has unknown type %d", kv->key, (int)kv->type);
        return;
    }
}

int gguf_add_tensor(struct gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne) {
    if (w->begun) return moex_errorf("gguf writer: tensor '%.80s' added after gguf_writer_begin", name ? name : "");
    if (!name || !*name) return moex_errorf("gguf writer: empty tensor name");
    for (size_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return moex_errorf("gguf writer: duplicate tensor name '%.80s'", name);
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return moex_errorf("gguf writer: tensor '%.80s' has %d dimensions (must be 1 to %d)", name, n_dims, GGUF_MAX_DIMS);
    const struct gguf_type_desc *desc = gguf_type_desc(type);
    if (!desc || desc->block_size == 0)
        return moex_errorf("gguf writer: tensor '%.80s' has unknown tensor type %" PRIu32, name, type);
    struct wtensor t = {.type = type, .n_dims = n_dims};
    int64_t elements = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (t.ne[d] <= 0)
            return moex_errorf("gguf writer: tensor '%.80s' dimension %d is %" PRId64 " (must be positive)", name, d, t.ne[d]);
        if (t.ne[d] > INT64_MAX / elements)
            return moex_errorf("gguf writer: tensor '%.80s' has too many elements", name);
        elements *= t.ne[d];
    }
    if (t.ne[0] % desc->block_size != 0)
        return moex_errorf("gguf writer: tensor '%.80s': row length %" PRId64 " is not a multiple of the %s block size %d",
                           name, t.ne[0], desc->name, desc->block_size);
    if (__builtin_mul_overflow((uint64_t)(elements / desc->block_size), (uint64_t)desc->type_size, &t.nbytes))
        return moex_errorf("gguf writer: tensor '%.80s' is too large", name);
    if (w->n_tensors == w->cap_tensors) {
        size_t cap = w->cap_tensors ? 2 * w->cap_tensors : 16;
        struct wtensor *ts = realloc(w->tensors, cap * sizeof *ts);
        if (!ts) return moex_errorf("gguf writer: out of memory");
        w->tensors = ts;
        w->cap_tensors = cap;
    }
    t.name = strdup(name);
    if (!t.name) return moex_errorf("gguf writer: out of memory");
    w->tensors[w->n_tensors++] = t;
    return 0;
}

struct gguf_writer *gguf_writer_new(void) {
    struct gguf_writer *w = calloc(1, sizeof *w);
    if (!w) moex_errorf("gguf writer: out of memory");
    return w;
}

void gguf_writer_free(struct gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) { free(w->kv[i].key); free(w->kv[i].payload); }
    for (size_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->kv);
    free(w->tensors);
    atomic_file_discard(w->out);
    free(w->path);
    free(w);
}

/* Reads the alignment back from its serialized integer value. */
static int writer_alignment(struct gguf_writer *w) {
    w->alignment = GGUF_DEFAULT_ALIGNMENT;
    for (size_t i = 0; i < w->n_kv; i++) {
        const struct wkv *kv = &w->kv[i];
        if (strcmp(kv->key, "general.alignment") != 0) continue;
        uint64_t a = 0;
        bool is_signed = kv->type == GGUF_I8 || kv->type == GGUF_I16 || kv->type == GGUF_I32 || kv->type == GGUF_I64;
        bool is_int = is_signed || kv->type == GGUF_U8 || kv->type == GGUF_U16 || kv->type == GGUF_U32 || kv->type == GGUF_U64;
        if (!is_int) return moex_errorf("%s: general.alignment must be an integer", w->path);
        memcpy(&a, kv->payload, kv->payload_len); /* little-endian: widening is a copy */
        if (is_signed && (kv->payload[kv->payload_len - 1] & 0x80)) a = 0;
        if (a == 0 || (a & (a - 1)) != 0)
            return moex_errorf("%s: bad general.alignment %" PRIu64 " (must be a non-zero power of two)", w->path, a);
        if (a > GGUF_MAX_ALIGNMENT)
            return moex_errorf("%s: general.alignment %" PRIu64 " is larger than %u", w->path, a, GGUF_MAX_ALIGNMENT);
        w->alignment = a;
    }
    return 0;
}

static int write_fail(struct gguf_writer *w) {
    w->failed = true;
    return moex_errorf("%s: write failed: %s", w->path, strerror(errno));
}

static int write_padding(struct gguf_writer *w, uint64_t pos) {
    static const uint8_t zeros[256];
    uint64_t pad = (w->alignment - pos % w->alignment) % w->alignment;
    while (pad) {
        size_t n = pad < sizeof zeros ? (size_t)pad : sizeof zeros;
        if (fwrite(zeros, 1, n, w->fp) != n) return write_fail(w);
        pad -= n;
    }
    return 0;
}

int gguf_writer_begin(struct gguf_writer *w, const char *path) {
    if (w->begun) return moex_errorf("%s: gguf_writer_begin called twice", path);
    w->path = strdup(path);
    if (!w->path) return moex_errorf("%s: out of memory", path);
    if (w->error[0]) return moex_errorf("%s: %s", path, w->error);
    if (writer_alignment(w)) return -1;
    uint64_t offset = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        w->tensors[i].offset = offset;
        uint64_t end = offset + w->tensors[i].nbytes;
        if (end < offset || end + w->alignment < end) return moex_errorf("%s: tensor data too large", path);
        offset = end + (w->alignment - end % w->alignment) % w->alignment;
    }

    struct buf b = {0};
    buf_put(&b, "GGUF", 4);
    buf_u32(&b, 3);
    buf_u64(&b, w->n_tensors);
    buf_u64(&b, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        buf_str(&b, w->kv[i].key, strlen(w->kv[i].key));
        buf_u32(&b, w->kv[i].type);
        buf_put(&b, w->kv[i].payload, w->kv[i].payload_len);
    }
    for (size_t i = 0; i < w->n_tensors; i++) {
        const struct wtensor *t = &w->tensors[i];
        buf_str(&b, t->name, strlen(t->name));
        buf_u32(&b, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) buf_u64(&b, (uint64_t)t->ne[d]);
        buf_u32(&b, t->type);
        buf_u64(&b, t->offset);
    }
    if (b.oom) { free(b.p); return moex_errorf("%s: out of memory", path); }

    w->out = atomic_file_create(path);
    w->fp = w->out ? atomic_file_stream(w->out) : NULL;
    if (!w->fp) { free(b.p); return -1; }
    w->begun = true;
    size_t header_len = b.len;
    size_t written = fwrite(b.p, 1, b.len, w->fp);
    free(b.p);
    if (written != header_len) return write_fail(w);
    return write_padding(w, header_len);
}

int gguf_writer_write_data(struct gguf_writer *w, const void *data, size_t n) {
    if (!w->begun || !w->fp) return moex_errorf("gguf writer: write_data before gguf_writer_begin");
    if (w->failed) return moex_errorf("%s: an earlier write failed", w->path);
    const uint8_t *p = data;
    while (n) {
        if (w->current >= w->n_tensors) {
            w->failed = true;
            return moex_errorf("%s: %zu bytes of tensor data beyond the declared tensors", w->path, n);
        }
        const struct wtensor *t = &w->tensors[w->current];
        uint64_t left = t->nbytes - w->current_done;
        size_t take = n < left ? n : (size_t)left;
        if (fwrite(p, 1, take, w->fp) != take) return write_fail(w);
        p += take;
        n -= take;
        w->current_done += take;
        if (w->current_done == t->nbytes) {
            if (write_padding(w, t->offset + t->nbytes)) return -1;
            w->current++;
            w->current_done = 0;
        }
    }
    return 0;
}

int gguf_writer_finish(struct gguf_writer *w) {
    if (!w->begun || !w->fp) return moex_errorf("gguf writer: finish before gguf_writer_begin");
    int rc = 0;
    if (w->failed) {
        rc = moex_errorf("%s: an earlier write failed", w->path);
    } else if (w->current < w->n_tensors) {
        const struct wtensor *t = &w->tensors[w->current];
        rc = moex_errorf("%s: tensor '%.80s' got %" PRIu64 " of its %" PRIu64 " bytes (%zu of %zu tensors complete)",
                         w->path, t->name, w->current_done, t->nbytes, w->current, w->n_tensors);
    }
    struct atomic_file *out = w->out;
    w->out = NULL;
    w->fp = NULL;
    if (rc == 0) return atomic_file_commit(out);
    atomic_file_discard(out);
    return rc;
}
