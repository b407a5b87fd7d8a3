#include "moe/executor_impl.h"

#include "core/cpu.h"
#include "core/error.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "core/trace.h"
#include "dev/board.h"
#include "dev/dev.h"
#include "moe/expert_cache.h"
#include "moe/experts.h"
#include "moe/moe_layers.h"
#include "moe/routing_stats.h"
#include "pack/packfile.h"
#include "pack/w8a8.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t round64(uint64_t x) { return (x + 63) / 64 * 64; }

/* The staging buffers' layout; their total as the device counts them. */
static struct stage_layout stage_layout(const struct dev *d, int n_embd, int n_ff, int top_k) {
    struct stage_layout l = { .rows = STAGE_TOKENS * top_k };
    uint64_t R = (uint64_t)l.rows;
    l.scale_offset[BUF_ACT] = round64(R * (uint64_t)n_embd);
    l.bytes[BUF_ACT] = l.scale_offset[BUF_ACT] + R * sizeof(float);
    l.bytes[BUF_GATE_UP] = 2 * R * (uint64_t)n_ff * sizeof(float);
    l.scale_offset[BUF_H] = round64(R * (uint64_t)n_ff);
    l.bytes[BUF_H] = l.scale_offset[BUF_H] + R * sizeof(float);
    l.bytes[BUF_OUT] = R * (uint64_t)n_embd * sizeof(float);
    for (int b = 0; b < N_STAGE_BUFS; b++) l.total += dev_mem_bytes(d, l.bytes[b]);
    return l;
}

void exec_note(struct moe_executor *e, const char *fmt, const char *detail) {
    if (!e->note[0]) snprintf(e->note, sizeof e->note, fmt, detail);
}

/* ---------------------------------------------------------------- device pipeline */

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

static bool file_has(const struct moe_executor *e, int layer, int expert) {
    return e->pack && !e->pack_refused && packfile_has_expert(e->pack, layer, expert);
}

/* An expert into its slots: from the pack file when it holds the expert,
 * else packed live. A damaged entry refuses the file for the rest of the
 * run; the expert is then packed live, so a slot never keeps bad bytes. */
