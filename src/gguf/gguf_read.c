/* The GGUF reader. Every count, length, offset and size read from the file
 * is checked against the bytes that remain and against overflow before it is
 * used, so a hostile file costs at most a small multiple of its own size in
 * memory and ends in one message naming the file and the problem. The host
 * is assumed little-endian, like the format. */
#include "gguf/gguf.h"
#include "gguf/gguf_types.h"
#include "core/error.h"
#include "core/file_magic.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Smallest encodings, which bound how many entries the remaining bytes can
 * hold: key (8-byte length + 1 byte) + 4-byte type + 1-byte value; tensor
 * name (8 + 1) + n_dims (4) + one dim (8) + type (4) + offset (8). */
#define MIN_KV_BYTES 14
#define MIN_TENSOR_INFO_BYTES 33
/* Lookup tables index with 32 bits; no real file comes near this. */
#define MAX_ENTRIES (UINT64_C(1) << 31)

/* Open-addressing name table: slot = index + 1, 0 = empty. */
struct name_index {
    uint32_t *slots;
    uint64_t mask;
};

struct gguf_file_impl {
    struct gguf_file pub;   /* first, so the public pointer converts back */
    size_t map_len;         /* nonzero when the mapping is ours to unmap */
    void **array_copies;    /* n_kv entries: aligned copies made for array_data */
    struct name_index kv_index, tensor_index;
};

struct parser {
    const uint8_t *data;
    uint64_t size;
    uint64_t pos;
    const char *name;
    char what[192];         /* what is being read, for truncation messages */
};

static int fail(const struct parser *p, const char *fmt, ...) MOEX_PRINTF(2, 3);
static int fail(const struct parser *p, const char *fmt, ...) {
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return moex_errorf("%s: %s", p->name, msg);
}

static uint64_t remaining(const struct parser *p) { return p->size - p->pos; }

static int need(struct parser *p, uint64_t n) {
    if (n <= remaining(p)) return 0;
    return fail(p, "truncated: the file ends at byte %" PRIu64 " while reading %s "
                "(%" PRIu64 " bytes needed at byte %" PRIu64 ")", p->size, p->what, n, p->pos);
}

static int read_bytes(struct parser *p, void *out, uint64_t n) {
    if (need(p, n)) return -1;
    memcpy(out, p->data + p->pos, n);
    p->pos += n;
    return 0;
}

static int read_u32(struct parser *p, uint32_t *v) { return read_bytes(p, v, 4); }
static int read_u64(struct parser *p, uint64_t *v) { return read_bytes(p, v, 8); }

static int read_str(struct parser *p, struct gguf_str *s) {
    if (read_u64(p, &s->len)) return -1;
    if (s->len > remaining(p))
        return fail(p, "%s: string length %" PRIu64 " at byte %" PRIu64
                    " runs past the end of the file (%" PRIu64 " bytes)",
                    p->what, s->len, p->pos - 8, p->size);
    s->data = (const char *)p->data + p->pos;
    p->pos += s->len;
    return 0;
}

/* A NUL-terminated copy of a key or tensor name; those must be non-empty
 * and free of NUL bytes, since the rest of moex handles them as C strings. */
static char *read_name(struct parser *p, const char *kind, uint64_t index) {
    struct gguf_str s = {0, NULL};
    uint64_t at = p->pos;
    if (read_str(p, &s)) return NULL;
    if (s.len == 0) {
        fail(p, "%s #%" PRIu64 " at byte %" PRIu64 " has an empty name", kind, index, at);
        return NULL;
    }
    if (memchr(s.data, 0, s.len)) {
        fail(p, "%s #%" PRIu64 " at byte %" PRIu64 " has a NUL byte in its name", kind, index, at);
        return NULL;
    }
    char *copy = malloc(s.len + 1);
    if (!copy) {
        fail(p, "out of memory copying %s #%" PRIu64 "'s name", kind, index);
        return NULL;
    }
    memcpy(copy, s.data, s.len);
    copy[s.len] = 0;
    return copy;
}

