/* Residency: what the device holds and how it got there. At start the
 * staging buffers and the slot pool are allocated once (the plan's sizes),
 * the pinned experts filled (imported from the pack file, or packed), the
 * backbone packed; while running, experts admitted by the recency cache are
 * filled into their slots in place. Runs after the plan (plan.h) and under
 * the run (executor_run.c), which calls in here; nothing here calls back. */
#include "moe/executor_impl.h"

#include "core/error.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "core/trace.h"
#include "pack/packfile.h"

#include <stdlib.h>
#include <string.h>

static int pack_expert(struct moe_executor *e, int layer, int expert, int slot) {
    const struct moe_layer_desc *L = &e->desc.layers[layer];
    const struct matrix *mats[MATS] = { &L->gate, &L->up, &L->down };
    int64_t t0 = time_ns();
    for (int i = 0; i < MATS; i++) {
        int rows = i < 2 ? e->n_ff : e->n_embd, K = i < 2 ? e->n_embd : e->n_ff;
        const char *data = (const char *)mats[i]->data + (size_t)expert * rows * mats[i]->row_bytes;
        int rc = dev_pack(e->dev, slot * MATS + i, mats[i]->type, data, K, rows);
        if (rc != DEV_OK) return rc;
    }
    trace_event(e->trace, LANE_DEVICE, "pack expert", t0, time_ns());
    return DEV_OK;
}

/* dev_slot_fn: DEV_OK when a slot holds exactly a pack file entry's bytes
 * (and codes in range), else DEV_E_VALUE. */
static int slot_matches(void *user, const int8_t *codes, size_t code_bytes, const float *scales, int K, int N) {
    const struct packfile_entry *en = user;
    (void)K;
    return packfile_entry_hash(codes, code_bytes, scales, N) == en->checksum && pack_codes_in_range(codes, code_bytes)
               ? DEV_OK
               : DEV_E_VALUE;
}

/* The expert's three weights copied from the pack file, each checked after
 * the copy against its entry's checksum: what the slot holds is what was
 * packed, or the load fails. */
static int load_expert(struct moe_executor *e, int layer, int expert, int slot) {
    enum pack_layout layout = packfile_info(e->pack)->layout;
    int64_t t0 = time_ns();
    for (int i = 0; i < MATS; i++) {
        const struct packfile_entry *en = packfile_entry(e->pack, packfile_find(e->pack, layer, expert, i));
        if (!en) return moex_errorf("%s: no entry for layer %d expert %d", packfile_path(e->pack), layer, expert), -1;
        int rc = dev_load_packed(e->dev, slot * MATS + i, layout, en->codes, en->scales, en->K, en->N);
        if (rc != DEV_OK) {
            char why[512];
            snprintf(why, sizeof why, "%s", moex_error());
            moex_errorf("%s: layer %d expert %d %s: %s", packfile_path(e->pack), layer, expert,
                        packfile_matrix_name(en->matrix), why);
            return rc;
        }
        if (dev_slot_view(e->dev, slot * MATS + i, slot_matches, (void *)en) != DEV_OK)
            return moex_errorf("%s: bad checksum in section data: layer %d expert %d %s", packfile_path(e->pack), layer,
                               expert, packfile_matrix_name(en->matrix));
    }
    trace_event(e->trace, LANE_DEVICE, "load expert", t0, time_ns());
    return DEV_OK;
}

bool res_file_has(const struct moe_executor *e, int layer, int expert) {
    return e->pack && !e->pack_refused && packfile_has_expert(e->pack, layer, expert);
}

/* An expert into its slots: from the pack file when it holds the expert,
 * else packed live. A damaged entry refuses the file for the rest of the
 * run; the expert is then packed live, so a slot never keeps bad bytes. */
int res_fill_expert(struct moe_executor *e, int layer, int expert, int slot, bool *loaded) {
    *loaded = false;
    if (res_file_has(e, layer, expert)) {
        int rc = load_expert(e, layer, expert, slot);
        if (rc == DEV_OK) {
            *loaded = true;
            return DEV_OK;
        }
        e->pack_refused = true;
        e->pack_report.status = rc == DEV_E_VALUE ? PACKFILE_E_CORRUPT : PACKFILE_E_CHECKSUM;
        snprintf(e->pack_report.message, sizeof e->pack_report.message, "%s", moex_error());
        /* A refusal at start is in the pack report, which is shown then;
         * one found while running is a note. */
        if (e->running) exec_note(e, "pack file refused, experts are packed live: %s", moex_error());
    }
    return pack_expert(e, layer, expert, slot);
}

static void expert_types(const struct moe_model_desc *d, uint32_t types[MATS]) {
    const struct moe_layer_desc *L = &d->layers[0];
    types[0] = (uint32_t)L->gate.type;
    types[1] = (uint32_t)L->up.type;
    types[2] = (uint32_t)L->down.type;
}

