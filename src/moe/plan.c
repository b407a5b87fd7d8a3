#include "moe/plan.h"

#include "core/error.h"
#include "moe/routing_stats.h"
#include "pack/packfile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t round64(uint64_t x) { return (x + 63) / 64 * 64; }

/* W8A8: int8 codes, then a float scale per row. Block devices: f32 rows,
 * then the scratch the device quantizes them into. */
static void stage_input(struct stage_layout *l, int buf, const struct dev_caps *caps, uint64_t R, int K) {
    bool blocks = caps->compute == DEV_COMPUTE_BLOCKS;
    l->scale_offset[buf] = round64(R * (uint64_t)K * (blocks ? sizeof(float) : 1));
    l->bytes[buf] = l->scale_offset[buf] + (blocks ? dev_act_q8_bytes((int)R, K) : R * sizeof(float));
}

struct stage_layout moe_stage_layout(const struct dev_caps *caps, int n_embd, int n_ff, int top_k) {
    struct stage_layout l = { .rows = STAGE_TOKENS * top_k };
    uint64_t R = (uint64_t)l.rows;
    stage_input(&l, BUF_ACT, caps, R, n_embd);
    l.bytes[BUF_GATE_UP] = 2 * R * (uint64_t)n_ff * sizeof(float);
    stage_input(&l, BUF_H, caps, R, n_ff);
    l.bytes[BUF_OUT] = R * (uint64_t)n_embd * sizeof(float);
    l.total = caps->fixed_bytes;
    for (int b = 0; b < N_STAGE_BUFS; b++) l.total += dev_caps_mem_bytes(caps, l.bytes[b]);
    return l;
}

int dense_geometry(const struct dev_caps *c, int64_t slot_values, int max_n, const struct matrix *w,
                       int *chunk_rows) {
    *chunk_rows = 0;
    int64_t K = w->cols, N = w->rows;
    if (K <= 0 || N <= 0 || K % c->k_multiple || N % c->n_multiple || K > c->k_max || K > PACK_MAX_K) return 0;
    if (!dev_caps_takes(c, w->type)) return 0;
    /* W8A8 slots hold slot_values codes; a block device's, bytes of GGUF rows */
    int64_t rows = c->compute == DEV_COMPUTE_BLOCKS
                       ? (int64_t)(dev_caps_slot_code_bytes(c, slot_values) / quant_row_size(w->type, K))
                       : slot_values / K;
    if (rows > max_n) rows = max_n;
    if (rows > N) rows = N;
    rows -= rows % c->n_multiple;
    if (rows < 1 || rows > c->n_max || pack_check_shape(c->layout, (int)K, (int)rows) != PACK_OK) return 0;
    *chunk_rows = (int)rows;
    return (int)((N + rows - 1) / rows);
}

int moe_plan_load_stats(const struct moe_model_desc *d, const char *path, double **rates, uint64_t *hash) {
    int n_layers = d->n_layers, n_expert = d->n_layers ? d->layers[0].n_expert : 0;
    *rates = NULL;
    struct packfile_identity id;
    if (packfile_model_identity(d->file, &id) != PACKFILE_OK) return -1;
    struct routing_stats *st = routing_stats_read(path);
    if (!st) return -1;
    if (routing_stats_check_model(st, path, id.hash, id.gguf_size, n_layers, n_expert) != 0) {
        routing_stats_free(st);
        return -1;
    }
    int n = n_layers * n_expert;
    *rates = malloc(sizeof **rates * (size_t)(n ? n : 1));
    if (!*rates) { routing_stats_free(st); return moex_errorf("out of memory"); }
    for (int k = 0; k < n; k++) (*rates)[k] = st->n_tokens ? (double)st->counts[k] / (double)st->n_tokens : 0;
    routing_stats_free(st);
    if (packfile_hash_file(path, hash) != PACKFILE_OK) { free(*rates); *rates = NULL; return -1; }
    return 0;
}

enum qtype moe_plan_slot_type(const struct moe_model_desc *d, const struct dev_caps *caps) {
    if (caps->compute != DEV_COMPUTE_BLOCKS) return 0;
    enum qtype widest = 0;
    double widest_bpv = 0;
    for (int l = 0; l < d->n_layers; l++) {
        const struct matrix *m[MATS] = { &d->layers[l].gate, &d->layers[l].up, &d->layers[l].down };
        for (int i = 0; i < MATS; i++) {
            const struct qtype_traits *t = quant_traits(m[i]->type);
            if (!dev_caps_takes(caps, m[i]->type) || !t->block_size) continue;
            double bpv = (double)t->type_size / t->block_size;
            if (bpv > widest_bpv) widest = m[i]->type, widest_bpv = bpv;
        }
    }
    return widest;
}

