/* The executor's set-up and its accessors: the device opened once, the
 * plan (plan.c), residency (residency.c), then batches run (executor_run.c,
 * executor_dense.c); the --profile report is executor_report.c. */
#include "moe/executor_impl.h"

#include "core/error.h"
#include "core/trace.h"
#include "pack/packfile.h"

#include <stdlib.h>
#include <string.h>

int moe_plan_for_device(const struct moe_model_desc *d, const struct moe_exec_options *o, const struct dev_caps *caps,
                        struct moe_device_plan *out) {
    memset(out, 0, sizeof *out);
    struct moe_plan_input in = { d, caps, o->hot_budget, o->hot_fraction, o->no_backbone, NULL, 0, o->pinned_share };
    double *rates = NULL;
    if (o->stats_path && moe_plan_load_stats(d, o->stats_path, &rates, &in.stats_hash) != 0) return -1;
    in.rates = rates;
    int rc = moe_plan(&in, out);
    free(rates);
    return rc;
}

int moe_device_plan(const struct moe_model_desc *d, const struct moe_exec_options *o, struct moe_device_plan *out) {
    memset(out, 0, sizeof *out);
    char why[256] = "";
    const char *name = dev_resolve(o->device, why, sizeof why);
    if (!name) return snprintf(out->note, sizeof out->note, "%s", why), 0;
    if (d->n_layers == 0) return snprintf(out->note, sizeof out->note, "the model has no experts"), 0;
    struct dev *dev = NULL;
    int rc = dev_open(name, &(struct dev_options){ .spec = o->device_spec }, &dev);
    if (rc == DEV_E_OPTION) return moex_errorf("device %s: %s", name, moex_error());
    if (rc != DEV_OK) return snprintf(out->note, sizeof out->note, "device unavailable: %s", moex_error()), 0;
    enum qtype slot_type = moe_plan_slot_type(d, dev_caps(dev));
    if (slot_type) dev_set_slot_type(dev, slot_type);
    rc = moe_plan_for_device(d, o, dev_caps(dev), out);
    dev_close(dev);
    return rc;
}

static void mib_or_gib(char *out, size_t n, uint64_t bytes) {
    if (bytes >= (1ull << 30)) snprintf(out, n, "%.2f GiB", bytes / 1073741824.0);
    else snprintf(out, n, "%.1f MiB", bytes / 1048576.0);
}

/* One line of what the budget holds, for the start-up log. */
static void summarize(struct moe_executor *e, const struct moe_device_plan *dp, bool stats, const char *unused_pack) {
    int n_keys = e->n_layers * e->n_expert, dense = 0;
    for (int i = 0; i < e->desc.n_dense; i++) dense += e->dense.slot[i] >= 0;
    char budget[32], staging[32], backbone[32];
    mib_or_gib(budget, sizeof budget, dp->budget_bytes);
    mib_or_gib(staging, sizeof staging, dp->staging_bytes);
    mib_or_gib(backbone, sizeof backbone, e->dense.backbone_bytes);
    int n = snprintf(e->summary, sizeof e->summary,
                     "device %s: the budget of %s holds the staging (%s), the backbone (%s: %d of %d dense matmuls) "
                     "and %d of %d experts (%.0f%%), %d of them pinned",
                     e->caps->name, budget, staging, backbone, dense, e->desc.n_dense, e->plan.n_slots, n_keys,
                     n_keys ? 100.0 * e->plan.n_slots / n_keys : 0.0, e->plan.n_pinned);
    if (n > 0 && (size_t)n < sizeof e->summary)
        snprintf(e->summary + n, sizeof e->summary - (size_t)n, "; expected share of routed rows on it %.0f%% (%s)",
                 100.0 * dp->expected_share,
                 e->plan.n_slots == n_keys ? "every expert"
                 : stats                   ? "the pinned experts' by the routing statistics, before the recency cache"
                                           : "as many as its slots of all experts: no routing statistics");
    size_t used = strlen(e->summary);
    if (unused_pack && used < sizeof e->summary)
        snprintf(e->summary + used, sizeof e->summary - used, "; pack file %s not used: the device holds the "
                 "experts' GGUF rows as they are", unused_pack);
}

