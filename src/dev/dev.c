/* The device layer every backend shares: opening by name, device memory
 * (slot pool, staging buffers) through the backend, validation of packs,
 * loads and jobs, counters. Backends see only valid calls. */
#include "dev/dev_impl.h"

#include "core/error.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "dev/sim.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/cpu.h"

/* Every device name moex knows: one table. ops NULL with offloads: a
 * backend this build does not have. */
struct backend {
    struct dev_name_info info;
    const struct dev_ops *ops;
    bool chooses;            /* "auto": stands for another backend (auto_order) */
};

#if defined(__x86_64__)
#define AMX_OPS (&dev_amx_ops)
#else
#define AMX_OPS NULL
#endif

static const struct backend backends[] = {
    {{"none", "every expert and matmul on the CPU's quantized kernels (the default)", false, false, NULL}, NULL, false},
    {{"cpu", "the int8 reference device (plain C; the others equal it bit for bit)", true, false, NULL},
     &dev_cpu_ops, false},
    {{"amx", "Intel AMX int8 tiles on the host's cores", true, false, NULL}, AMX_OPS, false},
    {{"sim", "a model of an RK3588 NPU: exact results, modelled time", true, true, "--sim"}, &dev_sim_ops, false},
    {{"rknpu", "the RK3588 NPU through its kernel driver (rocket or the vendor's rknpu)", true, true, "--rknpu"},
     &dev_rknpu_ops, false},
    {{"cuda", "an NVIDIA GPU: weights in their GGUF types in VRAM (not yet measured on one)", true, false, NULL},
     &dev_cuda_ops, false},
    {{"auto", "the first of amx that this machine has, else none", true, false, NULL}, NULL, true},
};
enum { N_BACKENDS = sizeof backends / sizeof backends[0] };
/* What "auto" tries, in order. */
static const char *const auto_order[] = { "amx" };

const char *dev_names(void) {
    static char names[128];
    if (!names[0])
        for (int i = 0; i < N_BACKENDS; i++) {
            size_t n = strlen(names);
            snprintf(names + n, sizeof names - n, "%s%s", n ? " " : "", backends[i].info.name);
        }
    return names;
}

static const struct backend *find_backend(const char *name) {
    for (int i = 0; name && i < N_BACKENDS; i++)
        if (!strcmp(name, backends[i].info.name)) return &backends[i];
    return NULL;
}

const struct dev_name_info *dev_name_info(const char *name) {
    const struct backend *b = find_backend(name);
    return b ? &b->info : NULL;
}

static int backend_available(const struct backend *b) {
    if (!b->ops) return moex_errorf("%s: this device needs an x86-64 build", b->info.name), DEV_E_UNAVAILABLE;
    return b->ops->available ? b->ops->available() : DEV_OK;
}

const char *dev_resolve(const char *name, char *why, size_t why_size) {
    const struct backend *b = find_backend(name);
    if (!b || !b->info.offloads) return NULL;
    if (!b->chooses) return b->info.name;
    for (size_t i = 0; i < sizeof auto_order / sizeof auto_order[0]; i++) {
        const struct backend *c = find_backend(auto_order[i]);
        if (c && backend_available(c) == DEV_OK) return c->info.name;
    }
    if (why) snprintf(why, why_size, "device auto: no AMX on this CPU");
    return NULL;
}

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

static size_t page_round(uint64_t bytes) {
    long page = sysconf(_SC_PAGESIZE);
    return round_up((size_t)bytes, page > 0 ? (size_t)page : 4096);
}

/* Device memory through the backend, or host pages where it computes from them. */
static int region_alloc(struct dev *d, uint64_t bytes, uint64_t unit, struct dev_region *r) {
    *r = (struct dev_region){.handle = -1, .unit = unit};
    if (d->ops->mem_alloc) return d->ops->mem_alloc(d, bytes, r);
    r->host = codes_alloc(page_round(bytes));
    if (!r->host)
        return moex_errorf("%s: out of memory for %llu bytes", d->caps.name, (unsigned long long)bytes), DEV_E_NOMEM;
    r->bytes = bytes;
    return DEV_OK;
}

static void region_free(struct dev *d, struct dev_region *r) {
    if (!r->host) return;
    if (d->ops->mem_free) d->ops->mem_free(d, r);
    else munmap(r->host, page_round(r->bytes));
    *r = (struct dev_region){.handle = -1};
}

