/* The cuda device: a block device (DEV_COMPUTE_BLOCKS) on an NVIDIA GPU.
 * Every call to the GPU goes through a CUDA layer (cuda/layer.h): the
 * driver's (dev_cuda_driver.c), or a test's fake.
 *
 * Its memory is VRAM: the slot pool (resident weights, each slot the GGUF
 * rows of one weight as they are in the file) and the staging buffers
 * (activations, their q8 copies, outputs) are device allocations made once,
 * plus the jobs' descriptor array; all of it counts in the budget, which is
 * never more than the VRAM free when the device opened. Region host fields
 * hold device addresses, which only the layer's copies touch: host bytes go
 * through a pinned staging buffer.
 *
 * A submission is at most three launches on the compute stream whatever its
 * number of jobs (all routed experts of a layer): the q8 quantizer over the
 * rows of the small-M jobs, the GEMV over those jobs, the GEMM over the
 * others; their descriptors go up in one copy first, an event after the
 * launches is the fence the stream's worker waits on. A failed copy, launch
 * or wait is a fault: the device refuses everything after it with the
 * first message, so that the caller runs the rest on the CPU. */
#include "dev/dev_cuda.h"

#include "core/error.h"
#include "dev/cuda/qblock.h"
#include "dev/dev_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static_assert(sizeof(struct qb_q8) == 40, "dev_act_q8_bytes counts 40 bytes per 32 values");
static_assert(sizeof(struct cuda_job_desc) == 64, "kernels.cu reads 64-byte descriptors");

/* Host bytes go to and from VRAM through this much pinned memory, in two
 * halves: the host fills one while the other's copy runs. */
#define CUDA_STAGING_BYTES ((uint64_t)8 << 20)
#define CUDA_STAGING_HALF (CUDA_STAGING_BYTES / 2)
/* Events: the two staging halves' last copies, then the submissions' fences in turn. */
#define CUDA_EVENT_STAGING 0
#define CUDA_EVENT_FENCES 2
/* VRAM the budget leaves to the driver when the free memory bounds it (the
 * module, the launches' local memory). */
#define CUDA_VRAM_RESERVE ((uint64_t)256 << 20)
/* cuMemAlloc hands out whole 2 MiB pages of the GPU's virtual memory (the
 * allocation granularity cuMemGetAllocationGranularity reports on sm_70 and
 * later): device memory is counted in them. */
#define CUDA_GRANULE ((uint64_t)2 << 20)
#define CUDA_DESCS (2 * DEV_MAX_JOBS)

struct cuda_dev {
    const struct cuda_layer *L;
    struct dev_cuda_info info;
    enum qtype *tenant_type;         /* (n_slots) each slot's weight type */
    cuda_ptr descs;                  /* (CUDA_DESCS) struct cuda_job_desc in VRAM */
    uint64_t descs_counted;
    struct cuda_job_desc *descs_host; /* (CUDA_DESCS) pinned */
    int8_t *staging;                 /* (CUDA_STAGING_BYTES) pinned */
    int next_event;
    char fault[256];
    char description[192]; /* caps.description */
};

static const struct cuda_layer *layer_override;

void cuda_layer_override(const struct cuda_layer *layer) { layer_override = layer; }

static cuda_ptr dptr(const void *p) { return (cuda_ptr)(uintptr_t)p; }

/* A failed copy, launch or wait: the device is lost for this run. */
static int fault(struct dev *d, int rc) {
    struct cuda_dev *cd = d->backend;
    if (!cd->fault[0]) {
        snprintf(cd->fault, sizeof cd->fault, "%s", moex_error());
        cd->info.fault = cd->fault;
    }
    cd->info.faults++;
    return rc;
}

static int refuse_after_fault(const struct cuda_dev *cd) {
    if (!cd->fault[0]) return DEV_OK;
    return moex_errorf("cuda: the device failed earlier (%s); its work runs on the CPU", cd->fault), DEV_E_SUBMIT;
}

