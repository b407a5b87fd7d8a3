/* The cuda device (dev_cuda.c) beyond dev.h: what it reports of the GPU and
 * of its own work, the kernels' host twins, and its probe. docs/cuda.md
 * says what runs where and what the executor must give it. */
#ifndef MOEX_DEV_CUDA_H
#define MOEX_DEV_CUDA_H

#include "dev/cuda/layer.h"
#include "dev/dev.h"

#include <stdio.h>

struct dev_cuda_info {
    struct cuda_props props;
    const char *layer;            /* "driver", or a test's fake */
    uint64_t vram_bytes;          /* device memory the device holds now (allocations, whole granules) */
    uint64_t vram_peak;
    uint64_t launches;            /* kernel launches */
    uint64_t launch_jobs;         /* jobs over those launches */
    uint64_t copies_in, copy_in_bytes, copies_out, copy_out_bytes;
    uint64_t faults;              /* failed copies, launches and waits */
    uint64_t free_now;            /* the driver's free device memory at this call (0 if it cannot say) */
    const char *fault;            /* the first failure's message; NULL while none */
};

/* DEV_E_ARG when d is not a cuda device. */
int dev_cuda_info(const struct dev *d, struct dev_cuda_info *out);

/* What one kernel launch computes for one job, on the host (dev_cuda_ref.c);
 * the job's addresses are host pointers. */
void cuda_ref_run(enum cuda_kernel kernel, const struct cuda_job_desc *job);

/* moex probe on a block device: opens `device` for DEV_COMPUTE_BLOCKS and,
 * when it is one, writes its name, memory, compute capability, GEMV and
 * GEMM rates on Q4_K weights of each shape (K x N) and rows of ms, and
 * host<->device bandwidth to out. 1 when the device opens but is no block
 * device (the caller probes it as W8A8), 0 when done, a dev_status when it
 * cannot open (the reason in moex_error()). */
int dev_cuda_probe(FILE *out, const char *device, const int *shape_k, const int *shape_n, int n_shapes,
                   const int64_t *ms, int n_m);

#endif