static bool is_integer_vtype(enum gguf_vtype t) {
    return t <= GGUF_I32 || t == GGUF_U64 || t == GGUF_I64;
}

static bool is_signed_vtype(enum gguf_vtype t) {
    return t == GGUF_I8 || t == GGUF_I16 || t == GGUF_I32 || t == GGUF_I64;
}

/* Reads one fixed-size scalar of type t into the widened union. */
static int read_scalar(struct parser *p, struct gguf_kv *kv) {
    enum gguf_vtype t = kv->type;
    size_t n = gguf_vtype_size(t);
    uint8_t raw[8];
    if (read_bytes(p, raw, n)) return -1;
    switch (t) {
    case GGUF_U8: kv->v.u64 = raw[0]; break;
    case GGUF_I8: { int8_t x; memcpy(&x, raw, 1); kv->v.i64 = x; break; }
    case GGUF_U16: { uint16_t x; memcpy(&x, raw, 2); kv->v.u64 = x; break; }
    case GGUF_I16: { int16_t x; memcpy(&x, raw, 2); kv->v.i64 = x; break; }
    case GGUF_U32: { uint32_t x; memcpy(&x, raw, 4); kv->v.u64 = x; break; }
    case GGUF_I32: { int32_t x; memcpy(&x, raw, 4); kv->v.i64 = x; break; }
    case GGUF_U64: memcpy(&kv->v.u64, raw, 8); break;
    case GGUF_I64: memcpy(&kv->v.i64, raw, 8); break;
    case GGUF_F32: { float x; memcpy(&x, raw, 4); kv->v.f64 = x; break; }
    case GGUF_F64: memcpy(&kv->v.f64, raw, 8); break;
    case GGUF_BOOL:
        /* Arrays of bools are read in place as C bool, where only 0 and 1
         * are valid values; scalars are held to the same rule. */
        if (raw[0] > 1)
            return fail(p, "key '%.80s' has bool value %u (must be 0 or 1)", kv->key, raw[0]);
        kv->v.b = raw[0];
        break;
    default: break;
    }
    return 0;
}

static int read_array(struct parser *p, struct gguf_kv *kv, void **copy) {
    uint32_t elem_type;
    if (read_u32(p, &elem_type)) return -1;
    if (elem_type == GGUF_ARRAY)
        return fail(p, "key '%.80s' is an array of arrays, which moex does not support", kv->key);
    if (elem_type >= GGUF_VTYPE_COUNT)
        return fail(p, "key '%.80s' is an array of unknown value type %" PRIu32, kv->key, elem_type);
    kv->array_type = (enum gguf_vtype)elem_type;
    if (read_u64(p, &kv->array_len)) return -1;
    uint64_t count_at = p->pos - 8;

    if (kv->array_type == GGUF_STRING) {
        if (kv->array_len > remaining(p) / 8)
            return fail(p, "key '%.80s': array of %" PRIu64 " strings at byte %" PRIu64
                        " runs past the end of the file (%" PRIu64 " bytes)",
                        kv->key, kv->array_len, count_at, p->size);
        kv->array_data = p->data + p->pos;
        if (kv->array_len == 0) return 0;
        kv->array_strs = malloc(kv->array_len * sizeof *kv->array_strs);
        if (!kv->array_strs) return fail(p, "out of memory for key '%.80s'", kv->key);
        for (uint64_t i = 0; i < kv->array_len; i++) {
            snprintf(p->what, sizeof p->what, "string %" PRIu64 " of key '%.80s'", i, kv->key);
            if (read_str(p, &kv->array_strs[i])) return -1;
        }
        return 0;
    }

    size_t elem = gguf_vtype_size(kv->array_type);
    if (kv->array_len > remaining(p) / elem)
        return fail(p, "key '%.80s': array of %" PRIu64 " %s elements at byte %" PRIu64
                    " runs past the end of the file (%" PRIu64 " bytes)",
                    kv->key, kv->array_len, gguf_vtype_name(kv->array_type), count_at, p->size);
    const uint8_t *at = p->data + p->pos;
    uint64_t bytes = kv->array_len * elem;
    p->pos += bytes;
    if (kv->array_type == GGUF_BOOL) {
        for (uint64_t i = 0; i < kv->array_len; i++)
            if (at[i] > 1)
                return fail(p, "key '%.80s': bool element %" PRIu64 " is %u (must be 0 or 1)",
                            kv->key, i, at[i]);
    }
    kv->array_data = at;
    /* Strings before an array put it at any byte; consumers index it as the
     * element type, so give them a naturally aligned copy when needed. */
    if (bytes && (uintptr_t)at % elem != 0) {
        *copy = malloc(bytes);
        if (!*copy) return fail(p, "out of memory for key '%.80s'", kv->key);
        memcpy(*copy, at, bytes);
        kv->array_data = *copy;
    }
    return 0;
}