static int fill_expert(struct moe_executor *e, int layer, int expert, int slot, bool *loaded) {
    *loaded = false;
    if (file_has(e, layer, expert)) {
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

/* Host step 1 on the device's stream: the admitted experts into their
 * slots, the device rows' activations quantized and staged. */
static int stage_in(struct dev *d, void *arg) {
    struct device_work *w = arg;
    struct moe_executor *e = w->e;
    for (int i = 0; i < e->n_to_pack; i++) {
        int ex = e->to_pack[i];
        bool loaded;
        int rc = fill_expert(e, w->layer, ex, e->dev_slot[ex], &loaded);
        if (rc != DEV_OK) return rc;
    }
    int rows = 0;
    for (int ex = 0; ex < e->n_expert; ex++) {
        if (e->dev_slot[ex] < 0) continue;
        int p0 = moe_expert_first_pair(w->s, ex), n = moe_expert_rows(w->s, ex);
        for (int p = p0; p < p0 + n; p++, rows++)
            if (w8a8_quantize_act(w->x + (size_t)moe_pair_token(w->s, p) * e->n_embd, 1, e->n_embd, e->n_embd,
                                  e->act_codes + (size_t)rows * e->n_embd, &e->act_scales[rows]) != 0)
                return moex_errorf("non-finite activations"), DEV_E_VALUE;
    }
    int rc = dev_write(d, exec_at(e, BUF_ACT, 0), e->act_codes, (uint64_t)rows * e->n_embd);
    if (rc == DEV_OK)
        rc = dev_write(d, exec_at(e, BUF_ACT, e->stage.scale_offset[BUF_ACT]), e->act_scales, (uint64_t)rows * sizeof(float));
    w->t_submit = time_ns();
    return rc;
}

/* Host step 2: SiLU(gate) * up of the staged rows, quantized and staged for down. */
static int stage_gated(struct dev *d, void *arg) {
    struct device_work *w = arg;
    struct moe_executor *e = w->e;
    trace_event(e->trace, LANE_DEVICE, "device gate+up", w->t_submit, time_ns());
    int rows = 0;
    for (int ex = 0; ex < e->n_expert; ex++) if (e->dev_slot[ex] >= 0) rows += moe_expert_rows(w->s, ex);
    uint64_t half = (uint64_t)e->stage.rows * e->n_ff;
    float *gate = e->gate_up, *up = e->gate_up + half;
    int rc = dev_read(d, exec_at(e, BUF_GATE_UP, 0), gate, (uint64_t)rows * e->n_ff * sizeof(float));
    if (rc == DEV_OK) rc = dev_read(d, exec_at(e, BUF_GATE_UP, half * sizeof(float)), up, (uint64_t)rows * e->n_ff * sizeof(float));
    if (rc != DEV_OK) return rc;
    for (int r = 0; r < rows; r++) {
        float *g = gate + (size_t)r * e->n_ff, *u = up + (size_t)r * e->n_ff;
        for (int i = 0; i < e->n_ff; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
        if (w8a8_quantize_act(g, 1, e->n_ff, e->n_ff, e->h_codes + (size_t)r * e->n_ff, &e->h_scales[r]) != 0)
            return moex_errorf("non-finite activations"), DEV_E_VALUE;
    }
    rc = dev_write(d, exec_at(e, BUF_H, 0), e->h_codes, (uint64_t)rows * e->n_ff);
    if (rc == DEV_OK)
        rc = dev_write(d, exec_at(e, BUF_H, e->stage.scale_offset[BUF_H]), e->h_scales, (uint64_t)rows * sizeof(float));
    w->t_submit = time_ns();
    return rc;
}

/* Host step 3: the down outputs back into the pairs' output rows. */
static int stage_out(struct dev *d, void *arg) {
    const struct device_work *w = arg;
    struct moe_executor *e = w->e;
    trace_event(e->trace, LANE_DEVICE, "device down", w->t_submit, time_ns());
    for (int ex = 0; ex < e->n_expert; ex++) {
        if (e->dev_slot[ex] < 0) continue;
        int p0 = moe_expert_first_pair(w->s, ex), n = moe_expert_rows(w->s, ex);
        /* a device expert's pairs are consecutive, so are its output rows */
        uint64_t row_bytes = (uint64_t)e->n_embd * sizeof(float);
        int rc = dev_read(d, exec_at(e, BUF_OUT, (uint64_t)e->stage_row[ex] * row_bytes), moe_pair_output(w->s, p0),
                          (uint64_t)n * row_bytes);
        if (rc != DEV_OK) return rc;
    }
    return DEV_OK;
}

int exec_submit(struct moe_executor *e, const struct dev_job *jobs, int n, dev_fence *fence, uint64_t *submissions,
                uint64_t *n_jobs) {
    for (int done = 0; done < n;) {
        int chunk = n - done < e->caps->max_jobs ? n - done : e->caps->max_jobs;
        int rc = dev_submit(e->dev, jobs + done, chunk, fence);
        if (rc != DEV_OK) return rc;
        ++*submissions;
        *n_jobs += (uint64_t)chunk;
        done += chunk;
    }
    return DEV_OK;
}

static int submit(struct moe_executor *e, const struct dev_job *jobs, int n, dev_fence *fence) {
    struct moe_phase_counters *c = &e->counters[e->phase];
    return exec_submit(e, jobs, n, fence, &c->submissions, &c->jobs);
}

/* Queues one layer's device work on the device's stream: staging in, gate
 * and up of every device expert in one submission, SiLU(gate) * up on the
 * host, down in a second submission, the outputs back. *fence: the last. */
static int device_layer(struct moe_executor *e, int layer, struct moe_scratch *s, const float *x, dev_fence *fence) {
    e->work = (struct device_work){ e, layer, s, x, 0 };
    int rows = 0, n_jobs = 0;
    for (int ex = 0; ex < e->n_expert; ex++) {
        if (e->dev_slot[ex] < 0) continue;
        e->stage_row[ex] = rows;
        rows += moe_expert_rows(s, ex);
    }
    const uint64_t R = (uint64_t)e->stage.rows, D = (uint64_t)e->n_embd, F = (uint64_t)e->n_ff;
    for (int ex = 0; ex < e->n_expert; ex++) {
        if (e->dev_slot[ex] < 0) continue;
        uint64_t r0 = (uint64_t)e->stage_row[ex];
        for (int i = 0; i < 2; i++)
            e->jobs[n_jobs++] = (struct dev_job){ e->dev_slot[ex] * MATS + i, moe_expert_rows(s, ex),
                                                  exec_at(e, BUF_ACT, r0 * D),
                                                  exec_at(e, BUF_ACT, e->stage.scale_offset[BUF_ACT] + r0 * sizeof(float)),
                                                  exec_at(e, BUF_GATE_UP, ((uint64_t)i * R + r0) * F * sizeof(float)),
                                                  (size_t)F };
    }
    int rc = dev_enqueue_host(e->dev, stage_in, &e->work, fence);
    if (rc == DEV_OK) rc = submit(e, e->jobs, n_jobs, fence);
    if (rc == DEV_OK) rc = dev_enqueue_host(e->dev, stage_gated, &e->work, fence);
    if (rc != DEV_OK) return rc;
    n_jobs = 0;
    for (int ex = 0; ex < e->n_expert; ex++) {
        if (e->dev_slot[ex] < 0) continue;
        uint64_t r0 = (uint64_t)e->stage_row[ex];
        e->jobs[n_jobs++] = (struct dev_job){ e->dev_slot[ex] * MATS + 2, moe_expert_rows(s, ex), exec_at(e, BUF_H, r0 * F),
                                              exec_at(e, BUF_H, e->stage.scale_offset[BUF_H] + r0 * sizeof(float)),
                                              exec_at(e, BUF_OUT, r0 * D * sizeof(float)), (size_t)D };
    }
    rc = submit(e, e->jobs, n_jobs, fence);
    if (rc == DEV_OK) rc = dev_enqueue_host(e->dev, stage_out, &e->work, fence);
    return rc;
}

/* The board's time for the layer: the executor's placement (or the
 * earlier backend's, legacy=1) priced by the board model. */
static int64_t board_layer_ns(struct moe_executor *e, int layer, struct moe_scratch *s, bool device_used,
                              double device_ns) {
    const struct moe_layer_desc *W = &e->desc.layers[layer];
    for (int ex = 0; ex < e->n_expert; ex++) {
        e->board_rows[ex] = moe_expert_rows(s, ex);
        e->board_on_device[ex] = device_used && !e->on_cpu[ex];
    }
    struct board_moe_layer L = { layer, e->n_layers, e->n_expert, e->n_embd, e->n_ff,
                                 { W->gate.type, W->up.type, W->down.type }, e->board_rows,
                                 device_used ? e->board_on_device : NULL, device_ns, e->overlap };
    return (int64_t)board_moe_ns(e->board, &L);
}

/* sim board=1 in the options: the board model, else NULL (and 0). */
static int open_board(struct moe_executor *e, const struct moe_exec_options *o) {
    struct sim_figures f;
    if (!o->device || strcmp(o->device, "sim") || sim_figures_parse(o->sim_figures, &f) != 0 || !f.board) return 0;
    e->board = board_new(&f);
    e->board_rows = malloc(sizeof *e->board_rows * (size_t)(e->n_expert ? e->n_expert : 1));
    e->board_on_device = malloc(sizeof *e->board_on_device * (size_t)(e->n_expert ? e->n_expert : 1));
    return e->board && e->board_rows && e->board_on_device ? 0 : moex_errorf("out of memory");
}

const struct board *moe_executor_board(const struct moe_executor *e) { return e->board; }

/* ---------------------------------------------------------------- set-up */

static int load_rates(const struct moe_model_desc *d, int n_expert, const char *path, double **rates) {
    int n_layers = d->n_layers;
    struct packfile_identity id;
    if (packfile_model_identity(d->file, &id) != PACKFILE_OK) return -1;
    struct routing_stats *st = routing_stats_read(path);
    if (!st) return -1;
    if (routing_stats_check_model(st, path, id.hash, id.gguf_size, n_layers, n_expert) != 0) {
        routing_stats_free(st);
        return -1;
    }
    int n = n_layers * n_expert;
    *rates = malloc(sizeof **rates * (size_t)n);
    if (!*rates) { routing_stats_free(st); return moex_errorf("out of memory"); }
    for (int k = 0; k < n; k++) (*rates)[k] = st->n_tokens ? (double)st->counts[k] / (double)st->n_tokens : 0;
    routing_stats_free(st);
    return 0;
}

static void plan_note(struct moe_device_plan *p, const char *fmt, const char *detail) {
    snprintf(p->note, sizeof p->note, fmt, detail);
}

/* The slots a pool needs and what it takes: experts_slots for experts, the backbone's after them. */
struct pool_shape {
    const struct dev *dev;
    int64_t slot_values;
    int max_n;
};

static uint64_t pool_bytes(const struct pool_shape *p, int slots) {
    return dev_pool_bytes(p->dev, slots, p->slot_values, p->max_n);
}

/* The backbone: the dense matmuls in the description's order, each whole
 * (all its slots) while the pool still fits in `room`, before any expert. */
static int plan_backbone(const struct moe_model_desc *d, const struct pool_shape *ps, uint64_t room,
                         struct moe_device_plan *out) {
    const struct dev_caps *caps = dev_caps(ps->dev);
    uint64_t slot_bytes = dev_slot_bytes(ps->dev, ps->slot_values, ps->max_n);
    out->dense_slot = malloc(sizeof *out->dense_slot * (size_t)(d->n_dense ? d->n_dense : 1));
    if (!out->dense_slot) return moex_errorf("out of memory");
    for (int i = 0; i < d->n_dense; i++) {
        int rows, chunks = dense_geometry(caps, dev_layout(ps->dev), ps->slot_values, ps->max_n, d->dense[i].w, &rows);
        out->dense_slot[i] = -1;
        if (chunks == 0 || pool_bytes(ps, out->backbone_slots + chunks) > room) continue;
        out->dense_slot[i] = out->backbone_slots;
        out->backbone_slots += chunks;
        out->backbone_bytes += (uint64_t)chunks * slot_bytes;
    }
    return 0;
}

/* Every dense matmul's slots, resident or not. */
static int all_backbone_slots(const struct moe_model_desc *d, const struct pool_shape *ps) {
    int all = 0;
    for (int i = 0; i < d->n_dense; i++) {
        int rows;
        all += dense_geometry(dev_caps(ps->dev), dev_layout(ps->dev), ps->slot_values, ps->max_n, d->dense[i].w, &rows);
    }
    return all;
}

/* The most experts (at most n_keys) whose slots fit in room beside the backbone's. */
static int fit_experts(const struct pool_shape *ps, int backbone_slots, uint64_t room, int n_keys) {
    uint64_t expert_bytes = MATS * dev_slot_bytes(ps->dev, ps->slot_values, ps->max_n);
    uint64_t used = backbone_slots ? pool_bytes(ps, backbone_slots) : 0;
    uint64_t n = room > used ? (room - used) / expert_bytes : 0;
    if (n > (uint64_t)n_keys) n = (uint64_t)n_keys;
    while (n > 0 && pool_bytes(ps, backbone_slots + MATS * (int)n) > room) n--;
    return (int)n;
}

int moe_device_plan(const struct moe_model_desc *d, const struct moe_exec_options *o, struct moe_device_plan *out) {
    memset(out, 0, sizeof *out);
    const char *name = o->device;
    if (!name || !strcmp(name, "none")) return 0;
    if (d->n_layers == 0) { plan_note(out, "the model has no experts%s", ""); return 0; }
    if (!strcmp(name, "auto")) {
        if (!cpu_features()->amx_int8) { plan_note(out, "device auto: no AMX on this CPU; experts run on the CPU%s", ""); return 0; }
        name = "amx";
    }
    const struct moe_layer_desc *L0 = &d->layers[0];
    int n_embd = L0->n_embd, n_ff = L0->n_ff, n_layers = d->n_layers, n_expert = L0->n_expert;
    int n_keys = n_layers * n_expert;
    /* One slot size for experts and the backbone: a dense matmul takes as
     * many slots as its output channels need. */
    int64_t slot_values = (int64_t)n_embd * n_ff;
    int max_n = n_embd > n_ff ? n_embd : n_ff;
    struct dev_options dopt = { 0, NULL, 1, o->sim_figures };
    struct dev *probe = NULL;
    /* Open once without a budget to learn the slot size, the envelope and
     * how the device counts its memory. */
    int rc = dev_open(name, &dopt, &probe);
    if (rc == DEV_E_OPTION) return moex_errorf("device %s: %s", name, moex_error());
    if (rc != DEV_OK) { plan_note(out, "device unavailable: %s; experts run on the CPU", moex_error()); return 0; }
    struct pool_shape ps = { probe, slot_values, max_n };
    uint64_t expert_bytes = MATS * dev_slot_bytes(probe, slot_values, max_n);
    const struct dev_caps *caps = dev_caps(probe);
    bool in_envelope = n_embd % caps->k_multiple == 0 && n_ff % caps->k_multiple == 0 &&
                       n_embd % caps->n_multiple == 0 && n_ff % caps->n_multiple == 0 &&
                       n_embd <= caps->k_max && n_ff <= caps->k_max && n_embd <= caps->n_max &&
                       n_ff <= caps->n_max;
    out->k_multiple = caps->k_multiple;
    out->n_multiple = caps->n_multiple;
    out->layout = dev_layout(probe);
    /* A share of the experts buys that share of them, the staging and the
     * whole backbone on top; a budget in bytes holds the staging first,
     * then the backbone, then experts. */
    uint64_t staging = stage_layout(probe, n_embd, n_ff, L0->n_used).total;
    int share = in_envelope ? (int)(o->hot_fraction * (double)n_keys) : 0;
    if (share > n_keys) share = n_keys;
    int backbone_all = o->no_backbone ? 0 : all_backbone_slots(d, &ps);
    uint64_t budget = o->hot_fraction > 0 ? staging + pool_bytes(&ps, backbone_all + MATS * share) : o->hot_budget;
    uint64_t room = budget > staging ? budget - staging : 0;
    out->staging_bytes = staging;
    rc = plan_backbone(d, &ps, o->no_backbone ? 0 : room, out);
    int n_fit = rc == 0 && in_envelope ? fit_experts(&ps, out->backbone_slots, room, n_keys) : 0;
    dev_close(probe);
    if (rc != 0) return -1;
    double *rates = NULL;
    if (o->stats_path && (load_rates(d, n_expert, o->stats_path, &rates) != 0 ||
                          packfile_hash_file(o->stats_path, &out->stats_hash) != PACKFILE_OK)) {
        free(rates);
        moe_device_plan_free(out);
        return -1;
    }
    out->pinned_share = o->pinned_share < 0 ? 0.25 : o->pinned_share;
    struct placement_input pin = { n_layers, n_expert, rates, expert_bytes, (uint64_t)n_fit * expert_bytes, 0,
                                   out->pinned_share };
    rc = placement_plan(&pin, &out->plan);
    free(rates);
    if (rc != 0) { moe_device_plan_free(out); return moex_errorf("out of memory"); }
    if (!in_envelope)
        plan_note(out, "the expert shapes are outside the %s device's envelope; experts run on the CPU", name);
    if (out->plan.n_slots == 0 && out->backbone_slots == 0) {
        if (in_envelope) plan_note(out, "the hot budget holds no expert; experts run on the CPU%s", "");
        moe_device_plan_free(out);
        return 0;
    }
    snprintf(out->device, sizeof out->device, "%s", name);
    out->slot_values = slot_values;
    out->max_n = max_n;
    out->expert_bytes = in_envelope ? expert_bytes : 0;
    out->budget_bytes = budget;
    return 0;
}

void moe_device_plan_free(struct moe_device_plan *p) {
    placement_free(&p->plan);
    free(p->dense_slot);
    p->dense_slot = NULL;
    p->backbone_slots = 0;
    p->backbone_bytes = 0;
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
static int open_pack(struct moe_executor *e, const char *path, const struct moe_device_plan *dp) {
    struct moe_pack_report *r = &e->pack_report;
    struct packfile *pf = NULL;
    struct packfile_identity id;
    uint32_t types[MATS];
    expert_types(&e->desc, types);
    int rc = packfile_open(path, &pf);
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

static int start_device(struct moe_executor *e, const struct moe_exec_options *o, const struct moe_device_plan *plan) {
    struct moe_device_plan dp = *plan;
    const char *name = dp.device;
    /* AMX computes on the CPU's own cores: it gets the pool, and its work runs
     * before the CPU experts', not beside them (one pool takes one caller at
     * a time, and two sides on the same cores would only contend). */
    bool shares_cores = !strcmp(name, "amx");
    if (shares_cores) e->overlap = false;
    struct dev_options dopt = { dp.budget_bytes, shares_cores ? e->pool : NULL, 1, o->sim_figures };
    if (dev_open(name, &dopt, &e->dev) != DEV_OK) {
        exec_note(e, "device unavailable: %s; experts run on the CPU", moex_error());
        return 0;
    }
    e->stage = stage_layout(e->dev, e->n_embd, e->n_ff, e->top_k);
    int rc = DEV_OK;
    for (int b = 0; b < N_STAGE_BUFS && rc == DEV_OK; b++) rc = dev_buffer_alloc(e->dev, e->stage.bytes[b], &e->stage_buf[b]);
    if (rc != DEV_OK) {
        exec_note(e, "device staging buffers: %s; experts run on the CPU", moex_error());
        dev_close(e->dev);
        e->dev = NULL;
        return 0;
    }
    if (dev_pool_alloc(e->dev, e->plan.n_slots * MATS + dp.backbone_slots, dp.slot_values, dp.max_n) != DEV_OK) {
        exec_note(e, "device slot pool: %s; experts run on the CPU", moex_error());
        dev_close(e->dev);
        e->dev = NULL;
        return 0;
    }
    e->caps = dev_caps(e->dev);
    e->min_m = o->min_m > 0 ? o->min_m : e->caps->min_m;
    e->pack_ns = 3.0 * (double)dp.slot_values * e->caps->pack_ns_per_value;
    if (o->pack_path) {
        if (!(e->pack_path = strdup(o->pack_path))) return moex_errorf("out of memory");
        e->pack_report.path = e->pack_path;
        if (open_pack(e, o->pack_path, &dp) != 0) return -1;
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
        rc = fill_expert(e, key / e->n_expert, key % e->n_expert, i, &loaded);
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
        if (dense_exec_pack(e, dp.dense_slot, e->plan.n_slots * MATS) != 0) return -1;
        e->pack_report.backbone_fill_ns = time_ns() - t0;
        struct dev_counters done;
        dev_get_counters(e->dev, &done);
        e->pack_report.backbone_device_ns = (int64_t)(done.pack_ns - after.pack_ns);
        if (o->progress) o->progress(o->progress_user, "packing the backbone", 1, 1);
    }
    return 0;
}

static int open_device(struct moe_executor *e, const struct moe_exec_options *o) {
    struct moe_device_plan dp;
    if (moe_device_plan(&e->desc, o, &dp) != 0) return -1;
    if (dp.note[0]) exec_note(e, "%s", dp.note);
    if (!dp.device[0]) return 0;
    e->plan = dp.plan; /* ours now */
    int rc = start_device(e, o, &dp);
    free(dp.dense_slot);
    return rc;
}

static void *alloc(size_t n, bool *failed) {
    void *p = malloc(n ? n : 1);
    if (!p) *failed = true;
    return p;
}

struct moe_executor *moe_executor_new(const struct moe_model_desc *d, struct threadpool *pool, int max_tokens,
                                      const struct moe_exec_options *opt) {
    if (moe_model_check(d) != 0) return NULL;
    struct moe_executor *e = calloc(1, sizeof *e);
    if (!e) { moex_errorf("out of memory"); return NULL; }
    /* A model without MoE layers gets an executor that is never run. */
    static const struct moe_layer_desc none = { 0 };
    const struct moe_layer_desc *L0 = d->n_layers ? &d->layers[0] : &none;
    e->desc = *d;
    e->pool = pool;
    e->n_layers = d->n_layers;
    e->n_expert = L0->n_expert;
    e->n_ff = L0->n_ff;
    e->n_embd = L0->n_embd;
    e->top_k = L0->n_used;
    e->max_pairs = max_tokens * e->top_k;
    e->overlap = !opt->no_overlap;
    e->trace = opt->trace;
    /* Quantization mixes give layers different types, so bytes are per layer. */
    if (!(e->expert_gguf_bytes = malloc(sizeof *e->expert_gguf_bytes * (size_t)(e->n_layers ? e->n_layers : 1)))) {
        free(e);
        moex_errorf("out of memory");
        return NULL;
    }
    for (int l = 0; l < e->n_layers; l++) {
        const struct moe_layer_desc *L = &d->layers[l];
        e->expert_gguf_bytes[l] = (uint64_t)e->n_ff * (L->gate.row_bytes + L->up.row_bytes) +
                                  (uint64_t)e->n_embd * L->down.row_bytes;
    }
    /* The CPU's time per routed row: a fixed model (3 matrices at 40 MACs
     * per ns) unless given, so that the same command places the same experts
     * and gives the same logits on every run. Only adaptive placement, asked
     * for, follows the times measured as batches run. */
    e->cpu_ns_per_row = opt->cpu_row_ns > 0 ? opt->cpu_row_ns : 3.0 * e->n_embd * e->n_ff / 40.0;
    e->adaptive = opt->adaptive && !(opt->cpu_row_ns > 0);
    trace_lane(e->trace, LANE_CPU, "cpu (experts)");
    trace_lane(e->trace, LANE_DEVICE, "device");
    if (dense_exec_init(e) != 0 || open_board(e, opt) != 0 || open_device(e, opt) != 0) {
        moe_executor_free(e);
        return NULL;
    }
    if (!e->dev) return e;
    bool failed = false;
    size_t R = (size_t)e->stage.rows;
    e->act_codes = alloc(R * e->n_embd, &failed);
    e->act_scales = alloc(R * sizeof(float), &failed);
    e->gate_up = alloc(2 * R * e->n_ff * sizeof(float), &failed);
    e->h_codes = alloc(R * e->n_ff, &failed);
    e->h_scales = alloc(R * sizeof(float), &failed);
    e->stage_row = alloc(sizeof *e->stage_row * (size_t)e->n_expert, &failed);
    e->jobs = alloc(sizeof *e->jobs * 2 * (size_t)e->n_expert, &failed);
    e->on_cpu = alloc(sizeof *e->on_cpu * (size_t)e->n_expert, &failed);
    e->dev_slot = alloc(sizeof *e->dev_slot * (size_t)e->n_expert, &failed);
    e->to_pack = alloc(sizeof *e->to_pack * (size_t)e->n_expert, &failed);
    e->busy = alloc(sizeof *e->busy * (size_t)e->plan.n_slots, &failed);
    if (failed) { moe_executor_free(e); moex_errorf("out of memory"); return NULL; }
    return e;
}

void moe_executor_free(struct moe_executor *e) {
    if (!e) return;
    dev_close(e->dev);
    packfile_close(e->pack);
    free(e->pack_path);
    expert_cache_free(e->cache);
    placement_free(&e->plan);
    dense_exec_free(&e->dense);
    free(e->act_codes); free(e->act_scales); free(e->gate_up); free(e->h_codes); free(e->h_scales); free(e->stage_row);
    free(e->expert_gguf_bytes);
    free(e->jobs); free(e->on_cpu); free(e->dev_slot); free(e->to_pack); free(e->busy);
    board_free(e->board); free(e->board_rows); free(e->board_on_device);
    free(e);
}

/* ---------------------------------------------------------------- per batch */

/* The time one of `rows` rows saves on the device, from its whole cost
 * model: the CPU's time per row against the device's per-MAC time, less
 * the expert's fixed costs per use spread over its rows (a job and the
 * weight's bytes streamed, per matrix) and, when no other expert of the
 * layer is on the device yet, the layer's two submissions. */
static double device_gain_per_row(const struct moe_executor *e, int rows, bool submits_paid) {
    const struct dev_caps *c = e->caps;
    double values = (double)e->n_embd * (double)e->n_ff; /* one matrix, one int8 byte each */
    double fixed = MATS * (c->job_ns + values * c->weight_ns_per_byte) + (submits_paid ? 0 : 2 * c->submit_ns);
    return e->cpu_ns_per_row - MATS * values * c->ns_per_mac - fixed / rows;
}

/* Where each active expert runs: the M rule first (residency never bypasses
 * it), then residency, then admission, a cost decision. */
static int place_experts(struct moe_executor *e, int layer, struct moe_scratch *s) {
    struct moe_phase_counters *c = &e->counters[e->phase];
    int n_device = 0;
    e->n_to_pack = 0;
    memset(e->busy, 0, sizeof *e->busy * (size_t)e->plan.n_slots);
    /* The layer's submissions are paid once any resident expert runs on the device. */
    bool submits_paid = false;
    for (int ex = 0; ex < e->n_expert && !submits_paid; ex++) {
        int rows = moe_expert_rows(s, ex);
        submits_paid = rows && rows >= e->min_m && expert_cache_lookup(e->cache, layer, ex) >= 0;
    }
    int staged = 0;
    for (int ex = 0; ex < e->n_expert; ex++) {
        int rows = moe_expert_rows(s, ex);
        e->on_cpu[ex] = true;
        e->dev_slot[ex] = -1;
        if (!rows) continue;
        expert_cache_touch(e->cache, layer, ex, rows);
        if (rows < e->min_m || staged + rows > e->stage.rows) continue;
        int slot = expert_cache_lookup(e->cache, layer, ex);
        if (slot >= 0) {
            c->hits++; c->hit_rows += (uint64_t)rows; c->hit_bytes += e->expert_gguf_bytes[layer];
        } else {
            c->misses++; c->miss_rows += (uint64_t)rows; c->miss_bytes += e->expert_gguf_bytes[layer];
            /* A decode miss runs on the CPU without evicting: the devices here
             * share DRAM with the CPU, so one row gains nothing worth a pack. */
            double gain = device_gain_per_row(e, rows, submits_paid);
            if (e->phase == MOE_PREFILL &&
                expert_cache_worth_admitting(e->cache, layer, ex, rows, gain, e->pack_ns, e->busy)) {
                int32_t evicted;
                slot = expert_cache_admit(e->cache, layer, ex, e->busy, &evicted);
                if (slot >= 0) {
                    c->admissions++;
                    if (evicted >= 0) c->evictions++;
                    if (file_has(e, layer, ex)) c->loads++;
                    else c->packs++;
                    e->to_pack[e->n_to_pack++] = ex;
                }
            }
        }
        if (slot < 0) continue;
        e->busy[slot] = true;
        submits_paid = true;
        staged += rows;
        e->dev_slot[ex] = slot;
        e->on_cpu[ex] = false;
        n_device++;
    }
    return n_device;
}

static int64_t cpu_part(struct moe_executor *e, const struct expert_layer *L, struct moe_scratch *s, const float *x,
                        const bool *mask, int rows) {
    int64_t t0 = time_ns();
    moe_compute_cpu(e->pool, L, s, x, mask);
    int64_t dt = time_ns() - t0;
    e->counters[e->phase].cpu_ns += dt;
    trace_event(e->trace, LANE_CPU, "cpu experts", t0, t0 + dt);
    if (rows > 0 && e->adaptive) e->cpu_ns_per_row = 0.9 * e->cpu_ns_per_row + 0.1 * (double)dt / rows;
    return dt;
}

void moe_executor_run(struct moe_executor *e, int layer, struct moe_scratch *s, const float *x, int n_tokens,
                      const int32_t *ids, const float *weights, float *out) {
    const struct moe_layer_desc *W = &e->desc.layers[layer];
    struct expert_layer L = { &W->gate, &W->up, &W->down, e->n_expert, e->n_ff, e->n_embd };
    int64_t t_start = time_ns();
    e->running = true;
    struct moe_phase_counters *c = &e->counters[e->phase]; /* the phase moe_executor_begin_batch set */
    c->batches++;
    int n_pairs = n_tokens * e->top_k;
    moe_group(s, n_tokens, e->top_k, ids);
    int n_device = e->dev && !e->failed ? place_experts(e, layer, s) : 0;
    int64_t modelled = -1, device_side = 0;
    if (n_device == 0) {
        cpu_part(e, &L, s, x, NULL, n_pairs);
        c->rows_cpu += (uint64_t)n_pairs;
    } else {
        int64_t cpu_dt = 0;
        int dev_rows = 0;
        for (int ex = 0; ex < e->n_expert; ex++) if (!e->on_cpu[ex]) dev_rows += moe_expert_rows(s, ex);
        struct dev_counters before, after;
        dev_get_counters(e->dev, &before);
        /* The device's stream runs its share while this thread runs the
         * CPU's, unless asked not to overlap (or the device runs on the
         * caller: amx). */
        dev_fence fence = 0;
        int status = device_layer(e, layer, s, x, &fence);
        if (status == DEV_OK && !e->overlap) status = dev_wait(e->dev, fence);
        cpu_dt = cpu_part(e, &L, s, x, e->on_cpu, n_pairs - dev_rows);
        if (status == DEV_OK && e->overlap) status = dev_wait(e->dev, fence);
        else if (status != DEV_OK && fence) dev_wait(e->dev, fence); /* nothing of it may run on past here */
        dev_get_counters(e->dev, &after);
        int64_t busy = (int64_t)(after.busy_ns - before.busy_ns), pack = (int64_t)(after.pack_ns - before.pack_ns);
        int64_t load = (int64_t)(after.load_ns - before.load_ns);
        c->device_ns += busy;
        c->pack_ns += pack;
        c->load_ns += load;
        device_side = busy + pack + load;
        if (e->caps->modelled_time) {
            modelled = e->overlap ? (cpu_dt > device_side ? cpu_dt : device_side) : cpu_dt + device_side;
        }
        if (status != DEV_OK) {
            /* The device's share runs on the CPU now, and so does everything
             * after: a failing device is not retried mid-run. */
            exec_note(e, "device error, the rest of the run is on the CPU: %s", moex_error());
            e->failed = true;
            c->fallbacks++;
            for (int ex = 0; ex < e->n_expert; ex++) e->on_cpu[ex] = !e->on_cpu[ex];
            int64_t redo = cpu_part(e, &L, s, x, e->on_cpu, dev_rows);
            if (modelled >= 0) modelled += redo;
            c->rows_cpu += (uint64_t)n_pairs;
        } else {
            c->rows_device += (uint64_t)dev_rows;
            c->rows_cpu += (uint64_t)(n_pairs - dev_rows);
        }
    }
    if (e->board) modelled = board_layer_ns(e, layer, s, n_device > 0 && !e->failed, (double)device_side);
    /* Recency and rates age once per forward pass, not once per layer. */
    if (e->cache && layer == e->n_layers - 1) expert_cache_end_batch(e->cache);
    moe_combine(s, weights, out);
    int64_t wall = time_ns() - t_start;
    c->wall_ns += wall;
    c->modelled_ns += modelled >= 0 ? modelled : wall;
}

/* ---------------------------------------------------------------- reports */

const struct moe_phase_counters *moe_executor_counters(const struct moe_executor *e, enum moe_phase phase) {
    return &e->counters[phase];
}

void moe_executor_reset_counters(struct moe_executor *e) { memset(e->counters, 0, sizeof e->counters); }

uint64_t moe_executor_resident_bytes(const struct moe_executor *e) {
    if (!e->dev) return 0;
    struct dev_counters c;
    dev_get_counters(e->dev, &c);
    return c.resident_bytes;
}

uint64_t moe_executor_staging_bytes(const struct moe_executor *e) {
    if (!e->dev) return 0;
    struct dev_counters c;
    dev_get_counters(e->dev, &c);
    return c.staging_bytes;
}

void moe_executor_slots(const struct moe_executor *e, int *pinned, int *total) {
    *pinned = e->dev ? e->plan.n_pinned : 0;
    *total = e->dev ? e->plan.n_slots : 0;
}

const char *moe_executor_note(const struct moe_executor *e) { return e->note; }

const struct moe_pack_report *moe_executor_pack_report(const struct moe_executor *e) { return &e->pack_report; }

bool moe_executor_modelled(const struct moe_executor *e) { return e->dev && e->caps->modelled_time; }

const char *moe_executor_device(const struct moe_executor *e) { return e->dev ? e->caps->name : "none"; }

void moe_executor_print(const struct moe_executor *e, FILE *out) {
    int pinned, total;
    moe_executor_slots(e, &pinned, &total);
    fprintf(out, "moex profile: device %s", moe_executor_device(e));
    if (e->dev)
        fprintf(out, " (min M %d, %d expert slots of which %d pinned, resident %.1f MiB%s)", e->min_m, total, pinned,
                moe_executor_resident_bytes(e) / 1048576.0, e->caps->modelled_time ? ", device times modelled" : "");
    fputc('\n', out);
    if (e->dev) {
        struct dev_counters dc;
        dev_get_counters(e->dev, &dc);
        fprintf(out, "moex profile: device failures: %llu allocations, %llu submissions, %llu packs\n",
                (unsigned long long)dc.failed_allocs, (unsigned long long)dc.failed_submissions,
                (unsigned long long)dc.failed_packs);
        char windows[1024], pinned_slots[48] = "none pinned";
        if (e->plan.n_pinned)
            snprintf(pinned_slots, sizeof pinned_slots, "the hottest first: slots 0-%d pinned", MATS * e->plan.n_pinned - 1);
        if (dev_sim_windows(e->dev, windows, sizeof windows) == DEV_OK)
            fprintf(out, "moex profile: device memory: staging %.1f MiB, slots %.1f MiB (3 per expert, %s); %s\n",
                    dc.staging_bytes / 1048576.0, (dc.resident_bytes - dc.staging_bytes) / 1048576.0, pinned_slots,
                    windows);
    }
    if (e->note[0]) fprintf(out, "moex profile: note: %s\n", e->note);
    const struct moe_pack_report *r = &e->pack_report;
    if (e->dev)
        fprintf(out, "moex profile: pinned experts: %d filled in %.1f ms, %d loaded from %s, %d packed live%s",
                r->experts_loaded + r->experts_packed, r->fill_ns / 1e6, r->experts_loaded,
                e->pack ? packfile_path(e->pack) : "a pack file", r->experts_packed,
                e->caps->modelled_time ? "" : "\n");
    if (e->dev && e->caps->modelled_time)
        fprintf(out, " (device time %.1f ms, modelled)\n", r->fill_device_ns / 1e6);
    if (e->dev && r->dense_packed)
        fprintf(out, "moex profile: backbone: %d dense matmuls packed in %.1f ms (device time %.1f ms%s)\n",
                r->dense_packed, r->backbone_fill_ns / 1e6, r->backbone_device_ns / 1e6,
                e->caps->modelled_time ? ", modelled" : "");
    fprintf(out, "| phase | batches | rows dev | rows cpu | submits | jobs | packs | loads | hits | misses | admits "
                 "| evicts | fallbacks | hit rows | hit bytes | device ms | pack ms | load ms | cpu ms | wall ms "
                 "| overlap ms |\n");
    fprintf(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:"
                 "|---:|\n");
    static const char *names[MOE_PHASES] = { "prefill", "decode" };
    for (int p = 0; p < MOE_PHASES; p++) {
        const struct moe_phase_counters *c = &e->counters[p];
        double hit_rows = c->hit_rows + c->miss_rows ? 100.0 * c->hit_rows / (double)(c->hit_rows + c->miss_rows) : 0;
        double hit_bytes =
            c->hit_bytes + c->miss_bytes ? 100.0 * c->hit_bytes / (double)(c->hit_bytes + c->miss_bytes) : 0;
        /* Work the two sides did at the same time: their sum past the wall. */
        double busy = (double)(c->device_ns + c->cpu_ns), overlap = busy > c->wall_ns ? busy - c->wall_ns : 0;
        if (e->dev && e->caps->modelled_time) overlap = 0;
        fprintf(out, "| %s | %llu | %llu | %llu | %llu | %llu | %llu | %llu | %llu | %llu | %llu | %llu | %llu | %.1f%% "
                     "| %.1f%% | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n",
                names[p], (unsigned long long)c->batches, (unsigned long long)c->rows_device,
                (unsigned long long)c->rows_cpu, (unsigned long long)c->submissions, (unsigned long long)c->jobs,
                (unsigned long long)c->packs, (unsigned long long)c->loads, (unsigned long long)c->hits,
                (unsigned long long)c->misses, (unsigned long long)c->admissions, (unsigned long long)c->evictions,
                (unsigned long long)c->fallbacks, hit_rows, hit_bytes, c->device_ns / 1e6, c->pack_ns / 1e6,
                c->load_ns / 1e6, c->cpu_ns / 1e6, c->wall_ns / 1e6, overlap / 1e6);
    }
    fprintf(out, "moex profile: decode: passes of one new token per sequence (a batched step of several "
                 "sequences too); prefill: the rest\n");
    fprintf(out, "moex profile: rows: routed (token, expert) pairs; jobs: matrices; packs, loads, hits, misses, "
                 "admits, evicts: experts (three matrices each); hit rows / hit bytes: hits' share of the experts "
                 "with rows >= min M, weighted by rows / by the experts' GGUF bytes\n");
    dense_exec_print(e, out);
}