/* Opens the pack file for this run's device and model, or says why not
 * (pack_report). When its plan was made for this run's budget (and routing
 * statistics, if this run has any) its pinned experts replace the plan. */
static int open_pack(struct moe_executor *e, const char *path, const struct packfile_shared *shared,
                     const struct moe_device_plan *dp) {
    struct moe_pack_report *r = &e->pack_report;
    struct packfile *pf = NULL;
    struct packfile_identity id;
    uint32_t types[MATS];
    expert_types(&e->desc, types);
    int rc = shared ? packfile_take(shared, &pf) : packfile_open(path, &pf);
    if (rc == PACKFILE_OK) rc = packfile_check_layout(pf, dp->device, dev_layout(e->dev), e->caps->k_multiple,
                                                      e->caps->n_multiple, dp->slot_values, dp->max_n);
    if (rc == PACKFILE_OK) rc = packfile_model_identity(e->desc.file, &id);
    if (rc == PACKFILE_OK)
        rc = packfile_check_model(pf, &id, e->n_layers, e->n_expert, e->n_embd, e->n_ff, types);
    r->status = rc;
    if (rc != PACKFILE_OK) {
        snprintf(r->message, sizeof r->message, "%s", moex_error());
        packfile_close(pf);
        return 0;
    }
    e->pack = pf;
    const struct packfile_info *in = packfile_info(pf);
    bool same_stats = dp->stats_hash == 0 || (dp->stats_hash == in->stats_hash && dp->pinned_share == in->pinned_share);
    if (in->budget_bytes == dp->budget_bytes && in->expert_bytes == dp->expert_bytes &&
        in->plan_slots == e->plan.n_slots && same_stats) {
        int32_t *pinned = malloc(sizeof *pinned * (size_t)(in->n_pinned ? in->n_pinned : 1));
        if (!pinned) return moex_errorf("out of memory");
        memcpy(pinned, packfile_pinned(pf), sizeof *pinned * (size_t)in->n_pinned);
        free(e->plan.pinned);
        e->plan.pinned = pinned;
        e->plan.n_pinned = in->n_pinned;
        r->plan_used = true;
    } else {
        snprintf(r->message, sizeof r->message,
                 "%s: its plan is for a budget of %.1f MiB%s, this run's is %.1f MiB%s: planned anew; the experts the "
                 "file holds are loaded, the others packed live", path, in->budget_bytes / 1048576.0,
                 in->stats_hash ? " with routing statistics" : "", dp->budget_bytes / 1048576.0,
                 dp->stats_hash == 0 ? "" : dp->stats_hash == in->stats_hash ? " with the same statistics"
                                                                              : " with other statistics");
    }
    return 0;
}

struct verify_job {
    const struct moe_executor *e;
    enum pack_layout layout;
    bool *bad; /* (slots) */
};

static void verify_slots(void *arg, int64_t begin, int64_t end, int thread_index) {
    (void)thread_index;
    struct verify_job *j = arg;
    for (int64_t s = begin; s < end; s++) {
        const struct packfile_entry *en = packfile_entry(j->e->pack, (int)s);
        j->bad[s] = j->bad[s] || dev_slot_view(j->e->dev, (int)s, slot_matches, (void *)en) != DEV_OK;
    }
}

/* The pinned experts of a file whose plan this run uses. The file holds
 * them in slot order, so the codes of all their slots are imported from it
 * in one piece (mapped where the device maps host pages: no copy, no zeroed
 * memory; read into its memory elsewhere), the scales copied, and every
 * slot hashed against its entry through the device, on the pool's threads. An expert that fails is
 * packed live and the file is not used again. Returns the experts done:
 * all pinned ones, or 0 when the codes cannot be mapped (the caller copies). */