static void count_vram(struct cuda_dev *cd, int64_t bytes) {
    uint64_t counted = ((uint64_t)(bytes < 0 ? -bytes : bytes) + CUDA_GRANULE - 1) / CUDA_GRANULE * CUDA_GRANULE;
    if (bytes < 0) cd->info.vram_bytes -= counted;
    else cd->info.vram_bytes += counted;
    if (cd->info.vram_bytes > cd->info.vram_peak) cd->info.vram_peak = cd->info.vram_bytes;
}

static void release(struct cuda_dev *cd) {
    const struct cuda_layer *L = cd->L;
    if (cd->descs) L->mem_free(L->ctx, cd->descs);
    if (cd->descs_host) L->host_free(L->ctx, cd->descs_host);
    if (cd->staging) L->host_free(L->ctx, cd->staging);
    L->fini(L->ctx);
    free(cd->tenant_type);
    free(cd);
}

static int cuda_open(struct dev *d, const struct dev_options *opt) {
    (void)opt; /* the budget is d's; threads are dev.c's */
    const struct cuda_layer *L = layer_override ? layer_override : cuda_driver_layer();
    struct cuda_dev *cd = calloc(1, sizeof *cd);
    if (!cd) return moex_errorf("cuda: out of memory"), DEV_E_NOMEM;
    cd->L = L;
    cd->info.layer = L->name;
    int rc = L->init(L->ctx, 0, &cd->info.props);
    if (rc != DEV_OK) {
        free(cd);
        return rc;
    }
    const struct cuda_props *p = &cd->info.props;
    if (!d->slot_type) d->slot_type = QT_Q8_0; /* the widest type a slot holds (dev_set_slot_type) */
    if (!d->open_blocks) {
        moex_errorf("cuda: %s computes on GGUF blocks with f32 activations; this caller drives W8A8 devices only "
                    "(docs/cuda.md)", p->name);
        rc = DEV_E_UNAVAILABLE;
    } else if (!qb_block_values(d->slot_type)) {
        moex_errorf("cuda: slots for %s weights (expected Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K or Q6_K)",
                    quant_type_name(d->slot_type));
        rc = DEV_E_OPTION;
    }
    if (rc != DEV_OK) {
        L->fini(L->ctx);
        free(cd);
        return rc;
    }
    d->backend = cd;
    d->layout = PACK_ROWS; /* not read: slots hold GGUF rows (dev_load_packed refuses) */
    uint64_t room = p->free_bytes > CUDA_VRAM_RESERVE ? p->free_bytes - CUDA_VRAM_RESERVE : 0;
    if (d->budget_bytes == 0 || d->budget_bytes > room) d->budget_bytes = room;
    snprintf(cd->description, sizeof cd->description, "%s, compute capability %d.%d, %.1f GiB (GGUF blocks resident)",
             p->name, p->cc_major, p->cc_minor, (double)p->total_bytes / (double)(1u << 30));
    d->caps = (struct dev_caps){
        .name = "cuda",
        .description = cd->description,
        .compute = DEV_COMPUTE_BLOCKS,
        .min_m = 1, /* resident weights beat the CPU from one row on: VRAM outruns host memory */
        .k_multiple = QB_CHUNK, /* the activations' q8 blocks; a weight's own blocks are its type's business */
        .n_multiple = 1,
        .k_max = PACK_MAX_K,
        .n_max = 1 << 20,
        .max_jobs = DEV_MAX_JOBS,
        .modelled_time = false,
        /* Planner figures until moex probe --device cuda measures them: ~5-10 us
         * per launch (DESIGN.md), weights read at ~3 TB/s (an H100/H200's HBM),
         * ~100 TMAC/s on f16 tensor cores. */
        .submit_ns = 3 * 8e3,
        .job_ns = 0,
        .weight_ns_per_byte = 1.0 / 3000.0,
        .ns_per_mac = 1.0 / 100e3,
        .pack_ns_per_value = 0.0, /* the rows are copied, not packed */
        .upload_ns_per_byte = 1.0 / 20.0, /* ~20 GB/s through pinned staging (PCIe 4/5) */
        .maps_host_pages = false,
        .mem_granule = CUDA_GRANULE,
        .block_types = 1ull << QT_Q4_0 | 1ull << QT_Q4_1 | 1ull << QT_Q5_0 | 1ull << QT_Q5_1 | 1ull << QT_Q8_0 |
                       1ull << QT_Q4_K | 1ull << QT_Q5_K | 1ull << QT_Q6_K,
    };
    uint64_t desc_bytes = CUDA_DESCS * sizeof(struct cuda_job_desc);
    cd->descs_counted = (desc_bytes + CUDA_GRANULE - 1) / CUDA_GRANULE * CUDA_GRANULE;
    if (cd->descs_counted > d->budget_bytes) {
        moex_errorf("cuda: a budget of %llu bytes holds not even the jobs' descriptors (%llu bytes)",
                    (unsigned long long)d->budget_bytes, (unsigned long long)cd->descs_counted);
        rc = DEV_E_BUDGET;
    }
    if (rc == DEV_OK) rc = L->mem_alloc(L->ctx, desc_bytes, &cd->descs);
    if (rc == DEV_OK) rc = L->host_alloc(L->ctx, desc_bytes, (void **)&cd->descs_host);
    if (rc == DEV_OK) rc = L->host_alloc(L->ctx, CUDA_STAGING_BYTES, (void **)&cd->staging);
    if (rc != DEV_OK) {
        release(cd);
        d->backend = NULL;
        return rc;
    }
    count_vram(cd, (int64_t)desc_bytes);
    d->caps.fixed_bytes = cd->descs_counted;
    d->counters.resident_bytes += cd->descs_counted;
    d->counters.staging_bytes += cd->descs_counted;
    return DEV_OK;
}

