/* What an open pack file holds: its header, plan and entries, looked up and
 * verified where they are used. */
#include "pack/packfile_impl.h"

#include "core/error.h"
#include "core/xxh64.h"
#include "pack/packfile_format.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

const struct packfile_info *packfile_info(const struct packfile *pf) { return &pf->info; }
const char *packfile_path(const struct packfile *pf) { return pf->path; }
const int32_t *packfile_pinned(const struct packfile *pf) { return pf->pinned; }
int packfile_fd(const struct packfile *pf) { return pf->fd; }

int packfile_check_model(const struct packfile *pf, const struct packfile_identity *id, int n_layers, int n_expert,
                         int n_embd, int n_ff, const uint32_t source_type[PACKFILE_MATRICES]) {
    const struct packfile_info *in = &pf->info;
    if (in->n_layers != n_layers || in->n_expert != n_expert || in->n_embd != n_embd || in->n_ff != n_ff)
        return packfile_refuse(pf->path, PACKFILE_E_MODEL, "packed from another model: %d layers x %d experts of %d x %d, this "
                      "model has %d x %d of %d x %d", in->n_layers, in->n_expert, in->n_embd, in->n_ff, n_layers,
                      n_expert, n_embd, n_ff);
    for (int m = 0; m < PACKFILE_MATRICES; m++)
        if (in->source_type[m] != source_type[m])
            return packfile_refuse(pf->path, PACKFILE_E_MODEL, "packed from another model: its %s weights were of type %" PRIu32
                          ", this model's are %" PRIu32, packfile_matrix_name((enum packfile_matrix)m),
                          in->source_type[m], source_type[m]);
    if (in->model.gguf_size != id->gguf_size || in->model.hash != id->hash)
        return packfile_refuse(pf->path, PACKFILE_E_MODEL, "packed from another model file (a GGUF of %" PRIu64 " bytes, "
                      "identity %016" PRIx64 "; this model: %" PRIu64 " bytes, identity %016" PRIx64 ")",
                      in->model.gguf_size, in->model.hash, id->gguf_size, id->hash);
    if (in->model.mtime_ns != id->mtime_ns || in->model.inode != id->inode)
        return packfile_refuse(pf->path, PACKFILE_E_MODEL, "the model file changed since it was packed: modified at %.9f, "
                      "inode %" PRIu64 ", where the pack file was made from one modified at %.9f, inode %" PRIu64
                      " (edited in place, rewritten or copied)", id->mtime_ns * 1e-9, id->inode,
                      in->model.mtime_ns * 1e-9, in->model.inode);
    return PACKFILE_OK;
}

static const char *layout_name(enum pack_layout l) {
    return l == PACK_ROWS ? "rows" : l == PACK_AMX ? "amx" : l == PACK_RKNPU ? "rknpu" : "?";
}

int packfile_check_layout(const struct packfile *pf, const char *device, enum pack_layout layout, int k_multiple,
                          int n_multiple, int64_t slot_values, int slot_max_n) {
    const struct packfile_info *in = &pf->info;
    if (in->no_device)
        return packfile_refuse(pf->path, PACKFILE_E_LAYOUT, "holds no device experts, only the CPU's interleaved layout (moex "
                      "pack --device none); this run's device is %s", device ? device : "?");
    if (in->layout != layout || in->k_multiple != k_multiple || in->n_multiple != n_multiple ||
        in->slot_values != slot_values || in->slot_max_n != slot_max_n)
        return packfile_refuse(pf->path, PACKFILE_E_LAYOUT, "packed for device %s (layout %s, K %% %d, N %% %d, slots of %" PRId64
                      " values, %d channels); this run's device %s has layout %s, K %% %d, N %% %d, slots of %" PRId64
                      " values, %d channels", in->device[0] ? in->device : "?", layout_name(in->layout),
                      in->k_multiple, in->n_multiple, in->slot_values, in->slot_max_n, device ? device : "?",
                      layout_name(layout), k_multiple, n_multiple, slot_values, slot_max_n);
    return PACKFILE_OK;
}

