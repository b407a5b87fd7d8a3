/* The dense matmuls (attention projections, shared experts, dense FFN
 * layers, the lm head) through the experts' placement: the M rule, the
 * envelope, residency and the device's cost model decide, per call, which
 * run on the device. A resident dense matmul (the backbone) takes slots of
 * the experts' size, its output channels cut into chunks that fit one slot
 * each, so the pool stays one allocation of one slot size. Dense calls run
 * between MoE layers, never during one, so they use the experts' staging
 * buffers: activations in BUF_ACT, outputs in BUF_OUT. */
#include "moe/executor_impl.h"

#include "core/error.h"
#include "core/timer.h"
#include "core/trace.h"
#include "pack/w8a8.h"

#include <stdlib.h>
#include <string.h>

static int by_matrix(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)((const struct dense_entry *)a)->w, y = (uintptr_t)((const struct dense_entry *)b)->w;
    return x < y ? -1 : x > y;
}

int dense_exec_init(struct moe_executor *e) {
    struct dense_exec *x = &e->dense;
    int n = e->desc.n_dense;
    x->n = n;
    size_t m = (size_t)(n ? n : 1);
    x->slot = malloc(sizeof *x->slot * m);
    x->chunks = calloc(m, sizeof *x->chunks);
    x->chunk_rows = calloc(m, sizeof *x->chunk_rows);
    x->by_w = malloc(sizeof *x->by_w * m);
    if (!x->slot || !x->chunks || !x->chunk_rows || !x->by_w) return moex_errorf("out of memory");
    for (int i = 0; i < n; i++) {
        x->slot[i] = -1;
        x->by_w[i] = (struct dense_entry){ e->desc.dense[i].w, i };
    }
    qsort(x->by_w, (size_t)n, sizeof *x->by_w, by_matrix);
    return 0;
}

void dense_exec_free(struct dense_exec *x) {
    free(x->slot);
    free(x->chunks);
    free(x->chunk_rows);
    free(x->by_w);
    free(x->jobs);
    memset(x, 0, sizeof *x);
}

static int find(const struct dense_exec *x, const struct matrix *w) {
    struct dense_entry key = { w, 0 };
    const struct dense_entry *hit = x->n ? bsearch(&key, x->by_w, (size_t)x->n, sizeof key, by_matrix) : NULL;
    return hit ? hit->id : -1;
}

void moe_executor_begin_batch(struct moe_executor *e, enum moe_phase phase) {
    if (e) e->phase = phase;
}

/* Rows of one pass: as many as the staging holds for inputs of K and
 * outputs of sum_n channels. */
static int pass_rows(const struct moe_executor *e, int64_t K, int64_t sum_n) {
    int64_t act = (int64_t)e->stage.rows * e->n_embd, out = act; /* BUF_ACT codes, BUF_OUT floats */
    int64_t rows = e->stage.rows;
    if (act / K < rows) rows = act / K;
    if (sum_n > 0 && out / sum_n < rows) rows = out / sum_n;
    return (int)rows;
}

/* The device's share of a call, synchronous: per pass, the rows quantized
 * and staged, every chunk of every device matmul in one submission, the
 * outputs read back into y. */
