/* The fake CUDA layer of the tests (cuda_fake.h). */
#include "cuda_fake.h"

#include "core/error.h"
#include "dev/cuda/qblock.h"
#include "dev/dev.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_TAG 0x4000000000000000ull /* a non-canonical address: dereferencing it faults */

struct fake F;

void fake_reset(uint64_t total) {
    memset(&F, 0, sizeof F);
    F.total = total;
    F.cc_major = 9;
}

void *host_of(cuda_ptr p, uint64_t bytes) {
    if (!(p & FAKE_TAG)) return NULL;
    int8_t *h = (int8_t *)(uintptr_t)(p & ~FAKE_TAG);
    for (int i = 0; i < F.n_allocs; i++)
        if (h >= F.allocs[i].p && (uint64_t)(h - F.allocs[i].p) + bytes <= F.allocs[i].bytes) return h;
    return NULL;
}

static int sticky(void) {
    return F.faulted ? (moex_errorf("fake: an earlier launch failed (sticky)"), DEV_E_SUBMIT) : DEV_OK;
}

static int fake_init(void *ctx, int ordinal, struct cuda_props *props) {
    (void)ctx;
    memset(props, 0, sizeof *props);
    if (F.init_rc) return moex_errorf("fake: the NVIDIA driver sees no device"), F.init_rc;
    if (F.cc_major * 10 + F.cc_minor < CUDA_MIN_CC_MAJOR * 10 + CUDA_MIN_CC_MINOR)
        return moex_errorf("cuda: Fake GPU has compute capability %d.%d; the kernels need %d.%d or newer", F.cc_major,
                           F.cc_minor, CUDA_MIN_CC_MAJOR, CUDA_MIN_CC_MINOR),
               DEV_E_UNAVAILABLE;
    snprintf(props->name, sizeof props->name, "Fake GPU");
    props->ordinal = ordinal;
    props->cc_major = F.cc_major;
    props->cc_minor = F.cc_minor;
    props->sm_count = 4;
    props->total_bytes = F.total;
    props->free_bytes = F.total - F.allocated;
    return DEV_OK;
}

static void fake_fini(void *ctx) { (void)ctx; }

static int fake_mem_alloc(void *ctx, uint64_t bytes, cuda_ptr *out) {
    (void)ctx;
    if (F.fail_alloc || F.allocated + bytes > F.total || F.n_allocs == FAKE_MAX_ALLOCS)
        return moex_errorf("fake: out of device memory (%llu bytes)", (unsigned long long)bytes), DEV_E_DEVMEM;
    int8_t *p = malloc((size_t)bytes);
    if (!p) return DEV_E_NOMEM;
    memset(p, 0xA5, (size_t)bytes); /* VRAM is not zeroed */
    F.allocs[F.n_allocs].p = p;
    F.allocs[F.n_allocs++].bytes = bytes;
    F.allocated += bytes;
    if (F.allocated > F.peak) F.peak = F.allocated;
    *out = (cuda_ptr)(uintptr_t)p | FAKE_TAG;
    return DEV_OK;
}

static void fake_mem_free(void *ctx, cuda_ptr p) {
    (void)ctx;
    int8_t *h = (int8_t *)(uintptr_t)(p & ~FAKE_TAG);
    for (int i = 0; i < F.n_allocs; i++)
        if (F.allocs[i].p == h) {
            F.allocated -= F.allocs[i].bytes;
            free(h);
            F.allocs[i] = F.allocs[--F.n_allocs];
            return;
        }
    F.bad++;
}

static int fake_host_alloc(void *ctx, uint64_t bytes, void **out) {
    (void)ctx;
    *out = malloc((size_t)bytes);
    if (!*out) return DEV_E_NOMEM;
    F.pinned++;
    return DEV_OK;
}

static void fake_host_free(void *ctx, void *p) {
    (void)ctx;
    free(p);
    F.pinned--;
}

static int fake_copy_h2d(void *ctx, cuda_ptr dst, const void *src, uint64_t bytes, int stream) {
    (void)ctx;
    (void)stream;
    int rc = sticky();
    if (rc != DEV_OK) return rc;
    void *h = host_of(dst, bytes);
    if (!h) return F.bad++, moex_errorf("fake: a copy to no allocation"), DEV_E_SUBMIT;
    memcpy(h, src, (size_t)bytes);
    F.copies_h2d++;
    return DEV_OK;
}

