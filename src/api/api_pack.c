/* Pack files for the public API: the model's device options and threads
 * handed to the expert packer (src/moe/pack_experts.h). */
#include "api/api_impl.h"

#include "dev/dev.h"

#include "core/atomic_file.h"
#include "core/timer.h"
#include "model/model_pack.h"
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

struct layout_job {
    moex_model *m;
    uint64_t bytes;
    int64_t ns;
};

/* After the experts: the model's matrices in the CPU's interleaved layout. */
static int write_layout(void *user, struct packfile_writer *w) {
    struct layout_job *j = user;
    int64_t t0 = time_ns();
    int rc = model_pack_interleaved(j->m->model, j->m->pool, w, &j->bytes);
    j->ns = time_ns() - t0;
    return rc;
}

static void layout_result(const struct layout_job *j, struct moex_pack_result *r) {
    r->interleaved = j->bytes ? model_interleave_targets(j->m->model, NULL) : 0;
    r->interleaved_bytes = j->bytes;
    r->interleave_s = j->ns * 1e-9;
}

static int pack(moex_model *m, bool all, moex_file *f, struct moex_pack_result *r) {
    struct atomic_file *file = (struct atomic_file *)f;
    if (!f) return api_null("moex_pack", "f");
    if (!m || !r) {
        atomic_file_discard(file);
        return api_null("moex_pack", m ? "r" : "m");
    }
    if (!m->model->arch) {
        atomic_file_discard(file);
        return moex_errorf("%s was loaded for its tokenizer only (vocab_only)", m->path);
    }
    struct layout_job layout = { m, 0, 0 };
    if (!dev_name_info(m->experts.device)->offloads) {
        int64_t t0 = time_ns();
        if (model_pack_interleaved_file(m->model, m->pool, file, &layout.bytes) != 0) return -1;
        layout.ns = time_ns() - t0;
        memset(r, 0, sizeof *r);
        snprintf(r->device, sizeof r->device, "none");
        r->total_s = layout.ns * 1e-9;
        r->weight_type = quant_type_name(m->model->moe.layers[0].gate.type);
        layout_result(&layout, r);
        return 0;
    }
    struct moe_exec_options experts = m->experts;
    experts.pack_path = NULL; /* packing reads the model, never an older pack file */
    const struct model *model = m->model;
    struct pack_progress progress = { m };
    if (m->progress) m->progress(m->user, "packing experts", 0, (uint64_t)model->moe.n_layers * (uint64_t)model->hp.n_expert);
    struct moe_pack_result got;
    int rc = moe_pack_experts(&model->moe, &experts, m->pool, all, file, m->progress ? on_expert : NULL, &progress,
                              write_layout, &layout, &got);
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
    layout_result(&layout, r);
    return 0;
}

int moex_pack(moex_model *m, bool all, moex_file *f, struct moex_pack_result *r) {
    if (m && f && r && api_threads_take(m, __func__)) {
        moex_file_discard(f);
        return -1;
    }
    int rc = pack(m, all, f, r);
    if (m && f && r) api_threads_give(m);
    return rc;
}
