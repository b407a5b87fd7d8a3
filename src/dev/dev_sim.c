/* The sim device: the cpu kernel for exact results, the RK3588 model of
 * sim.h for time, memory and faults. The slot pool lives in a few large
 * device buffers created once, as on the board. */
#include "dev/dev_impl.h"

#include "core/error.h"
#include "dev/sim.h"

#include <stdlib.h>

/* Slots are grouped into buffers of at most this size: few mappings, and
 * no single allocation that needs most of the window in one piece. */
#define SIM_POOL_BUFFER_MAX (256ull << 20)

struct sim_dev {
    struct sim *sim;
    uint64_t *buffers; /* device addresses of the pool's buffers */
    int n_buffers;
};

static int sim_open(struct dev *d, const struct dev_options *opt) {
    struct sim_figures f;
    if (sim_figures_parse(opt->sim ? opt->sim : "rk3588", &f) != 0) return DEV_E_OPTION;
    struct sim_dev *sd = calloc(1, sizeof *sd);
    if (!sd || !(sd->sim = sim_new(&f))) {
        free(sd);
        moex_errorf("sim: out of memory");
        return DEV_E_NOMEM;
    }
    d->backend = sd;
    d->layout = PACK_ROWS;
    const double core_bytes_per_ns = f.core_gbps * f.cores;
    d->caps = (struct dev_caps){
        .name = "sim",
        .description = "RK3588-class NPU model (exact results, modelled times)",
        .compute = DEV_COMPUTE_W8A8,
        .min_m = (int)f.min_m,
        .k_multiple = (int)f.k_multiple,
        .n_multiple = (int)f.n_multiple,
        .k_max = PACK_MAX_K,
        .n_max = 1 << 20,
        .max_jobs = DEV_MAX_JOBS,
        .modelled_time = true,
        /* a stream of chainable jobs; dev_estimate_ns has the exact model */
        .submit_ns = 1e3 * f.submit_us,
        .job_ns = 1e3 * f.job_us / f.cores,
        .weight_ns_per_byte = 1.0 / core_bytes_per_ns,
        .ns_per_mac = 1.0 / (f.core_gmacs * f.cores),
        .pack_ns_per_value = f.pack_ns_per_value,
    };
    return DEV_OK;
}

static void sim_close(struct dev *d) {
    struct sim_dev *sd = d->backend;
    if (!sd) return;
    for (int i = 0; i < sd->n_buffers; i++) sim_buffer_destroy(sd->sim, sd->buffers[i]);
    free(sd->buffers);
    sim_delete(sd->sim);
    free(sd);
}

static int sim_pool_alloc(struct dev *d) {
    struct sim_dev *sd = d->backend;
    const uint64_t slot_bytes = dev_slot_bytes(d, d->slot_values, d->max_n);
    uint64_t per_buffer = SIM_POOL_BUFFER_MAX / slot_bytes;
    if (per_buffer == 0) per_buffer = 1;
    int n_buffers = (int)(((uint64_t)d->n_slots + per_buffer - 1) / per_buffer);
    sd->buffers = calloc((size_t)n_buffers, sizeof *sd->buffers);
    if (!sd->buffers) return moex_errorf("sim: out of memory"), DEV_E_NOMEM;
    uint64_t left = (uint64_t)d->n_slots;
    for (int i = 0; i < n_buffers; i++) {
        uint64_t slots = left < per_buffer ? left : per_buffer;
        int rc = sim_buffer_create(sd->sim, slots * slot_bytes, &sd->buffers[i]);
        if (rc != DEV_OK) {
            for (int j = 0; j < i; j++) sim_buffer_destroy(sd->sim, sd->buffers[j]);
            free(sd->buffers);
            sd->buffers = NULL;
            sd->n_buffers = 0; /* sim_close must not destroy them again */
            return rc;
        }
        sd->n_buffers = i + 1;
        left -= slots;
    }
    return DEV_OK;
}

static uint64_t sim_pack_cost(struct dev *d, int K, int N, uint64_t measured_ns) {
    (void)measured_ns;
    struct sim_dev *sd = d->backend;
    double ns = sim_pack_ns(sd->sim, K, N);
    sim_advance(sd->sim, ns);
    return (uint64_t)ns;
}

static void shapes_of(const struct dev *d, const struct dev_job *jobs, int n, struct sim_shape *shapes) {
    for (int j = 0; j < n; j++) {
        const struct dev_slot *s = &d->slots[jobs[j].slot];
        shapes[j] = (struct sim_shape){.m = jobs[j].m, .k = s->K, .n = s->N};
    }
}

static int sim_submit_jobs(struct dev *d, const struct dev_job *jobs, int n_jobs, uint64_t *modelled_ns) {
    struct sim_dev *sd = d->backend;
    struct sim_shape shapes[DEV_MAX_JOBS];
    shapes_of(d, jobs, n_jobs, shapes);
    double ns = 0;
    int rc = sim_submit(sd->sim, shapes, n_jobs, &ns);
    *modelled_ns = (uint64_t)ns;
    if (rc != DEV_OK) return rc;
    dev_cpu_run(d, jobs, n_jobs);
    return DEV_OK;
}

static double sim_estimate(const struct dev *d, const struct dev_job *jobs, int n_jobs) {
    const struct sim_dev *sd = d->backend;
    struct sim_shape shapes[DEV_MAX_JOBS];
    if (n_jobs > DEV_MAX_JOBS) n_jobs = DEV_MAX_JOBS;
    for (int j = 0; j < n_jobs; j++)
        if (jobs[j].slot < 0 || jobs[j].slot >= d->n_slots) return 0.0;
    shapes_of(d, jobs, n_jobs, shapes);
    return sim_batch_ns(sd->sim, shapes, n_jobs);
}

struct sim *dev_sim(struct dev *d) {
    if (!d || d->ops != &dev_sim_ops) return NULL;
    return ((struct sim_dev *)d->backend)->sim;
}

const struct dev_ops dev_sim_ops = {
    .open = sim_open,
    .close = sim_close,
    .pool_alloc = sim_pool_alloc,
    .pack_cost = sim_pack_cost,
    .submit = sim_submit_jobs,
    .estimate = sim_estimate,
};
