/* libFuzzer target for the pack file reader. Random bytes rarely carry valid
 * checksums, so for inputs of even size the target first repairs them (the
 * header's, the plan's and indexes', and the data sections' over the
 * entries' checksums) and the fuzzer reaches the field and offset checks behind
 * them; odd sizes keep the bytes as they are. Whatever the reader accepts
 * must be safe to walk in full: every entry inside the input, found again by
 * its key, hashed, and checked against a model and a device. */
#include "core/xxh64.h"
#include "pack/packfile.h"
#include "pack/packfile_format.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static bool in_range(uint64_t off, uint64_t n, size_t size) { return off <= size && n <= size - off; }

/* An entry's checksum over its bytes where they lie in the file; returns the field. */
typedef uint8_t *(*entry_fix_fn)(uint8_t *d, size_t size, uint8_t *e);

static uint8_t *fix_device_entry(uint8_t *d, size_t size, uint8_t *e) {
    uint64_t co = pf_get64(e + PF_E_CODES_OFFSET), cn = pf_get64(e + PF_E_CODES_BYTES);
    uint64_t so = pf_get64(e + PF_E_SCALES_OFFSET), sn = pf_get64(e + PF_E_SCALES_BYTES);
    if (in_range(co, cn, size) && in_range(so, sn, size)) {
        struct xxh64_state h;
        xxh64_init(&h, 0);
        xxh64_update(&h, d + co, (size_t)cn);
        xxh64_update(&h, d + so, (size_t)sn);
        pf_put64(e + PF_E_CHECKSUM, xxh64_digest(&h));
    }
    return e + PF_E_CHECKSUM;
}

static uint8_t *fix_host_entry(uint8_t *d, size_t size, uint8_t *e) {
    uint64_t o = pf_get64(e + PF_X_OFFSET), n = pf_get64(e + PF_X_BYTES);
    if (in_range(o, n, size)) pf_put64(e + PF_X_CHECKSUM, xxh64(d + o, (size_t)n, 0));
    return e + PF_X_CHECKSUM;
}

/* The entries of the index in section `index`, then the checksum of section
 * `data` over theirs. */
static void repair_entries(uint8_t *d, size_t size, int index, int data, uint32_t n, uint32_t entry_bytes,
                           entry_fix_fn fix) {
    uint8_t *sec = d + PF_H_SECTIONS;
    uint64_t off = pf_get64(sec + index * PF_SECTION_BYTES + 8), bytes = pf_get64(sec + index * PF_SECTION_BYTES + 16);
    if (!in_range(off, bytes, size) || bytes != (uint64_t)n * entry_bytes) return;
    struct xxh64_state sums;
    xxh64_init(&sums, 0);
    for (uint32_t i = 0; i < n; i++) xxh64_update(&sums, fix(d, size, d + off + (uint64_t)i * entry_bytes), 8);
    pf_put64(sec + data * PF_SECTION_BYTES + 24, xxh64_digest(&sums));
}

static void repair(uint8_t *d, size_t size) {
    if (size < PF_HEADER_BYTES || memcmp(d, PF_MAGIC, PF_MAGIC_BYTES) != 0) return;
    /* Entries' checksums, then the sections', then the header's. */
    repair_entries(d, size, 1, 2, pf_get32(d + PF_H_N_ENTRIES), PF_ENTRY_BYTES, fix_device_entry);
    repair_entries(d, size, 4, 3, pf_get32(d + PF_H_N_HOST), PF_HOST_ENTRY_BYTES, fix_host_entry);
    for (uint32_t i = 0; i < PF_SECTIONS; i++) {
        if (i == 2 || i == 3) continue; /* data sections: over their entries' checksums */
        uint8_t *s = d + PF_H_SECTIONS + i * PF_SECTION_BYTES;
        uint64_t off = pf_get64(s + 8), n = pf_get64(s + 16);
        if (in_range(off, n, size)) pf_put64(s + 24, xxh64(d + off, (size_t)n, 0));
    }
    pf_put64(d + PF_H_CHECKSUM, xxh64(d, PF_H_CHECKSUM, 0));
}

static void walk(const struct packfile *pf, const uint8_t *base, size_t size) {
    const struct packfile_info *in = packfile_info(pf);
    for (int i = 0; i < in->n_pinned; i++)
        if (packfile_pinned(pf)[i] < 0 || packfile_pinned(pf)[i] >= in->n_layers * in->n_expert) abort();
    for (int i = 0; i < in->n_entries; i++) {
        const struct packfile_entry *e = packfile_entry(pf, i);
        size_t code_bytes = pack_bytes(in->layout, e->K, e->N), scale_bytes = (size_t)e->N * sizeof(float);
        const uint8_t *c = (const uint8_t *)e->codes, *s = (const uint8_t *)e->scales;
        if (c < base || c + code_bytes > base + size || s < base || s + scale_bytes > base + size) abort();
        if (packfile_find(pf, e->layer, e->expert, e->matrix) != i || !packfile_has_expert(pf, e->layer, e->expert))
            abort();
        packfile_verify_entry(pf, i);
    }
    if (packfile_entry(pf, in->n_entries) || packfile_find(pf, in->n_layers, 0, PACKFILE_GATE) != -1) abort();
    packfile_verify_data(pf);
    struct packfile_identity id = in->model;
    if (packfile_check_model(pf, &id, in->n_layers, in->n_expert, in->n_embd, in->n_ff, in->source_type) !=
        PACKFILE_OK)
        abort();
    if ((packfile_check_layout(pf, "fuzz", in->layout, in->k_multiple, in->n_multiple, in->slot_values,
                               in->slot_max_n) == PACKFILE_OK) == in->no_device)
        abort();
    for (int i = 0; i < in->n_host; i++) {
        const struct packfile_host_entry *x = packfile_host_entry(pf, i);
        const uint8_t *p = x->data;
        if (p < base || x->bytes > size || p + x->bytes > base + size || packfile_host_find(pf, x->source_offset) != i)
            abort();
        packfile_verify_host_entry(pf, i);
    }
    if (packfile_host_entry(pf, in->n_host) || packfile_host_entry(pf, -1)) abort();
    id.hash ^= 1;
    if (packfile_check_model(pf, &id, in->n_layers, in->n_expert, in->n_embd, in->n_ff, in->source_type) !=
        PACKFILE_E_MODEL)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *copy = malloc(size ? size : 1); /* aligned, and writable for the repair */
    if (!copy) return 0;
    if (size) memcpy(copy, data, size);
    if (size % 2 == 0) repair(copy, size);
    struct packfile *pf = NULL;
    if (packfile_open_memory(copy, size, "fuzz.mxpk", &pf) == PACKFILE_OK) {
        walk(pf, copy, size);
        packfile_close(pf);
    }
    free(copy);
    return 0;
}
