/* The pack file writer: streams entries to a temporary next to the file
 * (src/core/atomic_file.h) as they are packed (a large model's packed
 * experts do not fit in memory), hashing each on the way: codes in order,
 * each entry's scales at its place in the scales region (every offset is
 * known from the start), then the host matrices one after the other. Then
 * it writes the plan, the indexes and the header and commits the file:
 * synced and renamed into place, or on failure removed, leaving an older
 * file at the path as it was. */
#include "pack/packfile.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/xxh64.h"
#include "pack/packfile_format.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct packfile_writer {
    char *path;
    struct atomic_file *out;
    int fd;                   /* out's */
    struct packfile_info info;
    int32_t *pinned;          /* (n_pinned) */
    int32_t *order;           /* (n_pinned + n_extra) the experts in file order */
    uint8_t *index;           /* (n_entries, PF_ENTRY_BYTES) */
    int next;                 /* entries written */
    uint64_t plan_offset, index_offset, data_offset, scales_offset, file_size;
    uint64_t pos;             /* of the sequential writes (header space, codes) */
    uint64_t written;         /* bytes written in all */
    struct xxh64_state entry_sums;
    /* host matrices: data from host_offset on, each at an aligned offset */
    uint8_t *host_index;      /* (cap_host, PF_HOST_ENTRY_BYTES) */
    int n_host, cap_host;
    uint64_t host_offset, host_end;
    struct xxh64_state host_sums;
};

static const uint8_t zeros[PF_ALIGN];

static uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static int write_all(struct packfile_writer *w, const void *data, size_t n) {
    const uint8_t *p = data;
    while (n > 0) {
        ssize_t k = write(w->fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return moex_errorf("%s: write failed: %s", w->path, strerror(errno)), PACKFILE_E_IO;
        p += k;
        n -= (size_t)k;
        w->pos += (uint64_t)k;
        w->written += (uint64_t)k;
    }
    return PACKFILE_OK;
}

static int pad_to(struct packfile_writer *w, uint64_t offset) {
    while (w->pos < offset) {
        uint64_t n = offset - w->pos < sizeof zeros ? offset - w->pos : sizeof zeros;
        int rc = write_all(w, zeros, (size_t)n);
        if (rc != PACKFILE_OK) return rc;
    }
    return PACKFILE_OK;
}

static int pwrite_all(struct packfile_writer *w, const void *data, size_t n, uint64_t offset) {
    const uint8_t *p = data;
    while (n > 0) {
        ssize_t k = pwrite(w->fd, p, n, (off_t)offset);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return moex_errorf("%s: write failed: %s", w->path, strerror(errno)), PACKFILE_E_IO;
        p += k;
        n -= (size_t)k;
        offset += (uint64_t)k;
        w->written += (uint64_t)k;
    }
    return PACKFILE_OK;
}

static void writer_free(struct packfile_writer *w) {
    if (!w) return;
    atomic_file_discard(w->out);
    free(w->path);
    free(w->pinned);
    free(w->order);
    free(w->index);
    free(w->host_index);
    free(w);
}

static int check_info(const struct packfile_info *in, const int32_t *pinned, const int32_t *extra, int n_extra) {
    int n_all = in->n_layers * in->n_expert;
    if (in->no_device) {
        if (in->n_layers < 1 || in->n_expert < 1 || in->n_embd < 1 || in->n_ff < 1 || n_extra || in->n_pinned ||
            in->plan_slots || in->all_experts)
            return moex_errorf("packfile_writer_begin: a file without device experts has no plan or experts"),
                   PACKFILE_E_ARG;
        return PACKFILE_OK;
    }
    if (in->n_layers < 1 || in->n_expert < 1 || in->n_embd < 1 || in->n_ff < 1 || n_extra < 0 || in->n_pinned < 0 ||
        in->n_pinned > in->plan_slots || in->plan_slots > n_all || n_extra > n_all - in->n_pinned ||
        (n_extra && !extra) || (in->n_pinned && !pinned) || !(in->pinned_share >= 0 && in->pinned_share <= 1) ||
        (in->all_experts && in->n_pinned + n_extra != n_all) ||
        strnlen(in->device, sizeof in->device) == sizeof in->device)
        return moex_errorf("packfile_writer_begin: inconsistent description"), PACKFILE_E_ARG;
    uint64_t max_n = (uint64_t)(in->n_embd > in->n_ff ? in->n_embd : in->n_ff);
    if (in->code_stride < (uint64_t)in->n_embd * (uint64_t)in->n_ff || in->code_stride % PF_STRIDE_ALIGN ||
        in->scale_stride < 4 * max_n || in->scale_stride % PF_STRIDE_ALIGN || in->scale_stride > (1u << 30))
        return moex_errorf("packfile_writer_begin: strides %llu and %llu do not hold the weights",
                           (unsigned long long)in->code_stride, (unsigned long long)in->scale_stride),
               PACKFILE_E_ARG;
    for (int m = 0; m < PACKFILE_MATRICES; m++) {
        int K = m == PACKFILE_DOWN ? in->n_ff : in->n_embd, N = m == PACKFILE_DOWN ? in->n_embd : in->n_ff;
        if (pack_check_shape(in->layout, K, N) != PACK_OK)
            return moex_errorf("packfile_writer_begin: a %d x %d weight cannot be packed in layout %d", K, N,
                               (int)in->layout),
                   PACKFILE_E_ARG;
    }
    int rc = PACKFILE_OK;
    uint8_t *seen = calloc((size_t)n_all, 1);
    if (!seen) return moex_errorf("out of memory"), PACKFILE_E_NOMEM;
    for (int i = 0; i < in->n_pinned && rc == PACKFILE_OK; i++) {
        if (pinned[i] < 0 || pinned[i] >= n_all || seen[pinned[i]])
            rc = (moex_errorf("packfile_writer_begin: pinned key %d out of range or repeated", (int)pinned[i]),
                  PACKFILE_E_ARG);
        else
            seen[pinned[i]] = 1;
    }
    for (int i = 0; i < n_extra && rc == PACKFILE_OK; i++)
        if (extra[i] < 0 || extra[i] >= n_all || seen[extra[i]] || (i && extra[i] <= extra[i - 1]))
            rc = (moex_errorf("packfile_writer_begin: extra experts must ascend, unpinned, within the model"),
                  PACKFILE_E_ARG);
    free(seen);
    return rc;
}

int packfile_writer_begin(struct atomic_file *file, const struct packfile_info *info, const int32_t *pinned,
                          const int32_t *extra, int n_extra, struct packfile_writer **out) {
    if (!out || !file || !info) {
        atomic_file_discard(file);
        return moex_errorf("packfile_writer_begin: missing argument"), PACKFILE_E_ARG;
    }
    *out = NULL;
    int rc = check_info(info, pinned, extra, n_extra);
    struct packfile_writer *w = rc == PACKFILE_OK ? calloc(1, sizeof *w) : NULL;
    if (!w) {
        atomic_file_discard(file);
        return rc != PACKFILE_OK ? rc : (moex_errorf("out of memory"), PACKFILE_E_NOMEM);
    }
    w->out = file;
    w->fd = atomic_file_fd(file);
    w->info = *info;
    int n_experts = info->n_pinned + n_extra;
    w->info.n_entries = n_experts * PACKFILE_MATRICES;
    w->path = strdup(atomic_file_path(file));
    w->pinned = malloc(sizeof *w->pinned * (size_t)(info->n_pinned + 1));
    w->order = malloc(sizeof *w->order * (size_t)(n_experts + 1));
    w->index = calloc((size_t)w->info.n_entries + 1, PF_ENTRY_BYTES);
    if (!w->path || !w->pinned || !w->order || !w->index) {
        writer_free(w);
        return moex_errorf("out of memory"), PACKFILE_E_NOMEM;
    }
    if (info->n_pinned) memcpy(w->pinned, pinned, sizeof *w->pinned * (size_t)info->n_pinned);
    if (info->n_pinned) memcpy(w->order, pinned, sizeof *w->order * (size_t)info->n_pinned);
    if (n_extra) memcpy(w->order + info->n_pinned, extra, sizeof *w->order * (size_t)n_extra);
    w->plan_offset = PF_ALIGN;
    w->index_offset = round_up(w->plan_offset + 4ull * (uint64_t)info->n_pinned, PF_ALIGN);
    w->data_offset = round_up(w->index_offset + (uint64_t)PF_ENTRY_BYTES * (uint64_t)w->info.n_entries, PF_ALIGN);
    uint64_t n = (uint64_t)w->info.n_entries;
    if (info->no_device) w->info.code_stride = w->info.scale_stride = 0;
    w->scales_offset = round_up(w->data_offset + n * w->info.code_stride, PF_ALIGN);
    w->file_size = w->scales_offset + n * w->info.scale_stride;
    w->host_offset = w->host_end = round_up(w->file_size, PF_ALIGN);
    xxh64_init(&w->entry_sums, 0);
    xxh64_init(&w->host_sums, 0);
    /* Header, plan and index are written at the end; the data starts now. */
    if ((rc = pad_to(w, w->data_offset)) != PACKFILE_OK) {
        packfile_writer_abort(w);
        return rc;
    }
    *out = w;
    return PACKFILE_OK;
}

uint64_t packfile_writer_bytes(const struct packfile_writer *w) { return w ? w->written : 0; }

int packfile_writer_add_host(struct packfile_writer *w, const struct packfile_host_entry *d, const void *bytes) {
    if (!w || !d || !bytes) return moex_errorf("packfile_writer_add_host: missing argument"), PACKFILE_E_ARG;
    if (w->next != w->info.n_entries)
        return moex_errorf("packfile_writer_add_host: %d of %d device entries written", w->next, w->info.n_entries),
               PACKFILE_E_ARG;
    uint64_t last = w->n_host ? pf_get64(w->host_index + (size_t)(w->n_host - 1) * PF_HOST_ENTRY_BYTES) : 0;
    if ((w->n_host && d->source_offset <= last) || d->rows < 1 || d->cols < 1 || d->variant == 0 || d->bytes == 0)
        return moex_errorf("packfile_writer_add_host: a matrix at %llu out of order or empty",
                           (unsigned long long)d->source_offset),
               PACKFILE_E_ARG;
    if (w->n_host == w->cap_host) {
        int cap = w->cap_host ? 2 * w->cap_host : 256;
        uint8_t *index = realloc(w->host_index, (size_t)cap * PF_HOST_ENTRY_BYTES);
        if (!index) return moex_errorf("out of memory"), PACKFILE_E_NOMEM;
        w->host_index = index;
        w->cap_host = cap;
    }
    uint64_t at = round_up(w->host_end, PF_ALIGN); /* the gap reads as zeros */
    int rc = pwrite_all(w, bytes, (size_t)d->bytes, at);
    if (rc != PACKFILE_OK) return rc;
    uint64_t sum = xxh64(bytes, (size_t)d->bytes, 0);
    uint8_t *e = w->host_index + (size_t)w->n_host * PF_HOST_ENTRY_BYTES;
    memset(e, 0, PF_HOST_ENTRY_BYTES);
    pf_put64(e + PF_X_SOURCE_OFFSET, d->source_offset);
    pf_put32(e + PF_X_SOURCE_TYPE, d->source_type);
    pf_put32(e + PF_X_VARIANT, d->variant);
    pf_put64(e + PF_X_ROWS, (uint64_t)d->rows);
    pf_put64(e + PF_X_COLS, (uint64_t)d->cols);
    pf_put64(e + PF_X_OFFSET, at);
    pf_put64(e + PF_X_BYTES, d->bytes);
    pf_put64(e + PF_X_CHECKSUM, sum);
    uint8_t le[8];
    pf_put64(le, sum);
    xxh64_update(&w->host_sums, le, sizeof le);
    w->host_end = at + d->bytes;
    w->n_host++;
    return PACKFILE_OK;
}

int packfile_writer_add(struct packfile_writer *w, int layer, int expert, enum packfile_matrix matrix,
                        const int8_t *codes, const float *scales) {
    if (!w || !codes || !scales) return moex_errorf("packfile_writer_add: missing argument"), PACKFILE_E_ARG;
    const struct packfile_info *in = &w->info;
    int i = w->next;
    if (i >= in->n_entries || w->order[i / PACKFILE_MATRICES] != layer * in->n_expert + expert ||
        (int)matrix != i % PACKFILE_MATRICES)
        return moex_errorf("packfile_writer_add: layer %d expert %d %s is not the next entry", layer, expert,
                           packfile_matrix_name(matrix)),
               PACKFILE_E_ARG;
    int K = matrix == PACKFILE_DOWN ? in->n_ff : in->n_embd, N = matrix == PACKFILE_DOWN ? in->n_embd : in->n_ff;
    uint64_t code_bytes = pack_bytes(in->layout, K, N), scale_bytes = 4ull * (uint64_t)N;
    uint64_t codes_off = w->data_offset + (uint64_t)i * in->code_stride;
    uint64_t scales_off = w->scales_offset + (uint64_t)i * in->scale_stride;
    int rc;
    if ((rc = pad_to(w, codes_off)) != PACKFILE_OK || (rc = write_all(w, codes, (size_t)code_bytes)) != PACKFILE_OK ||
        (rc = pwrite_all(w, scales, (size_t)scale_bytes, scales_off)) != PACKFILE_OK)
        return rc;
    uint64_t sum = packfile_entry_hash(codes, (size_t)code_bytes, scales, N);
    uint8_t *e = w->index + (size_t)i * PF_ENTRY_BYTES;
    pf_put32(e + PF_E_LAYER, (uint32_t)layer);
    pf_put32(e + PF_E_EXPERT, (uint32_t)expert);
    pf_put32(e + PF_E_MATRIX, (uint32_t)matrix);
    pf_put32(e + PF_E_SOURCE_TYPE, in->source_type[matrix]);
    pf_put32(e + PF_E_K, (uint32_t)K);
    pf_put32(e + PF_E_N, (uint32_t)N);
    pf_put64(e + PF_E_CODES_OFFSET, codes_off);
    pf_put64(e + PF_E_CODES_BYTES, code_bytes);
    pf_put64(e + PF_E_SCALES_OFFSET, scales_off);
    pf_put64(e + PF_E_SCALES_BYTES, scale_bytes);
    pf_put64(e + PF_E_CHECKSUM, sum);
    uint8_t le[8];
    pf_put64(le, sum);
    xxh64_update(&w->entry_sums, le, sizeof le);
    w->next++;
    return PACKFILE_OK;
}

static void put_section(uint8_t *h, uint32_t i, uint64_t offset, uint64_t size, uint64_t checksum) {
    uint8_t *s = h + PF_H_SECTIONS + i * PF_SECTION_BYTES;
    pf_put32(s, PF_PLAN + i);
    pf_put32(s + 4, 0);
    pf_put64(s + 8, offset);
    pf_put64(s + 16, size);
    pf_put64(s + 24, checksum);
}

/* The device fields of the header (zero in a file without device experts). */
static void put_device(uint8_t *h, const struct packfile_info *in) {
    pf_put32(h + PF_H_LAYOUT, (uint32_t)in->layout);
    pf_put32(h + PF_H_FORMAT, PF_FORMAT_W8A8);
    pf_put32(h + PF_H_K_MULTIPLE, (uint32_t)in->k_multiple);
    pf_put32(h + PF_H_N_MULTIPLE, (uint32_t)in->n_multiple);
    pf_put64(h + PF_H_SLOT_VALUES, (uint64_t)in->slot_values);
    pf_put32(h + PF_H_SLOT_MAX_N, (uint32_t)in->slot_max_n);
    pf_put32(h + PF_H_SCALE_STRIDE, (uint32_t)in->scale_stride);
    pf_put64(h + PF_H_CODE_STRIDE, in->code_stride);
    memcpy(h + PF_H_DEVICE, in->device, strnlen(in->device, sizeof in->device));
    pf_put64(h + PF_H_BUDGET, in->budget_bytes);
    pf_put64(h + PF_H_EXPERT_BYTES, in->expert_bytes);
    pf_put64(h + PF_H_STATS_HASH, in->stats_hash);
    pf_put_f64(h + PF_H_PINNED_SHARE, in->pinned_share);
    pf_put32(h + PF_H_PLAN_SLOTS, (uint32_t)in->plan_slots);
    pf_put32(h + PF_H_N_PINNED, (uint32_t)in->n_pinned);
    pf_put32(h + PF_H_N_ENTRIES, (uint32_t)in->n_entries);
}

static int write_tables(struct packfile_writer *w) {
    const struct packfile_info *in = &w->info;
    uint64_t plan_bytes = 4ull * (uint64_t)in->n_pinned, index_bytes = (uint64_t)PF_ENTRY_BYTES * in->n_entries;
    /* Host data, then its index, ending the file; empty, both sit where the device data ends. */
    uint64_t host_at = w->n_host ? w->host_offset : w->file_size, host_bytes = w->n_host ? w->host_end - host_at : 0;
    uint64_t host_index_at = w->n_host ? round_up(w->host_end, PF_ALIGN) : w->file_size;
    uint64_t host_index_bytes = (uint64_t)PF_HOST_ENTRY_BYTES * (uint64_t)w->n_host;
    uint64_t total = host_index_at + host_index_bytes;
    uint8_t *plan = malloc((size_t)plan_bytes + 1);
    if (!plan) return moex_errorf("out of memory"), PACKFILE_E_NOMEM;
    for (int i = 0; i < in->n_pinned; i++) pf_put32(plan + 4 * i, (uint32_t)w->pinned[i]);
    uint8_t h[PF_HEADER_BYTES];
    memset(h, 0, sizeof h);
    memcpy(h + PF_H_MAGIC, PF_MAGIC, PF_MAGIC_BYTES);
    pf_put32(h + PF_H_VERSION, PF_VERSION);
    pf_put32(h + PF_H_HEADER_BYTES, PF_HEADER_BYTES);
    pf_put64(h + PF_H_FILE_SIZE, total);
    pf_put32(h + PF_H_ALIGN, PF_ALIGN);
    pf_put32(h + PF_H_N_SECTIONS, PF_SECTIONS);
    if (!in->no_device) put_device(h, in);
    pf_put64(h + PF_H_GGUF_SIZE, in->model.gguf_size);
    pf_put64(h + PF_H_GGUF_HASH, in->model.hash);
    pf_put64(h + PF_H_GGUF_MTIME, in->model.mtime_ns);
    pf_put64(h + PF_H_GGUF_INODE, in->model.inode);
    pf_put32(h + PF_H_N_LAYERS, (uint32_t)in->n_layers);
    pf_put32(h + PF_H_N_EXPERT, (uint32_t)in->n_expert);
    pf_put32(h + PF_H_N_EMBD, (uint32_t)in->n_embd);
    pf_put32(h + PF_H_N_FF, (uint32_t)in->n_ff);
    for (int m = 0; m < PACKFILE_MATRICES; m++) pf_put32(h + PF_H_SOURCE_TYPES + 4 * m, in->source_type[m]);
    pf_put32(h + PF_H_FLAGS, (in->all_experts ? PF_FLAG_ALL : 0) | (in->no_device ? PF_FLAG_NO_DEVICE : 0));
    pf_put32(h + PF_H_N_HOST, (uint32_t)w->n_host);
    put_section(h, 0, w->plan_offset, plan_bytes, xxh64(plan, (size_t)plan_bytes, 0));
    put_section(h, 1, w->index_offset, index_bytes, xxh64(w->index, (size_t)index_bytes, 0));
    put_section(h, 2, w->data_offset, w->file_size - w->data_offset, xxh64_digest(&w->entry_sums));
    put_section(h, 3, host_at, host_bytes, xxh64_digest(&w->host_sums));
    put_section(h, 4, host_index_at, host_index_bytes,
                xxh64(w->host_index ? w->host_index : zeros, (size_t)host_index_bytes, 0));
    pf_put64(h + PF_H_CHECKSUM, xxh64(h, PF_H_CHECKSUM, 0));
    /* The codes' padding up to the scales region; the rest of the padding is a hole. */
    int rc = pad_to(w, w->scales_offset);
    if (rc == PACKFILE_OK && ftruncate(w->fd, (off_t)total) != 0)
        rc = (moex_errorf("%s: cannot size the file: %s", w->path, strerror(errno)), PACKFILE_E_IO);
    if (rc == PACKFILE_OK) rc = pwrite_all(w, plan, (size_t)plan_bytes, w->plan_offset);
    if (rc == PACKFILE_OK) rc = pwrite_all(w, w->index, (size_t)index_bytes, w->index_offset);
    if (rc == PACKFILE_OK && host_index_bytes)
        rc = pwrite_all(w, w->host_index, (size_t)host_index_bytes, host_index_at);
    if (rc == PACKFILE_OK) rc = pwrite_all(w, h, sizeof h, 0);
    free(plan);
    return rc;
}

int packfile_writer_finish(struct packfile_writer *w) {
    if (!w) return moex_errorf("packfile_writer_finish: no writer"), PACKFILE_E_ARG;
    int rc = PACKFILE_OK;
    if (w->next != w->info.n_entries)
        rc = (moex_errorf("%s: %d of %d entries written", w->path, w->next, w->info.n_entries), PACKFILE_E_ARG);
    if (rc == PACKFILE_OK) rc = write_tables(w);
    if (rc == PACKFILE_OK) {
        struct atomic_file *file = w->out;
        w->out = NULL;
        if (atomic_file_commit(file) != 0) rc = PACKFILE_E_IO;
    }
    writer_free(w); /* on failure removes the temporary */
    return rc;
}

void packfile_writer_abort(struct packfile_writer *w) { writer_free(w); }
