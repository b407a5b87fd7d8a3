/* The driver CUDA layer: libcuda.so.1 loaded at run time (dlopen), the
 * driver API's few calls the cuda device makes, and the kernels' fatbin
 * (sm_90 code and compute_75 PTX, embedded in the library at build time)
 * loaded as a module. Nothing links against CUDA: on a machine without the
 * NVIDIA driver the library loads and runs as it does without this file,
 * and opening the device says why it cannot.
 *
 * The driver API's types and constants are declared here from cuda.h (the
 * values are that header's), so that the file builds without the toolkit. */
#include "dev/cuda/layer.h"
#include "dev/dev.h"

#include "core/error.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_NO_DEVICE = 100,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_STREAM_NON_BLOCKING = 0x1,
    CU_EVENT_DISABLE_TIMING = 0x2,
    CU_MEMHOSTALLOC_PORTABLE = 0x1,
};

#if defined(MOEX_HAVE_CUDA_KERNELS)
extern const unsigned char moex_cuda_fatbin[]; /* the generated kernels_fatbin.c */
int cuda_kernels_built(void) { return 1; }
#else
int cuda_kernels_built(void) { return 0; }
#endif

/* The entry points, by their exported names (cuda.h maps the plain names to these). */
#define CUDA_CALLS(X)                                                                                        \
    X(cuInit, (unsigned))                                                                        \
    X(cuGetErrorString, (CUresult, const char **))                                               \
    X(cuDeviceGetCount, (int *))                                                                 \
    X(cuDeviceGet, (CUdevice *, int))                                                            \
    X(cuDeviceGetName, (char *, int, CUdevice))                                                  \
    X(cuDeviceGetAttribute, (int *, int, CUdevice))                                              \
    X(cuDeviceTotalMem_v2, (size_t *, CUdevice))                                                 \
    X(cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice))                                         \
    X(cuDevicePrimaryCtxRelease_v2, (CUdevice))                                                  \
    X(cuCtxSetCurrent, (CUcontext))                                                              \
    X(cuMemGetInfo_v2, (size_t *, size_t *))                                                     \
    X(cuMemAlloc_v2, (CUdeviceptr *, size_t))                                                    \
    X(cuMemFree_v2, (CUdeviceptr))                                                               \
    X(cuMemHostAlloc, (void **, size_t, unsigned))                                               \
    X(cuMemFreeHost, (void *))                                                                   \
    X(cuMemcpyHtoDAsync_v2, (CUdeviceptr, const void *, size_t, CUstream))                       \
    X(cuMemcpyDtoHAsync_v2, (void *, CUdeviceptr, size_t, CUstream))                             \
    X(cuStreamCreate, (CUstream *, unsigned))                                                    \
    X(cuStreamDestroy_v2, (CUstream))                                                            \
    X(cuStreamSynchronize, (CUstream))                                                           \
    X(cuStreamWaitEvent, (CUstream, CUevent, unsigned))                                          \
    X(cuEventCreate, (CUevent *, unsigned))                                                      \
    X(cuEventDestroy_v2, (CUevent))                                                              \
    X(cuEventRecord, (CUevent, CUstream))                                                        \
    X(cuEventSynchronize, (CUevent))                                                             \
    X(cuModuleLoadData, (CUmodule *, const void *))                                              \
    X(cuModuleUnload, (CUmodule))                                                                \
    X(cuModuleGetFunction, (CUfunction *, CUmodule, const char *))                               \
    X(cuLaunchKernel, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,      \
                       CUstream, void **, void **))

struct driver {
    void *lib;
#define CUDA_FIELD(name, args) CUresult(*name) args;
    CUDA_CALLS(CUDA_FIELD)
#undef CUDA_FIELD
    CUdevice dev;
    CUcontext ctx;
    CUmodule module;
    CUfunction fn[CUDA_K_COUNT];
    CUstream stream[CUDA_STREAMS];
    CUevent event[CUDA_EVENTS];
};

static struct driver g_driver; /* one device per process in this step */

/* What to do about the failures met when opening (CUresult values from cuda.h). */
static const char *hint(CUresult r) {
    switch (r) {
    case 34: return "; the CUDA stub library was loaded, not the NVIDIA driver's libcuda.so.1";
    case 46: return "; the device is unavailable (exclusive mode, or in use)";
    case 209: case 218: case 222:
        return "; the driver cannot load kernels from this nvcc: update the driver, or build with the CUDA "
               "version it supports";
    case 803: return "; the driver's library and its kernel module are different versions";
    default: return "";
    }
}

