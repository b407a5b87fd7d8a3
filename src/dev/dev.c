/* The device layer every backend shares: opening by name, the slot pool,
 * validation of packs and jobs, counters. Backends see only valid calls. */
#include "dev/dev_impl.h"

#include "core/error.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "dev/sim.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct backend {
    const char *name;
    const struct dev_ops *ops;
};

static const struct backend backends[] = {
    {"cpu", &dev_cpu_ops},
#if defined(__x86_64__)
    {"amx", &dev_amx_ops},
#else
    {"amx", NULL},
#endif
    {"sim", &dev_sim_ops},
};

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* The pool's codes: anonymous pages, with transparent huge pages asked for.
 * A pool is up to many GiB filled once at start, and first-touch faults of
 * 4 KiB pages cost microseconds each (4 us measured in a VM): with 2 MiB pages
 * filling the pool is bound by the packing or the copy, not by the faults. */
static int8_t *codes_alloc(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
#if defined(MADV_HUGEPAGE)
    if (bytes >= ((size_t)2 << 20)) madvise(p, bytes, MADV_HUGEPAGE); /* advice only: failure is harmless */
#endif
    return p;
}

static void codes_free(struct dev *d) {
    if (d->codes) munmap(d->codes, d->slot_code_bytes * (size_t)d->n_slots);
    d->codes = NULL;
}

const char *dev_backend_names(void) { return "cpu amx sim"; }

const char *dev_status_string(int status) {
    switch (status) {
    case DEV_OK: return "ok";
    case DEV_E_ARG: return "invalid argument";
    case DEV_E_UNAVAILABLE: return "device unavailable";
    case DEV_E_NOMEM: return "out of host memory";
    case DEV_E_BUDGET: return "over the resident byte budget";
    case DEV_E_DEVMEM: return "device memory allocation failed";
    case DEV_E_SHAPE: return "shape outside the device envelope";
    case DEV_E_TYPE: return "weight type cannot be packed";
    case DEV_E_VALUE: return "weights hold a NaN or an infinity";
    case DEV_E_STATE: return "invalid device state";
    case DEV_E_SUBMIT: return "submission failed";
    case DEV_E_OPTION: return "invalid option";
    case DEV_E_LAYOUT: return "packed for another layout";
    default: return "unknown device status";
    }
}

int dev_open(const char *name, const struct dev_options *opt, struct dev **out) {
    if (!out) return moex_errorf("dev_open: no result pointer"), DEV_E_ARG;
    *out = NULL;
    static const struct dev_options defaults;
    if (!opt) opt = &defaults;
    const struct dev_ops *ops = NULL;
    bool known = false;
    for (size_t i = 0; name && i < sizeof backends / sizeof backends[0]; i++)
        if (!strcmp(name, backends[i].name)) {
            known = true;
            ops = backends[i].ops;
        }
    if (!known) {
        moex_errorf("unknown device '%s' (expected one of: %s)", name ? name : "", dev_backend_names());
        return DEV_E_OPTION;
    }
    if (!ops) {
        moex_errorf("%s: this device needs an x86-64 build", name);
        return DEV_E_UNAVAILABLE;
    }
    if (ops->available) {
        int rc = ops->available();
        if (rc != DEV_OK) return rc;
    }
    struct dev *d = calloc(1, sizeof *d);
    if (!d) return moex_errorf("%s: out of memory", name), DEV_E_NOMEM;
    d->ops = ops;
    d->budget_bytes = opt->budget_bytes;
    int rc = ops->open(d, opt);
    if (rc != DEV_OK) {
        free(d);
        return rc;
    }
    if (opt->pool) {
        d->pool = opt->pool;
    } else if (opt->n_threads > 1) {
        d->pool = threadpool_new(opt->n_threads, false);
        if (!d->pool) {
            dev_close(d);
            return DEV_E_NOMEM;
        }
        d->own_pool = true;
    }
    *out = d;
    return DEV_OK;
}

void dev_close(struct dev *d) {
    if (!d) return;
    if (d->ops->close) d->ops->close(d);
    if (d->own_pool) threadpool_free(d->pool);
    codes_free(d);
    free(d->scales);
    free(d->slots);
    free(d);
}

