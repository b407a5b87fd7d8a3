/* Matrix devices: one small interface, several backends.
 *
 *   cpu  plain C int8 GEMM: the reference every other backend equals bit for bit
 *   amx  Intel AMX int8 tiles (TDPBSSD); opening fails cleanly where absent
 *   sim  a model of an RK3588-class NPU: exact results (the cpu kernel), time
 *        from a cost model on a virtual clock, a 32-bit IOVA window, faults
 *
 * Life of a device: open; read its capabilities; allocate the slot pool once
 * (sized by the resident byte budget); pack weights into slots in place, as
 * often as tenants change; submit batches of jobs, each batch one
 * submission that returns when every output is written; close. Nothing is
 * allocated or freed after the pool. Every failure is a dev_status the
 * caller can act on (run the matmul on the CPU and count it); the message
 * is in moex_error(). A device is used by one thread at a time; it spreads
 * its own work (packing; compute on cpu, amx and sim) over the thread pool it
 * was given, so nothing else may run on that pool meanwhile. dev_submit
 * returns when the work is done: to overlap it with CPU work, call it from
 * another thread and give the device threads of its own (n_threads).
 *
 * Numbers are W8A8 (pack/w8a8.h): out = (float)acc * act_scale * channel_scale. */
#ifndef MOEX_DEV_H
#define MOEX_DEV_H

#include "pack/pack.h"
#include "quant/quant.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct threadpool;
struct dev;
struct sim;

enum dev_status {
    DEV_OK = 0,
    DEV_E_ARG = -1,         /* a bad argument: NULL pointer, slot out of range, m < 1, ... */
    DEV_E_UNAVAILABLE = -2, /* the backend cannot run on this machine or build */
    DEV_E_NOMEM = -3,       /* host memory */
    DEV_E_BUDGET = -4,      /* the slot pool does not fit the resident byte budget */
    DEV_E_DEVMEM = -5,      /* device memory: window exhausted, too many buffers, injected */
    DEV_E_SHAPE = -6,       /* K or N outside the envelope or larger than the pool's slots */
    DEV_E_TYPE = -7,        /* the weight type cannot be packed */
    DEV_E_VALUE = -8,       /* the weights hold a NaN or an infinity */
    DEV_E_STATE = -9,       /* no pool yet, pool already allocated, or slot empty */
    DEV_E_SUBMIT = -10,     /* the device failed the submission (outputs untouched) */
    DEV_E_OPTION = -11,     /* a bad option (unknown backend, bad sim figure) */
    DEV_E_LAYOUT = -12,     /* a packed weight in another layout than the device's */
};

struct dev_options {
    uint64_t budget_bytes;   /* resident bytes the device may hold (slot pool included); 0: no limit */
    struct threadpool *pool; /* borrowed threads for packing and host compute; NULL: see n_threads */
    int n_threads;           /* without a pool: threads the device starts itself (<= 1: the caller's only) */
    const char *sim;         /* sim figures: "rk3588" or "rk3588,key=value,..." (NULL: "rk3588") */
};

enum dev_compute { DEV_COMPUTE_W8A8 = 1 };

struct dev_caps {
    const char *name;        /* "cpu", "amx", "sim" */
    const char *description; /* one line for tables and logs */
    enum dev_compute compute;
    int min_m;               /* fewer rows than this run faster on the CPU: route them there */
    int k_multiple, n_multiple; /* the envelope: K % k_multiple == 0, N % n_multiple == 0 */
    int k_max, n_max;
    int max_jobs;            /* jobs one submission takes */
    bool modelled_time;      /* busy and pack times come from a cost model (sim), not a clock */
    /* Cost model for the planner (ns): a submission costs about
     * submit_ns + per job (job_ns + weight bytes * weight_ns_per_byte + m*K*N * ns_per_mac). */
    double submit_ns, job_ns, weight_ns_per_byte, ns_per_mac;
    double pack_ns_per_value; /* host time to pack one weight value */
};

/* One matmul: out[i][n] = act[i] . w[n] for i < m, n < N of the slot's weight. */
struct dev_job {
    int slot;
    int m;                  /* rows, >= 1 */
    const int8_t *act;      /* (m, K) codes, rows K bytes apart */
    const float *act_scale; /* (m) */
    float *out;             /* (m, out_stride): columns 0..N-1 of each row are written */
    size_t out_stride;      /* floats between output rows, >= N */
};

