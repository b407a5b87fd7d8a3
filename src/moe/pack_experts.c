#include "moe/pack_experts.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/timer.h"
#include "dev/dev.h"
#include "moe/executor.h"
#include "moe/moe_layers.h"
#include "pack/packfile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct entry_out {
    struct packfile_writer *w;
    int layer, expert, matrix;
};

/* dev_slot_fn: a slot's bytes, read back through the device, into the file. */
static int write_slot(void *user, const int8_t *codes, size_t code_bytes, const float *scales, int K, int N) {
    const struct entry_out *o = user;
    (void)code_bytes, (void)K, (void)N;
    return packfile_writer_add(o->w, o->layer, o->expert, (enum packfile_matrix)o->matrix, codes, scales) == PACKFILE_OK
               ? 0
               : -1;
}

/* One expert through the device's pack path into slots 0..2, then out. */
static int pack_one(const struct moe_model_desc *d, struct dev *dev, struct packfile_writer *w, int layer, int expert) {
    const struct moe_layer_desc *L = &d->layers[layer];
    const struct matrix *mats[PACKFILE_MATRICES] = { &L->gate, &L->up, &L->down };
    for (int i = 0; i < PACKFILE_MATRICES; i++) {
        int rows = i < 2 ? L->n_ff : L->n_embd, K = i < 2 ? L->n_embd : L->n_ff;
        const char *data = (const char *)mats[i]->data + (size_t)expert * rows * mats[i]->row_bytes;
        if (dev_pack(dev, i, mats[i]->type, data, K, rows) != DEV_OK)
            return moex_errorf("layer %d expert %d: %s", layer, expert, moex_error());
        struct entry_out o = { w, layer, expert, i };
        if (dev_slot_view(dev, i, write_slot, &o) != 0) return -1;
    }
    return 0;
}

/* With all, the experts the plan does not pin, ascending; else none. */
static int32_t *extra_experts(const struct moe_model_desc *d, const struct placement *plan, bool all, int *n_extra) {
    int n_all = d->n_layers * d->layers[0].n_expert;
    int32_t *extra = malloc(sizeof *extra * (size_t)n_all);
    bool *pinned = calloc((size_t)n_all, sizeof *pinned);
    *n_extra = 0;
    if (!extra || !pinned) {
        free(extra);
        free(pinned);
        moex_errorf("out of memory");
        return NULL;
    }
    for (int i = 0; i < plan->n_pinned; i++) pinned[plan->pinned[i]] = true;
    for (int k = 0; all && k < n_all; k++)
        if (!pinned[k]) extra[(*n_extra)++] = k;
    free(pinned);
    return extra;
}

struct pack_hooks {
    moe_pack_progress_fn progress;
    void *user;
    moe_pack_more_fn more;
    void *more_user;
};

static int write_file(const struct moe_model_desc *d, const struct moe_device_plan *dp, struct dev *dev,
                      const int32_t *extra, int n_extra, bool all, struct atomic_file **file,
                      const struct pack_hooks *hooks, struct moe_pack_result *out) {
    const struct moe_layer_desc *L0 = &d->layers[0];
    struct packfile_info info = {
        .layout = dev_layout(dev), .k_multiple = dp->k_multiple, .n_multiple = dp->n_multiple,
        .slot_values = dp->slot_values, .slot_max_n = dp->max_n, .code_stride = dev_slot_code_stride(dev),
        .scale_stride = ((uint64_t)dp->max_n * sizeof(float) + 63) / 64 * 64,
        .n_layers = d->n_layers, .n_expert = L0->n_expert, .n_embd = L0->n_embd, .n_ff = L0->n_ff,
        .source_type = { (uint32_t)L0->gate.type, (uint32_t)L0->up.type, (uint32_t)L0->down.type },
        .budget_bytes = dp->budget_bytes, .expert_bytes = dp->expert_bytes, .stats_hash = dp->stats_hash,
        .pinned_share = dp->pinned_share, .plan_slots = dp->plan.n_slots, .n_pinned = dp->plan.n_pinned,
        .all_experts = all,
    };
    snprintf(info.device, sizeof info.device, "%s", dp->device);
    struct packfile_writer *w = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s", atomic_file_path(*file));
    if (packfile_model_identity(d->file, &info.model) != PACKFILE_OK) return -1;
    struct atomic_file *taken = *file;
    *file = NULL; /* the writer owns it now */
    if (packfile_writer_begin(taken, &info, dp->plan.pinned, extra, n_extra, &w) != PACKFILE_OK) return -1;
    int n_pinned = dp->plan.n_pinned, n = n_pinned + n_extra;
    for (int i = 0; i < n; i++) {
        int key = i < n_pinned ? dp->plan.pinned[i] : extra[i - n_pinned];
        if (pack_one(d, dev, w, key / L0->n_expert, key % L0->n_expert) != 0) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", moex_error());
            packfile_writer_abort(w);
            return moex_errorf("%s", msg);
        }
        if (hooks->progress) hooks->progress(hooks->user, i + 1, n);
    }
    if (hooks->more && hooks->more(hooks->more_user, w) != 0) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", moex_error());
        packfile_writer_abort(w);
        return moex_errorf("%s", msg);
    }
    out->file_bytes = packfile_writer_bytes(w);
    if (packfile_writer_finish(w) != PACKFILE_OK) return -1;
    /* What was written must read back as a valid file. */
    struct packfile *check = NULL;
    if (packfile_open(path, &check) != PACKFILE_OK) return moex_errorf("the file written does not read back: %s", moex_error());
    packfile_close(check);
    out->experts = n;
    out->pinned = n_pinned;
    return 0;
}