static void cuda_close(struct dev *d) {
    if (d->backend) release(d->backend);
    d->backend = NULL;
}

static int cuda_mem_alloc(struct dev *d, uint64_t bytes, struct dev_region *r) {
    struct cuda_dev *cd = d->backend;
    cuda_ptr p = 0;
    int rc = cd->L->mem_alloc(cd->L->ctx, bytes, &p);
    if (rc != DEV_OK) return rc;
    r->host = (int8_t *)(uintptr_t)p;
    r->bytes = bytes;
    r->handle = 0;
    count_vram(cd, (int64_t)bytes);
    return DEV_OK;
}

static void cuda_mem_free(struct dev *d, struct dev_region *r) {
    struct cuda_dev *cd = d->backend;
    cd->L->mem_free(cd->L->ctx, dptr(r->host));
    count_vram(cd, -(int64_t)r->bytes);
}

/* Host bytes into VRAM through the pinned staging halves on the copy
 * stream: half h is refilled once its previous copy's event has passed, so
 * the host's memcpy of one chunk overlaps the DMA of the one before. */
static int cuda_mem_write(struct dev *d, int8_t *dst, const void *src, uint64_t bytes) {
    struct cuda_dev *cd = d->backend;
    const struct cuda_layer *L = cd->L;
    int rc = refuse_after_fault(cd);
    if (rc != DEV_OK) return rc;
    bool pending[2] = {false, false};
    int h = 0;
    for (uint64_t done = 0; rc == DEV_OK && done < bytes; done += CUDA_STAGING_HALF, h ^= 1) {
        uint64_t n = bytes - done < CUDA_STAGING_HALF ? bytes - done : CUDA_STAGING_HALF;
        int8_t *half = cd->staging + (size_t)h * CUDA_STAGING_HALF;
        if (pending[h]) rc = L->event_sync(L->ctx, CUDA_EVENT_STAGING + h);
        if (rc != DEV_OK) break;
        memcpy(half, (const int8_t *)src + done, (size_t)n);
        rc = L->copy_h2d(L->ctx, dptr(dst) + done, half, n, 1);
        if (rc == DEV_OK) rc = L->event_record(L->ctx, CUDA_EVENT_STAGING + h, 1);
        pending[h] = true;
        cd->info.copies_in++;
        cd->info.copy_in_bytes += n;
    }
    if (rc == DEV_OK) rc = L->stream_sync(L->ctx, 1);
    return rc == DEV_OK ? DEV_OK : fault(d, rc);
}