static int parse_kv(struct parser *p, struct gguf_kv *kv, uint64_t index, void **copy) {
    snprintf(p->what, sizeof p->what, "the name of key #%" PRIu64, index);
    kv->key = read_name(p, "key", index);
    if (!kv->key) return -1;
    snprintf(p->what, sizeof p->what, "the value of key '%.80s'", kv->key);
    uint32_t type;
    if (read_u32(p, &type)) return -1;
    if (type >= GGUF_VTYPE_COUNT)
        return fail(p, "key '%.80s' has unknown value type %" PRIu32, kv->key, type);
    kv->type = (enum gguf_vtype)type;
    if (kv->type == GGUF_STRING) return read_str(p, &kv->v.str);
    if (kv->type == GGUF_ARRAY) return read_array(p, kv, copy);
    return read_scalar(p, kv);
}

/* ---- name tables ---- */

static uint64_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603u; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211u;
    return h;
}

typedef const char *(*name_at_fn)(const struct gguf_file *f, uint64_t i);
static const char *kv_name_at(const struct gguf_file *f, uint64_t i) { return f->kv[i].key; }
static const char *tensor_name_at(const struct gguf_file *f, uint64_t i) { return f->tensors[i].name; }

static int64_t index_find(const struct name_index *idx, const struct gguf_file *f,
                          name_at_fn name_at, const char *name) {
    if (!idx->slots) return -1;
    for (uint64_t s = name_hash(name) & idx->mask;; s = (s + 1) & idx->mask) {
        uint32_t v = idx->slots[s];
        if (v == 0) return -1;
        if (strcmp(name_at(f, v - 1), name) == 0) return v - 1;
    }
}

/* Builds the table; on a duplicate name returns -1 with *dup its index. */
static int index_build(struct name_index *idx, const struct gguf_file *f, uint64_t n,
                       name_at_fn name_at, uint64_t *dup) {
    uint64_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    idx->slots = calloc(cap, sizeof *idx->slots);
    if (!idx->slots) return -2;
    idx->mask = cap - 1;
    for (uint64_t i = 0; i < n; i++) {
        const char *name = name_at(f, i);
        uint64_t s = name_hash(name) & idx->mask;
        for (; idx->slots[s]; s = (s + 1) & idx->mask) {
            if (strcmp(name_at(f, idx->slots[s] - 1), name) == 0) {
                *dup = i;
                return -1;
            }
        }
        idx->slots[s] = (uint32_t)(i + 1);
    }
    return 0;
}

/* ---- tensors ---- */