/* Whether every expert matrix has a type the device takes. */
static bool experts_taken(const struct moe_model_desc *d, const struct dev_caps *caps, enum qtype *refused) {
    for (int l = 0; l < d->n_layers; l++) {
        const struct matrix *m[MATS] = { &d->layers[l].gate, &d->layers[l].up, &d->layers[l].down };
        for (int i = 0; i < MATS; i++)
            if (!dev_caps_takes(caps, m[i]->type)) return *refused = m[i]->type, false;
    }
    return true;
}

static void plan_note(struct moe_device_plan *p, const char *fmt, const char *detail) {
    snprintf(p->note, sizeof p->note, fmt, detail);
}

/* The slot geometry of a plan: one slot size for experts and the backbone;
 * on a block device each matrix of an expert (gate, up, down) has slots of
 * its own size (role_bytes: the largest of that matrix's GGUF rows over the
 * layers) and the backbone's slots the slot type's size. */
struct pool_shape {
    const struct dev_caps *caps;
    int64_t slot_values;
    int max_n;
    uint64_t role_bytes[MATS]; /* 0: one size (W8A8) */
};

/* Device bytes of a pool of backbone slots and experts. */
static uint64_t pool_bytes(const struct pool_shape *p, int backbone_slots, int experts) {
    if (!p->role_bytes[0]) return dev_caps_pool_bytes(p->caps, backbone_slots + MATS * experts, p->slot_values, p->max_n);
    uint64_t expert = p->role_bytes[0] + p->role_bytes[1] + p->role_bytes[2];
    return dev_caps_sized_pool_bytes(p->caps, (uint64_t)backbone_slots * dev_caps_slot_code_bytes(p->caps, p->slot_values) +
                                                  (uint64_t)experts * expert);
}

/* One expert's slots. */
static uint64_t expert_slot_bytes(const struct pool_shape *p) {
    if (!p->role_bytes[0]) return MATS * dev_caps_slot_bytes(p->caps, p->slot_values, p->max_n);
    return p->role_bytes[0] + p->role_bytes[1] + p->role_bytes[2];
}

static void role_bytes(const struct moe_model_desc *d, const struct dev_caps *caps, uint64_t out[MATS]) {
    memset(out, 0, sizeof(uint64_t) * MATS);
    if (caps->compute != DEV_COMPUTE_BLOCKS) return;
    for (int l = 0; l < d->n_layers; l++) {
        const struct moe_layer_desc *L = &d->layers[l];
        const struct matrix *m[MATS] = { &L->gate, &L->up, &L->down };
        for (int i = 0; i < MATS; i++) {
            int64_t K = i < 2 ? L->n_embd : L->n_ff, N = i < 2 ? L->n_ff : L->n_embd;
            uint64_t b = round64(quant_row_size(m[i]->type, K) * (uint64_t)N);
            if (b > out[i]) out[i] = b;
        }
    }
}

/* The backbone: the dense matmuls in the description's order, each whole
 * (all its slots) while the pool still fits in `room`, before any expert. */
static int plan_backbone(const struct moe_model_desc *d, const struct pool_shape *ps, uint64_t room,
                         struct moe_device_plan *out) {
    uint64_t slot_bytes = ps->role_bytes[0] ? dev_caps_slot_code_bytes(ps->caps, ps->slot_values)
                                            : dev_caps_slot_bytes(ps->caps, ps->slot_values, ps->max_n);
    out->dense_slot = malloc(sizeof *out->dense_slot * (size_t)(d->n_dense ? d->n_dense : 1));
    if (!out->dense_slot) return moex_errorf("out of memory");
    for (int i = 0; i < d->n_dense; i++) {
        int rows, chunks = dense_geometry(ps->caps, ps->slot_values, ps->max_n, d->dense[i].w, &rows);
        out->dense_slot[i] = -1;
        if (chunks == 0 || pool_bytes(ps, out->backbone_slots + chunks, 0) > room) continue;
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
        all += dense_geometry(ps->caps, ps->slot_values, ps->max_n, d->dense[i].w, &rows);
    }
    return all;
}

/* The most experts (at most n_keys) whose slots fit in room beside the backbone's. */
static int fit_experts(const struct pool_shape *ps, int backbone_slots, uint64_t room, int n_keys) {
    uint64_t expert_bytes = expert_slot_bytes(ps);
    /* From above: the backbone's pool alone rounds up to whole granules, so
     * room less it would undercount what fits beside it in the same granules. */
    uint64_t n = room / expert_bytes;
    if (n > (uint64_t)n_keys) n = (uint64_t)n_keys;
    while (n > 0 && pool_bytes(ps, backbone_slots, (int)n) > room) n--;
    return (int)n;
}

/* A budget over what the device's windows hold is planned for what they
 * hold: the pool and the staging are cut into pieces that each take whole
 * granules of a window, so a margin of granules per piece is kept free. */
