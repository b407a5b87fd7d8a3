/* Matrix devices: one small interface, several backends.
 *
 *   cpu  plain C int8 GEMM: the reference every other backend equals bit for bit
 *   amx  Intel AMX int8 tiles (TDPBSSD); opening fails cleanly where absent
 *   sim  a model of an RK3588-class NPU: exact results (the cpu kernel), time
 *        from a cost model on a virtual clock, a 32-bit IOVA window, faults
 *   cuda NVIDIA GPUs (docs/cuda.md): weights in their GGUF block types in
 *        VRAM, f32 activations (DEV_COMPUTE_BLOCKS); opening says why not
 *
 * A device owns its memory: the slot pool and the staging buffers for
 * activations and outputs live in its address space (host pages on cpu and
 * amx; on sim a separate arena standing for IOVA-mapped DMA buffers, placed
 * in its window, inaccessible to the host outside the device's own calls
 * with guard=1), and all of it counts against the budget. The host reaches
 * it only through these calls: weights by dev_pack (packed in a host staging
 * slot, then uploaded), dev_load_packed and dev_import_codes; activations by
 * dev_write; results by dev_read; a slot's contents by dev_slot_view. Jobs
 * name device buffers by offset, never host pointers.
 *
 * Life of a device: open; read its capabilities; allocate the staging
 * buffers and the slot pool once (nothing is allocated or freed after);
 * pack weights into slots in place, as often as tenants change; submit
 * batches of jobs, each batch one submission that returns a fence at once,
 * and wait on the fence; close. A device with threads of its own (no pool
 * given) runs its stream on a worker of its own, so the caller computes
 * meanwhile; with a borrowed pool the stream runs on the caller, inside
 * dev_submit. Host functions queued on the stream (dev_enqueue_host) run in
 * order with the submissions, on the stream's thread, and may use the
 * device's synchronous calls. A synchronous call from another thread first
 * waits for the stream to drain. Every failure is a dev_status the caller
 * can act on (run the matmul on the CPU and count it); the message is in
 * moex_error(). A device is used by one thread at a time.
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
    struct threadpool *host_pool; /* offered: a device that computes on the host's cores (caps.shares_host_cores)
                                     borrows it as if given as pool; the others start their own threads */
    const char *spec;        /* the backend's own options, "key=value,..." parsed once by it at open (sim:
                                "rk3588" or "rk3588,key=value,..."; NULL: its defaults) */
};

/* W8A8: int8 codes with channel scales in the device's layout, int8
 * activations with row scales. BLOCKS (devices opened by dev_open_blocks):
 * a slot holds the GGUF rows as they are (dev_pack places them; no pack
 * file copy, dev_load_packed refuses), a job's act is (m, K) floats, 4-byte
 * aligned, and its act_scale names dev_act_q8_bytes(m, K) bytes of scratch
 * where the device quantizes them. */
enum dev_compute { DEV_COMPUTE_W8A8 = 1, DEV_COMPUTE_BLOCKS = 2 };

/* A range of device addresses the device's memory must fit in (an NPU's
 * 32-bit IOVA domain): the planner fits the budget into the windows. */
struct dev_window_caps {
    int count;               /* windows; 0: memory is not limited by windows */
    uint64_t bytes;          /* capacity of each */
};

struct board;
struct board_moe_layer;
struct board_net;
/* A device that models a whole machine prices the work the executor placed
 * (the sim with board=1 owns its board model): NULL elsewhere. */
struct dev_pricing {
    /* One MoE layer's experts as placed (ns). */
    double (*moe_layer_ns)(const struct dev *d, const struct board_moe_layer *L);
    /* n_tokens at positions n_past.. through the dense matmuls, attention and the lm head (ns). */
    double (*forward_ns)(const struct dev *d, const struct board_net *net, int n_tokens, int n_past);
    /* The earlier backend's replayed expert policy: uses on the board's NPU and CPU. */
    void (*legacy_uses)(const struct dev *d, uint64_t *hits, uint64_t *misses);
};

/* Everything the rest of moex may know about a device: no code outside
 * src/dev/ compares its name. */