static int parse_tensor_info(struct parser *p, struct gguf_tensor *t, uint64_t index) {
    snprintf(p->what, sizeof p->what, "the name of tensor #%" PRIu64, index);
    t->name = read_name(p, "tensor", index);
    if (!t->name) return -1;
    snprintf(p->what, sizeof p->what, "the info of tensor '%.80s'", t->name);
    uint32_t n_dims;
    if (read_u32(p, &n_dims)) return -1;
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return fail(p, "tensor '%.80s' has %" PRIu32 " dimensions (must be 1 to %d)",
                    t->name, n_dims, GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    int64_t elements = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d >= t->n_dims) continue;
        uint64_t raw;
        if (read_u64(p, &raw)) return -1;
        if (raw == 0 || raw > INT64_MAX)
            return fail(p, "tensor '%.80s' dimension %d is %" PRIu64 " (must be 1 to %" PRId64 ")", t->name, d, raw,
                        INT64_MAX);
        t->ne[d] = (int64_t)raw;
        if (t->ne[d] > INT64_MAX / elements)
            return fail(p, "tensor '%.80s': shape %" PRId64 " x %" PRId64 " x %" PRId64 " x %" PRId64
                        " has too many elements (the product overflows 64 bits)",
                        t->name, t->ne[0], d >= 1 ? t->ne[1] : 1, d >= 2 ? t->ne[2] : 1,
                        d >= 3 ? t->ne[3] : 1);
        elements *= t->ne[d];
    }
    if (read_u32(p, &t->type)) return -1;
    const struct gguf_type_desc *desc = gguf_type_desc(t->type);
    if (!desc)
        return fail(p, "tensor '%.80s' has unknown tensor type %" PRIu32, t->name, t->type);
    if (desc->block_size == 0)
        return fail(p, "tensor '%.80s' has tensor type %" PRIu32 " (%s), which was removed from GGUF",
                    t->name, t->type, desc->name);
    if (t->ne[0] % desc->block_size != 0)
        return fail(p, "tensor '%.80s': row length %" PRId64 " is not a multiple of the %s block size %d",
                    t->name, t->ne[0], desc->name, desc->block_size);
    uint64_t blocks = (uint64_t)(elements / desc->block_size);
    if (__builtin_mul_overflow(blocks, (uint64_t)desc->type_size, &t->nbytes))
        return fail(p, "tensor '%.80s': its size in bytes overflows 64 bits", t->name);
    if (read_u64(p, &t->offset)) return -1;
    return 0;
}

static int place_tensors(struct parser *p, struct gguf_file *f) {
    uint64_t header_end = p->pos, data_offset;
    if (__builtin_add_overflow(header_end, f->alignment - 1, &data_offset))
        return fail(p, "the data section offset overflows");
    data_offset -= data_offset % f->alignment;
    if (f->n_tensors == 0 && data_offset > p->size) data_offset = p->size; /* no data, padding optional */
    f->data_offset = data_offset;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        struct gguf_tensor *t = &f->tensors[i];
        if (t->offset % f->alignment != 0)
            return fail(p, "tensor '%.80s' offset %" PRIu64 " is not a multiple of the alignment %" PRIu64,
                        t->name, t->offset, f->alignment);
        uint64_t start, end;
        if (__builtin_add_overflow(data_offset, t->offset, &start) ||
            __builtin_add_overflow(start, t->nbytes, &end))
            return fail(p, "tensor '%.80s' data at offset %" PRIu64 " (%" PRIu64 " bytes) ends past "
                        "the end of the file (%" PRIu64 " bytes)", t->name, t->offset, t->nbytes, p->size);
        if (end > p->size)
            return fail(p, "tensor '%.80s' data ends at byte %" PRIu64 " but the file has %" PRIu64 " bytes",
                        t->name, end, p->size);
        t->data = p->data + start;
    }
    return 0;
}

/* ---- the whole file ---- */

static int read_alignment(struct parser *p, struct gguf_file_impl *impl) {
    struct gguf_file *f = &impl->pub;
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t i = index_find(&impl->kv_index, f, kv_name_at, "general.alignment");
    if (i < 0) return 0;
    const struct gguf_kv *kv = &f->kv[i];
    if (!is_integer_vtype(kv->type))
        return fail(p, "general.alignment has type %s (must be an integer)", gguf_vtype_name(kv->type));
    if (is_signed_vtype(kv->type) && kv->v.i64 <= 0)
        return fail(p, "bad general.alignment %" PRId64 " (must be a non-zero power of two)", kv->v.i64);
    uint64_t a = kv->v.u64;
    if (a == 0 || (a & (a - 1)) != 0)
        return fail(p, "bad general.alignment %" PRIu64 " (must be a non-zero power of two)", a);
    if (a > GGUF_MAX_ALIGNMENT)
        return fail(p, "general.alignment %" PRIu64 " is larger than %u", a, GGUF_MAX_ALIGNMENT);
    f->alignment = a;
    return 0;
}

