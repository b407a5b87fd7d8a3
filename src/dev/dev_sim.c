/* The sim device: the cpu kernel for exact results, the RK3588 model of
 * sim.h for time, memory and faults. Its memory is an arena of its own,
 * standing for IOVA-mapped DMA buffers: each region (the pool's codes, its
 * scales, each staging buffer) is a separate mapping that takes ranges of
 * the window, created once as on the board. With guard=1 the arena is
 * PROT_NONE outside the device's own calls, so that a write from outside
 * faults, as it would on a device the host cannot address. */
#include "dev/dev_impl.h"

#include "core/error.h"
#include "dev/board.h"
#include "dev/sim.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* A region takes window ranges of at most this size: few mappings, and no
 * single allocation that needs most of the window in one piece. */
#define SIM_POOL_BUFFER_MAX (256ull << 20)

struct sim_region {
    int8_t *host;       /* NULL: a free entry */
    size_t map_bytes;
    uint64_t *iova;     /* the window ranges behind it */
    uint64_t *iova_bytes; /* their sizes, in order through the region */
    int n_iova;
    uint64_t unit;      /* the pieces hold whole units of this (a slot's codes or scales); 0: any */
};

struct sim_dev {
    struct sim *sim;
    struct board *board;  /* board=1: the whole board's model, which prices what the executor placed */
    bool guard;
    pthread_mutex_t lock; /* open_depth: the stream's worker and the caller */
    int open_depth;
    struct sim_region regions[DEV_MAX_BUFFERS + 2];
};

static double price_moe_layer(const struct dev *d, const struct board_moe_layer *L) {
    return board_moe_ns(((struct sim_dev *)d->backend)->board, L);
}

static double price_forward(const struct dev *d, const struct board_net *net, int n_tokens, int n_past) {
    return board_net_ns(((struct sim_dev *)d->backend)->board, net, n_tokens, n_past, false);
}

static void price_legacy_uses(const struct dev *d, uint64_t *hits, uint64_t *misses) {
    board_legacy_uses(((struct sim_dev *)d->backend)->board, hits, misses);
}

static const struct dev_pricing board_pricing = { price_moe_layer, price_forward, price_legacy_uses };

static int sim_open(struct dev *d, const struct dev_options *opt) {
    struct sim_figures f;
    if (sim_figures_parse(opt->spec ? opt->spec : "rk3588", &f) != 0) return DEV_E_OPTION;
    struct sim_dev *sd = calloc(1, sizeof *sd);
    if (!sd || !(sd->sim = sim_new(&f)) || (f.board && !(sd->board = board_new(&f)))) {
        if (sd) sim_delete(sd->sim);
        free(sd);
        moex_errorf("sim: out of memory");
        return DEV_E_NOMEM;
    }
    sd->guard = f.guard != 0;
    pthread_mutex_init(&sd->lock, NULL);
    d->backend = sd;
    d->layout = PACK_ROWS;
    const double core_bytes_per_ns = f.core_gbps * f.cores;
    d->caps = (struct dev_caps){
        .name = "sim",
        .description = "RK3588-class NPU model (exact results, modelled times)",
        .compute = DEV_COMPUTE_W8A8,
        .min_m = (int)f.min_m,
        .k_multiple = (int)f.k_multiple,
        .n_multiple = (int)f.n_multiple,
        .k_max = PACK_MAX_K,
        .n_max = 1 << 20,
        .max_jobs = DEV_MAX_JOBS,
        .modelled_time = true,
        /* a stream of chainable jobs; dev_estimate_ns has the exact model */
        .submit_ns = 1e3 * f.submit_us,
        .job_ns = 1e3 * f.job_us / f.cores,
        .weight_ns_per_byte = 1.0 / core_bytes_per_ns,
        .ns_per_mac = 1.0 / (f.core_gmacs * f.cores),
        .pack_ns_per_value = f.pack_ns_per_value,
        .maps_host_pages = false,
        .mem_granule = (uint64_t)f.iova_align, /* every buffer takes whole granules of the window */
        .windows = { (int)f.domains, (uint64_t)(f.iova_mib * 1048576.0) },
        .pricing = sd->board ? &board_pricing : NULL,
    };
    return DEV_OK;
}

static void sim_close(struct dev *d) {
    struct sim_dev *sd = d->backend;
    if (!sd) return;
    pthread_mutex_destroy(&sd->lock);
    board_free(sd->board);
    sim_delete(sd->sim);
    free(sd);
}