struct dev_caps {
    const char *name;        /* the backend's name, for messages and reports only */
    const char *description; /* one line for tables and logs */
    enum dev_compute compute;
    enum pack_layout layout; /* the layout its slots hold (pack files carry it) */
    bool shares_host_cores;  /* computes on the host's own cores (amx): it borrows the caller's thread pool
                                and its work runs before the CPU's share, not beside it */
    struct dev_window_caps windows;
    int min_m;               /* fewer rows than this run faster on the CPU: route them there */
    int k_multiple, n_multiple; /* the envelope: K % k_multiple == 0, N % n_multiple == 0 */
    int k_max, n_max;
    int max_jobs;            /* jobs one submission takes */
    bool modelled_time;      /* busy and pack times come from a cost model (sim), not a clock */
    /* Cost model for the planner (ns): a submission costs about
     * submit_ns + per job (job_ns + weight bytes * weight_ns_per_byte + m*K*N * ns_per_mac). */
    double submit_ns, job_ns, weight_ns_per_byte, ns_per_mac;
    double pack_ns_per_value; /* host time to pack one weight value */
    double upload_ns_per_byte; /* copying a slot's bytes into device memory (0: the device reads host pages
                                  or its packing time covers it) */
    bool maps_host_pages;     /* the device computes from host pages: a file's pages can back its slots */
    uint64_t mem_granule;     /* device memory is allocated (and counted) in multiples of this: host pages,
                                 or the sim's IOVA granule */
    uint64_t fixed_bytes;     /* device memory the device holds from its open on, counted in the budget as
                                 staging (cuda: the jobs' descriptors) */
    const struct dev_pricing *pricing; /* a machine model's prices; NULL: none */
    /* Block devices: the GGUF types their slots take (bit t for enum qtype
     * t); 0 on W8A8 devices, whose dev_pack converts what the CPU reads. */
    uint64_t block_types;
    /* A slot's code bytes: code_block_bytes per code_block_values values,
     * rounded up (W8A8: 1 and 1; a block device: its slot type's block,
     * dev_set_slot_type). */
    int code_block_values, code_block_bytes;
};

/* A place in device memory: a staging buffer (dev_buffer_alloc) and a byte offset. */
struct dev_ref {
    int buf;
    uint64_t offset;
};

/* One matmul: out[i][n] = act[i] . w[n] for i < m, n < N of the slot's
 * weight, every buffer in device memory. */
struct dev_job {
    int slot;
    int m;                    /* rows, >= 1 */
    struct dev_ref act;       /* (m, K) int8 codes, rows K bytes apart */
    struct dev_ref act_scale; /* (m) floats, 4-byte aligned */
    struct dev_ref out;       /* (m, out_stride) floats: columns 0..N-1 of each row are written */
    size_t out_stride;        /* floats between output rows, >= N */
};

/* The scratch a block device quantizes m rows of K floats into (40 bytes per 32 values). */
static inline uint64_t dev_act_q8_bytes(int m, int K) { return (uint64_t)m * (uint64_t)(K / 32) * 40u; }

/* A submission's place in the device's stream: 1, 2, ... in order. */
typedef uint64_t dev_fence;

struct dev_counters {
    uint64_t submissions, jobs, rows, macs;
    uint64_t packs, pack_bytes_read, pack_bytes_written;
    uint64_t loads, load_bytes; /* slots filled with packed weights (dev_load_packed) */
    uint64_t busy_ns;        /* in submissions (modelled on sim) */
    uint64_t pack_ns;        /* in packing (modelled on sim) */
    uint64_t load_ns;        /* in dev_load_packed (on sim: the modelled DMA fill of the bytes) */
    uint64_t failed_submissions, failed_packs, failed_allocs; /* failed_packs: loads too */
    uint64_t resident_bytes; /* the slot pool and the staging buffers */
    uint64_t staging_bytes;  /* of it, the staging buffers */
    uint64_t uploads, upload_bytes, downloads, download_bytes; /* dev_write / dev_read and pack uploads */
    uint64_t imported_bytes; /* slot codes backed by a file's pages, no copy (dev_import_codes) */
};

/* ---- The device table: every name moex knows, in one place. "none" (the
 * CPU's quantized kernels, no device) and "auto" (the first device of a
 * preference list that opens here) are names too. */