static int map_pinned(struct moe_executor *e) {
    const struct packfile_info *in = packfile_info(e->pack);
    int n_slots = e->plan.n_pinned * MATS;
    if (!e->pack_report.plan_used || n_slots == 0 || in->code_stride != dev_slot_code_stride(e->dev) ||
        dev_import_codes(e->dev, 0, n_slots, packfile_fd(e->pack), packfile_entry(e->pack, 0)->codes_offset) != DEV_OK)
        return 0;
    bool *bad = calloc((size_t)n_slots, sizeof *bad);
    if (!bad) return 0;
    for (int s = 0; s < n_slots; s++) {
        const struct packfile_entry *en = packfile_entry(e->pack, s);
        bad[s] = dev_load_packed(e->dev, s, in->layout, NULL, en->scales, en->K, en->N) != DEV_OK;
    }
    struct verify_job job = { e, in->layout, bad };
    threadpool_parallel_for(e->pool, n_slots, 1, verify_slots, &job);
    for (int i = 0; i < e->plan.n_pinned; i++) {
        int key = e->plan.pinned[i];
        if (!bad[i * MATS] && !bad[i * MATS + 1] && !bad[i * MATS + 2]) {
            e->counters[MOE_PREFILL].loads++;
            e->pack_report.experts_loaded++;
            continue;
        }
        if (!e->pack_refused) {
            int m = bad[i * MATS] ? 0 : bad[i * MATS + 1] ? 1 : 2;
            e->pack_refused = true;
            const struct packfile_entry *en = packfile_entry(e->pack, i * MATS + m);
            bool in_range = pack_codes_in_range(en->codes, pack_bytes(in->layout, en->K, en->N));
            e->pack_report.status = in_range ? PACKFILE_E_CHECKSUM : PACKFILE_E_CORRUPT;
            snprintf(e->pack_report.message, sizeof e->pack_report.message, "%s: %s: layer %d expert %d %s",
                     packfile_path(e->pack), in_range ? "bad checksum in section data" : "code -128 in section data",
                     key / e->n_expert, key % e->n_expert, packfile_matrix_name((enum packfile_matrix)m));
        }
        if (pack_expert(e, key / e->n_expert, key % e->n_expert, i) != DEV_OK) {
            exec_note(e, "packing the pinned experts failed: %s; experts run on the CPU", moex_error());
            e->failed = true;
            break;
        }
        e->counters[MOE_PREFILL].packs++;
        e->pack_report.experts_packed++;
    }
    free(bad);
    return e->plan.n_pinned;
}

/* The device could not take the plan: the experts stay on the CPU. A
 * device that prices the machine it models stays open for that. */
static void drop_device(struct moe_executor *e) {
    if (e->pricer != e->dev) dev_close(e->dev);
    e->dev = NULL;
    e->caps = NULL;
}

/* The plan's pool: one slot size, or on a block device each expert
 * matrix's slots at its own size and the backbone's at the slot type's. */
static int alloc_pool(struct moe_executor *e, const struct moe_device_plan *dp) {
    int n = e->plan.n_slots * MATS + dp->backbone_slots;
    const uint64_t *role = dp->role_bytes;
    if (!role[0]) return dev_pool_alloc(e->dev, n, dp->slot_values, dp->max_n);
    uint64_t *bytes = malloc(sizeof *bytes * (size_t)(n ? n : 1));
    if (!bytes) return moex_errorf("out of memory"), DEV_E_NOMEM;
    uint64_t backbone = dev_caps_slot_code_bytes(dev_caps(e->dev), dp->slot_values);
    for (int s = 0; s < n; s++) bytes[s] = s < e->plan.n_slots * MATS ? role[s % MATS] : backbone;
    int rc = dev_pool_alloc_sized(e->dev, n, bytes, dp->slot_values, dp->max_n);
    free(bytes);
    return rc;
}