static int run_device(struct moe_executor *e, int k, const struct matrix *const *w, float *const *y, const float *x,
                      int n, const int *ids, const bool *on_dev, int rows_per_pass, struct dense_counters *c,
                      int64_t *wait_ns) {
    struct dense_exec *dx = &e->dense;
    int64_t K = w[0]->cols;
    for (int r0 = 0; r0 < n; r0 += rows_per_pass) {
        int rows = n - r0 < rows_per_pass ? n - r0 : rows_per_pass;
        int rc = DEV_OK;
        if (exec_blocks(e)) /* the rows as they are: no host copy */
            rc = exec_write_rows(e, BUF_ACT, (const int8_t *)(const void *)(x + (size_t)r0 * K), NULL, rows, K);
        else if (w8a8_quantize_act(x + (size_t)r0 * K, rows, K, K, e->act_codes, e->act_scales) != 0)
            return moex_errorf("non-finite activations"), DEV_E_VALUE;
        else
            rc = exec_write_rows(e, BUF_ACT, e->act_codes, e->act_scales, rows, K);
        if (rc != DEV_OK) return rc;
        int n_jobs = 0;
        uint64_t base = 0, offset[DENSE_GROUP_MAX]; /* floats: matrix i's (rows, N) outputs in BUF_OUT */
        for (int i = 0; i < k; i++) {
            if (!on_dev[i]) continue;
            offset[i] = base;
            for (int ch = 0; ch < dx->chunks[ids[i]]; ch++)
                dx->jobs[n_jobs++] = (struct dev_job){
                    dx->slot[ids[i]] + ch, rows, exec_row(e, BUF_ACT, 0, K), exec_row_scale(e, BUF_ACT, 0, K),
                    exec_at(e, BUF_OUT, (base + (uint64_t)ch * dx->chunk_rows[ids[i]]) * sizeof(float)),
                    (size_t)w[i]->rows };
            base += (uint64_t)rows * (uint64_t)w[i]->rows;
        }
        dev_fence fence = 0;
        rc = exec_submit(e, dx->jobs, n_jobs, &fence, &c->submissions, &c->jobs);
        int64_t t0 = time_ns();
        if (fence) {
            int wrc = dev_wait(e->dev, fence);
            if (rc == DEV_OK) rc = wrc;
        }
        *wait_ns += time_ns() - t0;
        for (int i = 0; i < k && rc == DEV_OK; i++)
            if (on_dev[i])
                rc = dev_read(e->dev, exec_at(e, BUF_OUT, offset[i] * sizeof(float)), y[i] + (size_t)r0 * w[i]->rows,
                              (uint64_t)rows * (uint64_t)w[i]->rows * sizeof(float));
        if (rc != DEV_OK) return rc;
    }
    return DEV_OK;
}

unsigned executor_dense(struct moe_executor *e, int k, const struct matrix *const *w, float *const *y,
                            const float *x, int n) {
    unsigned left = k > 0 ? (1u << k) - 1 : 0;
    if (!e || k < 1 || k > DENSE_GROUP_MAX || n < 1) return left;
    struct dense_exec *dx = &e->dense;
    int ids[DENSE_GROUP_MAX];
    bool on_dev[DENSE_GROUP_MAX];
    int64_t K = w[0]->cols, sum_n = 0;
    bool usable = e->dev && !e->failed && n >= e->min_m;
    for (int i = 0; i < k; i++) {
        ids[i] = find(dx, w[i]);
        on_dev[i] = usable && ids[i] >= 0 && dx->slot[ids[i]] >= 0 && w[i]->cols == K;
        if (on_dev[i]) sum_n += w[i]->rows;
    }
    int rows_per_pass = sum_n ? pass_rows(e, K, sum_n) : 0;
    if (rows_per_pass < 1) memset(on_dev, 0, sizeof on_dev);
    int first = 0; /* the call's device time and submissions count under its first device matmul */
    while (first < k && !on_dev[first]) first++;
    if (first < k) {
        struct dense_counters *c0 = &dx->counters[e->phase][e->desc.dense[ids[first]].kind];
        int64_t t0 = time_ns(), wait = 0;
        struct dev_counters before, after;
        dev_get_counters(e->dev, &before);
        int rc = run_device(e, k, w, y, x, n, ids, on_dev, rows_per_pass, c0, &wait);
        dev_get_counters(e->dev, &after);
        int64_t wall = time_ns() - t0, busy = (int64_t)(after.busy_ns - before.busy_ns);
        c0->device_ns += busy;
        c0->wall_ns += wall;
        c0->modelled_ns += e->caps->modelled_time ? wall - wait + busy : wall;
        trace_event(e->trace, LANE_DEVICE, "device dense", t0, t0 + wall);
        if (rc != DEV_OK) {
            exec_note(e, "device error, the rest of the run is on the CPU: %s", moex_error());
            e->failed = true;
            c0->fallbacks++;
            memset(on_dev, 0, sizeof on_dev);
        }
    }
    for (int i = 0; i < k; i++) {
        if (ids[i] < 0) continue;
        struct dense_counters *c = &dx->counters[e->phase][e->desc.dense[ids[i]].kind];
        if (on_dev[i]) {
            c->matmuls_device++;
            c->rows_device += (uint64_t)n;
            left &= ~(1u << i);
        } else {
            c->matmuls_cpu++;
            c->rows_cpu += (uint64_t)n;
        }
    }
    return left;
}