static void pool_free(struct dev *d) {
    region_free(d, &d->codes_mem);
    region_free(d, &d->scales_mem);
    d->codes = NULL;
    d->scales = NULL;
    free(d->pack_stage);
    free(d->slots);
    free(d->slot_offset);
    d->pack_stage = NULL;
    d->slots = NULL;
    d->slot_offset = NULL;
    d->n_slots = 0;
}

const char *dev_probe_device(const char *name) {
    const char *d = dev_resolve(name ? name : "auto", NULL, 0);
    return d ? d : name ? NULL : "sim";
}

int dev_windows_report(struct dev *d, char *out, size_t n) {
    if (!out || n == 0) return DEV_E_ARG;
    out[0] = 0;
    if (!d || !d->ops->windows_report) return DEV_E_ARG;
    return d->ops->windows_report(d, out, n);
}

/* The code bytes of a slot of slot_values values: one byte each (W8A8), or
 * the block device's count for its slot type. */
static size_t slot_code_size(const struct dev *d, int64_t slot_values) {
    return (size_t)dev_caps_slot_code_bytes(&d->caps, slot_values);
}


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

static int open_device(const char *name, const struct dev_options *opt, bool blocks, enum qtype slot_type,
                       struct dev **out) {
    if (!out) return moex_errorf("dev_open: no result pointer"), DEV_E_ARG;
    *out = NULL;
    static const struct dev_options defaults;
    if (!opt) opt = &defaults;
    const struct backend *b = find_backend(name);
    if (!b || !b->info.offloads || b->chooses) {
        moex_errorf("unknown device '%s' (expected one of: %s)", name ? name : "", dev_names());
        return DEV_E_OPTION;
    }
    int rc = backend_available(b);
    if (rc != DEV_OK) return rc;
    const struct dev_ops *ops = b->ops;
    struct dev *d = calloc(1, sizeof *d);
    if (!d) return moex_errorf("%s: out of memory", name), DEV_E_NOMEM;
    d->ops = ops;
    d->budget_bytes = opt->budget_bytes;
    d->open_blocks = blocks;
    d->slot_type = slot_type;
    rc = ops->open(d, opt);
    if (rc != DEV_OK) {
        free(d);
        return rc;
    }
    if (d->caps.mem_granule == 0) d->caps.mem_granule = page_round(1);
    d->caps.layout = d->layout;
    if (d->caps.compute == DEV_COMPUTE_BLOCKS) {
        if (!d->slot_type) d->slot_type = QT_Q8_0;
        d->caps.code_block_values = quant_traits(d->slot_type)->block_size;
        d->caps.code_block_bytes = (int)quant_traits(d->slot_type)->type_size;
    } else {
        d->caps.code_block_values = d->caps.code_block_bytes = 1;
    }
    if (opt->pool || (opt->host_pool && d->caps.shares_host_cores)) {
        d->pool = opt->pool ? opt->pool : opt->host_pool;
    } else if (opt->n_threads > 1) {
        d->pool = threadpool_new(opt->n_threads, false);
        if (!d->pool) {
            dev_close(d);
            return DEV_E_NOMEM;
        }
        d->own_pool = true;
    }
    if (dev_stream_start(d) != DEV_OK) {
        dev_close(d);
        return DEV_E_NOMEM;
    }
    *out = d;
    return DEV_OK;
}

int dev_open(const char *name, const struct dev_options *opt, struct dev **out) {
    return open_device(name, opt, false, 0, out);
}

int dev_open_blocks(const char *name, const struct dev_options *opt, enum qtype slot_type, struct dev **out) {
    return open_device(name, opt, true, slot_type, out);
}

void dev_close(struct dev *d) {
    if (!d) return;
    dev_stream_stop(d);
    pool_free(d);
    for (int b = 0; b < d->n_buffers; b++) region_free(d, &d->buffers[b]);
    if (d->ops->close) d->ops->close(d);
    if (d->own_pool) threadpool_free(d->pool);
    free(d);
}

const struct dev_caps *dev_caps(const struct dev *d) { return &d->caps; }

int dev_set_budget(struct dev *d, uint64_t budget_bytes) {
    if (!d) return moex_errorf("dev_set_budget: no device"), DEV_E_ARG;
    if (d->slots || d->n_buffers) return moex_errorf("%s: the budget is set before any allocation", d->caps.name), DEV_E_STATE;
    d->budget_bytes = budget_bytes;
    return DEV_OK;
}