int res_start(struct moe_executor *e, const struct moe_exec_options *o, const struct moe_device_plan *plan) {
    struct moe_device_plan dp = *plan;
    e->stage = moe_stage_layout(dev_caps(e->dev), e->n_embd, e->n_ff, e->top_k);
    int rc = DEV_OK;
    for (int b = 0; b < N_STAGE_BUFS && rc == DEV_OK; b++) rc = dev_buffer_alloc(e->dev, e->stage.bytes[b], &e->stage_buf[b]);
    if (rc != DEV_OK) {
        exec_note(e, "device staging buffers: %s; experts run on the CPU", moex_error());
        drop_device(e);
        return 0;
    }
    if (alloc_pool(e, &dp) != DEV_OK) {
        exec_note(e, "device slot pool: %s; experts run on the CPU", moex_error());
        drop_device(e);
        return 0;
    }
    e->caps = dev_caps(e->dev);
    e->min_m = o->min_m > 0 ? o->min_m : e->caps->min_m;
    e->pack_ns = 3.0 * (double)dp.slot_values * e->caps->pack_ns_per_value +
                 (double)dp.expert_bytes * e->caps->upload_ns_per_byte;
    /* nothing is packed for a block device: not a refusal to rebuild (the
     * start-up summary says the file is not used) */
    if (o->pack_path && !exec_blocks(e)) {
        if (!(e->pack_path = strdup(o->pack_path))) return moex_errorf("out of memory");
        e->pack_report.path = e->pack_path;
        if (open_pack(e, o->pack_path, o->pack_shared, &dp) != 0) return -1;
    }
    e->cache = expert_cache_new(e->n_layers, e->n_expert, &e->plan);
    if (!e->cache) return moex_errorf("out of memory");
    /* The pinned core is filled now, once: from the pack file, or packed. */
    const char *label = e->pack ? "loading pinned experts" : "packing pinned experts";
    uint64_t n_pinned = (uint64_t)e->plan.n_pinned;
    if (o->progress) o->progress(o->progress_user, label, 0, n_pinned);
    int64_t t0 = time_ns();
    struct dev_counters before, after;
    dev_get_counters(e->dev, &before);
    for (int i = e->pack ? map_pinned(e) : 0; i < e->plan.n_pinned && !e->failed; i++) {
        int key = e->plan.pinned[i];
        bool loaded;
        rc = res_fill_expert(e, key / e->n_expert, key % e->n_expert, i, &loaded);
        if (rc != DEV_OK) {
            exec_note(e, "packing the pinned experts failed: %s; experts run on the CPU", moex_error());
            e->failed = true;
            break;
        }
        if (loaded) {
            e->counters[MOE_PREFILL].loads++;
            e->pack_report.experts_loaded++;
        } else {
            e->counters[MOE_PREFILL].packs++;
            e->pack_report.experts_packed++;
        }
        if (o->progress && (uint64_t)i + 1 < n_pinned) o->progress(o->progress_user, label, (uint64_t)i + 1, n_pinned);
    }
    if (o->progress) o->progress(o->progress_user, label, n_pinned, n_pinned);
    e->pack_report.fill_ns = time_ns() - t0;
    dev_get_counters(e->dev, &after);
    e->pack_report.fill_device_ns = (int64_t)(after.pack_ns - before.pack_ns + after.load_ns - before.load_ns);
    /* The backbone, packed once: its slots follow the experts'. */
    if (dp.backbone_slots > 0 && !e->failed) {
        if (o->progress) o->progress(o->progress_user, "packing the backbone", 0, 1);
        t0 = time_ns();
        if (res_pack_backbone(e, dp.dense_slot, e->plan.n_slots * MATS) != 0) return -1;
        e->pack_report.backbone_fill_ns = time_ns() - t0;
        struct dev_counters done;
        dev_get_counters(e->dev, &done);
        e->pack_report.backbone_device_ns = (int64_t)(done.pack_ns - after.pack_ns);
        if (o->progress) o->progress(o->progress_user, "packing the backbone", 1, 1);
    }
    return 0;
}

/* Packs dense matmul i's chunks into its slots; DEV_OK or the first failure. */
static int pack_dense(struct moe_executor *e, int i) {
    const struct dense_exec *x = &e->dense;
    const struct matrix *w = e->desc.dense[i].w;
    for (int c = 0; c < x->chunks[i]; c++) {
        int64_t row0 = (int64_t)c * x->chunk_rows[i];
        int rows = (int)(w->rows - row0 < x->chunk_rows[i] ? w->rows - row0 : x->chunk_rows[i]);
        int rc = dev_pack(e->dev, x->slot[i] + c, w->type, (const char *)w->data + (size_t)row0 * w->row_bytes,
                          (int)w->cols, rows);
        if (rc != DEV_OK) return rc;
    }
    return DEV_OK;
}

int res_pack_backbone(struct moe_executor *e, const int32_t *slot_of, int first_slot) {
    struct dense_exec *x = &e->dense;
    const struct moe_layer_desc *L0 = &e->desc.layers[0];
    int64_t slot_values = (int64_t)L0->n_embd * L0->n_ff;
    int max_n = L0->n_embd > L0->n_ff ? L0->n_embd : L0->n_ff, most = 0;
    int64_t t0 = time_ns();
    for (int i = 0; i < x->n; i++) {
        if (slot_of[i] < 0) continue;
        x->chunks[i] = dense_geometry(e->caps, slot_values, max_n, e->desc.dense[i].w, &x->chunk_rows[i]);
        x->slot[i] = first_slot + slot_of[i];
        if (pack_dense(e, i) != DEV_OK) {
            /* That matmul stays on the CPU; its slots stay empty. */
            exec_note(e, "a dense matmul could not be packed, it runs on the CPU: %s", moex_error());
            x->slot[i] = -1;
            continue;
        }
        enum dense_kind kind = e->desc.dense[i].kind;
        uint64_t bytes = (uint64_t)x->chunks[i] * dev_slot_bytes(e->dev, slot_values, max_n);
        x->resident[kind] += bytes;
        x->backbone_bytes += bytes;
        e->pack_report.dense_packed++;
        if (x->chunks[i] > most) most = x->chunks[i];
    }
    trace_event(e->trace, LANE_DEVICE, "pack backbone", t0, time_ns());
    x->max_jobs = DENSE_GROUP_MAX * most;
    x->jobs = malloc(sizeof *x->jobs * (size_t)(x->max_jobs ? x->max_jobs : 1));
    return x->jobs ? 0 : moex_errorf("out of memory");
}