const struct dense_counters *executor_dense_counters(const struct moe_executor *e, enum moe_phase phase,
                                                             enum dense_kind kind) {
    return &e->dense.counters[phase][kind];
}

int64_t moe_executor_simulation_ns(const struct moe_executor *e, enum moe_phase phase) {
    const struct moe_phase_counters *c = &e->counters[phase];
    int64_t ns = c->wall_ns - c->modelled_ns;
    for (int k = 0; k < DENSE_KINDS; k++) ns += e->dense.counters[phase][k].wall_ns - e->dense.counters[phase][k].modelled_ns;
    return ns;
}

uint64_t moe_executor_backbone_bytes(const struct moe_executor *e) { return e->dense.backbone_bytes; }

uint64_t executor_dense_resident_bytes(const struct moe_executor *e, enum dense_kind kind) {
    return (unsigned)kind < DENSE_KINDS ? e->dense.resident[kind] : 0;
}

void dense_exec_print(const struct moe_executor *e, FILE *out) {
    const struct dense_exec *dx = &e->dense;
    bool present[DENSE_KINDS] = { false };
    int count[DENSE_KINDS] = { 0 }, resident[DENSE_KINDS] = { 0 };
    for (int i = 0; i < dx->n; i++) {
        enum dense_kind kind = e->desc.dense[i].kind;
        present[kind] = true;
        count[kind]++;
        resident[kind] += dx->slot[i] >= 0;
    }
    fprintf(out, "moex profile: dense matmuls: backbone resident %.1f MiB\n", dx->backbone_bytes / 1048576.0);
    fprintf(out, "| matmul | phase | resident | resident MiB | rows dev | rows cpu | calls dev | calls cpu | submits "
                 "| jobs | fallbacks | device ms | wall ms |\n");
    fprintf(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    static const char *names[MOE_PHASES] = { "prefill", "decode" };
    for (int kind = 0; kind < DENSE_KINDS; kind++)
        for (int p = 0; p < MOE_PHASES; p++) {
            if (!present[kind]) continue;
            const struct dense_counters *c = &dx->counters[p][kind];
            fprintf(out, "| %s | %s | %d/%d | %.1f | %llu | %llu | %llu | %llu | %llu | %llu | %llu | %.1f | %.1f |\n",
                    dense_kind_name((enum dense_kind)kind), names[p], resident[kind], count[kind],
                    dx->resident[kind] / 1048576.0, (unsigned long long)c->rows_device,
                    (unsigned long long)c->rows_cpu, (unsigned long long)c->matmuls_device,
                    (unsigned long long)c->matmuls_cpu, (unsigned long long)c->submissions,
                    (unsigned long long)c->jobs, (unsigned long long)c->fallbacks, c->device_ns / 1e6,
                    c->wall_ns / 1e6);
        }
    fprintf(out, "moex profile: dense rows: token rows of each matmul; resident: matmuls of that kind in the backbone; "
                 "jobs: slots (chunks of output channels); a call's submissions and device time count under its "
                 "first matmul on the device\n");
}

bool executor_dense_resident(const struct moe_executor *e, const void *data) {
    if (!e->dev || e->failed) return false;
    for (int i = 0; i < e->dense.n; i++)
        if (e->dense.slot[i] >= 0 && e->desc.dense[i].w->data == data) return true;
    return false;
}

int moe_executor_min_m(const struct moe_executor *e) { return e->dev && !e->failed ? e->min_m : 0; }
