/* Pack files for the public API: the model's device options and threads
 * handed to the expert packer (src/moe/pack_experts.h). */
#include "api/api_impl.h"

#include "core/atomic_file.h"
#include "moe/pack_experts.h"
#include "quant/quant.h"

#include <string.h>

struct pack_progress {
    const moex_model *m;
};

static void on_expert(void *user, int done, int total) {
    const moex_model *m = ((struct pack_progress *)user)->m;
    m->progress(m->user, "packing experts", (uint64_t)done, (uint64_t)total);
}

int moex_pack(moex_model *m, bool all, moex_file *f, struct moex_pack_result *r) {
    struct atomic_file *file = (struct atomic_file *)f;
    if (!m->model->arch) {
        atomic_file_discard(file);
        return moex_errorf("%s was loaded for its tokenizer only (vocab_only)", m->path);
    }
    struct moe_exec_options experts = m->experts;
    experts.pack_path = NULL; /* packing reads the model, never an older pack file */
    const struct model *model = m->model;
    struct pack_progress progress = { m };
    if (m->progress) m->progress(m->user, "packing experts", 0, (uint64_t)model->moe.n_layers * (uint64_t)model->hp.n_expert);
    struct moe_pack_result got;
    int rc = moe_pack_experts(&model->moe, &experts, m->pool, all, file, m->progress ? on_expert : NULL, &progress, &got);
    if (rc != 0) return -1;
    memset(r, 0, sizeof *r);
    memcpy(r->device, got.device, sizeof r->device);
    r->experts = got.experts;
    r->pinned = got.pinned;
    r->source_bytes = got.source_bytes;
    r->file_bytes = got.file_bytes;
    r->pack_s = got.pack_ns * 1e-9;
    r->total_s = got.total_ns * 1e-9;
    r->pack_modelled = got.pack_modelled;
    r->weight_type = quant_type_name(model->moe.layers[0].gate.type);
    return 0;
}