/* What a file that is not GGUF is likely to be, and what to do, for the message. */
static const char *instead_of_gguf(const uint8_t *d, uint64_t size) {
    if (size >= MOEX_PACK_MAGIC_BYTES && !memcmp(d, MOEX_PACK_MAGIC, MOEX_PACK_MAGIC_BYTES))
        return "a moex pack file, not a model: the model is the GGUF file it was packed from";
    if (size >= 4 && !memcmp(d, "PK\3\4", 4))
        return "a zip archive (a PyTorch checkpoint?): convert the model to GGUF, e.g. with llama.cpp's "
               "convert_hf_to_gguf.py";
    if (size >= 9 && d[8] == '{')
        return "a safetensors file?: convert the model to GGUF, e.g. with llama.cpp's convert_hf_to_gguf.py";
    return "moex runs GGUF model files, e.g. as llama.cpp's convert_hf_to_gguf.py writes them";
}

static int parse(struct parser *p, struct gguf_file_impl *impl) {
    struct gguf_file *f = &impl->pub;
    char magic[4];
    snprintf(p->what, sizeof p->what, "the header");
    if (need(p, 4)) return -1;
    memcpy(magic, p->data, 4);
    if (memcmp(magic, "GGUF", 4) != 0)
        return fail(p, "not a GGUF file (bad magic %02x %02x %02x %02x, expected \"GGUF\"): %s",
                    (uint8_t)magic[0], (uint8_t)magic[1], (uint8_t)magic[2], (uint8_t)magic[3],
                    instead_of_gguf(p->data, p->size));
    p->pos = 4;
    if (read_u32(p, &f->version)) return -1;
    if (f->version == 0x02000000u || f->version == 0x03000000u)
        return fail(p, "big-endian GGUF files are not supported");
    if (f->version != 2 && f->version != 3)
        return fail(p, "unsupported GGUF version %" PRIu32 " (moex reads versions 2 and 3)", f->version);
    if (read_u64(p, &f->n_tensors) || read_u64(p, &f->n_kv)) return -1;
    if (f->n_kv >= MAX_ENTRIES || f->n_kv > remaining(p) / MIN_KV_BYTES)
        return fail(p, "the header claims %" PRIu64 " metadata keys but only %" PRIu64
                    " bytes follow (each key needs at least %d)", f->n_kv, remaining(p), MIN_KV_BYTES);
    if (f->n_tensors >= MAX_ENTRIES ||
        f->n_tensors > (remaining(p) - f->n_kv * MIN_KV_BYTES) / MIN_TENSOR_INFO_BYTES)
        return fail(p, "the header claims %" PRIu64 " tensors but only %" PRIu64
                    " bytes follow (each tensor info needs at least %d)",
                    f->n_tensors, remaining(p), MIN_TENSOR_INFO_BYTES);

    f->kv = calloc(f->n_kv ? f->n_kv : 1, sizeof *f->kv);
    impl->array_copies = calloc(f->n_kv ? f->n_kv : 1, sizeof *impl->array_copies);
    f->tensors = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *f->tensors);
    if (!f->kv || !impl->array_copies || !f->tensors) return fail(p, "out of memory");

    for (uint64_t i = 0; i < f->n_kv; i++)
        if (parse_kv(p, &f->kv[i], i, &impl->array_copies[i])) return -1;
    uint64_t dup = 0;
    int rc = index_build(&impl->kv_index, f, f->n_kv, kv_name_at, &dup);
    if (rc == -1) return fail(p, "duplicate key '%.80s' (key #%" PRIu64 ")", f->kv[dup].key, dup);
    if (rc) return fail(p, "out of memory");
    if (read_alignment(p, impl)) return -1;

    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (parse_tensor_info(p, &f->tensors[i], i)) return -1;
    rc = index_build(&impl->tensor_index, f, f->n_tensors, tensor_name_at, &dup);
    if (rc == -1)
        return fail(p, "duplicate tensor name '%.80s' (tensor #%" PRIu64 ")", f->tensors[dup].name, dup);
    if (rc) return fail(p, "out of memory");
    return place_tensors(p, f);
}

