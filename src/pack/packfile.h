/* Pack files: experts packed once into a device layout, and the CPU's own
 * interleaved layout of the model's matrices (quant_r16_pack), loaded at
 * every later start without re-packing (byte-level spec: docs/pack-format.md).
 *
 * A pack file names what it was made for: the device layout and envelope,
 * the source GGUF (its size and a sampled hash), the model's shape, and the
 * placement plan (budget, pinned experts). It holds one entry per packed
 * weight (layer, expert, gate/up/down): int8 codes and one float scale per
 * output channel, each entry with its own checksum. Entries lie in device
 * slot order: the plan's pinned experts first, in plan order, their codes a
 * device slot stride apart, so that a run with the same plan can import the
 * codes of all pinned slots from the file in one piece (dev_import_codes).
 *
 * Nothing in a file is trusted: packfile_open checks every field, offset and
 * size, and the checksums of the header, plan and index; the data of an
 * entry is checked when it is used (packfile_verify_entry, or hashing what
 * was copied with packfile_entry_hash). Every refusal is a packfile_status
 * with the reason in moex_error(). */
#ifndef MOEX_PACKFILE_H
#define MOEX_PACKFILE_H

#include "pack/pack.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gguf_file;

enum packfile_status {
    PACKFILE_OK = 0,
    PACKFILE_E_IO = -1,        /* cannot open, map, read or write */
    PACKFILE_E_NOT_PACK = -2,  /* not a pack file (no magic) */
    PACKFILE_E_VERSION = -3,   /* a pack file of another format version */
    PACKFILE_E_LAYOUT = -4,    /* packed for another device layout or envelope */
    PACKFILE_E_MODEL = -5,     /* packed from another model (identity or shape) */
    PACKFILE_E_CHECKSUM = -6,  /* a section's checksum fails; the message names it */
    PACKFILE_E_TRUNCATED = -7, /* shorter than its header says */
    PACKFILE_E_CORRUPT = -8,   /* checksums hold but a field is impossible */
    PACKFILE_E_ARG = -9,       /* a bad argument (writer misuse) */
    PACKFILE_E_NOMEM = -10,
};

/* The three weights of an expert, in file order. */
enum packfile_matrix { PACKFILE_GATE = 0, PACKFILE_UP = 1, PACKFILE_DOWN = 2, PACKFILE_MATRICES = 3 };

/* Which GGUF a file was packed from: its size and a hash of its header,
 * metadata and tensor infos in full plus samples of every tensor's data
 * (docs/pack-format.md says which bytes), and the file itself: its
 * modification time and inode, which change when the file is edited in
 * place or rewritten between the samples. */
struct packfile_identity {
    uint64_t gguf_size;
    uint64_t hash;
    uint64_t mtime_ns;        /* ns since 1970; 0: a model in memory */
    uint64_t inode;
};

/* What a file was made for (the header, decoded). */
struct packfile_info {
    /* device */
    enum pack_layout layout;
    char device[16];          /* the device it was packed with, for messages */
    int k_multiple, n_multiple;
    int64_t slot_values;      /* the device slot geometry of dev_pool_alloc */
    int slot_max_n;
    uint64_t code_stride;     /* bytes from one entry's codes to the next's: the slot stride */
    uint64_t scale_stride;    /* bytes from one entry's scales to the next's */
    /* model */
    struct packfile_identity model;
    int n_layers, n_expert, n_embd, n_ff;
    uint32_t source_type[PACKFILE_MATRICES]; /* GGUF type ids of gate, up, down */
    /* plan */
    uint64_t budget_bytes;    /* device bytes for experts the plan was made for */
    uint64_t expert_bytes;    /* device bytes of one expert (three slots) */
    uint64_t stats_hash;      /* XXH64 of the routing statistics file; 0: none */
    double pinned_share;
    int plan_slots;           /* expert slots the budget holds */
    int n_pinned;
    bool all_experts;         /* every expert is in the file (moex pack --all) */
    bool no_device;           /* no device experts (the fields above are 0): host matrices only */
    int n_entries;            /* packed weights in the file: 3 per expert, the pinned first */
    int n_host;               /* matrices in the CPU's interleaved layout (set by the reader) */
};

/* One packed weight; codes and scales point into the mapped file. */
struct packfile_entry {
    int layer, expert;
    enum packfile_matrix matrix;
    uint32_t source_type;
    int K, N;
    const int8_t *codes;      /* pack_bytes(layout, K, N) */
    const float *scales;      /* (N), 4-byte aligned */
    uint64_t codes_offset;    /* of the codes in the file */
    uint64_t checksum;
};

/* One matrix in the CPU's interleaved layout, named by where its plain rows
 * lie in the GGUF; data points into the mapped file. */
struct packfile_host_entry {
    uint64_t source_offset;   /* of the matrix's first byte in the GGUF file */
    uint32_t source_type;     /* GGUF type id */
    uint32_t variant;         /* quant_r16_variant of the layout the bytes are in */
    int64_t rows, cols;
    const void *data;         /* (bytes), aligned to the file's alignment */
    uint64_t bytes;           /* rows x the type's row size */
    uint64_t checksum;        /* XXH64 of the bytes */
};

/* ---------------------------------------------------------------- reading */

struct packfile;

/* Maps and validates path (structure, header, plan and index checksums).
 * *out is NULL on failure. */
