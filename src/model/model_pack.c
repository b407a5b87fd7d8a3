/* The model's matrices in the CPU's interleaved layout, into a pack file:
 * each repacked once into a buffer the size of the largest and appended as
 * a host entry; the GGUF's pages of each are dropped once it is written, so
 * packing a model larger than memory keeps one matrix resident. */
#include "model/model_pack.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "pack/packfile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int model_pack_describe(const struct model *m, struct packfile_info *out) {
    memset(out, 0, sizeof *out);
    if (m->moe.n_layers < 1) return moex_errorf("%s has no MoE layers: pack files are for MoE models", m->file->path);
    const struct moe_layer_desc *L = &m->moe.layers[0];
    out->n_layers = m->moe.n_layers;
    out->n_expert = L->n_expert;
    out->n_embd = L->n_embd;
    out->n_ff = L->n_ff;
    out->source_type[0] = (uint32_t)L->gate.type;
    out->source_type[1] = (uint32_t)L->up.type;
    out->source_type[2] = (uint32_t)L->down.type;
    return packfile_model_identity(m->file, &out->model) == PACKFILE_OK ? 0 : -1;
}

struct target {
    uint64_t at; /* source offset */
    const struct matrix *w;
};

static int by_source_offset(const void *a, const void *b) {
    uint64_t x = ((const struct target *)a)->at, y = ((const struct target *)b)->at;
    return x < y ? -1 : x > y;
}

int model_pack_interleaved(struct model *m, struct threadpool *pool, struct packfile_writer *w, uint64_t *bytes) {
    *bytes = 0;
    int n = m->plain_rows ? 0 : model_interleave_targets(m, NULL);
    if (n == 0) return 0;
    struct matrix **mats = malloc(sizeof *mats * (size_t)n);
    struct target *targets = malloc(sizeof *targets * (size_t)n);
    if (!mats || !targets) {
        free(mats), free(targets);
        return moex_errorf("out of memory");
    }
    model_interleave_targets(m, mats);
    size_t largest = 0;
    for (int t = 0; t < n; t++) {
        targets[t] = (struct target){ model_source_offset(m, mats[t]), mats[t] };
        if ((size_t)mats[t]->rows * mats[t]->row_bytes > largest) largest = (size_t)mats[t]->rows * mats[t]->row_bytes;
    }
    free(mats);
    qsort(targets, (size_t)n, sizeof *targets, by_source_offset);
    void *buf = mmap(NULL, largest, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) {
        free(targets);
        return moex_errorf("out of memory for a matrix of %zu MiB", largest >> 20);
    }
    int rc = 0;
    for (int t = 0; t < n && rc == 0; t++) {
        const struct matrix *x = targets[t].w;
        uint64_t at = targets[t].at;
        if (t && at == targets[t - 1].at) continue; /* one matrix under two names */
        model_interleave_into(pool, x, buf);
        struct packfile_host_entry e = {
            .source_offset = at, .source_type = (uint32_t)x->type, .variant = quant_r16_variant(x->type),
            .rows = x->rows, .cols = x->cols, .bytes = (uint64_t)x->rows * x->row_bytes,
        };
        rc = packfile_writer_add_host(w, &e, buf) == PACKFILE_OK ? 0 : -1;
        *bytes += e.bytes;
    }
    munmap(buf, largest);
    free(targets);
    return rc;
}

int model_pack_interleaved_file(struct model *m, struct threadpool *pool, struct atomic_file *file, uint64_t *bytes) {
    *bytes = 0;
    struct packfile_info info;
    if (model_pack_describe(m, &info) != 0) {
        atomic_file_discard(file);
        return -1;
    }
    if (m->plain_rows || model_interleave_targets(m, NULL) == 0) {
        atomic_file_discard(file);
        return moex_errorf("nothing to pack without a device: %s", m->plain_rows
                               ? "the interleaved layout is turned off (no_interleave, MOEX_INTERLEAVE=0)"
                               : "no matrix of the model has an interleaved kernel on this machine");
    }
    info.no_device = true;
    char path[4096];
    snprintf(path, sizeof path, "%s", atomic_file_path(file));
    struct packfile_writer *w = NULL;
    if (packfile_writer_begin(file, &info, NULL, NULL, 0, &w) != PACKFILE_OK) return -1;
    if (model_pack_interleaved(m, pool, w, bytes) != 0) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", moex_error());
        packfile_writer_abort(w);
        return moex_errorf("%s", msg);
    }
    if (packfile_writer_finish(w) != PACKFILE_OK) return -1;
    struct packfile *check = NULL;
    if (packfile_open(path, &check) != PACKFILE_OK) return moex_errorf("the file written does not read back: %s", moex_error());
    packfile_close(check);
    return 0;
}