static int pack_experts(const struct moe_model_desc *d, const struct moe_exec_options *o, struct threadpool *pool,
                        bool all, struct atomic_file **file, const struct pack_hooks *hooks,
                        struct moe_pack_result *out) {
    memset(out, 0, sizeof *out);
    int64_t t0 = time_ns();
    if (moe_model_check(d) != 0) return -1;
    /* The device is opened once: its capabilities plan, then it packs. */
    char why[256] = "";
    const char *name = dev_resolve(o->device, why, sizeof why);
    struct dev *dev = NULL;
    int rc = -1;
    if (!name)
        return moex_errorf("nothing to pack for --device %s: %s", o->device ? o->device : "none", why[0] ? why : "no device");
    if (d->n_layers == 0) return moex_errorf("nothing to pack for --device %s: the model has no experts", name);
    rc = dev_open(name, &(struct dev_options){ .pool = pool, .spec = o->device_spec }, &dev);
    if (rc != DEV_OK)
        return moex_errorf("nothing to pack for --device %s: device unavailable: %s", name, moex_error());
    struct moe_device_plan dp;
    if (moe_plan_for_device(d, o, dev_caps(dev), &dp) != 0) {
        dev_close(dev);
        return -1;
    }
    rc = -1;
    if (!dp.device[0]) {
        moex_errorf("nothing to pack for --device %s: %s", name, dp.note[0] ? dp.note : "no device");
        dev_close(dev);
        return -1;
    }
    if (dp.expert_bytes == 0) {
        moe_device_plan_free(&dp);
        dev_close(dev);
        return moex_errorf("nothing to pack for --device %s: %s", name, dp.note[0] ? dp.note : "no expert fits");
    }
    if (!all && dp.plan.n_pinned == 0) {
        moe_device_plan_free(&dp);
        dev_close(dev);
        return moex_errorf("at this hot budget the plan pins no expert (without routing statistics only a budget that "
                           "holds every expert pins them): give statistics (moex profile) or pack all experts");
    }
    int n_extra = 0;
    int32_t *extra = extra_experts(d, &dp.plan, all, &n_extra);
    if (!extra) {
        /* moex_error set */
    } else if (dev_pool_alloc(dev, PACKFILE_MATRICES, dp.slot_values, dp.max_n) != DEV_OK) {
        moex_errorf("device %s: %s", dp.device, moex_error());
    } else if (write_file(d, &dp, dev, extra, n_extra, all, file, hooks, out) == 0) {
        struct dev_counters c;
        dev_get_counters(dev, &c);
        snprintf(out->device, sizeof out->device, "%s", dp.device);
        out->source_bytes = c.pack_bytes_read;
        out->pack_ns = (int64_t)c.pack_ns;
        out->pack_modelled = dev_caps(dev)->modelled_time;
        out->total_ns = time_ns() - t0;
        rc = 0;
    }
    dev_close(dev);
    free(extra);
    moe_device_plan_free(&dp);
    return rc;
}

int moe_pack_experts(const struct moe_model_desc *d, const struct moe_exec_options *o, struct threadpool *pool, bool all,
                     struct atomic_file *file, moe_pack_progress_fn progress, void *user, moe_pack_more_fn more,
                     void *more_user, struct moe_pack_result *out) {
    struct pack_hooks hooks = { progress, user, more, more_user };
    int rc = pack_experts(d, o, pool, all, &file, &hooks, out);
    atomic_file_discard(file); /* NULL once the writer took it */
    return rc;
}
