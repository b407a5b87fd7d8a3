/* Internal to src/dev: what a backend provides, and the state dev.c keeps
 * for every device (slot pool, counters) so that backends stay small. */
#ifndef MOEX_DEV_IMPL_H
#define MOEX_DEV_IMPL_H

#include "dev/dev.h"
#include "pack/pack.h"

struct dev_ops {
    /* Plain C check that the backend can run here, before any of its code
     * compiled for a wider ISA does (NULL: always). DEV_OK, or an error
     * with moex_error set. */
    int (*available)(void);
    /* Fills d->caps and d->layout, sets d->backend. Nothing to undo on failure. */
    int (*open)(struct dev *d, const struct dev_options *opt);
    void (*close)(struct dev *d);
    /* Device-side resources for the pool dev.c has laid out (host memory is
     * dev.c's). NULL when there is nothing to do. */
    int (*pool_alloc)(struct dev *d);
    /* The time a pack of K x N counts (ns): the measured host time, or a
     * model's (which also advances its clock). NULL: measured. */
    uint64_t (*pack_cost)(struct dev *d, int K, int N, uint64_t measured_ns);
    /* Runs validated jobs. *modelled_ns: the submission's time when the
     * device models time (caps.modelled_time), else left alone. */
    int (*submit)(struct dev *d, const struct dev_job *jobs, int n_jobs, uint64_t *modelled_ns);
    /* NULL: the generic formula from caps. */
    double (*estimate)(const struct dev *d, const struct dev_job *jobs, int n_jobs);
};

struct dev_slot {
    int K, N; /* 0 when empty */
};

struct dev {
    const struct dev_ops *ops;
    struct dev_caps caps;
    enum pack_layout layout;
    struct threadpool *pool; /* borrowed or owned */
    bool own_pool;
    uint64_t budget_bytes;
    /* The slot pool: slot s's codes at codes + s * slot_code_bytes (64-byte
     * aligned), its scales at scales + s * max_n. max_k: the largest K a
     * slot can hold in this envelope. */
    int n_slots, max_k, max_n;
    int64_t slot_values;
    size_t slot_code_bytes;
    int8_t *codes;
    float *scales;
    struct dev_slot *slots;
    struct dev_counters counters;
    void *backend;
};

/* Jobs one submission may hold, on every backend. */
#define DEV_MAX_JOBS 1024

extern const struct dev_ops dev_cpu_ops;
extern const struct dev_ops dev_sim_ops;
#if defined(__x86_64__)
extern const struct dev_ops dev_amx_ops;
/* amx_detect.c (plain C, safe anywhere): 0 when AMX-INT8 can run in this
 * process (tile data permission granted), else DEV_E_UNAVAILABLE with the
 * reason in moex_error(). */
int amx_request(void);
#endif

/* The reference kernel over a submission (dev_cpu.c), PACK_ROWS slots:
 * exact int32 dots, the W8A8 output rule, jobs' column blocks spread over
 * d->pool. The sim computes with it too. */
void dev_cpu_run(struct dev *d, const struct dev_job *jobs, int n_jobs);

static inline const int8_t *dev_slot_codes(const struct dev *d, int slot) {
    return d->codes + (size_t)slot * d->slot_code_bytes;
}
static inline const float *dev_slot_scales(const struct dev *d, int slot) {
    return d->scales + (size_t)slot * (size_t)d->max_n;
}

#endif