/* The one place a run opens its device: resolve the name, open it, plan
 * from its capabilities (moe_plan, pure), set the plan's budget, then let
 * residency fill it. A device that cannot be opened or holds nothing is not
 * an error: the experts run on the CPU and the note says why. A device that
 * prices the machine it models (the sim's board) is kept for that even
 * when nothing is resident. */
static int open_device(struct moe_executor *e, const struct moe_exec_options *o) {
    char why[256] = "";
    const char *name = dev_resolve(o->device, why, sizeof why);
    if (!name) {
        if (why[0]) exec_note(e, "%s; experts run on the CPU", why);
        return 0;
    }
    struct dev *dev = NULL;
    /* A device on the host's own cores (amx) borrows the pool, and its work
     * runs before the CPU experts', not beside them (one pool takes one
     * caller at a time, and two sides on the same cores would only contend). */
    struct dev_options dopt = { .pool = NULL, .host_pool = e->pool, .n_threads = 1, .spec = o->device_spec };
    int rc = dev_open_blocks(name, &dopt, 0, &dev); /* the run drives block devices too */
    if (rc == DEV_E_OPTION) return moex_errorf("device %s: %s", name, moex_error());
    if (rc != DEV_OK) {
        exec_note(e, "device unavailable: %s; experts run on the CPU", moex_error());
        return 0;
    }
    const struct dev_caps *caps = dev_caps(dev);
    /* A block device's slots are sized for the widest expert type it takes. */
    enum qtype slot_type = e->n_layers ? moe_plan_slot_type(&e->desc, caps) : 0;
    if (slot_type && dev_set_slot_type(dev, slot_type) != DEV_OK) {
        exec_note(e, "device unavailable: %s; experts run on the CPU", moex_error());
        dev_close(dev);
        return 0;
    }
    if (caps->pricing) {
        e->pricer = dev;
        e->priced_rows = malloc(sizeof *e->priced_rows * (size_t)(e->n_expert ? e->n_expert : 1));
        e->priced_on_device = malloc(sizeof *e->priced_on_device * (size_t)(e->n_expert ? e->n_expert : 1));
        if (!e->priced_rows || !e->priced_on_device) return moex_errorf("out of memory");
    }
    if (e->n_layers == 0) {
        exec_note(e, "the model has no experts%s", "");
        if (!caps->pricing) dev_close(dev);
        return 0;
    }
    struct moe_device_plan dp;
    if (moe_plan_for_device(&e->desc, o, caps, &dp) != 0) {
        if (!caps->pricing) dev_close(dev);
        return -1;
    }
    if (dp.note[0]) exec_note(e, "%s", dp.note);
    if (!dp.device[0] || dev_set_budget(dev, dp.budget_bytes) != DEV_OK) {
        if (!caps->pricing) dev_close(dev);
        moe_device_plan_free(&dp);
        return 0;
    }
    if (caps->shares_host_cores) e->overlap = false;
    e->dev = dev;
    e->caps = caps;
    e->plan = dp.plan; /* ours now */
    rc = res_start(e, o, &dp);
    if (rc == 0 && e->dev) summarize(e, &dp, o->stats_path != NULL, exec_blocks(e) ? o->pack_path : NULL);
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
    if (dense_exec_init(e) != 0 || open_device(e, opt) != 0) {
        moe_executor_free(e);
        return NULL;
    }
    if (!e->dev) return e;
    bool failed = false;
    size_t R = (size_t)e->stage.rows, elem = exec_blocks(e) ? sizeof(float) : 1;
    e->act_codes = alloc(R * e->n_embd * elem, &failed);
    e->act_scales = alloc(R * sizeof(float), &failed);
    e->gate_up = alloc(2 * R * e->n_ff * sizeof(float), &failed);
    e->h_codes = alloc(R * e->n_ff * elem, &failed);
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
    if (e->pricer != e->dev) dev_close(e->pricer);
    free(e->priced_rows); free(e->priced_on_device);
    free(e);
}

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

const char *moe_executor_summary(const struct moe_executor *e) { return e->summary; }

const struct moe_pack_report *moe_executor_pack_report(const struct moe_executor *e) { return &e->pack_report; }

bool moe_executor_modelled(const struct moe_executor *e) { return e->dev && e->caps->modelled_time; }

const char *moe_executor_device(const struct moe_executor *e) { return e->dev ? e->caps->name : "none"; }

const struct dev *moe_executor_pricer(const struct moe_executor *e) { return e->pricer; }
