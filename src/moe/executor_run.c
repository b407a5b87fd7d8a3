/* The run: per batch, where each active expert goes (the M rule, residency,
 * admission), the device's share queued on its stream (staging in, gate+up
 * in one submission, the gating on the host, down in a second, outputs
 * back) while the CPU threads run the cold experts, the fence waited on,
 * and any device error moved to the CPU for the rest of the run. It calls
 * residency (residency.c) for admitted experts; nothing calls back. */
#include "moe/executor_impl.h"

#include "core/error.h"
#include "core/timer.h"
#include "core/trace.h"
#include "dev/board.h"
#include "moe/experts.h"
#include "pack/w8a8.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int exec_put_row(const struct moe_executor *e, const float *x, int64_t K, int r, int8_t *codes, float *scales) {
    if (exec_blocks(e)) {
        memcpy((float *)(void *)codes + (size_t)r * (size_t)K, x, sizeof(float) * (size_t)K);
        return DEV_OK;
    }
    if (w8a8_quantize_act(x, 1, K, K, codes + (size_t)r * (size_t)K, &scales[r]) != 0)
        return moex_errorf("non-finite activations"), DEV_E_VALUE;
    return DEV_OK;
}

int exec_write_rows(struct moe_executor *e, int buf, const int8_t *codes, const float *scales, int rows, int64_t K) {
    int rc = dev_write(e->dev, exec_row(e, buf, 0, K), codes, (uint64_t)rows * (uint64_t)K * (exec_blocks(e) ? sizeof(float) : 1));
    if (rc == DEV_OK && !exec_blocks(e))
        rc = dev_write(e->dev, exec_row_scale(e, buf, 0, K), scales, (uint64_t)rows * sizeof(float));
    return rc;
}

/* Host step 1 on the device's stream: the admitted experts into their
 * slots, the device rows' activations quantized (W8A8) or copied (block
 * devices) and staged. */
static int stage_in(struct dev *d, void *arg) {
    struct device_work *w = arg;
    struct moe_executor *e = w->e;
    for (int i = 0; i < e->n_to_pack; i++) {
        int ex = e->to_pack[i];
        bool loaded;
        int rc = res_fill_expert(e, w->layer, ex, e->dev_slot[ex], &loaded);
        if (rc != DEV_OK) return rc;
    }
    int rows = 0;
    for (int ex = 0; ex < e->n_expert; ex++) {
        if (e->dev_slot[ex] < 0) continue;
        int p0 = moe_expert_first_pair(w->s, ex), n = moe_expert_rows(w->s, ex);
        for (int p = p0; p < p0 + n; p++, rows++) {
            int rc = exec_put_row(e, w->x + (size_t)moe_pair_token(w->s, p) * e->n_embd, e->n_embd, rows,
                                  e->act_codes, e->act_scales);
            if (rc != DEV_OK) return rc;
        }
    }
    (void)d;
    int rc = exec_write_rows(e, BUF_ACT, e->act_codes, e->act_scales, rows, e->n_embd);
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
        rc = exec_put_row(e, g, e->n_ff, r, e->h_codes, e->h_scales);
        if (rc != DEV_OK) return rc;
    }
    rc = exec_write_rows(e, BUF_H, e->h_codes, e->h_scales, rows, e->n_ff);
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
                                                  exec_row(e, BUF_ACT, r0, e->n_embd),
                                                  exec_row_scale(e, BUF_ACT, r0, e->n_embd),
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
        e->jobs[n_jobs++] = (struct dev_job){ e->dev_slot[ex] * MATS + 2, moe_expert_rows(s, ex),
                                              exec_row(e, BUF_H, r0, e->n_ff), exec_row_scale(e, BUF_H, r0, e->n_ff),
                                              exec_at(e, BUF_OUT, r0 * D * sizeof(float)), (size_t)D };
    }
    rc = submit(e, e->jobs, n_jobs, fence);
    if (rc == DEV_OK) rc = dev_enqueue_host(e->dev, stage_out, &e->work, fence);
    return rc;
}

/* The layer's time on a machine the device models (its pricing hook): the
 * executor's placement (or, with the sim's legacy=1, the earlier backend's)
 * priced by the device's model. */
static int64_t priced_layer_ns(struct moe_executor *e, int layer, struct moe_scratch *s, bool device_used,
                               double device_ns) {
    const struct moe_layer_desc *W = &e->desc.layers[layer];
    for (int ex = 0; ex < e->n_expert; ex++) {
        e->priced_rows[ex] = moe_expert_rows(s, ex);
        e->priced_on_device[ex] = device_used && !e->on_cpu[ex];
    }
    struct board_moe_layer L = { layer, e->n_layers, e->n_expert, e->n_embd, e->n_ff,
                                 { W->gate.type, W->up.type, W->down.type }, e->priced_rows,
                                 device_used ? e->priced_on_device : NULL, device_ns, e->overlap };
    return (int64_t)dev_caps(e->pricer)->pricing->moe_layer_ns(e->pricer, &L);
}

/* The time one of `rows` rows saves on the device, from its whole cost
 * model: the CPU's time per row against the device's per-MAC time, less
 * the expert's fixed costs per use spread over its rows (a job and the
 * weight's bytes streamed, per matrix) and, when no other expert of the
 * layer is on the device yet, the layer's two submissions. */
static double device_gain_per_row(const struct moe_executor *e, int rows, bool submits_paid) {
    const struct dev_caps *c = e->caps;
    double values = (double)e->n_embd * (double)e->n_ff; /* one matrix */
    double bytes = values * c->code_block_bytes / c->code_block_values; /* its slot's bytes a value */
    double fixed = MATS * (c->job_ns + bytes * c->weight_ns_per_byte) + (submits_paid ? 0 : 2 * c->submit_ns);
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
                    if (res_file_has(e, layer, ex)) c->loads++;
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
    if (e->priced_rows) modelled = priced_layer_ns(e, layer, s, n_device > 0 && !e->failed, (double)device_side);
    /* Recency and rates age once per forward pass, not once per layer. */
    if (e->cache && layer == e->n_layers - 1) expert_cache_end_batch(e->cache);
    moe_combine(s, weights, out);
    int64_t wall = time_ns() - t_start;
    c->wall_ns += wall;
    c->modelled_ns += modelled >= 0 ? modelled : wall;
}