static int fake_copy_d2h(void *ctx, void *dst, cuda_ptr src, uint64_t bytes, int stream) {
    (void)ctx;
    (void)stream;
    int rc = sticky();
    if (rc != DEV_OK) return rc;
    const void *h = host_of(src, bytes);
    if (!h) return F.bad++, moex_errorf("fake: a copy from no allocation"), DEV_E_SUBMIT;
    memcpy(dst, h, (size_t)bytes);
    F.copies_d2h++;
    return DEV_OK;
}

static uint32_t job_tiles(enum cuda_kernel k, const struct cuda_job_desc *j) {
    switch (k) {
    case CUDA_K_QUANTIZE: return (uint32_t)(((uint64_t)j->m * (uint64_t)(j->K / 32) + CUDA_QUANT_CHUNKS - 1) / CUDA_QUANT_CHUNKS);
    case CUDA_K_GEMV: return (uint32_t)((j->N + CUDA_GEMV_COLS - 1) / CUDA_GEMV_COLS);
    default:
        return (uint32_t)(((j->m + CUDA_GEMM_TILE_M - 1) / CUDA_GEMM_TILE_M) *
                          ((j->N + CUDA_GEMM_TILE_N - 1) / CUDA_GEMM_TILE_N));
    }
}

/* A launch: each job's buffers must lie in allocations and its tiles follow
 * the previous job's; then the host twin computes it. */
static int fake_launch(void *ctx, const struct cuda_launch *l, int stream) {
    (void)ctx;
    (void)stream;
    int rc = sticky();
    if (rc != DEV_OK) return rc;
    F.launches++;
    if (F.fail_launch == F.launches) {
        F.faulted = true;
        return moex_errorf("fake: injected failure of launch %d", F.launches), DEV_E_SUBMIT;
    }
    F.kernels[(F.launches - 1) % 16] = l->kernel;
    F.kernel_jobs[(F.launches - 1) % 16] = l->n_jobs;
    const struct cuda_job_desc *descs = host_of(l->jobs, (uint64_t)l->n_jobs * sizeof *descs);
    if (!descs) return F.bad++, moex_errorf("fake: descriptors outside device memory"), DEV_E_SUBMIT;
    uint32_t tile = 0;
    for (int i = 0; i < l->n_jobs; i++) {
        struct cuda_job_desc j = descs[i];
        uint64_t m = (uint64_t)j.m, rows = (uint64_t)j.N * j.row_bytes;
        if (j.first_tile != tile) F.bad++;
        tile += job_tiles(l->kernel, &j);
        void *w = host_of(j.w, rows), *act = host_of(j.act, m * (uint64_t)j.K * 4);
        void *q8 = l->kernel == CUDA_K_GEMM ? NULL : host_of(j.act_q8, dev_act_q8_bytes(j.m, j.K));
        void *out = host_of(j.out, ((m - 1) * j.out_stride + (uint64_t)j.N) * 4);
        if (!w || !act || !out || (l->kernel != CUDA_K_GEMM && !q8) || j.row_bytes != quant_row_size(j.type, j.K))
            return F.bad++, F.faulted = true, moex_errorf("fake: job %d reads or writes outside its buffers", i),
                   DEV_E_SUBMIT;
        j.w = (cuda_ptr)(uintptr_t)w;
        j.act = (cuda_ptr)(uintptr_t)act;
        j.act_q8 = (cuda_ptr)(uintptr_t)q8;
        j.out = (cuda_ptr)(uintptr_t)out;
        cuda_ref_run(l->kernel, &j);
    }
    if (tile != l->tiles) F.bad++;
    return DEV_OK;
}

static int fake_event_record(void *ctx, int event, int stream) {
    (void)ctx;
    (void)event;
    (void)stream;
    return sticky();
}
static int fake_stream_wait_event(void *ctx, int stream, int event) {
    (void)ctx;
    (void)event;
    (void)stream;
    return sticky();
}
static int fake_event_sync(void *ctx, int event) {
    (void)ctx;
    (void)event;
    F.syncs++;
    return sticky();
}
static int fake_stream_sync(void *ctx, int stream) {
    (void)ctx;
    (void)stream;
    F.syncs++;
    return sticky();
}
static int fake_mem_info(void *ctx, uint64_t *free_bytes, uint64_t *total_bytes) {
    (void)ctx;
    *free_bytes = F.total - F.allocated;
    *total_bytes = F.total;
    return DEV_OK;
}

const struct cuda_layer fake_layer = {
    "fake", NULL, fake_init, fake_fini, fake_mem_alloc, fake_mem_free, fake_host_alloc, fake_host_free,
    fake_copy_h2d, fake_copy_d2h, fake_launch, fake_event_record, fake_stream_wait_event, fake_event_sync,
    fake_stream_sync, fake_mem_info,
};