/* The pool, once: n_slots of one size, or (sized) of code_bytes[s] each. */
static int pool_alloc(struct dev *d, int n_slots, const uint64_t *sized, int64_t slot_values, int max_n) {
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
    uint64_t staging = d->counters.staging_bytes;
    uint64_t room = d->budget_bytes > staging ? d->budget_bytes - staging : 0;
    uint64_t *offset = NULL;
    if (sized) { /* prefix sums of the slots' sizes, each 64-byte aligned */
        if (!(offset = malloc(sizeof *offset * ((size_t)n_slots + 1)))) return moex_errorf("%s: out of memory", name), DEV_E_NOMEM;
        offset[0] = 0;
        slot_bytes = 0;
        for (int i = 0; i < n_slots; i++) {
            uint64_t b = round_up((size_t)sized[i], 64);
            offset[i + 1] = offset[i] + b;
            if (b > slot_bytes) slot_bytes = b;
        }
    } else if (n_slots == 0) {
        if (d->budget_bytes == 0) return moex_errorf("%s: a pool sized by the budget needs a budget", name), DEV_E_ARG;
        uint64_t fit = room / slot_bytes;
        n_slots = fit > (uint64_t)(1 << 30) ? 1 << 30 : (int)fit;
        while (n_slots > 0 && dev_pool_bytes(d, n_slots, slot_values, max_n) > room) n_slots--;
    }
    uint64_t pool_bytes = sized ? dev_caps_sized_pool_bytes(c, offset[n_slots]) : dev_pool_bytes(d, n_slots, slot_values, max_n);
    if (n_slots == 0 || (d->budget_bytes && pool_bytes > room)) {
        moex_errorf("%s: %d slots of %llu bytes do not fit the budget of %llu bytes (%llu of it staging)", name,
                    n_slots ? n_slots : 1, (unsigned long long)slot_bytes, (unsigned long long)d->budget_bytes,
                    (unsigned long long)staging);
        free(offset);
        return DEV_E_BUDGET;
    }
    dev_stream_drain(d);
    int64_t max_k = slot_values / c->n_multiple;
    if (max_k > c->k_max) max_k = c->k_max;
    d->slot_code_bytes = sized ? (size_t)slot_bytes : slot_code_size(d, slot_values);
    d->slot_offset = offset;
    d->slot_values = slot_values;
    d->max_k = (int)max_k;
    d->max_n = max_n;
    /* a slot's codes never straddle two device buffers (or windows) */
    int rc = region_alloc(d, sized ? offset[n_slots] : d->slot_code_bytes * (size_t)n_slots, d->slot_code_bytes,
                          &d->codes_mem);
    uint64_t scales = (uint64_t)n_slots * dev_scale_bytes(c, max_n);
    if (rc == DEV_OK && scales) rc = region_alloc(d, scales, dev_scale_bytes(c, max_n), &d->scales_mem);
    d->codes = d->codes_mem.host;
    d->scales = (float *)(void *)d->scales_mem.host;
    d->n_slots = n_slots;
    d->slots = calloc((size_t)n_slots, sizeof *d->slots);
    bool staged = !c->maps_host_pages && !d->ops->pack; /* block devices place rows as they are */
    if (staged) d->pack_stage = malloc(d->slot_code_bytes + (size_t)max_n * sizeof(float));
    if (rc == DEV_OK && (!d->slots || (staged && !d->pack_stage))) {
        moex_errorf("%s: out of memory for %d slots of %llu bytes", name, n_slots, (unsigned long long)slot_bytes);
        rc = DEV_E_NOMEM;
    }
    if (rc == DEV_OK && d->ops->pool_alloc) rc = d->ops->pool_alloc(d);
    if (rc != DEV_OK) {
        if (rc == DEV_E_DEVMEM) d->counters.failed_allocs++;
        pool_free(d);
        return rc;
    }
    d->counters.resident_bytes += pool_bytes;
    return DEV_OK;
}

int dev_pool_alloc(struct dev *d, int n_slots, int64_t slot_values, int max_n) {
    if (!d) return moex_errorf("dev_pool_alloc: no device"), DEV_E_ARG;
    return pool_alloc(d, n_slots, NULL, slot_values, max_n);
}

int dev_pool_alloc_sized(struct dev *d, int n_slots, const uint64_t *code_bytes, int64_t slot_values, int max_n) {
    if (!d || !code_bytes) return moex_errorf("dev_pool_alloc_sized: no device or sizes"), DEV_E_ARG;
    if (d->caps.compute != DEV_COMPUTE_BLOCKS)
        return moex_errorf("%s: slots of their own sizes are for block devices", d->caps.name), DEV_E_ARG;
    if (n_slots < 1) return moex_errorf("%s: a pool of %d sized slots", d->caps.name, n_slots), DEV_E_ARG;
    return pool_alloc(d, n_slots, code_bytes, slot_values, max_n);
}