/* The driver's message for a failed call, as a dev_status. */
static int fail(struct driver *g, CUresult r, const char *what, int status) {
    const char *msg = NULL;
    if (g->cuGetErrorString && g->cuGetErrorString(r, &msg) != CUDA_SUCCESS) msg = NULL;
    moex_errorf("cuda: %s: %s (CUresult %d)%s", what, msg ? msg : "unknown error", r, hint(r));
    return status;
}

/* The context is per thread in the driver API: the stream's worker and the
 * caller both make it theirs before a call. */
static int use(struct driver *g) {
    CUresult r = g->cuCtxSetCurrent(g->ctx);
    return r == CUDA_SUCCESS ? DEV_OK : fail(g, r, "cuCtxSetCurrent", DEV_E_SUBMIT);
}

static const char *const kernel_names[CUDA_K_COUNT] = {"moex_cuda_quantize", "moex_cuda_gemv", "moex_cuda_gemm"};

static void drv_fini(void *ctx);

#if defined(MOEX_HAVE_CUDA_KERNELS)
static int load_symbols(struct driver *g) {
    g->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!g->lib) {
        const char *why = dlerror();
        return moex_errorf("cuda: no NVIDIA driver (libcuda.so.1 cannot be loaded: %s)", why ? why : "not found"),
               DEV_E_UNAVAILABLE;
    }