static void release(struct sim_dev *sd, struct sim_region *r) {
    for (int i = 0; i < r->n_iova; i++) sim_buffer_destroy(sd->sim, r->iova[i]);
    if (r->host) munmap(r->host, r->map_bytes);
    free(r->iova);
    free(r->iova_bytes);
    memset(r, 0, sizeof *r);
}

static int sim_mem_alloc(struct dev *d, uint64_t bytes, struct dev_region *out) {
    struct sim_dev *sd = d->backend;
    int h = 0;
    while (h < DEV_MAX_BUFFERS + 2 && sd->regions[h].host) h++;
    if (h == DEV_MAX_BUFFERS + 2) return moex_errorf("sim: too many regions"), DEV_E_DEVMEM;
    struct sim_region *r = &sd->regions[h];
    long page = sysconf(_SC_PAGESIZE);
    size_t pg = page > 0 ? (size_t)page : 4096;
    r->map_bytes = ((size_t)bytes + pg - 1) / pg * pg;
    /* Pieces of at most SIM_POOL_BUFFER_MAX in whole units (a slot never
     * straddles two buffers), one more per window they spill over. */
    uint64_t unit = out->unit ? out->unit : 1, full = SIM_POOL_BUFFER_MAX / unit * unit;
    if (full == 0) full = unit;
    int n = (int)((bytes + full - 1) / full) + sim_domains(sd->sim) + 1;
    r->iova = calloc((size_t)n, sizeof *r->iova);
    r->iova_bytes = calloc((size_t)n, sizeof *r->iova_bytes);
    void *p = mmap(NULL, r->map_bytes, sd->guard ? PROT_NONE : PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!r->iova || !r->iova_bytes || p == MAP_FAILED) {
        free(r->iova);
        free(r->iova_bytes);
        if (p != MAP_FAILED) munmap(p, r->map_bytes);
        memset(r, 0, sizeof *r);
        return moex_errorf("sim: out of memory for a %llu-byte region", (unsigned long long)bytes), DEV_E_NOMEM;
    }
    r->host = p;
    r->unit = out->unit;
    for (uint64_t left = bytes; left > 0; r->n_iova++) {
        /* With several domains a piece fills the tail of the fullest window
         * with room for a unit before a fresh window is cut into: nothing
         * is stranded between the windows. */
        uint64_t piece = left < full ? left : full;
        uint64_t room = sim_domains(sd->sim) > 1 ? sim_tightest_free(sd->sim, unit < left ? unit : left) : 0;
        if (room && piece > room) {
            uint64_t whole = room / unit * unit;
            piece = whole ? whole : room;
        }
        int rc = r->n_iova < n ? sim_buffer_create(sd->sim, piece, &r->iova[r->n_iova])
                               : (moex_errorf("sim: a %llu-byte region in too many pieces", (unsigned long long)bytes),
                                  DEV_E_DEVMEM);
        if (rc != DEV_OK) {
            release(sd, r);
            return rc;
        }
        r->iova_bytes[r->n_iova] = piece;
        left -= piece;
    }
    *out = (struct dev_region){.host = r->host, .bytes = bytes, .handle = h};
    return DEV_OK;
}

static void sim_mem_free(struct dev *d, struct dev_region *r) {
    struct sim_dev *sd = d->backend;
    if (r->handle >= 0 && r->handle < DEV_MAX_BUFFERS + 2) release(sd, &sd->regions[r->handle]);
}

static void protect_all(struct sim_dev *sd, int prot) {
    for (int i = 0; i < DEV_MAX_BUFFERS + 2; i++)
        if (sd->regions[i].host) mprotect(sd->regions[i].host, sd->regions[i].map_bytes, prot);
}

static void sim_mem_open(struct dev *d) {
    struct sim_dev *sd = d->backend;
    if (!sd->guard) return;
    pthread_mutex_lock(&sd->lock);
    if (sd->open_depth++ == 0) protect_all(sd, PROT_READ | PROT_WRITE);
    pthread_mutex_unlock(&sd->lock);
}

static void sim_mem_close(struct dev *d) {
    struct sim_dev *sd = d->backend;
    if (!sd->guard) return;
    pthread_mutex_lock(&sd->lock);
    if (--sd->open_depth == 0) protect_all(sd, PROT_NONE);
    pthread_mutex_unlock(&sd->lock);
}

static uint64_t sim_pack_cost(struct dev *d, int K, int N, uint64_t measured_ns) {
    (void)measured_ns;
    struct sim_dev *sd = d->backend;
    double ns = sim_pack_ns(sd->sim, K, N);
    sim_advance(sd->sim, ns);
    return (uint64_t)ns;
}