struct dev_counters {
    uint64_t submissions, jobs, rows, macs;
    uint64_t packs, pack_bytes_read, pack_bytes_written;
    uint64_t loads, load_bytes; /* slots filled with packed weights (dev_load_packed) */
    uint64_t busy_ns;        /* in submissions (modelled on sim) */
    uint64_t pack_ns;        /* in packing (modelled on sim) */
    uint64_t load_ns;        /* in dev_load_packed (on sim: the modelled DMA fill of the bytes) */
    uint64_t failed_submissions, failed_packs, failed_allocs; /* failed_packs: loads too */
    uint64_t resident_bytes; /* the slot pool */
};

/* name: "cpu", "amx" or "sim". On failure *out is NULL. */
int dev_open(const char *name, const struct dev_options *opt, struct dev **out);
void dev_close(struct dev *d);
const struct dev_caps *dev_caps(const struct dev *d);

/* Resident bytes of one slot holding a weight of up to slot_values (K * N)
 * values and max_n output channels. */
uint64_t dev_slot_bytes(const struct dev *d, int64_t slot_values, int max_n);
/* Allocates the pool once: n_slots slots (0: as many as the budget holds),
 * each for one weight with K * N <= slot_values and N <= max_n (so that
 * 2048 x 768 and 768 x 2048 share a slot size). */
int dev_pool_alloc(struct dev *d, int n_slots, int64_t slot_values, int max_n);
int dev_pool_slots(const struct dev *d);

/* Packs a GGUF weight (N rows of K values of `type`, rows contiguous) into a
 * slot, replacing its tenant. On failure the slot is empty. */
int dev_pack(struct dev *d, int slot, enum qtype type, const void *data, int K, int N);
/* The shape a slot holds (0, 0 when empty). */
void dev_slot_shape(const struct dev *d, int slot, int *K, int *N);

/* The layout the device's slots hold (pack.h). */
enum pack_layout dev_layout(const struct dev *d);
/* Fills a slot with a weight that is already packed (a pack file's entry):
 * K x N codes in `layout` (pack_bytes of them) and N channel scales, copied
 * in, replacing the tenant. No re-quantization: the slot then holds exactly
 * these bytes. codes NULL: the codes are in the slot already (dev_map_codes)
 * and only the scales are copied. layout must be the device's
 * (DEV_E_LAYOUT), the shape as for dev_pack, scales finite and >= 0
 * (DEV_E_VALUE). Counted as a load; on sim its time is the modelled DMA fill
 * of the codes and scales (fill_gbps), elsewhere the measured copy. On
 * failure the slot is empty. */
int dev_load_packed(struct dev *d, int slot, enum pack_layout layout, const int8_t *codes, const float *scales,
                    int K, int N);
/* Bytes from one slot's codes to the next's (0 before the pool). */
size_t dev_slot_code_stride(const struct dev *d);
/* Backs the codes of slots [first, first + n) with a file's bytes from
 * `offset` on (n strides of them) by a private mapping: the slots read the
 * file's pages, with no copy and no zeroed memory, until written (copy on
 * write). Filling gigabytes of slots then costs the page-table work, not a
 * copy of every byte. The slots are empty until dev_load_packed (codes
 * NULL) fills each. The slots' start, the length and offset must be
 * multiples of the page size (DEV_E_ARG: copy instead); DEV_E_DEVMEM when
 * the mapping fails (the slots keep fresh memory; if even that cannot be
 * restored, the pool shrinks to the slots before `first`). */
int dev_map_codes(struct dev *d, int first, int n, int fd, uint64_t offset);
/* Read-back of what a slot holds: its codes (in the device's layout) and
 * scales, valid until the slot's next pack or load. DEV_E_STATE when empty. */
int dev_slot_data(const struct dev *d, int slot, const int8_t **codes, const float **scales, int *K, int *N);

/* Runs the jobs as one submission and waits for them. */
int dev_submit(struct dev *d, const struct dev_job *jobs, int n_jobs);

/* The cost model's time for these jobs as one submission (ns). */
double dev_estimate_ns(const struct dev *d, const struct dev_job *jobs, int n_jobs);

void dev_get_counters(const struct dev *d, struct dev_counters *c);
/* The model behind a sim device (its clock, window, figures); NULL otherwise. */
struct sim *dev_sim(struct dev *d);

const char *dev_status_string(int status);
/* "cpu amx sim": what dev_open knows, available here or not. */
const char *dev_backend_names(void);

#endif