static void free_impl(struct gguf_file_impl *impl) {
    struct gguf_file *f = &impl->pub;
    if (f->kv) {
        for (uint64_t i = 0; i < f->n_kv; i++) {
            free(f->kv[i].key);
            free(f->kv[i].array_strs);
        }
    }
    if (impl->array_copies)
        for (uint64_t i = 0; i < f->n_kv; i++) free(impl->array_copies[i]);
    if (f->tensors)
        for (uint64_t i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    free(f->kv);
    free(f->tensors);
    free(impl->array_copies);
    free(impl->kv_index.slots);
    free(impl->tensor_index.slots);
    if (impl->map_len) munmap((void *)f->map, impl->map_len);
    free(f->path);
    free(impl);
}

static struct gguf_file *open_buffer(const void *data, size_t size, const char *name, size_t map_len) {
    struct parser p = {.data = data, .size = size, .pos = 0, .name = name};
    struct gguf_file_impl *impl = calloc(1, sizeof *impl);
    char *path = strdup(name);
    if (!impl || !path) {
        free(impl);
        free(path);
        if (map_len) munmap((void *)data, map_len);
        moex_errorf("%s: out of memory", name);
        return NULL;
    }
    impl->pub.path = path;
    impl->pub.map = data;
    impl->pub.file_size = size;
    impl->map_len = map_len;
    if (parse(&p, impl)) {
        /* The counts may be hostile: free only what was allocated. */
        free_impl(impl);
        return NULL;
    }
    return &impl->pub;
}

struct gguf_file *gguf_open_memory(const void *data, size_t size, const char *name) {
    if (!name) name = "<memory>";
    if (!data && size) {
        moex_errorf("%s: no data", name);
        return NULL;
    }
    return open_buffer(data, size, name, 0);
}

struct gguf_file *gguf_open(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        moex_errorf("%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        moex_errorf("%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (S_ISDIR(st.st_mode)) {
        moex_errorf("%s: a directory, not a GGUF model file (a Hugging Face checkpoint directory converts to "
                    "one, e.g. with llama.cpp's convert_hf_to_gguf.py)", path);
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        moex_errorf("%s: not a regular file", path);
        close(fd);
        return NULL;
    }
    if (st.st_size == 0) {
        moex_errorf("%s: truncated: the file is empty (0 bytes), not a GGUF file", path);
        close(fd);
        return NULL;
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        moex_errorf("%s: too large to map", path);
        close(fd);
        return NULL;
    }
    size_t size = (size_t)st.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd);
    if (map == MAP_FAILED) {
        moex_errorf("%s: cannot map %zu bytes: %s", path, size, strerror(map_errno));
        return NULL;
    }
    struct gguf_file *f = open_buffer(map, size, path, size);
    if (f) {
        f->mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
        f->inode = (uint64_t)st.st_ino;
    }
    return f;
}

void gguf_close(struct gguf_file *f) {
    if (f) free_impl((struct gguf_file_impl *)f);
}

const struct gguf_kv *gguf_find_kv(const struct gguf_file *f, const char *key) {
    const struct gguf_file_impl *impl = (const struct gguf_file_impl *)f;
    int64_t i = index_find(&impl->kv_index, f, kv_name_at, key);
    return i < 0 ? NULL : &f->kv[i];
}

const struct gguf_tensor *gguf_find_tensor(const struct gguf_file *f, const char *name) {
    const struct gguf_file_impl *impl = (const struct gguf_file_impl *)f;
    int64_t i = index_find(&impl->tensor_index, f, tensor_name_at, name);
    return i < 0 ? NULL : &f->tensors[i];
}