int dev_buffer_alloc(struct dev *d, uint64_t bytes, int *buf) {
    if (!d || !buf) return moex_errorf("dev_buffer_alloc: no device or result pointer"), DEV_E_ARG;
    *buf = -1;
    const char *name = d->caps.name;
    if (bytes == 0 || bytes > ((uint64_t)1 << 40))
        return moex_errorf("%s: a buffer of %llu bytes", name, (unsigned long long)bytes), DEV_E_ARG;
    if (d->n_buffers == DEV_MAX_BUFFERS)
        return moex_errorf("%s: %d buffers already", name, DEV_MAX_BUFFERS), DEV_E_DEVMEM;
    uint64_t counted = dev_mem_bytes(d, bytes);
    if (d->budget_bytes && d->counters.resident_bytes + counted > d->budget_bytes)
        return moex_errorf("%s: a staging buffer of %llu bytes does not fit the budget of %llu bytes (%llu resident)",
                           name, (unsigned long long)bytes, (unsigned long long)d->budget_bytes,
                           (unsigned long long)d->counters.resident_bytes),
               DEV_E_BUDGET;
    dev_stream_drain(d);
    int rc = region_alloc(d, bytes, 0, &d->buffers[d->n_buffers]);
    if (rc != DEV_OK) {
        if (rc == DEV_E_DEVMEM) d->counters.failed_allocs++;
        return rc;
    }
    *buf = d->n_buffers++;
    d->counters.resident_bytes += counted;
    d->counters.staging_bytes += counted;
    return DEV_OK;
}

uint64_t dev_buffer_bytes(const struct dev *d, int buf) {
    return d && buf >= 0 && buf < d->n_buffers ? d->buffers[buf].bytes : 0;
}

int dev_buffer_count(const struct dev *d) { return d ? d->n_buffers : 0; }

/* The host address of bytes [ref.offset, + bytes) of a buffer, or NULL. */
static int8_t *resolve(const struct dev *d, struct dev_ref ref, uint64_t bytes) {
    if (ref.buf < 0 || ref.buf >= d->n_buffers) return NULL;
    const struct dev_region *r = &d->buffers[ref.buf];
    if (ref.offset > r->bytes || bytes > r->bytes - ref.offset) return NULL;
    return r->host + ref.offset;
}

static int copy_check(struct dev *d, struct dev_ref ref, const void *host, uint64_t bytes, const char *what) {
    if (!d) return moex_errorf("%s: no device", what), DEV_E_ARG;
    if (!host || !resolve(d, ref, bytes))
        return moex_errorf("%s: %s of %llu bytes at offset %llu of buffer %d (%d buffers)", d->caps.name, what,
                           (unsigned long long)bytes, (unsigned long long)ref.offset, ref.buf, d->n_buffers),
               DEV_E_ARG;
    dev_stream_drain(d);
    return DEV_OK;
}

int dev_write(struct dev *d, struct dev_ref dst, const void *src, uint64_t bytes) {
    int rc = copy_check(d, dst, src, bytes, "dev_write");
    if (rc != DEV_OK) return rc;
    dev_mem_open(d);
    rc = dev_mem_put(d, resolve(d, dst, bytes), src, bytes);
    dev_mem_close(d);
    if (rc != DEV_OK) return rc;
    d->counters.uploads++;
    d->counters.upload_bytes += bytes;
    return DEV_OK;
}

int dev_read(struct dev *d, struct dev_ref src, void *dst, uint64_t bytes) {
    int rc = copy_check(d, src, dst, bytes, "dev_read");
    if (rc != DEV_OK) return rc;
    dev_mem_open(d);
    rc = dev_mem_get(d, dst, resolve(d, src, bytes), bytes);
    dev_mem_close(d);
    if (rc != DEV_OK) return rc;
    d->counters.downloads++;
    d->counters.download_bytes += bytes;
    return DEV_OK;
}

int dev_pool_slots(const struct dev *d) { return d ? d->n_slots : 0; }