const struct dev_caps *dev_caps(const struct dev *d) { return &d->caps; }

uint64_t dev_slot_bytes(const struct dev *d, int64_t slot_values, int max_n) {
    (void)d;
    if (slot_values <= 0 || max_n <= 0) return 0;
    return round_up((size_t)slot_values, 64) + round_up((size_t)max_n * sizeof(float), 64);
}

int dev_pool_alloc(struct dev *d, int n_slots, int64_t slot_values, int max_n) {
    if (!d) return moex_errorf("dev_pool_alloc: no device"), DEV_E_ARG;
    const char *name = d->caps.name;
    const struct dev_caps *c = &d->caps;
    if (d->slots) return moex_errorf("%s: the slot pool is allocated once", name), DEV_E_STATE;
    if (n_slots < 0 || slot_values <= 0 || max_n <= 0 || slot_values > ((int64_t)1 << 40))
        return moex_errorf("%s: pool of %d slots of %lld values, %d channels", name, n_slots,
                           (long long)slot_values, max_n),
               DEV_E_ARG;
    if (max_n > c->n_max || slot_values < (int64_t)c->k_multiple * c->n_multiple)
        return moex_errorf("%s: slots of %lld values and %d channels hold no weight in the envelope", name,
                           (long long)slot_values, max_n),
               DEV_E_SHAPE;
    uint64_t slot_bytes = dev_slot_bytes(d, slot_values, max_n);
    if (n_slots == 0) {
        if (d->budget_bytes == 0) return moex_errorf("%s: a pool sized by the budget needs a budget", name), DEV_E_ARG;
        uint64_t fit = d->budget_bytes / slot_bytes;
        n_slots = fit > (uint64_t)(1 << 30) ? 1 << 30 : (int)fit;
    }
    if (n_slots == 0 || (d->budget_bytes && (uint64_t)n_slots * slot_bytes > d->budget_bytes)) {
        moex_errorf("%s: %d slots of %llu bytes do not fit the budget of %llu bytes", name, n_slots ? n_slots : 1,
                    (unsigned long long)slot_bytes, (unsigned long long)d->budget_bytes);
        return DEV_E_BUDGET;
    }
    int64_t max_k = slot_values / c->n_multiple;
    if (max_k > c->k_max) max_k = c->k_max;
    d->slot_code_bytes = round_up((size_t)slot_values, 64);
    d->n_slots = n_slots;
    d->codes = codes_alloc(d->slot_code_bytes * (size_t)n_slots);
    d->scales = malloc((size_t)n_slots * (size_t)max_n * sizeof(float));
    d->slots = calloc((size_t)n_slots, sizeof *d->slots);
    d->slot_values = slot_values;
    d->max_k = (int)max_k;
    d->max_n = max_n;
    int rc = DEV_OK;
    if (!d->codes || !d->scales || !d->slots) {
        moex_errorf("%s: out of memory for %d slots of %llu bytes", name, n_slots, (unsigned long long)slot_bytes);
        rc = DEV_E_NOMEM;
    } else if (d->ops->pool_alloc) {
        rc = d->ops->pool_alloc(d);
        if (rc == DEV_E_DEVMEM) d->counters.failed_allocs++;
    }
    if (rc != DEV_OK) {
        codes_free(d);
        free(d->scales);
        free(d->slots);
        d->scales = NULL;
        d->slots = NULL;
        d->n_slots = 0;
        return rc;
    }
    d->counters.resident_bytes = (uint64_t)n_slots * slot_bytes;
    return DEV_OK;
}

int dev_pool_slots(const struct dev *d) { return d ? d->n_slots : 0; }

void dev_slot_shape(const struct dev *d, int slot, int *K, int *N) {
    bool ok = d && d->slots && slot >= 0 && slot < d->n_slots;
    if (K) *K = ok ? d->slots[slot].K : 0;
    if (N) *N = ok ? d->slots[slot].N : 0;
}