static uint64_t fit_windows(const struct dev_caps *c, uint64_t budget, struct moe_device_plan *out) {
    if (c->windows.count <= 0) return budget;
    uint64_t capacity = (uint64_t)c->windows.count * c->windows.bytes;
    uint64_t margin = capacity / 64 + (uint64_t)(N_STAGE_BUFS + 4 * c->windows.count) * dev_caps_mem_bytes(c, 1);
    uint64_t usable = capacity > margin ? capacity - margin : 0;
    if (budget <= usable) return budget;
    char what[160];
    snprintf(what, sizeof what, "%.1f MiB do not fit the %s device's %d window%s of %.1f MiB: planned for %.1f MiB",
             budget / 1048576.0, c->name, c->windows.count, c->windows.count == 1 ? "" : "s",
             c->windows.bytes / 1048576.0, usable / 1048576.0);
    plan_note(out, "the hot budget of %s", what);
    return usable;
}

int moe_plan(const struct moe_plan_input *in, struct moe_device_plan *out) {
    memset(out, 0, sizeof *out);
    const struct moe_model_desc *d = in->desc;
    const struct dev_caps *caps = in->caps;
    const struct moe_layer_desc *L0 = &d->layers[0];
    int n_embd = L0->n_embd, n_ff = L0->n_ff, n_layers = d->n_layers, n_expert = L0->n_expert;
    int n_keys = n_layers * n_expert;
    /* One slot size for experts and the backbone: a dense matmul takes as
     * many slots as its output channels need. */
    int64_t slot_values = (int64_t)n_embd * n_ff;
    int max_n = n_embd > n_ff ? n_embd : n_ff;
    struct pool_shape ps = { caps, slot_values, max_n, { 0 } };
    role_bytes(d, caps, ps.role_bytes);
    uint64_t expert_bytes = expert_slot_bytes(&ps);
    /* gate and up are n_embd x n_ff, down n_ff x n_embd */
    enum qtype refused = 0;
    bool types_taken = experts_taken(d, caps, &refused);
    bool in_envelope = dev_caps_fits(caps, n_embd, n_ff) && dev_caps_fits(caps, n_ff, n_embd) && types_taken;
    out->k_multiple = caps->k_multiple;
    out->n_multiple = caps->n_multiple;
    out->layout = caps->layout;
    /* A share of the experts buys that share of them, the staging and the
     * whole backbone on top; a budget in bytes holds the staging first,
     * then the backbone, then experts. */
    uint64_t staging = moe_stage_layout(caps, n_embd, n_ff, L0->n_used).total;
    int share = in_envelope ? (int)(in->hot_fraction * (double)n_keys) : 0;
    if (share > n_keys) share = n_keys;
    int backbone_all = in->no_backbone ? 0 : all_backbone_slots(d, &ps);
    uint64_t budget = in->hot_fraction > 0 ? staging + pool_bytes(&ps, backbone_all, share) : in->hot_budget;
    budget = fit_windows(caps, budget, out);
    uint64_t room = budget > staging ? budget - staging : 0;
    out->staging_bytes = staging;
    if (plan_backbone(d, &ps, in->no_backbone ? 0 : room, out) != 0) return -1;
    int n_fit = in_envelope ? fit_experts(&ps, out->backbone_slots, room, n_keys) : 0;
    out->stats_hash = in->stats_hash;
    out->pinned_share = in->pinned_share < 0 ? 0.25 : in->pinned_share;
    struct placement_input pin = { n_layers, n_expert, in->rates, expert_bytes, (uint64_t)n_fit * expert_bytes, 0,
                                   out->pinned_share };
    if (placement_plan(&pin, &out->plan) != 0) { moe_device_plan_free(out); return moex_errorf("out of memory"); }
    out->expected_share = n_keys ? (double)out->plan.n_slots / n_keys : 0;
    if (in->rates && out->plan.n_pinned < n_keys) {
        double all = 0, pinned = 0;
        for (int k = 0; k < n_keys; k++) all += in->rates[k];
        for (int i = 0; i < out->plan.n_pinned; i++) pinned += in->rates[out->plan.pinned[i]];
        if (all > 0) out->expected_share = pinned / all;
    }
    if (!types_taken)
        snprintf(out->note, sizeof out->note, "the %s device does not take %s experts; experts run on the CPU",
                 caps->name, quant_type_name(refused));
    else if (!in_envelope)
        plan_note(out, "the expert shapes are outside the %s device's envelope; experts run on the CPU", caps->name);
    if (out->plan.n_slots == 0 && out->backbone_slots == 0) {
        if (in_envelope && out->note[0]) {
            char was[sizeof out->note];
            snprintf(was, sizeof was, "%s", out->note);
            snprintf(out->note, sizeof out->note, "%.200s, which holds no expert; experts run on the CPU", was);
        } else if (in_envelope) {
            plan_note(out, "the hot budget holds no expert; experts run on the CPU%s", "");
        }
        moe_device_plan_free(out);
        return 0;
    }
    snprintf(out->device, sizeof out->device, "%s", caps->name);
    out->slot_values = slot_values;
    out->max_n = max_n;
    memcpy(out->role_bytes, ps.role_bytes, sizeof out->role_bytes);
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