/* What a submission can be refused for when queued: its form. */
static int check_jobs(const struct dev *d, const struct dev_job *jobs, int n_jobs) {
    const char *name = d->caps.name;
    if (!d->slots) return moex_errorf("%s: submit before the slot pool is allocated", name), DEV_E_STATE;
    if (n_jobs < 1 || n_jobs > d->caps.max_jobs || !jobs)
        return moex_errorf("%s: %d jobs in a submission (1..%d)", name, n_jobs, d->caps.max_jobs), DEV_E_ARG;
    for (int j = 0; j < n_jobs; j++) {
        const struct dev_job *job = &jobs[j];
        if (job->slot < 0 || job->slot >= d->n_slots)
            return moex_errorf("%s: job %d: slot %d of %d", name, j, job->slot, d->n_slots), DEV_E_ARG;
        if (job->m < 1 || !resolve(d, job->act, 0) || !resolve(d, job->act_scale, 0) || !resolve(d, job->out, 0) ||
            job->act_scale.offset % sizeof(float) || job->out.offset % sizeof(float))
            return moex_errorf("%s: job %d: m %d, or a buffer that is not the device's, or misaligned floats", name, j,
                               job->m),
                   DEV_E_ARG;
    }
    return DEV_OK;
}

/* What it can fail for when it runs: the slots' tenants then (packs queued
 * before it may have changed them) and the ranges their shapes need. */
static int check_run(const struct dev *d, const struct dev_job *jobs, int n_jobs) {
    const char *name = d->caps.name;
    for (int j = 0; j < n_jobs; j++) {
        const struct dev_job *job = &jobs[j];
        const struct dev_slot *s = &d->slots[job->slot];
        if (s->N == 0) return moex_errorf("%s: job %d: slot %d is empty", name, j, job->slot), DEV_E_STATE;
        if (job->out_stride < (size_t)s->N)
            return moex_errorf("%s: job %d: out stride %zu for N %d", name, j, job->out_stride, s->N), DEV_E_ARG;
        uint64_t m = (uint64_t)job->m;
        uint64_t out_bytes = ((m - 1) * job->out_stride + (uint64_t)s->N) * sizeof(float);
        bool blocks = d->caps.compute == DEV_COMPUTE_BLOCKS; /* f32 rows; act_scale: their q8 scratch */
        if (blocks && job->act.offset % sizeof(float))
            return moex_errorf("%s: job %d: rows of floats at a misaligned offset", name, j), DEV_E_ARG;
        if (!resolve(d, job->act, m * (uint64_t)s->K * (blocks ? sizeof(float) : 1)) ||
            !resolve(d, job->act_scale, blocks ? dev_act_q8_bytes(job->m, s->K) : m * sizeof(float)) ||
            !resolve(d, job->out, out_bytes))
            return moex_errorf("%s: job %d: a range past the end of its staging buffer", name, j), DEV_E_ARG;
    }
    return DEV_OK;
}

int dev_submit(struct dev *d, const struct dev_job *jobs, int n_jobs, dev_fence *fence) {
    if (!d) return moex_errorf("dev_submit: no device"), DEV_E_ARG;
    int rc = check_jobs(d, jobs, n_jobs);
    if (rc != DEV_OK) {
        dev_stream_drain(d);
        d->counters.failed_submissions++;
        return rc;
    }
    return dev_stream_submit(d, jobs, n_jobs, fence);
}

int dev_enqueue_host(struct dev *d, dev_host_fn fn, void *arg, dev_fence *fence) {
    if (!d || !fn) return moex_errorf("dev_enqueue_host: no device or function"), DEV_E_ARG;
    return dev_stream_host(d, fn, arg, fence);
}

int dev_wait(struct dev *d, dev_fence fence) {
    if (!d) return moex_errorf("dev_wait: no device"), DEV_E_ARG;
    return dev_stream_wait(d, fence);
}

int dev_run(struct dev *d, const struct dev_job *jobs, int n_jobs) {
    dev_fence f;
    int rc = dev_submit(d, jobs, n_jobs, &f);
    return rc != DEV_OK ? rc : dev_wait(d, f);
}

int dev_execute(struct dev *d, const struct dev_job *jobs, int n_jobs) {
    int rc = check_run(d, jobs, n_jobs);
    if (rc != DEV_OK) {
        d->counters.failed_submissions++;
        return rc;
    }
    struct dev_exec_job run[DEV_MAX_JOBS];
    for (int j = 0; j < n_jobs; j++) {
        const struct dev_job *job = &jobs[j];
        run[j] = (struct dev_exec_job){job->slot, job->m, resolve(d, job->act, 0),
                                       (const float *)(void *)resolve(d, job->act_scale, 0),
                                       (float *)(void *)resolve(d, job->out, 0), job->out_stride};
    }
    uint64_t modelled = 0;
    int64_t t0 = time_ns();
    dev_mem_open(d);
    rc = d->ops->submit(d, run, n_jobs, &modelled);
    dev_mem_close(d);
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
    dev_stream_drain((struct dev *)d); /* the stream's worker writes them */
    *c = d->counters;
}