static int cuda_mem_read(struct dev *d, void *dst, const int8_t *src, uint64_t bytes) {
    struct cuda_dev *cd = d->backend;
    const struct cuda_layer *L = cd->L;
    int rc = refuse_after_fault(cd);
    for (uint64_t done = 0; rc == DEV_OK && done < bytes; done += CUDA_STAGING_BYTES) {
        uint64_t n = bytes - done < CUDA_STAGING_BYTES ? bytes - done : CUDA_STAGING_BYTES;
        rc = L->copy_d2h(L->ctx, cd->staging, dptr(src) + done, n, 1);
        if (rc == DEV_OK) rc = L->stream_sync(L->ctx, 1);
        if (rc != DEV_OK) return fault(d, rc);
        memcpy((int8_t *)dst + done, cd->staging, (size_t)n);
        cd->info.copies_out++;
        cd->info.copy_out_bytes += n;
    }
    return rc;
}

static int cuda_pool_alloc(struct dev *d) {
    struct cuda_dev *cd = d->backend;
    cd->tenant_type = calloc((size_t)d->n_slots, sizeof *cd->tenant_type);
    return cd->tenant_type ? DEV_OK : (moex_errorf("cuda: out of memory"), DEV_E_NOMEM);
}

static int cuda_pack(struct dev *d, int slot, enum qtype type, const void *data, int K, int N) {
    struct cuda_dev *cd = d->backend;
    if (!qb_block_values(type))
        return moex_errorf("cuda: %s weights stay on the CPU (the device computes on Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, "
                           "Q4_K, Q5_K and Q6_K)", quant_type_name(type)),
               DEV_E_TYPE;
    uint64_t bytes = quant_row_size(type, K) * (uint64_t)N;
    if (K % qb_block_values(type) || bytes > dev_slot_capacity(d, slot))
        return moex_errorf("cuda: a %d x %d %s weight (%llu bytes) does not fit slot %d of %llu bytes", K, N,
                           quant_type_name(type), (unsigned long long)bytes, slot,
                           (unsigned long long)dev_slot_capacity(d, slot)),
               DEV_E_SHAPE;
    int rc = cuda_mem_write(d, (int8_t *)dev_slot_codes(d, slot), data, bytes);
    if (rc != DEV_OK) return rc;
    cd->tenant_type[slot] = type;
    return DEV_OK;
}

static uint64_t cuda_slot_used_bytes(const struct dev *d, int slot) {
    const struct cuda_dev *cd = d->backend;
    return quant_row_size(cd->tenant_type[slot], d->slots[slot].K) * (uint64_t)d->slots[slot].N;
}

static uint32_t div_up(uint64_t a, uint64_t b) { return (uint32_t)((a + b - 1) / b); }

/* The launch plan: descriptors of the small-M jobs twice (the quantizer's
 * tiles, then the GEMV's), then the large-M jobs' (the GEMM's); each
 * launch's tiles numbered from 0 through its jobs. Returns the launches;
 * *n_descs: the descriptors written. */
