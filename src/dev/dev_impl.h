/* Internal to src/dev: what a backend provides, and the state dev.c keeps
 * for every device (memory regions, slot pool, stream, counters) so that
 * backends stay small. */
#ifndef MOEX_DEV_IMPL_H
#define MOEX_DEV_IMPL_H

#include "dev/dev.h"
#include "pack/pack.h"

#include <string.h>

/* A job with its buffers resolved to where the backend keeps them in this
 * process: what backends compute on, inside their own calls. */
struct dev_exec_job {
    int slot, m;
    const int8_t *act;
    const float *act_scale;
    float *out;
    size_t out_stride;
};

/* A piece of device memory: where it lies in this process (the backend's
 * arena; touched only inside the device's calls) and the backend's handle. */
struct dev_region {
    int8_t *host;
    uint64_t bytes;
    int handle;
    uint64_t unit; /* in: a piece of device memory holds whole units of this (a slot's codes); 0: any */
};

struct dev_ops {
    /* Plain C check that the backend can run here, before any of its code
     * compiled for a wider ISA does (NULL: always). DEV_OK, or an error
     * with moex_error set. */
    int (*available)(void);
    /* Fills d->caps and d->layout, sets d->backend. Nothing to undo on failure. */
    int (*open)(struct dev *d, const struct dev_options *opt);
    void (*close)(struct dev *d);
    /* Device memory: NULL for host pages (anonymous mappings, dev.c's).
     * mem_alloc fills r->host and r->handle; DEV_E_DEVMEM or DEV_E_NOMEM. */
    int (*mem_alloc)(struct dev *d, uint64_t bytes, struct dev_region *r);
    void (*mem_free)(struct dev *d, struct dev_region *r);
    /* Brackets every access to device memory (the guard); NULL: always open. */
    void (*mem_open)(struct dev *d);
    void (*mem_close)(struct dev *d);
    /* Device-side resources once the pool is laid out (NULL: nothing). */
    int (*pool_alloc)(struct dev *d);
    /* The time a pack of K x N counts (ns): the measured host time, or a
     * model's (which also advances its clock). NULL: measured. */
    uint64_t (*pack_cost)(struct dev *d, int K, int N, uint64_t measured_ns);
    /* Runs validated jobs. *modelled_ns: the submission's time when the
     * device models time (caps.modelled_time), else left alone. */
    int (*submit)(struct dev *d, const struct dev_exec_job *jobs, int n_jobs, uint64_t *modelled_ns);
    /* NULL: the generic formula from caps. */
    double (*estimate)(const struct dev *d, const struct dev_job *jobs, int n_jobs);
    /* A device with windows: which window holds which memory, one line (NULL: none). */
    int (*windows_report)(struct dev *d, char *out, size_t n);
    /* Memory the host cannot address (a region's host field then holds a
     * device address that dev.c never dereferences): copies in and out,
     * complete on return. NULL: memcpy. */
    int (*mem_write)(struct dev *d, int8_t *dst, const void *src, uint64_t bytes);
    int (*mem_read)(struct dev *d, void *dst, const int8_t *src, uint64_t bytes);
    /* Block devices (DEV_COMPUTE_BLOCKS): placing a weight's GGUF rows in a
     * slot (instead of pack_matrix and the upload); the bytes a filled slot
     * holds. Their slot geometry is caps.code_block_* (dev_set_slot_type). */
    int (*pack)(struct dev *d, int slot, enum qtype type, const void *data, int K, int N);
    uint64_t (*slot_used_bytes)(const struct dev *d, int slot);
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
    size_t slot_code_bytes;    /* of every slot; of the largest where slots have sizes of their own */
    uint64_t *slot_offset;     /* (n_slots + 1) block devices' pools of sized slots (dev_pool_alloc_sized):
                                  slot s's codes at codes + slot_offset[s]; NULL: s * slot_code_bytes */
    struct dev_region codes_mem, scales_mem;
    int8_t *codes;       /* codes_mem.host */
    float *scales;       /* scales_mem.host */
    int8_t *pack_stage;  /* a host slot packs go to before the upload; NULL where packs go to the slot */
    struct dev_slot *slots;
    struct dev_region buffers[DEV_MAX_BUFFERS];
    int n_buffers;
    struct dev_counters counters;
    struct dev_stream *stream; /* the worker that runs submissions; NULL: they run on the caller */
    void *backend;
    bool open_blocks;          /* for open: the caller drives DEV_COMPUTE_BLOCKS devices (dev_open_blocks) */
    enum qtype slot_type;      /* block devices: their slots' widest weight type (0 at open: Q8_0) */
};