int packfile_open(const char *path, struct packfile **out);
/* The same over a buffer (8-byte aligned, not copied; must outlive the result). */
int packfile_open_memory(const void *data, size_t size, const char *name, struct packfile **out);
/* A pack file opened once for its several users (a context's executor and
 * its model's CPU layout): the file, or why it could not be opened. */
struct packfile_shared {
    const char *path;
    struct packfile *pf;         /* NULL: not opened; status and message say why */
    int status;
    char message[768];
};
/* Opens path into *s (the caller closes s->pf). */
void packfile_open_shared(const char *path, struct packfile_shared *s);
/* A user's own handle on it: a reference to s->pf (close it), or s's
 * refusal again (status, with the message in moex_error()). */
int packfile_take(const struct packfile_shared *s, struct packfile **out);

/* Another holder of an open file (a model's CPU layout and its contexts'
 * executors share one open): each holder closes it once. */
struct packfile *packfile_ref(struct packfile *pf);
void packfile_close(struct packfile *pf);

const struct packfile_info *packfile_info(const struct packfile *pf);
const char *packfile_path(const struct packfile *pf);
/* The pinned experts of the plan (layer * n_expert + expert), most valuable
 * first: entries 3i..3i+2 are pinned[i]'s gate, up, down. */
const int32_t *packfile_pinned(const struct packfile *pf);
/* The open file (for mapping entries' codes), or -1 for a memory buffer. */
int packfile_fd(const struct packfile *pf);

/* PACKFILE_E_MODEL unless the file was packed from a GGUF with this
 * identity and shape (source types included). */
int packfile_check_model(const struct packfile *pf, const struct packfile_identity *id, int n_layers, int n_expert,
                         int n_embd, int n_ff, const uint32_t source_type[PACKFILE_MATRICES]);
/* PACKFILE_E_LAYOUT unless the file's layout, envelope and slot geometry
 * are these (or when it holds no device experts). device names this run's
 * device in the message. */
int packfile_check_layout(const struct packfile *pf, const char *device, enum pack_layout layout, int k_multiple,
                          int n_multiple, int64_t slot_values, int slot_max_n);

/* The entry of (layer, expert, matrix), or -1 when the file lacks it. */
int packfile_find(const struct packfile *pf, int layer, int expert, enum packfile_matrix matrix);
/* True when all three weights of the expert are in the file. */
bool packfile_has_expert(const struct packfile *pf, int layer, int expert);
const struct packfile_entry *packfile_entry(const struct packfile *pf, int i);
/* Hashes the entry's bytes in the file: PACKFILE_OK or PACKFILE_E_CHECKSUM. */
int packfile_verify_entry(const struct packfile *pf, int i);
/* Every entry, and the data section's checksum over them. */
int packfile_verify_data(const struct packfile *pf);
/* An entry's checksum over codes and scales wherever they are (a device
 * slot after a load): equal to entry->checksum when the bytes are. */
uint64_t packfile_entry_hash(const int8_t *codes, size_t code_bytes, const float *scales, int N);

/* The host matrices, by ascending source offset; find: the entry at that
 * source offset, or -1. verify: hashes its bytes (PACKFILE_E_CHECKSUM
 * naming it when they do not match). */
const struct packfile_host_entry *packfile_host_entry(const struct packfile *pf, int i);
int packfile_host_find(const struct packfile *pf, uint64_t source_offset);
int packfile_verify_host_entry(const struct packfile *pf, int i);

/* ---------------------------------------------------------------- identity */

int packfile_model_identity(const struct gguf_file *f, struct packfile_identity *out);
/* XXH64 of a whole file (routing statistics); PACKFILE_E_IO when unreadable. */
int packfile_hash_file(const char *path, uint64_t *out);

/* ---------------------------------------------------------------- writing */

struct packfile_writer;
struct atomic_file;

/* Starts writing into file (src/core/atomic_file.h), which the writer owns
 * from here on, also on failure: the file appears at its path only when
 * finished. The
 * file holds the plan's info->n_pinned pinned experts (layer * n_expert +
 * expert), then the n_extra experts of `extra` (ascending, none pinned).
 * info->n_entries and n_host are ignored (3 per expert; the host matrices
 * added); code_stride must hold K * N codes and be a multiple of 64 (the
 * device's slot stride). With info->no_device, the device fields are 0 and
 * no expert is given. */
int packfile_writer_begin(struct atomic_file *file, const struct packfile_info *info, const int32_t *pinned,
                          const int32_t *extra, int n_extra, struct packfile_writer **out);
/* The next weight, in order: pinned then extra experts, for each gate, up,
 * down; codes of pack_bytes(layout, K, N) and N scales with K, N of the
 * model's shape. */
int packfile_writer_add(struct packfile_writer *w, int layer, int expert, enum packfile_matrix matrix,
                        const int8_t *codes, const float *scales);
/* After the last device entry: a matrix in the CPU's interleaved layout
 * (desc's data unused), source offsets ascending. */
int packfile_writer_add_host(struct packfile_writer *w, const struct packfile_host_entry *desc, const void *bytes);
/* Bytes written so far. */
uint64_t packfile_writer_bytes(const struct packfile_writer *w);
/* Writes index, plan and header, then commits the file (synced, renamed
 * into place; removed on failure). Frees w. */
int packfile_writer_finish(struct packfile_writer *w);
/* Removes the temporary; a file already at the path stays. Frees w. */
void packfile_writer_abort(struct packfile_writer *w);

const char *packfile_status_string(int status);
const char *packfile_matrix_name(enum packfile_matrix m);

#endif
