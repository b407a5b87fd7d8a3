/* GGUF files (versions 2 and 3): a validating mmap reader and a streaming
 * writer. The reader checks every length, count, offset and size against the
 * file size and against overflow before use; tensors are used in place from
 * the mapping. */
#ifndef MOEX_GGUF_H
#define MOEX_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum gguf_vtype {
    GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5,
    GGUF_F32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_U64 = 10,
    GGUF_I64 = 11, GGUF_F64 = 12, GGUF_VTYPE_COUNT = 13,
};

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32
/* The largest general.alignment accepted (files use 32): a hostile value
 * such as 2^40 would otherwise ask a writer for a terabyte of padding. */
#define GGUF_MAX_ALIGNMENT (1u << 20)

/* A string inside the mapping (not NUL-terminated there). */
struct gguf_str {
    uint64_t len;
    const char *data;
};

struct gguf_kv {
    char *key;                   /* NUL-terminated copy */
    enum gguf_vtype type;
    enum gguf_vtype array_type;  /* for GGUF_ARRAY */
    uint64_t array_len;          /* for GGUF_ARRAY */
    const void *array_data;      /* for arrays of fixed-size elements: in the mapping,
                                    or in an aligned copy when the file places the array
                                    at an address that is not a multiple of the element
                                    size; always safe to index as the element type */
    struct gguf_str *array_strs; /* for arrays of strings: array_len entries (NULL if 0) */
    union {
        uint64_t u64;
        int64_t i64;
        double f64;
        bool b;
        struct gguf_str str;
    } v;                         /* scalars, widened */
};

struct gguf_tensor {
    char *name;                  /* NUL-terminated copy */
    uint32_t type;               /* ggml type id (enum qtype) */
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS];   /* ne[0] is the row length; unused dims are 1 */
    uint64_t offset;             /* from the start of the data section */
    uint64_t nbytes;
    const void *data;            /* in the mapping */
};

struct gguf_file {
    char *path;
    uint32_t version;
    uint64_t alignment;
    uint64_t n_kv, n_tensors;
    struct gguf_kv *kv;
    struct gguf_tensor *tensors;
    const uint8_t *map;          /* whole file */
    uint64_t file_size;
    uint64_t data_offset;        /* start of the tensor data section */
    uint64_t mtime_ns, inode;    /* the file's modification time (ns since 1970) and inode; 0 for a buffer */
};

/* Opens and validates path. NULL on any problem, with moex_error() naming the
 * file and the problem. */
struct gguf_file *gguf_open(const char *path);
/* The same over a memory buffer (not copied; must outlive the result). */
struct gguf_file *gguf_open_memory(const void *data, size_t size, const char *name);
void gguf_close(struct gguf_file *f);

const struct gguf_kv *gguf_find_kv(const struct gguf_file *f, const char *key);
const struct gguf_tensor *gguf_find_tensor(const struct gguf_file *f, const char *name);
/* Typed getters: 0 on success; -1 if missing or of an incompatible type
 * (integers of any width convert when the value fits). */
int gguf_get_u32(const struct gguf_file *f, const char *key, uint32_t *out);
int gguf_get_u64(const struct gguf_file *f, const char *key, uint64_t *out);
int gguf_get_f32(const struct gguf_file *f, const char *key, float *out);
int gguf_get_bool(const struct gguf_file *f, const char *key, bool *out);
/* A NUL-terminated copy (malloc) of a string value, or NULL. */
char *gguf_get_str(const struct gguf_file *f, const char *key);
const char *gguf_vtype_name(enum gguf_vtype t);
/* Bytes of one element of a fixed-size type; 0 for strings, arrays, unknown. */
size_t gguf_vtype_size(enum gguf_vtype t);
/* ggml's name of a tensor type id ("Q4_K"), also for ids moex cannot compute
 * with; "?" for ids never assigned. */
const char *gguf_type_name(uint32_t type);

/* Describes f for `moex info`: header, architecture hyper-parameters, the
 * metadata (long arrays and strings abbreviated unless all_metadata), a tensor
 * table and totals. 0, or -1 if writing to out failed. */
int gguf_print_info(FILE *out, const struct gguf_file *f, bool all_metadata);

/* Writer: collect metadata and tensor infos, then write the header and stream
 * each tensor's data in order. */
struct gguf_writer;
struct gguf_writer *gguf_writer_new(void);
void gguf_writer_free(struct gguf_writer *w);
void gguf_set_u8(struct gguf_writer *w, const char *key, uint8_t v);
void gguf_set_i8(struct gguf_writer *w, const char *key, int8_t v);
void gguf_set_u16(struct gguf_writer *w, const char *key, uint16_t v);
void gguf_set_i16(struct gguf_writer *w, const char *key, int16_t v);
void gguf_set_u32(struct gguf_writer *w, const char *key, uint32_t v);
void gguf_set_i32(struct gguf_writer *w, const char *key, int32_t v);
void gguf_set_u64(struct gguf_writer *w, const char *key, uint64_t v);
void gguf_set_i64(struct gguf_writer *w, const char *key, int64_t v);
void gguf_set_f32(struct gguf_writer *w, const char *key, float v);
void gguf_set_f64(struct gguf_writer *w, const char *key, double v);
void gguf_set_bool(struct gguf_writer *w, const char *key, bool v);
void gguf_set_str(struct gguf_writer *w, const char *key, const char *v);
/* Array of fixed-size elements (copied). */
void gguf_set_arr(struct gguf_writer *w, const char *key, enum gguf_vtype type, const void *data, uint64_t n);
void gguf_set_arr_str(struct gguf_writer *w, const char *key, const char *const *strs, uint64_t n);
/* Copies one key/value (any type) from a reader. */
void gguf_copy_kv(struct gguf_writer *w, const struct gguf_kv *kv);
/* Declares a tensor; its bytes come later through gguf_writer_write_data. */
int gguf_add_tensor(struct gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne);
/* Starts a temporary next to path (src/core/atomic_file.h) and writes
 * header, metadata and tensor infos to it. */
int gguf_writer_begin(struct gguf_writer *w, const char *path);
/* Appends bytes of the tensors in declaration order; padding between tensors
 * is inserted automatically once a tensor's bytes are complete. */
int gguf_writer_write_data(struct gguf_writer *w, const void *data, size_t n);
/* Checks that every tensor got its bytes, then flushes, syncs and renames
 * the file into place; on any failure (or gguf_writer_free without finish)
 * the temporary is removed and a file already at path stays as it was. */
int gguf_writer_finish(struct gguf_writer *w);

#endif