/* Jobs one submission may hold, on every backend. */
#define DEV_MAX_JOBS 1024

extern const struct dev_ops dev_cpu_ops;
extern const struct dev_ops dev_sim_ops;
extern const struct dev_ops dev_rknpu_ops;
extern const struct dev_ops dev_cuda_ops;
#if defined(__x86_64__)
extern const struct dev_ops dev_amx_ops;
/* amx_detect.c (plain C, safe anywhere): 0 when AMX-INT8 can run in this
 * process (tile data permission granted), else DEV_E_UNAVAILABLE with the
 * reason in moex_error(). */
int amx_request(void);
#endif

/* Device memory access, bracketed for the guard. */
static inline void dev_mem_open(struct dev *d) {
    if (d->ops->mem_open) d->ops->mem_open(d);
}
static inline void dev_mem_close(struct dev *d) {
    if (d->ops->mem_close) d->ops->mem_close(d);
}

/* Copies into and out of device memory (the backend's where the host cannot address it). */
static inline int dev_mem_put(struct dev *d, int8_t *dst, const void *src, uint64_t bytes) {
    if (d->ops->mem_write) return d->ops->mem_write(d, dst, src, bytes);
    memcpy(dst, src, (size_t)bytes);
    return DEV_OK;
}

static inline int dev_mem_get(struct dev *d, void *dst, const int8_t *src, uint64_t bytes) {
    if (d->ops->mem_read) return d->ops->mem_read(d, dst, src, bytes);
    memcpy(dst, src, (size_t)bytes);
    return DEV_OK;
}

/* The stream (dev_stream.c). A command runs fn(d, arg); its status is kept
 * with its fence. */
struct dev_stream;
typedef int (*dev_stream_fn)(struct dev *d, void *arg);
int dev_stream_start(struct dev *d);      /* the worker; DEV_E_NOMEM */
void dev_stream_stop(struct dev *d);      /* drains first */
/* Queues a submission (jobs copied) or a host function; runs it now when
 * the device has no stream. */
int dev_stream_submit(struct dev *d, const struct dev_job *jobs, int n_jobs, dev_fence *fence);
int dev_stream_host(struct dev *d, dev_host_fn fn, void *arg, dev_fence *fence);
int dev_stream_wait(struct dev *d, dev_fence fence);
/* Waits until nothing is queued, unless called from the stream's own thread. */
void dev_stream_drain(struct dev *d);
/* Runs validated jobs now (dev.c): resolves their buffers, calls the backend, counts. */
int dev_execute(struct dev *d, const struct dev_job *jobs, int n_jobs);

/* The reference kernel over a submission (dev_cpu.c), PACK_ROWS slots:
 * exact int32 dots, the W8A8 output rule, jobs' column blocks spread over
 * d->pool. The sim computes with it too. */
void dev_cpu_run(struct dev *d, const struct dev_exec_job *jobs, int n_jobs);

static inline const int8_t *dev_slot_codes(const struct dev *d, int slot) {
    return d->codes + (d->slot_offset ? (size_t)d->slot_offset[slot] : (size_t)slot * d->slot_code_bytes);
}
/* A slot's channel scales: W8A8 slots only (a block device's rows carry
 * their own), max_n floats. */
uint64_t dev_scale_bytes(const struct dev_caps *c, int max_n);

/* The code bytes slot s holds at most. */
static inline uint64_t dev_slot_capacity(const struct dev *d, int slot) {
    return d->slot_offset ? d->slot_offset[slot + 1] - d->slot_offset[slot] : d->slot_code_bytes;
}
static inline const float *dev_slot_scales(const struct dev *d, int slot) {
    return d->scales + (size_t)slot * (size_t)d->max_n;
}

#endif