#define CUDA_LOAD(name, args)                                                                               \
    if (!(*(void **)&g->name = dlsym(g->lib, #name)))                                                         \
        return moex_errorf("cuda: the NVIDIA driver has no %s (too old a driver)", #name), DEV_E_UNAVAILABLE;
    CUDA_CALLS(CUDA_LOAD)
#undef CUDA_LOAD
    return DEV_OK;
}
#endif

static int drv_init(void *ctx, int ordinal, struct cuda_props *props) {
    struct driver *g = ctx;
    memset(props, 0, sizeof *props);
    if (g->lib) return moex_errorf("cuda: the device is open already (one per process)"), DEV_E_UNAVAILABLE;
#if !defined(MOEX_HAVE_CUDA_KERNELS)
    (void)ordinal;
    return moex_errorf("cuda: this moex was built without CUDA (its cmake step says why; -DMOEX_CUDA=ON forces it)"),
           DEV_E_UNAVAILABLE;
#else
    int rc = load_symbols(g);
    if (rc != DEV_OK) {
        drv_fini(g);
        return rc;
    }
    CUresult r = g->cuInit(0);
    int count = 0;
    if (r == CUDA_SUCCESS) r = g->cuDeviceGetCount(&count);
    if (r == CUDA_ERROR_NO_DEVICE || (r == CUDA_SUCCESS && count == 0)) {
        drv_fini(g);
        return moex_errorf("cuda: the NVIDIA driver sees no device"), DEV_E_UNAVAILABLE;
    }
    if (r != CUDA_SUCCESS) {
        rc = fail(g, r, "cuInit", DEV_E_UNAVAILABLE);
        drv_fini(g);
        return rc;
    }
    if (ordinal < 0 || ordinal >= count) {
        drv_fini(g);
        return moex_errorf("cuda: device %d of %d", ordinal, count), DEV_E_UNAVAILABLE;
    }
    size_t total = 0, free_b = 0;
    r = g->cuDeviceGet(&g->dev, ordinal);
    if (r == CUDA_SUCCESS) r = g->cuDeviceGetName(props->name, (int)sizeof props->name, g->dev);
    if (r == CUDA_SUCCESS) r = g->cuDeviceGetAttribute(&props->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, g->dev);
    if (r == CUDA_SUCCESS) r = g->cuDeviceGetAttribute(&props->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, g->dev);
    if (r == CUDA_SUCCESS) r = g->cuDeviceGetAttribute(&props->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, g->dev);
    if (r == CUDA_SUCCESS) r = g->cuDeviceTotalMem_v2(&total, g->dev);
    if (r != CUDA_SUCCESS) {
        rc = fail(g, r, "reading the device's properties", DEV_E_UNAVAILABLE);
        drv_fini(g);
        return rc;
    }
    props->ordinal = ordinal;
    props->total_bytes = total;
    if (props->cc_major * 10 + props->cc_minor < CUDA_MIN_CC_MAJOR * 10 + CUDA_MIN_CC_MINOR) {
        moex_errorf("cuda: %s has compute capability %d.%d; the kernels need %d.%d or newer", props->name,
                    props->cc_major, props->cc_minor, CUDA_MIN_CC_MAJOR, CUDA_MIN_CC_MINOR);
        drv_fini(g);
        return DEV_E_UNAVAILABLE;
    }
    const char *what = "cuDevicePrimaryCtxRetain";
    r = g->cuDevicePrimaryCtxRetain(&g->ctx, g->dev);
    if (r == CUDA_SUCCESS && (what = "cuCtxSetCurrent", r = g->cuCtxSetCurrent(g->ctx)) == CUDA_SUCCESS)
        what = "loading the kernels", r = g->cuModuleLoadData(&g->module, moex_cuda_fatbin);
    for (int k = 0; k < CUDA_K_COUNT && r == CUDA_SUCCESS; k++)
        what = kernel_names[k], r = g->cuModuleGetFunction(&g->fn[k], g->module, kernel_names[k]);
    for (int s = 0; s < CUDA_STREAMS && r == CUDA_SUCCESS; s++)
        what = "cuStreamCreate", r = g->cuStreamCreate(&g->stream[s], CU_STREAM_NON_BLOCKING);
    for (int e = 0; e < CUDA_EVENTS && r == CUDA_SUCCESS; e++)
        what = "cuEventCreate", r = g->cuEventCreate(&g->event[e], CU_EVENT_DISABLE_TIMING);
    if (r == CUDA_SUCCESS) what = "cuMemGetInfo", r = g->cuMemGetInfo_v2(&free_b, &total);
    if (r != CUDA_SUCCESS) {
        rc = fail(g, r, what, DEV_E_UNAVAILABLE);
        drv_fini(g);
        return rc;
    }
    props->free_bytes = free_b;
    return DEV_OK;
#endif
}

static void drv_fini(void *ctx) {
    struct driver *g = ctx;
    if (g->ctx && g->cuCtxSetCurrent(g->ctx) == CUDA_SUCCESS) {
        for (int e = 0; e < CUDA_EVENTS; e++)
            if (g->event[e]) g->cuEventDestroy_v2(g->event[e]);
        for (int s = 0; s < CUDA_STREAMS; s++)
            if (g->stream[s]) g->cuStreamDestroy_v2(g->stream[s]);
        if (g->module) g->cuModuleUnload(g->module);
        g->cuDevicePrimaryCtxRelease_v2(g->dev);
    }
    if (g->lib) dlclose(g->lib);
    memset(g, 0, sizeof *g);
}

static int drv_mem_alloc(void *ctx, uint64_t bytes, cuda_ptr *out) {
    struct driver *g = ctx;
    CUdeviceptr p = 0;
    int rc = use(g);
    if (rc != DEV_OK) return rc;
    CUresult r = g->cuMemAlloc_v2(&p, (size_t)bytes);
    if (r != CUDA_SUCCESS) return fail(g, r, "cuMemAlloc", DEV_E_DEVMEM);
    *out = p;
    return DEV_OK;
}

static void drv_mem_free(void *ctx, cuda_ptr p) {
    struct driver *g = ctx;
    if (use(g) == DEV_OK) g->cuMemFree_v2(p);
}

static int drv_host_alloc(void *ctx, uint64_t bytes, void **out) {
    struct driver *g = ctx;
    int rc = use(g);
    if (rc != DEV_OK) return rc;
    CUresult r = g->cuMemHostAlloc(out, (size_t)bytes, CU_MEMHOSTALLOC_PORTABLE);
    return r == CUDA_SUCCESS ? DEV_OK : fail(g, r, "cuMemHostAlloc", DEV_E_NOMEM);
}

static void drv_host_free(void *ctx, void *p) {
    struct driver *g = ctx;
    if (use(g) == DEV_OK) g->cuMemFreeHost(p);
}

static int drv_copy_h2d(void *ctx, cuda_ptr dst, const void *src, uint64_t bytes, int stream) {
    struct driver *g = ctx;
    int rc = use(g);
    if (rc != DEV_OK) return rc;
    CUresult r = g->cuMemcpyHtoDAsync_v2(dst, src, (size_t)bytes, g->stream[stream]);
    return r == CUDA_SUCCESS ? DEV_OK : fail(g, r, "cuMemcpyHtoDAsync", DEV_E_SUBMIT);
}

static int drv_copy_d2h(void *ctx, void *dst, cuda_ptr src, uint64_t bytes, int stream) {
    struct driver *g = ctx;
    int rc = use(g);
    if (rc != DEV_OK) return rc;
    CUresult r = g->cuMemcpyDtoHAsync_v2(dst, src, (size_t)bytes, g->stream[stream]);
    return r == CUDA_SUCCESS ? DEV_OK : fail(g, r, "cuMemcpyDtoHAsync", DEV_E_SUBMIT);
}

static int drv_launch(void *ctx, const struct cuda_launch *l, int stream) {
    struct driver *g = ctx;
    int rc = use(g);
    if (rc != DEV_OK) return rc;
    static const unsigned threads[CUDA_K_COUNT] = {CUDA_QUANT_CHUNKS, 32 * CUDA_GEMV_COLS, 256};
    CUdeviceptr jobs = l->jobs;
    int n_jobs = l->n_jobs;
    void *args[] = {&jobs, &n_jobs};
    CUresult r = g->cuLaunchKernel(g->fn[l->kernel], l->tiles, 1, 1, threads[l->kernel], 1, 1, 0, g->stream[stream],
                                   args, NULL);
    return r == CUDA_SUCCESS ? DEV_OK : fail(g, r, kernel_names[l->kernel], DEV_E_SUBMIT);
}

static int drv_event_record(void *ctx, int event, int stream) {
    struct driver *g = ctx;
    int rc = use(g);
    if (rc != DEV_OK) return rc;
    CUresult r = g->cuEventRecord(g->event[event], g->stream[stream]);
    return r == CUDA_SUCCESS ? DEV_OK : fail(g, r, "cuEventRecord", DEV_E_SUBMIT);
}

static int drv_stream_wait_event(void *ctx, int stream, int event) {
    struct driver *g = ctx;
    int rc = use(g);
    if (rc != DEV_OK) return rc;
    CUresult r = g->cuStreamWaitEvent(g->stream[stream], g->event[event], 0);
    return r == CUDA_SUCCESS ? DEV_OK : fail(g, r, "cuStreamWaitEvent", DEV_E_SUBMIT);
}

static int drv_event_sync(void *ctx, int event) {
    struct driver *g = ctx;
    int rc = use(g);
    if (rc != DEV_OK) return rc;
    CUresult r = g->cuEventSynchronize(g->event[event]);
    return r == CUDA_SUCCESS ? DEV_OK : fail(g, r, "cuEventSynchronize (a kernel or copy failed)", DEV_E_SUBMIT);
}

static int drv_stream_sync(void *ctx, int stream) {
    struct driver *g = ctx;
    int rc = use(g);
    if (rc != DEV_OK) return rc;
    CUresult r = g->cuStreamSynchronize(g->stream[stream]);
    return r == CUDA_SUCCESS ? DEV_OK : fail(g, r, "cuStreamSynchronize (a kernel or copy failed)", DEV_E_SUBMIT);
}

static int drv_mem_info(void *ctx, uint64_t *free_bytes, uint64_t *total_bytes) {
    struct driver *g = ctx;
    int rc = use(g);
    if (rc != DEV_OK) return rc;
    size_t f = 0, t = 0;
    CUresult r = g->cuMemGetInfo_v2(&f, &t);
    if (r != CUDA_SUCCESS) return fail(g, r, "cuMemGetInfo", DEV_E_SUBMIT);
    *free_bytes = f;
    *total_bytes = t;
    return DEV_OK;
}

static const struct cuda_layer driver_layer = {
    .name = "driver",
    .ctx = &g_driver,
    .init = drv_init,
    .fini = drv_fini,
    .mem_alloc = drv_mem_alloc,
    .mem_free = drv_mem_free,
    .host_alloc = drv_host_alloc,
    .host_free = drv_host_free,
    .copy_h2d = drv_copy_h2d,
    .copy_d2h = drv_copy_d2h,
    .launch = drv_launch,
    .event_record = drv_event_record,
    .stream_wait_event = drv_stream_wait_event,
    .event_sync = drv_event_sync,
    .stream_sync = drv_stream_sync,
    .mem_info = drv_mem_info,
};

const struct cuda_layer *cuda_driver_layer(void) { return &driver_layer; }