static struct sim_shape shape_of(const struct dev *d, int slot, int m) {
    const struct dev_slot *s = &d->slots[slot];
    /* the pool's codes lie in pieces of at most SIM_POOL_BUFFER_MAX, whole slots each */
    uint64_t per_buffer = d->slot_code_bytes ? SIM_POOL_BUFFER_MAX / d->slot_code_bytes : 1;
    return (struct sim_shape){.m = m, .k = s->K, .n = s->N, .buffer = (int)(slot / (per_buffer ? per_buffer : 1))};
}

static int sim_submit_jobs(struct dev *d, const struct dev_exec_job *jobs, int n_jobs, uint64_t *modelled_ns) {
    struct sim_dev *sd = d->backend;
    struct sim_shape shapes[DEV_MAX_JOBS];
    for (int j = 0; j < n_jobs; j++) shapes[j] = shape_of(d, jobs[j].slot, jobs[j].m);
    double ns = 0;
    int rc = sim_submit(sd->sim, shapes, n_jobs, &ns);
    *modelled_ns = (uint64_t)ns;
    if (rc != DEV_OK) return rc;
    dev_cpu_run(d, jobs, n_jobs);
    return DEV_OK;
}

static double sim_estimate(const struct dev *d, const struct dev_job *jobs, int n_jobs) {
    const struct sim_dev *sd = d->backend;
    struct sim_shape shapes[DEV_MAX_JOBS];
    if (n_jobs > DEV_MAX_JOBS) n_jobs = DEV_MAX_JOBS;
    for (int j = 0; j < n_jobs; j++)
        if (jobs[j].slot < 0 || jobs[j].slot >= d->n_slots) return 0.0;
    for (int j = 0; j < n_jobs; j++) shapes[j] = shape_of(d, jobs[j].slot, jobs[j].m);
    return sim_batch_ns(sd->sim, shapes, n_jobs);
}

/* Which slots a region's pieces in window w hold: "" or ", slot codes 0-411". */
static void slots_in_window(const struct sim_region *r, int w, const char *what, char *out, size_t n) {
    uint64_t at = 0, first = UINT64_MAX, last = 0;
    for (int i = 0; i < r->n_iova; at += r->iova_bytes[i++]) {
        if (sim_address_domain(r->iova[i]) != w || !r->unit) continue;
        if (at / r->unit < first) first = at / r->unit;
        last = (at + r->iova_bytes[i]) / r->unit;
    }
    if (first == UINT64_MAX) out[0] = 0;
    else snprintf(out, n, ", slot %s %llu-%llu", what, (unsigned long long)first, (unsigned long long)last - 1);
}

/* "window 0: 4095.9 MiB used, 0.1 MiB free (4 staging buffers, slot codes 0-1199, slot scales 0-3071); window 1: ..."
 * for each window in use. */
static int sim_windows_report(struct dev *d, char *out, size_t n) {
    struct sim_dev *sd = d->backend;
    const double f = sim_get_figures(sd->sim)->iova_mib;
    size_t at = 0;
    for (int w = 0; w < sim_domains(sd->sim) && at < n; w++) {
        if (sim_domain_buffers(sd->sim, w) == 0) continue;
        int staging = 0;
        char what[2][64] = {"", ""}; /* slot codes, slot scales */
        for (int h = 0; h < DEV_MAX_BUFFERS + 2; h++) {
            const struct sim_region *r = &sd->regions[h];
            int pieces = 0;
            for (int i = 0; i < r->n_iova; i++) pieces += sim_address_domain(r->iova[i]) == w;
            if (!pieces) continue;
            int k = h == d->codes_mem.handle ? 0 : h == d->scales_mem.handle ? 1 : -1;
            if (k < 0) staging++;
            else slots_in_window(r, w, k ? "scales" : "codes", what[k], sizeof what[k]);
        }
        double used = sim_domain_used(sd->sim, w) / 1048576.0;
        at += (size_t)snprintf(out + at, n - at, "%swindow %d: %.1f MiB used, %.1f free (%d staging buffers%s%s)",
                               at ? "; " : "", w, used, f - used, staging, what[0], what[1]);
    }
    return DEV_OK;
}

struct sim *dev_sim(struct dev *d) {
    if (!d || d->ops != &dev_sim_ops) return NULL;
    return ((struct sim_dev *)d->backend)->sim;
}

const struct dev_ops dev_sim_ops = {
    .open = sim_open,
    .close = sim_close,
    .mem_alloc = sim_mem_alloc,
    .mem_free = sim_mem_free,
    .mem_open = sim_mem_open,
    .mem_close = sim_mem_close,
    .pack_cost = sim_pack_cost,
    .submit = sim_submit_jobs,
    .estimate = sim_estimate,
    .windows_report = sim_windows_report,
};