int packfile_find(const struct packfile *pf, int layer, int expert, enum packfile_matrix matrix) {
    const struct packfile_info *in = &pf->info;
    if (layer < 0 || layer >= in->n_layers || expert < 0 || expert >= in->n_expert || (int)matrix < 0 ||
        matrix >= PACKFILE_MATRICES)
        return -1;
    return pf->by_weight[((size_t)layer * (size_t)in->n_expert + (size_t)expert) * PACKFILE_MATRICES + matrix];
}

bool packfile_has_expert(const struct packfile *pf, int layer, int expert) {
    /* The index holds whole experts only. */
    return packfile_find(pf, layer, expert, PACKFILE_GATE) >= 0;
}

const struct packfile_entry *packfile_entry(const struct packfile *pf, int i) {
    return i >= 0 && i < pf->info.n_entries ? &pf->entries[i] : NULL;
}

int packfile_verify_entry(const struct packfile *pf, int i) {
    const struct packfile_entry *e = packfile_entry(pf, i);
    if (!e) return moex_errorf("%s: no entry %d", pf->path, i), PACKFILE_E_ARG;
    size_t code_bytes = pack_bytes(pf->info.layout, e->K, e->N);
    uint64_t sum = packfile_entry_hash(e->codes, code_bytes, e->scales, e->N);
    if (sum != e->checksum)
        return packfile_refuse(pf->path, PACKFILE_E_CHECKSUM, "bad checksum in section data: layer %d expert %d %s",
                      e->layer, e->expert, packfile_matrix_name(e->matrix));
    if (!pack_codes_in_range(e->codes, code_bytes))
        return packfile_refuse(pf->path, PACKFILE_E_CORRUPT, "layer %d expert %d %s holds the code -128 (codes are -127..127)",
                      e->layer, e->expert, packfile_matrix_name(e->matrix));
    return PACKFILE_OK;
}

int packfile_verify_data(const struct packfile *pf) {
    for (int i = 0; i < pf->info.n_entries; i++) {
        int rc = packfile_verify_entry(pf, i);
        if (rc != PACKFILE_OK) return rc;
    }
    return PACKFILE_OK;
}

const struct packfile_host_entry *packfile_host_entry(const struct packfile *pf, int i) {
    return i >= 0 && i < pf->info.n_host ? &pf->host[i] : NULL;
}

int packfile_host_find(const struct packfile *pf, uint64_t source_offset) {
    int lo = 0, hi = pf->info.n_host;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (pf->host[mid].source_offset < source_offset) lo = mid + 1;
        else hi = mid;
    }
    return lo < pf->info.n_host && pf->host[lo].source_offset == source_offset ? lo : -1;
}

int packfile_verify_host_entry(const struct packfile *pf, int i) {
    const struct packfile_host_entry *x = packfile_host_entry(pf, i);
    if (!x) return moex_errorf("%s: no host matrix %d", pf->path, i), PACKFILE_E_ARG;
    if (xxh64(x->data, (size_t)x->bytes, 0) != x->checksum)
        return packfile_refuse(pf->path, PACKFILE_E_CHECKSUM, "bad checksum in section host data: the matrix at %" PRIu64
                      " in the model", x->source_offset);
    return PACKFILE_OK;
}

void packfile_open_shared(const char *path, struct packfile_shared *s) {
    memset(s, 0, sizeof *s);
    s->path = path;
    s->status = packfile_open(path, &s->pf);
    if (s->status != PACKFILE_OK) snprintf(s->message, sizeof s->message, "%s", moex_error());
}

int packfile_take(const struct packfile_shared *s, struct packfile **out) {
    *out = NULL;
    if (!s->pf) return moex_errorf("%s", s->message), s->status;
    *out = packfile_ref(s->pf);
    return PACKFILE_OK;
}