struct dev_name_info {
    const char *name;
    const char *summary;     /* one line for --help */
    bool offloads;           /* false for "none" */
    bool takes_spec;         /* reads dev_options.spec (the sim's figures, the rknpu options) */
    const char *spec_option; /* the command line's option for that string ("--sim", "--rknpu"), or NULL */
};
/* "none cpu amx sim auto": the names, in the table's order. */
const char *dev_names(void);
/* The entry of a name; NULL when unknown. */
const struct dev_name_info *dev_name_info(const char *name);
/* The backend a name opens: itself, or for "auto" the first backend of the
 * preference list available here; NULL for "none" and when auto finds
 * none (*why then says why, when why is given). */
const char *dev_resolve(const char *name, char *why, size_t why_size);

/* The backend `moex probe` measures for a name (NULL: the default, the
 * first of auto's list available here, else sim); NULL when none. */
const char *dev_probe_device(const char *name);

/* name: a backend of the table ("auto" resolved). On failure *out is NULL. */
int dev_open(const char *name, const struct dev_options *opt, struct dev **out);
/* dev_open for a caller that drives DEV_COMPUTE_BLOCKS devices too (dev_open
 * refuses to open those): slots of a block device hold weights up to
 * slot_type's bytes per value (Q8_0 the widest; 0: Q8_0; dev_set_slot_type
 * changes it before any allocation). */
int dev_open_blocks(const char *name, const struct dev_options *opt, enum qtype slot_type, struct dev **out);
void dev_close(struct dev *d);
const struct dev_caps *dev_caps(const struct dev *d);
/* Sets the resident byte budget before anything is allocated (a budget
 * planned from the capabilities of the opened device); DEV_E_STATE after. */
int dev_set_budget(struct dev *d, uint64_t budget_bytes);

/* A block device's slots hold weights up to slot_type's bytes per value
 * (a type of caps.block_types; the widest the caller will place): set before
 * anything is allocated, it changes caps.code_block_*. DEV_E_STATE after an
 * allocation, DEV_E_TYPE for a type the device does not take, DEV_E_ARG on
 * a W8A8 device. */
int dev_set_slot_type(struct dev *d, enum qtype slot_type);
/* Whether a weight of this type can be placed on the device: a block
 * device's types; every type on W8A8 devices (their packing says no to
 * what it cannot convert). */
bool dev_caps_takes(const struct dev_caps *c, enum qtype type);

/* Geometry from the capabilities alone, so a planner needs no device: what
 * device memory of `bytes` takes (whole granules), one slot of slot_values
 * values and max_n channels, and a pool of n_slots of them (codes and, on
 * W8A8 devices, channel scales; a block device's slots hold no scales). */
uint64_t dev_caps_mem_bytes(const struct dev_caps *c, uint64_t bytes);
/* The code bytes of one slot of slot_values values (64-byte aligned). */
uint64_t dev_caps_slot_code_bytes(const struct dev_caps *c, int64_t slot_values);
uint64_t dev_caps_slot_bytes(const struct dev_caps *c, int64_t slot_values, int max_n);
uint64_t dev_caps_pool_bytes(const struct dev_caps *c, int n_slots, int64_t slot_values, int max_n);
/* Whether a K x N weight is inside the envelope. */
bool dev_caps_fits(const struct dev_caps *c, int64_t K, int64_t N);

/* A staging buffer of `bytes` in device memory, counted in the budget
 * (DEV_E_BUDGET); *buf its id for dev_ref. At set-up, before or after the
 * pool: at most DEV_MAX_BUFFERS. On sim it takes a range of the window. */
#define DEV_MAX_BUFFERS 16
int dev_buffer_alloc(struct dev *d, uint64_t bytes, int *buf);
uint64_t dev_buffer_bytes(const struct dev *d, int buf); /* 0 when no such buffer */
int dev_buffer_count(const struct dev *d);
/* Copies host bytes into a buffer / buffer bytes out to the host. */
int dev_write(struct dev *d, struct dev_ref dst, const void *src, uint64_t bytes);
int dev_read(struct dev *d, struct dev_ref src, void *dst, uint64_t bytes);

/* Resident bytes of one slot holding a weight of up to slot_values (K * N)
 * values and max_n output channels. */
uint64_t dev_slot_bytes(const struct dev *d, int64_t slot_values, int max_n);
/* What device memory of `bytes` takes (and counts in the budget): whole granules. */
uint64_t dev_mem_bytes(const struct dev *d, uint64_t bytes);
/* What a pool of n_slots such slots takes: its codes and its scales, each in whole granules. */
uint64_t dev_pool_bytes(const struct dev *d, int n_slots, int64_t slot_values, int max_n);
/* Allocates the pool once: n_slots slots (0: as many as the budget holds
 * after the staging buffers),
 * each for one weight with K * N <= slot_values and N <= max_n (so that
 * 2048 x 768 and 768 x 2048 share a slot size). */
