/* The CUDA layer: every call the cuda device makes to a GPU, as one table of
 * functions. The driver layer (dev_cuda_driver.c) loads libcuda.so.1 at run
 * time and calls the driver API; tests put a fake underneath (host memory
 * standing for VRAM, launches run by the kernels' host twins of
 * dev_cuda_ref.c), so that everything above it is tested without a GPU.
 *
 * The kernels' parameter blocks are here too: kernels.cu and the host twins
 * read the same structs. */
#ifndef MOEX_DEV_CUDA_LAYER_H
#define MOEX_DEV_CUDA_LAYER_H

#include <stdint.h>

typedef uint64_t cuda_ptr; /* a device address; 0 is none */

/* What init reports of the device it opened. */
struct cuda_props {
    char name[96];
    int ordinal;
    int cc_major, cc_minor;   /* compute capability */
    int sm_count;
    uint64_t total_bytes;     /* the device's memory */
    uint64_t free_bytes;      /* free when opened (the context taken) */
};

/* The oldest GPU the kernels run on: they are built for sm_90 and as PTX
 * for compute_75 (the oldest nvcc 13 targets; dp4a and f16 tensor cores). */
#define CUDA_MIN_CC_MAJOR 7
#define CUDA_MIN_CC_MINOR 5

enum cuda_kernel {
    CUDA_K_QUANTIZE, /* f32 rows -> qb_q8 blocks, every job's rows */
    CUDA_K_GEMV,     /* small-M jobs: dp4a dots, a warp per output channel */
    CUDA_K_GEMM,     /* large-M jobs: tiles dequantized to f16 in shared memory, tensor cores */
    CUDA_K_COUNT,
};

/* One job as a kernel reads it (64 bytes, an array of them in device memory). */
struct cuda_job_desc {
    cuda_ptr w;        /* N rows of raw GGUF blocks, row_bytes apart */
    cuda_ptr act;      /* (m, K) floats */
    cuda_ptr act_q8;   /* (m, K / 32) qb_q8 blocks (CUDA_K_QUANTIZE writes, CUDA_K_GEMV reads) */
    cuda_ptr out;      /* (m, out_stride) floats */
    uint32_t out_stride;
    int32_t type;      /* enum qtype */
    int32_t K, N, m;
    uint32_t row_bytes;
    uint32_t first_tile; /* the job's first tile (thread block) in its launch */
    uint32_t pad;
};

/* A launch over jobs [first, first + n_jobs) of the descriptor array; the
 * grid is tiles thread blocks, each finds its job by first_tile. */
struct cuda_launch {
    enum cuda_kernel kernel;
    cuda_ptr jobs;      /* struct cuda_job_desc[n_jobs] */
    int n_jobs;
    uint32_t tiles;     /* grid size */
};

/* Tiles of each kernel: GEMV_COLS channels (a warp each) per thread block,
 * GEMM_TILE_M x GEMM_TILE_N outputs per block, one 32-value chunk per thread
 * for CUDA_K_QUANTIZE in blocks of QUANT_CHUNKS. */
#define CUDA_GEMV_COLS 8
#define CUDA_GEMV_MAX_M 8 /* jobs of more rows go to the GEMM */
#define CUDA_GEMM_TILE_M 64
#define CUDA_GEMM_TILE_N 64
#define CUDA_GEMM_TILE_K 32
#define CUDA_QUANT_CHUNKS 256

#define CUDA_STREAMS 2 /* 0: compute, 1: copies */
#define CUDA_EVENTS 64

struct cuda_layer {
    const char *name; /* "driver", "fake" */
    void *ctx;
    /* Opens device `ordinal` (context, streams, events, the kernels' module).
     * DEV_E_UNAVAILABLE with the reason in moex_error(): no driver, no
     * device, too old. */
    int (*init)(void *ctx, int ordinal, struct cuda_props *props);
    void (*fini)(void *ctx);
    int (*mem_alloc)(void *ctx, uint64_t bytes, cuda_ptr *out); /* DEV_E_DEVMEM */
    void (*mem_free)(void *ctx, cuda_ptr p);
    int (*host_alloc)(void *ctx, uint64_t bytes, void **out);   /* pinned host memory; DEV_E_NOMEM */
    void (*host_free)(void *ctx, void *p);
    /* Copies queued on a stream, in order with its launches. */
    int (*copy_h2d)(void *ctx, cuda_ptr dst, const void *src, uint64_t bytes, int stream);
    int (*copy_d2h)(void *ctx, void *dst, cuda_ptr src, uint64_t bytes, int stream);
    int (*launch)(void *ctx, const struct cuda_launch *l, int stream);
    /* Events as fences: record one of CUDA_EVENTS on a stream, make another
     * stream wait for it, wait on the host. */
    int (*event_record)(void *ctx, int event, int stream);
    int (*stream_wait_event)(void *ctx, int stream, int event);
    int (*event_sync)(void *ctx, int event);
    int (*stream_sync)(void *ctx, int stream);
    int (*mem_info)(void *ctx, uint64_t *free_bytes, uint64_t *total_bytes);
};

/* The driver layer; its init says why it cannot open (not built with CUDA,
 * no libcuda.so.1, no device, compute capability too old). */
const struct cuda_layer *cuda_driver_layer(void);
/* Whether this build holds the compiled kernels. */
int cuda_kernels_built(void);

/* The layer the next cuda device opens on (NULL: the driver's). For tests. */
void cuda_layer_override(const struct cuda_layer *layer);

#endif