static int plan(const struct dev *d, const struct dev_exec_job *jobs, int n_jobs, struct cuda_job_desc *desc,
                struct cuda_launch launches[3], cuda_ptr descs, uint64_t *n_descs) {
    const struct cuda_dev *cd = d->backend;
    int n_small = 0, n_large = 0;
    for (int j = 0; j < n_jobs; j++) {
        if (jobs[j].m <= CUDA_GEMV_MAX_M) n_small++;
        else n_large++;
    }
    struct cuda_job_desc *quant = desc, *gemv = desc + n_small, *gemm = desc + 2 * n_small;
    uint32_t t_quant = 0, t_gemv = 0, t_gemm = 0;
    int i_small = 0, i_large = 0;
    for (int j = 0; j < n_jobs; j++) {
        const struct dev_exec_job *job = &jobs[j];
        const struct dev_slot *s = &d->slots[job->slot];
        enum qtype type = cd->tenant_type[job->slot];
        struct cuda_job_desc jd = {
            .w = dptr(dev_slot_codes(d, job->slot)),
            .act = dptr(job->act),
            .act_q8 = dptr(job->act_scale), /* a block device's q8 scratch */
            .out = dptr(job->out),
            .out_stride = (uint32_t)job->out_stride,
            .type = (int32_t)type,
            .K = s->K,
            .N = s->N,
            .m = job->m,
            .row_bytes = (uint32_t)quant_row_size(type, s->K),
        };
        if (job->m <= CUDA_GEMV_MAX_M) {
            quant[i_small] = gemv[i_small] = jd;
            quant[i_small].first_tile = t_quant;
            gemv[i_small].first_tile = t_gemv;
            t_quant += div_up((uint64_t)job->m * (uint64_t)(s->K / QB_CHUNK), CUDA_QUANT_CHUNKS);
            t_gemv += div_up((uint64_t)s->N, CUDA_GEMV_COLS);
            i_small++;
        } else {
            gemm[i_large] = jd;
            gemm[i_large].first_tile = t_gemm;
            t_gemm += div_up((uint64_t)job->m, CUDA_GEMM_TILE_M) * div_up((uint64_t)s->N, CUDA_GEMM_TILE_N);
            i_large++;
        }
    }
    int n = 0;
    const uint64_t size = sizeof *desc;
    *n_descs = 2 * (uint64_t)n_small + (uint64_t)n_large;
    if (n_small) {
        launches[n++] = (struct cuda_launch){CUDA_K_QUANTIZE, descs, n_small, t_quant};
        launches[n++] = (struct cuda_launch){CUDA_K_GEMV, descs + (uint64_t)n_small * size, n_small, t_gemv};
    }
    if (n_large)
        launches[n++] = (struct cuda_launch){CUDA_K_GEMM, descs + 2 * (uint64_t)n_small * size, n_large, t_gemm};
    return n;
}

static int cuda_submit(struct dev *d, const struct dev_exec_job *jobs, int n_jobs, uint64_t *modelled_ns) {
    (void)modelled_ns;
    struct cuda_dev *cd = d->backend;
    const struct cuda_layer *L = cd->L;
    int rc = refuse_after_fault(cd);
    if (rc != DEV_OK) return rc;
    struct cuda_launch launches[3];
    uint64_t n_descs;
    int n_launches = plan(d, jobs, n_jobs, cd->descs_host, launches, cd->descs, &n_descs);
    int event = CUDA_EVENT_FENCES + cd->next_event;
    cd->next_event = (cd->next_event + 1) % (CUDA_EVENTS - CUDA_EVENT_FENCES);
    rc = L->copy_h2d(L->ctx, cd->descs, cd->descs_host, n_descs * sizeof(struct cuda_job_desc), 0);
    for (int l = 0; l < n_launches && rc == DEV_OK; l++) rc = L->launch(L->ctx, &launches[l], 0);
    if (rc == DEV_OK) rc = L->event_record(L->ctx, event, 0);
    if (rc == DEV_OK) rc = L->event_sync(L->ctx, event);
    if (rc != DEV_OK) return fault(d, rc);
    cd->info.launches += (uint64_t)n_launches;
    for (int l = 0; l < n_launches; l++) cd->info.launch_jobs += (uint64_t)launches[l].n_jobs;
    return DEV_OK;
}

int dev_cuda_info(const struct dev *d, struct dev_cuda_info *out) {
    if (!d || d->ops != &dev_cuda_ops || !out) return moex_errorf("dev_cuda_info: not a cuda device"), DEV_E_ARG;
    const struct cuda_dev *cd = d->backend;
    *out = cd->info;
    uint64_t total = 0;
    if (cd->fault[0] || cd->L->mem_info(cd->L->ctx, &out->free_now, &total) != DEV_OK) out->free_now = 0;
    return DEV_OK;
}

const struct dev_ops dev_cuda_ops = {
    .open = cuda_open,
    .close = cuda_close,
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .pool_alloc = cuda_pool_alloc,
    .submit = cuda_submit,
    .mem_write = cuda_mem_write,
    .mem_read = cuda_mem_read,
    .pack = cuda_pack,
    .slot_used_bytes = cuda_slot_used_bytes,
};