int dev_pool_alloc(struct dev *d, int n_slots, int64_t slot_values, int max_n);
/* A block device's pool whose slots have sizes of their own: slot s holds
 * up to code_bytes[s] bytes of GGUF rows (64-byte aligned), shapes bounded
 * by slot_values and max_n as above; all of it one allocation counted in
 * whole granules (dev_caps_sized_pool_bytes). So that an expert's Q4_K gate
 * and up do not take slots sized for its Q6_K down. DEV_E_ARG on W8A8
 * devices. */
int dev_pool_alloc_sized(struct dev *d, int n_slots, const uint64_t *code_bytes, int64_t slot_values, int max_n);
/* What such a pool takes of the budget: its code bytes, each slot's rounded
 * to 64, in whole granules. */
uint64_t dev_caps_sized_pool_bytes(const struct dev_caps *c, uint64_t code_bytes);
int dev_pool_slots(const struct dev *d);

/* Packs a GGUF weight (N rows of K values of `type`, rows contiguous) into a
 * slot, replacing its tenant: into a host staging slot, then uploaded (on
 * devices that map host pages the staging slot is the slot). On failure
 * the slot is empty. */
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
/* Fills the codes of slots [first, first + n) with a file's bytes from
 * `offset` on (n strides of them). Where the device maps host pages
 * (caps.maps_host_pages) the slots are backed by a private mapping of the
 * file: no copy and no zeroed memory, until written (copy on write), so
 * filling gigabytes of slots costs the page-table work; the slots' start,
 * the length and offset must then be multiples of the page size (DEV_E_ARG:
 * load with codes instead). Elsewhere the bytes are read into the device's
 * memory (on sim at the modelled DMA fill rate). The slots are empty until
 * dev_load_packed (codes NULL) fills each. DEV_E_DEVMEM when the mapping or
 * the read fails (the slots keep fresh memory; if even that cannot be
 * restored, the pool shrinks to the slots before `first`). */
int dev_import_codes(struct dev *d, int first, int n, int fd, uint64_t offset);
/* Read-back of what a slot holds, through the device: fn sees its codes (in
 * the device's layout, code_bytes of them) and its N scales during the
 * call, and its return value is returned. DEV_E_STATE when empty. */
typedef int (*dev_slot_fn)(void *user, const int8_t *codes, size_t code_bytes, const float *scales, int K, int N);
int dev_slot_view(struct dev *d, int slot, dev_slot_fn fn, void *user);

/* Queues the jobs as one submission on the device's stream; *fence names it.
 * Bad jobs are refused here (nothing queued); a failure while running is
 * reported by dev_wait, and the stream then skips what follows until that
 * wait. */
int dev_submit(struct dev *d, const struct dev_job *jobs, int n_jobs, dev_fence *fence);
/* Queues fn(d, arg) on the stream after what is queued; a non-zero return
 * fails the stream as a submission would (the message in moex_error()). */
typedef int (*dev_host_fn)(struct dev *d, void *arg);
int dev_enqueue_host(struct dev *d, dev_host_fn fn, void *arg, dev_fence *fence);
/* Waits until the stream has run everything up to `fence`; the first
 * failure among those, DEV_OK when none. */
int dev_wait(struct dev *d, dev_fence fence);
/* Submits and waits: the synchronous form. */
int dev_run(struct dev *d, const struct dev_job *jobs, int n_jobs);

/* The cost model's time for these jobs as one submission (ns). */
double dev_estimate_ns(const struct dev *d, const struct dev_job *jobs, int n_jobs);

/* Counters as of the last drained stream. */
void dev_get_counters(const struct dev *d, struct dev_counters *c);
/* The model behind a sim device (its clock, window, figures); NULL otherwise. */
struct sim *dev_sim(struct dev *d);
/* A device with windows: one line saying which window holds which of the
 * device's memory (slot codes, slot scales, staging); DEV_E_ARG otherwise. */
int dev_windows_report(struct dev *d, char *out, size_t n);

const char *dev_status_string(int status);

#endif