static int check_shape(const struct dev *d, int K, int N) {
    const struct dev_caps *c = &d->caps;
    if (K <= 0 || N <= 0 || K % c->k_multiple || N % c->n_multiple || K > c->k_max || N > c->n_max) {
        moex_errorf("%s: a %d x %d weight is outside the envelope (K %% %d, N %% %d, K <= %d, N <= %d)", c->name, K,
                    N, c->k_multiple, c->n_multiple, c->k_max, c->n_max);
        return DEV_E_SHAPE;
    }
    return DEV_OK;
}

static int pack_into(struct dev *d, int slot, enum qtype type, const void *data, int K, int N) {
    const char *name = d->caps.name;
    if (!data) return moex_errorf("%s: pack without data", name), DEV_E_ARG;
    if (!d->slots) return moex_errorf("%s: pack before the slot pool is allocated", name), DEV_E_STATE;
    if (slot < 0 || slot >= d->n_slots) return moex_errorf("%s: slot %d of %d", name, slot, d->n_slots), DEV_E_ARG;
    d->slots[slot].K = d->slots[slot].N = 0;
    int rc = check_shape(d, K, N);
    if (rc != DEV_OK) return rc;
    if ((int64_t)K * N > d->slot_values || N > d->max_n || K > d->max_k) {
        moex_errorf("%s: a %d x %d weight does not fit the slots (%lld values, %d channels)", name, K, N,
                    (long long)d->slot_values, d->max_n);
        return DEV_E_SHAPE;
    }
    int64_t t0 = time_ns();
    int prc = pack_matrix(d->pool, PACK_PATH_BEST, type, data, K, N, d->layout,
                          (int8_t *)dev_slot_codes(d, slot), (float *)dev_slot_scales(d, slot));
    uint64_t measured = (uint64_t)(time_ns() - t0);
    if (prc != PACK_OK) {
        moex_errorf("%s: packing a %d x %d %s weight: %s", name, K, N, quant_type_name(type), pack_status_string(prc));
        return prc == PACK_E_VALUE ? DEV_E_VALUE : prc == PACK_E_SHAPE ? DEV_E_SHAPE : DEV_E_TYPE;
    }
    d->slots[slot].K = K;
    d->slots[slot].N = N;
    d->counters.pack_bytes_read += quant_row_size(type, K) * (uint64_t)N;
    d->counters.pack_bytes_written += pack_bytes(d->layout, K, N) + (uint64_t)N * sizeof(float);
    d->counters.pack_ns += d->ops->pack_cost ? d->ops->pack_cost(d, K, N, measured) : measured;
    return DEV_OK;
}

int dev_pack(struct dev *d, int slot, enum qtype type, const void *data, int K, int N) {
    if (!d) return moex_errorf("dev_pack: no device"), DEV_E_ARG;
    int rc = pack_into(d, slot, type, data, K, N);
    if (rc == DEV_OK) d->counters.packs++;
    else d->counters.failed_packs++;
    return rc;
}

enum pack_layout dev_layout(const struct dev *d) { return d ? d->layout : PACK_ROWS; }

/* The time a load counts: on the NPU model the DMA fill of the bytes on its
 * virtual clock (the host copy is not the board's cost), else the copy. */
static uint64_t load_cost(struct dev *d, uint64_t bytes, uint64_t measured_ns) {
    struct sim *s = dev_sim(d);
    if (!s) return measured_ns;
    double ns = sim_fill_ns(s, bytes);
    sim_advance(s, ns);
    return (uint64_t)ns;
}

