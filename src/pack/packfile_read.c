/* The pack file reader. Checks, in this order, so that each refusal names its
 * real cause: the magic (not a pack file), the version, the header's size and
 * checksum, the file's length against the header (truncated), then every
 * field, the section table, the plan and index checksums, every index entry's
 * place and shape, then the host index likewise. Offsets and sizes are checked
 * against the file and overflow before use; entries' data are hashed when
 * used. Assumes a little-endian host for the scales used in place. */
#include "pack/packfile.h"

#include "core/error.h"
#include "core/xxh64.h"
#include "pack/packfile_format.h"
#include "pack/packfile_impl.h"
#include "quant/quant.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>


int packfile_refuse(const char *name, int status, const char *fmt, ...) {
    char msg[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    moex_errorf("%s: %s", name, msg);
    return status;
}

static const char *section_name(uint32_t kind) {
    switch (kind) {
    case PF_PLAN: return "plan";
    case PF_INDEX: return "index";
    case PF_DATA: return "data";
    case PF_HOST_DATA: return "host data";
    case PF_HOST_INDEX: return "host index";
    default: return "?";
    }
}

static bool is_pow2(uint64_t x) { return x && !(x & (x - 1)); }

static uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* Codes of a K x N weight in the layout, or 0 when the shape cannot be packed. */
static uint64_t code_bytes_of(enum pack_layout layout, int K, int N) {
    return pack_check_shape(layout, K, N) == PACK_OK ? (uint64_t)pack_bytes(layout, K, N) : 0;
}

/* The header's fields, each checked for range; not yet the sections. */
/* A file without device experts: every device field is zero. */
static int read_no_device(struct packfile *pf, const uint8_t *h) {
    static const uint32_t fields[][2] = {
        { PF_H_LAYOUT, 4 }, { PF_H_FORMAT, 4 }, { PF_H_K_MULTIPLE, 4 }, { PF_H_N_MULTIPLE, 4 },
        { PF_H_SLOT_VALUES, 8 }, { PF_H_SLOT_MAX_N, 4 }, { PF_H_SCALE_STRIDE, 4 }, { PF_H_DEVICE, 16 },
        { PF_H_BUDGET, 8 }, { PF_H_EXPERT_BYTES, 8 }, { PF_H_STATS_HASH, 8 }, { PF_H_PINNED_SHARE, 8 },
        { PF_H_PLAN_SLOTS, 4 }, { PF_H_N_PINNED, 4 }, { PF_H_N_ENTRIES, 4 }, { PF_H_CODE_STRIDE, 8 },
    };
    for (size_t f = 0; f < sizeof fields / sizeof *fields; f++)
        for (uint32_t i = 0; i < fields[f][1]; i++)
            if (h[fields[f][0] + i])
                return packfile_refuse(pf->path, PACKFILE_E_CORRUPT, "marked as holding no device experts, with a device "
                              "field at byte %" PRIu32 " set", fields[f][0]);
    pf->info.no_device = true;
    return PACKFILE_OK;
}

static int read_header(struct packfile *pf, const uint8_t *h) {
    const char *name = pf->path;
    struct packfile_info *in = &pf->info;
    uint32_t flags = pf_get32(h + PF_H_FLAGS);
    if (flags & ~(PF_FLAG_ALL | PF_FLAG_NO_DEVICE) || (flags & PF_FLAG_ALL && flags & PF_FLAG_NO_DEVICE))
        return packfile_refuse(name, PACKFILE_E_CORRUPT, "unknown or contradictory flags 0x%" PRIx32, flags);
    int rc = flags & PF_FLAG_NO_DEVICE ? read_no_device(pf, h) : PACKFILE_OK;
    if (rc != PACKFILE_OK) return rc;
    bool device = !in->no_device;
    uint32_t layout = pf_get32(h + PF_H_LAYOUT), format = pf_get32(h + PF_H_FORMAT);
    if (device && layout != PACK_ROWS && layout != PACK_AMX && layout != PACK_RKNPU)
        return packfile_refuse(name, PACKFILE_E_LAYOUT, "packed in device layout %" PRIu32 ", which this moex does not know",
                      layout);
    if (device && format != PF_FORMAT_W8A8)
        return packfile_refuse(name, PACKFILE_E_LAYOUT, "number format %" PRIu32 " (this moex packs W8A8, format %u)", format,
                      PF_FORMAT_W8A8);
    in->layout = (enum pack_layout)layout;
    uint32_t km = pf_get32(h + PF_H_K_MULTIPLE), nm = pf_get32(h + PF_H_N_MULTIPLE);
    uint32_t max_n = pf_get32(h + PF_H_SLOT_MAX_N), scale_stride = pf_get32(h + PF_H_SCALE_STRIDE);
    uint64_t slot_values = pf_get64(h + PF_H_SLOT_VALUES), code_stride = pf_get64(h + PF_H_CODE_STRIDE);
    if (device && (km < 1 || km > PACK_MAX_K || nm < 1 || nm > (1u << 20) || max_n < 1 || max_n > (1u << 20) ||
        slot_values < 1 || slot_values > ((uint64_t)1 << 40)))
        return packfile_refuse(name, PACKFILE_E_CORRUPT, "device envelope K %% %" PRIu32 ", N %% %" PRIu32 ", slots of %" PRIu64
                      " values and %" PRIu32 " channels", km, nm, slot_values, max_n);
    if (device && (code_stride < slot_values || code_stride > ((uint64_t)1 << 41) || code_stride % PF_STRIDE_ALIGN ||
                   scale_stride < 4ull * max_n || scale_stride > (1u << 30) || scale_stride % PF_STRIDE_ALIGN))
        return packfile_refuse(name, PACKFILE_E_CORRUPT, "strides of %" PRIu64 " code bytes and %" PRIu32 " scale bytes for "
                      "slots of %" PRIu64 " values and %" PRIu32 " channels", code_stride, scale_stride, slot_values,
                      max_n);
    in->code_stride = code_stride;
    in->scale_stride = scale_stride;
    in->k_multiple = (int)km;
    in->n_multiple = (int)nm;
    in->slot_values = (int64_t)slot_values;
    in->slot_max_n = (int)max_n;
    memcpy(in->device, h + PF_H_DEVICE, sizeof in->device);
    if (in->device[sizeof in->device - 1] != 0)
        return packfile_refuse(name, PACKFILE_E_CORRUPT, "device name is not NUL-terminated");
    for (size_t i = strlen(in->device); i < sizeof in->device; i++)
        if (in->device[i]) return packfile_refuse(name, PACKFILE_E_CORRUPT, "device name padding is not zero");

    in->model.gguf_size = pf_get64(h + PF_H_GGUF_SIZE);
    in->model.hash = pf_get64(h + PF_H_GGUF_HASH);
    in->model.mtime_ns = pf_get64(h + PF_H_GGUF_MTIME);
    in->model.inode = pf_get64(h + PF_H_GGUF_INODE);
    uint32_t n_layers = pf_get32(h + PF_H_N_LAYERS), n_expert = pf_get32(h + PF_H_N_EXPERT);
    uint32_t n_embd = pf_get32(h + PF_H_N_EMBD), n_ff = pf_get32(h + PF_H_N_FF);
    if (n_layers < 1 || n_layers > 4096 || n_expert < 1 || n_expert > 65536 || n_embd < 1 || n_embd > PACK_MAX_K ||
        n_ff < 1 || n_ff > PACK_MAX_K || (uint64_t)n_layers * n_expert > (1u << 24) ||
        (device && ((uint64_t)n_embd * n_ff > slot_values || (n_embd > n_ff ? n_embd : n_ff) > max_n)))
        return packfile_refuse(name, PACKFILE_E_CORRUPT, "model shape %" PRIu32 " layers x %" PRIu32 " experts, dim %" PRIu32
                      ", expert ffn %" PRIu32 " (slots of %" PRIu64 " values, %" PRIu32 " channels)", n_layers,
                      n_expert, n_embd, n_ff, slot_values, max_n);
    in->n_layers = (int)n_layers;
    in->n_expert = (int)n_expert;
    in->n_embd = (int)n_embd;
    in->n_ff = (int)n_ff;
    for (int m = 0; m < PACKFILE_MATRICES; m++) in->source_type[m] = pf_get32(h + PF_H_SOURCE_TYPES + 4 * m);

    in->budget_bytes = pf_get64(h + PF_H_BUDGET);
    in->expert_bytes = pf_get64(h + PF_H_EXPERT_BYTES);
    in->stats_hash = pf_get64(h + PF_H_STATS_HASH);
    in->pinned_share = pf_get_f64(h + PF_H_PINNED_SHARE);
    uint32_t plan_slots = pf_get32(h + PF_H_PLAN_SLOTS), n_pinned = pf_get32(h + PF_H_N_PINNED);
    uint32_t n_entries = pf_get32(h + PF_H_N_ENTRIES), n_host = pf_get32(h + PF_H_N_HOST);
    uint32_t n_keys = n_layers * n_expert;
    if (!(in->pinned_share >= 0 && in->pinned_share <= 1))
        return packfile_refuse(name, PACKFILE_E_CORRUPT, "pinned share %g", in->pinned_share);
    if (plan_slots > n_keys || n_pinned > plan_slots)
        return packfile_refuse(name, PACKFILE_E_CORRUPT, "plan of %" PRIu32 " slots, %" PRIu32 " pinned, for %" PRIu32
                      " experts", plan_slots, n_pinned, n_keys);
    if (n_entries % PACKFILE_MATRICES || n_entries / PACKFILE_MATRICES > n_keys)
        return packfile_refuse(name, PACKFILE_E_CORRUPT, "%" PRIu32 " entries for %" PRIu32 " experts of 3 weights", n_entries,
                      n_keys);
    if (n_host > (1u << 20)) return packfile_refuse(name, PACKFILE_E_CORRUPT, "%" PRIu32 " host matrices", n_host);
    in->n_host = (int)n_host;
    in->all_experts = flags & PF_FLAG_ALL;
    if (in->all_experts && n_entries != PACKFILE_MATRICES * n_keys)
        return packfile_refuse(name, PACKFILE_E_CORRUPT, "marked as holding every expert, with %" PRIu32 " entries", n_entries);
    in->plan_slots = (int)plan_slots;
    in->n_pinned = (int)n_pinned;
    in->n_entries = (int)n_entries;
    for (uint32_t i = PF_H_N_HOST + 4; i < PF_H_CHECKSUM; i++)
        if (h[i] && (i < PF_H_GGUF_MTIME || i >= PF_H_RESERVED)) return packfile_refuse(name, PACKFILE_E_CORRUPT, "reserved header byte %" PRIu32 " is not zero", i);
    if (pf_get32(h + 124) || pf_get64(h + 184))
        return packfile_refuse(name, PACKFILE_E_CORRUPT, "reserved header fields are not zero");
    return PACKFILE_OK;
}

struct section {
    uint64_t offset, size, checksum;
};

/* The section table: plan, index, data, host data, host index in file
 * order, aligned (an empty one may also sit where the one before ends),
 * inside the file, sized for their counts, the last ending the file. */
static int read_sections(struct packfile *pf, const uint8_t *h, uint64_t align, struct section s[PF_SECTIONS]) {
    const char *name = pf->path;
    uint64_t end = PF_HEADER_BYTES;
    for (uint32_t i = 0; i < PF_SECTIONS; i++) {
        const uint8_t *e = h + PF_H_SECTIONS + i * PF_SECTION_BYTES;
        uint32_t kind = pf_get32(e), zero = pf_get32(e + 4);
        s[i] = (struct section){ pf_get64(e + 8), pf_get64(e + 16), pf_get64(e + 24) };
        if (kind != PF_PLAN + i || zero)
            return packfile_refuse(name, PACKFILE_E_CORRUPT, "section %" PRIu32 " has kind %" PRIu32 " (expected %s)", i, kind,
                          section_name(PF_PLAN + i));
        bool placed = s[i].offset % align == 0 || (s[i].size == 0 && s[i].offset == end);
        if (!placed || s[i].offset < end || s[i].offset > pf->size || s[i].size > pf->size - s[i].offset)
            return packfile_refuse(name, PACKFILE_E_CORRUPT, "section %s at %" PRIu64 " of %" PRIu64
                          " bytes: misaligned, overlapping or past the end (%" PRIu64 " bytes)",
                          section_name(kind), s[i].offset, s[i].size, pf->size);
        end = s[i].offset + s[i].size;
    }
    if (s[0].size != 4ull * (uint64_t)pf->info.n_pinned)
        return packfile_refuse(name, PACKFILE_E_CORRUPT, "plan section of %" PRIu64 " bytes for %d pinned experts", s[0].size,
                      pf->info.n_pinned);
    if (s[1].size != (uint64_t)PF_ENTRY_BYTES * (uint64_t)pf->info.n_entries)
        return packfile_refuse(name, PACKFILE_E_CORRUPT, "index section of %" PRIu64 " bytes for %d entries", s[1].size,
                      pf->info.n_entries);
    /* The data: codes region, then the scales region at the next aligned
     * offset, each n_entries strides long: each fits in the file, so their
     * sums do not overflow. */
    uint64_t n = (uint64_t)pf->info.n_entries;
    if (n && (pf->info.code_stride > pf->size / n || pf->info.scale_stride > pf->size / n))
        return packfile_refuse(name, PACKFILE_E_CORRUPT, "%d entries of %" PRIu64 " + %" PRIu64 " bytes do not fit in %" PRIu64
                      " bytes", pf->info.n_entries, pf->info.code_stride, pf->info.scale_stride, pf->size);
    uint64_t scales = round_up(s[2].offset + n * pf->info.code_stride, align);
    if (s[2].size != scales - s[2].offset + n * pf->info.scale_stride)
        return packfile_refuse(name, PACKFILE_E_CORRUPT, "data section of %" PRIu64 " bytes for %d entries of %" PRIu64
                      " + %" PRIu64 " bytes", s[2].size, pf->info.n_entries, pf->info.code_stride,
                      pf->info.scale_stride);
    uint64_t n_host = (uint64_t)pf->info.n_host;
    if (s[4].size != (uint64_t)PF_HOST_ENTRY_BYTES * n_host || (n_host == 0) != (s[3].size == 0))
        return packfile_refuse(name, PACKFILE_E_CORRUPT, "host sections of %" PRIu64 " and %" PRIu64 " bytes for %" PRIu64
                      " host matrices", s[3].size, s[4].size, n_host);
    if (end != pf->size)
        return packfile_refuse(name, PACKFILE_E_CORRUPT, "the last section ends at %" PRIu64 ", the file at %" PRIu64, end,
                      pf->size);
    return PACKFILE_OK;
}

static int read_plan(struct packfile *pf, const struct section *s) {
    const struct packfile_info *in = &pf->info;
    int n_keys = in->n_layers * in->n_expert;
    pf->pinned = malloc(sizeof *pf->pinned * (size_t)(in->n_pinned ? in->n_pinned : 1));
    uint8_t *seen = calloc((size_t)n_keys, 1);
    if (!pf->pinned || !seen) {
        free(seen);
        return packfile_refuse(pf->path, PACKFILE_E_NOMEM, "out of memory");
    }
    for (int i = 0; i < in->n_pinned; i++) {
        uint32_t key = pf_get32(pf->map + s->offset + 4 * (uint64_t)i);
        if (key >= (uint32_t)n_keys || seen[key]) {
            free(seen);
            return packfile_refuse(pf->path, PACKFILE_E_CORRUPT, "pinned expert %d: key %" PRIu32 " out of range or repeated",
                          i, key);
        }
        seen[key] = 1;
        pf->pinned[i] = (int32_t)key;
    }
    free(seen);
    return PACKFILE_OK;
}

/* Every entry: the plan's pinned experts first, in plan order, then the
 * others ascending; whole experts (gate, up, down); the model's shapes;
 * codes and scales at their place in the data section. */
static int read_index(struct packfile *pf, const struct section *index, const struct section *data, uint64_t align) {
    const struct packfile_info *in = &pf->info;
    const char *name = pf->path;
    size_t n_weights = (size_t)in->n_layers * (size_t)in->n_expert * PACKFILE_MATRICES;
    pf->entries = calloc((size_t)(in->n_entries ? in->n_entries : 1), sizeof *pf->entries);
    pf->by_weight = malloc(sizeof *pf->by_weight * n_weights);
    if (!pf->entries || !pf->by_weight) return packfile_refuse(name, PACKFILE_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n_weights; i++) pf->by_weight[i] = -1;
    uint64_t scales_region = round_up(data->offset + (uint64_t)in->n_entries * in->code_stride, align);
    int64_t last_extra = -1;
    struct xxh64_state sums;
    xxh64_init(&sums, 0);
    for (int i = 0; i < in->n_entries; i++) {
        const uint8_t *e = pf->map + index->offset + (uint64_t)i * PF_ENTRY_BYTES;
        uint32_t layer = pf_get32(e + PF_E_LAYER), expert = pf_get32(e + PF_E_EXPERT), matrix = pf_get32(e + PF_E_MATRIX);
        uint32_t K = pf_get32(e + PF_E_K), N = pf_get32(e + PF_E_N);
        uint64_t codes_off = pf_get64(e + PF_E_CODES_OFFSET), codes_bytes = pf_get64(e + PF_E_CODES_BYTES);
        uint64_t scales_off = pf_get64(e + PF_E_SCALES_OFFSET), scales_bytes = pf_get64(e + PF_E_SCALES_BYTES);
        if (layer >= (uint32_t)in->n_layers || expert >= (uint32_t)in->n_expert || matrix >= PACKFILE_MATRICES)
            return packfile_refuse(name, PACKFILE_E_CORRUPT, "index entry %d: layer %" PRIu32 ", expert %" PRIu32
                          ", matrix %" PRIu32 " out of range", i, layer, expert, matrix);
        int64_t key = (int64_t)layer * in->n_expert + expert, weight = key * PACKFILE_MATRICES + matrix;
        const char *mname = packfile_matrix_name((enum packfile_matrix)matrix);
        int slot = i / PACKFILE_MATRICES;
        bool in_order = (int)matrix == i % PACKFILE_MATRICES && pf->by_weight[weight] < 0 &&
                        (matrix == PACKFILE_GATE ? (slot < in->n_pinned ? key == pf->pinned[slot] : key > last_extra)
                                                 : pf->entries[i - 1].layer == (int)layer &&
                                                       pf->entries[i - 1].expert == (int)expert);
        if (!in_order)
            return packfile_refuse(name, PACKFILE_E_CORRUPT, "index entry %d (layer %" PRIu32 " expert %" PRIu32 " %s) is "
                          "repeated, out of order, or not part of a whole expert", i, layer, expert, mname);
        if (matrix == PACKFILE_GATE && slot >= in->n_pinned) last_extra = key;
        uint32_t want_K = matrix == PACKFILE_DOWN ? (uint32_t)in->n_ff : (uint32_t)in->n_embd;
        uint32_t want_N = matrix == PACKFILE_DOWN ? (uint32_t)in->n_embd : (uint32_t)in->n_ff;
        uint64_t want_codes = code_bytes_of(in->layout, (int)want_K, (int)want_N);
        if (K != want_K || N != want_N || want_codes == 0 || codes_bytes != want_codes ||
            scales_bytes != 4ull * N || pf_get32(e + PF_E_SOURCE_TYPE) != in->source_type[matrix])
            return packfile_refuse(name, PACKFILE_E_CORRUPT, "index entry %d: a %" PRIu32 " x %" PRIu32 " weight of %" PRIu64
                          " code bytes and %" PRIu64 " scale bytes where the model's %s is %" PRIu32 " x %" PRIu32,
                          i, K, N, codes_bytes, scales_bytes, mname, want_K, want_N);
        /* The section checks bound both regions inside the file. */
        if (codes_off != data->offset + (uint64_t)i * in->code_stride ||
            scales_off != scales_region + (uint64_t)i * in->scale_stride)
            return packfile_refuse(name, PACKFILE_E_CORRUPT, "index entry %d: codes at %" PRIu64 ", scales at %" PRIu64
                          ", not at their place in the data section", i, codes_off, scales_off);
        pf->entries[i] = (struct packfile_entry){
            .layer = (int)layer, .expert = (int)expert, .matrix = (enum packfile_matrix)matrix,
            .source_type = pf_get32(e + PF_E_SOURCE_TYPE), .K = (int)K, .N = (int)N,
            .codes = (const int8_t *)(pf->map + codes_off), .scales = (const float *)(pf->map + scales_off),
            .codes_offset = codes_off, .checksum = pf_get64(e + PF_E_CHECKSUM),
        };
        pf->by_weight[weight] = i;
        uint8_t sum[8];
        pf_put64(sum, pf->entries[i].checksum);
        xxh64_update(&sums, sum, sizeof sum);
    }
    pf->data_checksum = xxh64_digest(&sums);
    return PACKFILE_OK;
}

/* Every host matrix: source offsets ascending, a type moex knows with rows
 * of whole groups, the bytes of its shape, each at the first aligned
 * offset after the one before, the last ending the host data section. */
static int read_host(struct packfile *pf, const struct section *index, const struct section *data, uint64_t align) {
    const char *name = pf->path;
    int n = pf->info.n_host;
    pf->host = calloc((size_t)(n ? n : 1), sizeof *pf->host);
    if (!pf->host) return packfile_refuse(name, PACKFILE_E_NOMEM, "out of memory");
    uint64_t at = data->offset;
    struct xxh64_state sums;
    xxh64_init(&sums, 0);
    for (int i = 0; i < n; i++) {
        const uint8_t *e = pf->map + index->offset + (uint64_t)i * PF_HOST_ENTRY_BYTES;
        struct packfile_host_entry *x = &pf->host[i];
        uint64_t rows = pf_get64(e + PF_X_ROWS), cols = pf_get64(e + PF_X_COLS), offset = pf_get64(e + PF_X_OFFSET);
        *x = (struct packfile_host_entry){
            .source_offset = pf_get64(e + PF_X_SOURCE_OFFSET), .source_type = pf_get32(e + PF_X_SOURCE_TYPE),
            .variant = pf_get32(e + PF_X_VARIANT), .rows = (int64_t)rows, .cols = (int64_t)cols,
            .bytes = pf_get64(e + PF_X_BYTES), .checksum = pf_get64(e + PF_X_CHECKSUM),
        };
        size_t row_bytes = x->source_type < QT_MAX && cols <= (1u << 24)
                               ? quant_row_size((enum qtype)x->source_type, (int64_t)cols) : 0;
        bool shape = rows >= 1 && rows <= (1u << 30) && rows % QUANT_R16_ROWS == 0 && row_bytes &&
                     x->bytes == rows * row_bytes;
        if (!shape || x->variant == 0 || pf_get64(e + PF_X_RESERVED) ||
            (i && x->source_offset <= pf->host[i - 1].source_offset))
            return packfile_refuse(name, PACKFILE_E_CORRUPT, "host matrix %d (at %" PRIu64 " in the model, type %" PRIu32
                          ", %" PRIu64 " x %" PRIu64 ", %" PRIu64 " bytes, variant %" PRIu32 ") is out of order or "
                          "of an impossible shape", i, x->source_offset, x->source_type, rows, cols, x->bytes,
                          x->variant);
        uint64_t want = round_up(at, align);
        if (offset != want || x->bytes > data->offset + data->size - offset)
            return packfile_refuse(name, PACKFILE_E_CORRUPT, "host matrix %d at %" PRIu64 ", not at its place (%" PRIu64 ")",
                          i, offset, want);
        x->data = pf->map + offset;
        at = offset + x->bytes;
        uint8_t sum[8];
        pf_put64(sum, x->checksum);
        xxh64_update(&sums, sum, sizeof sum);
    }
    if (n && at != data->offset + data->size)
        return packfile_refuse(name, PACKFILE_E_CORRUPT, "the host matrices end at %" PRIu64 ", their section at %" PRIu64, at,
                      data->offset + data->size);
    if (xxh64_digest(&sums) != data->checksum)
        return packfile_refuse(name, PACKFILE_E_CHECKSUM, "bad checksum in section host data (its matrices' checksums hash to "
                      "%016" PRIx64 ", expected %016" PRIx64 ")", xxh64_digest(&sums), data->checksum);
    return PACKFILE_OK;
}

static int check_section_sum(const struct packfile *pf, const struct section *s, uint32_t kind) {
    uint64_t sum = xxh64(pf->map + s->offset, (size_t)s->size, 0);
    if (sum != s->checksum)
        return packfile_refuse(pf->path, PACKFILE_E_CHECKSUM, "bad checksum in section %s (%016" PRIx64 ", expected %016" PRIx64
                      ")", section_name(kind), sum, s->checksum);
    return PACKFILE_OK;
}

static int parse(struct packfile *pf) {
    const char *name = pf->path;
    const uint8_t *h = pf->map;
    uint64_t size = pf->size;
    size_t n_magic = size < PF_MAGIC_BYTES ? (size_t)size : PF_MAGIC_BYTES;
    if (size == 0 || memcmp(h, PF_MAGIC, n_magic) != 0)
        return packfile_refuse(name, PACKFILE_E_NOT_PACK, "not a moex pack file (it does not start with \"%s\")", PF_MAGIC);
    if (size < 12)
        return packfile_refuse(name, PACKFILE_E_TRUNCATED, "truncated: %" PRIu64 " bytes, shorter than a pack file header",
                      size);
    uint32_t version = pf_get32(h + PF_H_VERSION);
    if (version != PF_VERSION)
        return packfile_refuse(name, PACKFILE_E_VERSION, "pack file version %" PRIu32 "; this moex reads version %u", version,
                      PF_VERSION);
    if (size < PF_HEADER_BYTES)
        return packfile_refuse(name, PACKFILE_E_TRUNCATED, "truncated: %" PRIu64 " bytes, shorter than the %u-byte header",
                      size, PF_HEADER_BYTES);
    if (pf_get32(h + PF_H_HEADER_BYTES) != PF_HEADER_BYTES)
        return packfile_refuse(name, PACKFILE_E_CORRUPT, "header of %" PRIu32 " bytes (version %u has %u)",
                      pf_get32(h + PF_H_HEADER_BYTES), PF_VERSION, PF_HEADER_BYTES);
    uint64_t sum = xxh64(h, PF_H_CHECKSUM, 0);
    if (sum != pf_get64(h + PF_H_CHECKSUM))
        return packfile_refuse(name, PACKFILE_E_CHECKSUM, "bad checksum in section header (%016" PRIx64 ", expected %016" PRIx64
                      ")", sum, pf_get64(h + PF_H_CHECKSUM));
    uint64_t file_size = pf_get64(h + PF_H_FILE_SIZE);
    if (size < file_size)
        return packfile_refuse(name, PACKFILE_E_TRUNCATED, "truncated: %" PRIu64 " bytes, the header says %" PRIu64, size,
                      file_size);
    if (size > file_size)
        return packfile_refuse(name, PACKFILE_E_CORRUPT, "%" PRIu64 " bytes, longer than the %" PRIu64 " the header says",
                      size, file_size);
    uint32_t align = pf_get32(h + PF_H_ALIGN);
    if (!is_pow2(align) || align < PF_ALIGN_MIN || align > PF_ALIGN_MAX || pf_get32(h + PF_H_N_SECTIONS) != PF_SECTIONS)
        return packfile_refuse(name, PACKFILE_E_CORRUPT, "alignment %" PRIu32 " or %" PRIu32 " sections", align,
                      pf_get32(h + PF_H_N_SECTIONS));
    int rc = read_header(pf, h);
    if (rc != PACKFILE_OK) return rc;
    struct section s[PF_SECTIONS];
    if ((rc = read_sections(pf, h, align, s)) != PACKFILE_OK) return rc;
    for (uint32_t i = 0; i < 2; i++)
        if ((rc = check_section_sum(pf, &s[i], PF_PLAN + i)) != PACKFILE_OK) return rc;
    if ((rc = read_plan(pf, &s[0])) != PACKFILE_OK) return rc;
    if ((rc = read_index(pf, &s[1], &s[2], align)) != PACKFILE_OK) return rc;
    if (pf->data_checksum != s[2].checksum)
        return packfile_refuse(name, PACKFILE_E_CHECKSUM, "bad checksum in section data (its entries' checksums hash to "
                      "%016" PRIx64 ", expected %016" PRIx64 ")", pf->data_checksum, s[2].checksum);
    if ((rc = check_section_sum(pf, &s[4], PF_HOST_INDEX)) != PACKFILE_OK) return rc;
    return read_host(pf, &s[4], &s[3], align);
}

static int open_buffer(const void *data, size_t size, const char *name, size_t map_len, struct packfile **out) {
    struct packfile *pf = calloc(1, sizeof *pf);
    if (pf) atomic_init(&pf->refs, 1);
    if (pf) pf->path = strdup(name);
    if (!pf || !pf->path) {
        free(pf);
        if (map_len) munmap((void *)data, map_len);
        return packfile_refuse(name, PACKFILE_E_NOMEM, "out of memory");
    }
    pf->fd = -1;
    pf->map = data;
    pf->size = size;
    pf->map_len = map_len;
    int rc = parse(pf);
    if (rc != PACKFILE_OK) {
        packfile_close(pf);
        return rc;
    }
    *out = pf;
    return PACKFILE_OK;
}

int packfile_open_memory(const void *data, size_t size, const char *name, struct packfile **out) {
    if (!out) return moex_errorf("packfile_open_memory: no result pointer"), PACKFILE_E_ARG;
    *out = NULL;
    if ((!data && size) || (uintptr_t)data % 8)
        return moex_errorf("packfile_open_memory: no data, or data not 8-byte aligned"), PACKFILE_E_ARG;
    static const uint8_t empty[1];
    return open_buffer(data ? data : empty, size, name ? name : "(memory)", 0, out);
}

int packfile_open(const char *path, struct packfile **out) {
    if (!out || !path) return moex_errorf("packfile_open: no path or result pointer"), PACKFILE_E_ARG;
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return packfile_refuse(path, PACKFILE_E_IO, "cannot open: %s", strerror(errno));
    struct stat st;
    int rc;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = packfile_refuse(path, PACKFILE_E_IO, "not a regular file");
    } else if ((uint64_t)st.st_size > SIZE_MAX) {
        rc = packfile_refuse(path, PACKFILE_E_IO, "too large to map");
    } else if (st.st_size == 0) {
        rc = open_buffer("", 0, path, 0, out);
    } else {
        void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        rc = map == MAP_FAILED ? packfile_refuse(path, PACKFILE_E_IO, "cannot map: %s", strerror(errno))
                               : open_buffer(map, (size_t)st.st_size, path, (size_t)st.st_size, out);
    }
    if (rc != PACKFILE_OK) {
        close(fd);
        return rc;
    }
    (*out)->fd = fd; /* kept: device slots may map codes from it */
    return PACKFILE_OK;
}

struct packfile *packfile_ref(struct packfile *pf) {
    if (pf) atomic_fetch_add(&pf->refs, 1);
    return pf;
}

void packfile_close(struct packfile *pf) {
    if (!pf || atomic_fetch_sub(&pf->refs, 1) > 1) return;
    if (pf->map_len) munmap((void *)pf->map, pf->map_len);
    if (pf->fd >= 0) close(pf->fd);
    free(pf->pinned);
    free(pf->entries);
    free(pf->by_weight);
    free(pf->host);
    free(pf->path);
    free(pf);
}