static int load_into(struct dev *d, int slot, enum pack_layout layout, const int8_t *codes, const float *scales,
                     int K, int N) {
    const char *name = d->caps.name;
    if (!scales) return moex_errorf("%s: load without scales", name), DEV_E_ARG;
    if (!d->slots) return moex_errorf("%s: load before the slot pool is allocated", name), DEV_E_STATE;
    if (slot < 0 || slot >= d->n_slots) return moex_errorf("%s: slot %d of %d", name, slot, d->n_slots), DEV_E_ARG;
    d->slots[slot].K = d->slots[slot].N = 0;
    if (layout != d->layout)
        return moex_errorf("%s: a weight packed in layout %d, the device's is %d", name, (int)layout, (int)d->layout),
               DEV_E_LAYOUT;
    int rc = check_shape(d, K, N);
    if (rc != DEV_OK) return rc;
    if ((int64_t)K * N > d->slot_values || N > d->max_n || K > d->max_k || pack_check_shape(layout, K, N) != PACK_OK) {
        moex_errorf("%s: a %d x %d weight does not fit the slots (%lld values, %d channels)", name, K, N,
                    (long long)d->slot_values, d->max_n);
        return DEV_E_SHAPE;
    }
    for (int n = 0; n < N; n++)
        if (!isfinite(scales[n]) || scales[n] < 0)
            return moex_errorf("%s: channel %d of a packed weight has scale %g", name, n, (double)scales[n]), DEV_E_VALUE;
    size_t code_bytes = pack_bytes(layout, K, N), scale_bytes = (size_t)N * sizeof(float);
    if (codes && !pack_codes_in_range(codes, code_bytes))
        return moex_errorf("%s: a packed weight holds the code -128 (codes are -127..127)", name), DEV_E_VALUE;
    int64_t t0 = time_ns();
    if (codes) memcpy((int8_t *)dev_slot_codes(d, slot), codes, code_bytes);
    memcpy((float *)dev_slot_scales(d, slot), scales, scale_bytes);
    uint64_t measured = (uint64_t)(time_ns() - t0);
    d->slots[slot].K = K;
    d->slots[slot].N = N;
    d->counters.load_bytes += code_bytes + scale_bytes;
    d->counters.load_ns += load_cost(d, code_bytes + scale_bytes, measured);
    return DEV_OK;
}

int dev_load_packed(struct dev *d, int slot, enum pack_layout layout, const int8_t *codes, const float *scales,
                    int K, int N) {
    if (!d) return moex_errorf("dev_load_packed: no device"), DEV_E_ARG;
    int rc = load_into(d, slot, layout, codes, scales, K, N);
    if (rc == DEV_OK) d->counters.loads++;
    else d->counters.failed_packs++;
    return rc;
}

size_t dev_slot_code_stride(const struct dev *d) { return d && d->slots ? d->slot_code_bytes : 0; }

int dev_map_codes(struct dev *d, int first, int n, int fd, uint64_t offset) {
    if (!d) return moex_errorf("dev_map_codes: no device"), DEV_E_ARG;
    const char *name = d->caps.name;
    if (!d->slots) return moex_errorf("%s: mapping before the slot pool is allocated", name), DEV_E_STATE;
    if (first < 0 || n < 1 || first > d->n_slots - n || fd < 0)
        return moex_errorf("%s: mapping slots %d..%d of %d", name, first, first + n - 1, d->n_slots), DEV_E_ARG;
    long page = sysconf(_SC_PAGESIZE);
    int8_t *addr = d->codes + (size_t)first * d->slot_code_bytes;
    size_t len = (size_t)n * d->slot_code_bytes;
    if (page <= 0 || (uintptr_t)addr % (size_t)page || len % (size_t)page || offset % (uint64_t)page)
        return moex_errorf("%s: slots of %zu bytes at file offset %llu are not page-aligned", name, d->slot_code_bytes,
                           (unsigned long long)offset),
               DEV_E_ARG;
    for (int s = first; s < first + n; s++) d->slots[s].K = d->slots[s].N = 0;
    if (mmap(addr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, (off_t)offset) == MAP_FAILED) {
        int err = errno;
        /* A failed MAP_FIXED may leave the range unmapped: put fresh memory
         * back, or give up the slots from `first` on. */
        if (mmap(addr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
            d->n_slots = first;
        return moex_errorf("%s: mapping %zu bytes of slots from a file: %s", name, len, strerror(err)), DEV_E_DEVMEM;
    }
#if defined(MADV_WILLNEED)
    madvise(addr, len, MADV_WILLNEED); /* read-ahead when the file is not cached; advice only */
#endif
    return DEV_OK;
}

int dev_slot_data(const struct dev *d, int slot, const int8_t **codes, const float **scales, int *K, int *N) {
    if (!d || !codes || !scales) return moex_errorf("dev_slot_data: no device or result pointer"), DEV_E_ARG;
    *codes = NULL;
    *scales = NULL;
    if (K) *K = 0;
    if (N) *N = 0;
    if (!d->slots || slot < 0 || slot >= d->n_slots)
        return moex_errorf("%s: slot %d of %d", d->caps.name, slot, d->n_slots), DEV_E_ARG;
    if (d->slots[slot].N == 0) return moex_errorf("%s: slot %d is empty", d->caps.name, slot), DEV_E_STATE;
    *codes = dev_slot_codes(d, slot);
    *scales = dev_slot_scales(d, slot);
    if (K) *K = d->slots[slot].K;
    if (N) *N = d->slots[slot].N;
    return DEV_OK;
}

static int check_jobs(const struct dev *d, const struct dev_job *jobs, int n_jobs) {
    const char *name = d->caps.name;
    if (!d->slots) return moex_errorf("%s: submit before the slot pool is allocated", name), DEV_E_STATE;
    if (n_jobs < 1 || n_jobs > d->caps.max_jobs || !jobs)
        return moex_errorf("%s: %d jobs in a submission (1..%d)", name, n_jobs, d->caps.max_jobs), DEV_E_ARG;
    for (int j = 0; j < n_jobs; j++) {
        const struct dev_job *job = &jobs[j];
        if (job->slot < 0 || job->slot >= d->n_slots)
            return moex_errorf("%s: job %d: slot %d of %d", name, j, job->slot, d->n_slots), DEV_E_ARG;
        const struct dev_slot *s = &d->slots[job->slot];
        if (s->N == 0) return moex_errorf("%s: job %d: slot %d is empty", name, j, job->slot), DEV_E_STATE;
        if (job->m < 1 || !job->act || !job->act_scale || !job->out || job->out_stride < (size_t)s->N)
            return moex_errorf("%s: job %d: m %d, out stride %zu for N %d, or a NULL buffer", name, j, job->m,
                               job->out_stride, s->N),
                   DEV_E_ARG;
    }
    return DEV_OK;
}

int dev_submit(struct dev *d, const struct dev_job *jobs, int n_jobs) {
    if (!d) return moex_errorf("dev_submit: no device"), DEV_E_ARG;
    int rc = check_jobs(d, jobs, n_jobs);
    if (rc != DEV_OK) {
        d->counters.failed_submissions++;
        return rc;
    }
    uint64_t modelled = 0;
    int64_t t0 = time_ns();
    rc = d->ops->submit(d, jobs, n_jobs, &modelled);
    uint64_t busy = d->caps.modelled_time ? modelled : (uint64_t)(time_ns() - t0);
    d->counters.busy_ns += busy;
    if (rc != DEV_OK) {
        d->counters.failed_submissions++;
        return rc;
    }
    d->counters.submissions++;
    d->counters.jobs += (uint64_t)n_jobs;
    for (int j = 0; j < n_jobs; j++) {
        const struct dev_slot *s = &d->slots[jobs[j].slot];
        d->counters.rows += (uint64_t)jobs[j].m;
        d->counters.macs += (uint64_t)jobs[j].m * (uint64_t)s->K * (uint64_t)s->N;
    }
    return DEV_OK;
}

double dev_estimate_ns(const struct dev *d, const struct dev_job *jobs, int n_jobs) {
    if (!d || !d->slots || n_jobs < 1 || !jobs) return 0.0;
    if (d->ops->estimate) return d->ops->estimate(d, jobs, n_jobs);
    const struct dev_caps *c = &d->caps;
    double t = c->submit_ns;
    for (int j = 0; j < n_jobs; j++) {
        if (jobs[j].slot < 0 || jobs[j].slot >= d->n_slots) continue;
        const struct dev_slot *s = &d->slots[jobs[j].slot];
        double w = (double)s->K * (double)s->N;
        t += c->job_ns + w * c->weight_ns_per_byte + (double)jobs[j].m * w * c->ns_per_mac;
    }
    return t;
}

void dev_get_counters(const struct dev *d, struct dev_counters *c) {
    if (!c) return;
    if (!d) {
        memset(c, 0, sizeof *c);
        return;
    }
    *c = d->counters;
}
