/* The amx device: int8 GEMM on Intel AMX tiles (TDPBSSD) over weights in
 * the PACK_AMX layout. Results equal the cpu device bit for bit: the tiles
 * sum int8 products exactly in int32, and the epilogue is w8a8_out()
 * sixteen channels at a time.
 *
 * Tile use: tmm0-3 accumulate a 32 x 32 block of C (2 x 2 tiles of 16 x 16
 * int32), tmm4-5 hold two 16-row x 64-byte slices of activations, tmm6-7 two
 * B tiles (64 K values x 16 columns). Activation rows are loaded straight
 * from the job's buffer (stride K); a last partial group of rows is copied
 * into a zero-padded per-thread buffer allocated with the pool. Every tile
 * instruction is in amx_ops.h; each thread loads the configuration for its
 * share of a submission and releases the tiles when it is done.
 *
 * Written for Sapphire Rapids and later. Without AMX hardware it is tested on
 * an emulated tile unit (tests/emulated-amx.sh); on AMX machines the tests
 * compare it with the cpu device. */
#include "dev/dev_impl.h"

#include "core/error.h"
#include "core/threadpool.h"
#include "dev/amx_ops.h"
#include "pack/w8a8.h"

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

struct amx_dev {
    int8_t *pads; /* (threads, 16, max_k): rows past M are zero */
    int n_pads;
};

/* Eight 16-row x 64-byte tiles: C in tmm0-3, A in tmm4-5, B in tmm6-7. */
static void tile_config_fill(struct amx_tile_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->palette_id = 1;
    for (int t = 0; t < 8; t++) {
        cfg->rows[t] = 16;
        cfg->colsb[t] = 64;
    }
}

static int amx_open(struct dev *d, const struct dev_options *opt) {
    (void)opt;
    struct amx_dev *ad = calloc(1, sizeof *ad);
    if (!ad) return moex_errorf("amx: out of memory"), DEV_E_NOMEM;
    d->backend = ad;
    d->layout = PACK_AMX;
    d->caps = (struct dev_caps){
        .name = "amx",
        .description = "Intel AMX int8 tiles (TDPBSSD)",
        .compute = DEV_COMPUTE_W8A8,
        .min_m = 16,
        .k_multiple = 64,
        .n_multiple = 16,
        .k_max = PACK_MAX_K,
        .n_max = 1 << 20,
        .max_jobs = DEV_MAX_JOBS,
        .modelled_time = false,
        /* Same-core work: no submission cost to speak of. 1024 MACs per
         * cycle per core at ~2 GHz, weights from DRAM at ~10 GB/s a core. */
        .submit_ns = 1000,
        .job_ns = 200,
        .weight_ns_per_byte = 0.1,
        .ns_per_mac = 0.0005,
        .pack_ns_per_value = 0.5,
        .maps_host_pages = true,
        .shares_host_cores = true, /* its tiles are the host cores' own */
    };
    return DEV_OK;
}

static void amx_close(struct dev *d) {
    struct amx_dev *ad = d->backend;
    if (!ad) return;
    free(ad->pads);
    free(ad);
}

/* Bytes of one thread's pad: 16 rows of up to max_k codes, whole cache lines. */
static size_t pad_bytes(const struct dev *d) { return ((size_t)16 * (size_t)d->max_k + 63) / 64 * 64; }

static int amx_pool_alloc(struct dev *d) {
    struct amx_dev *ad = d->backend;
    int threads = threadpool_size(d->pool);
    size_t bytes = (size_t)threads * pad_bytes(d);
    ad->pads = aligned_alloc(64, bytes);
    if (!ad->pads) return moex_errorf("amx: out of memory for row padding"), DEV_E_NOMEM;
    memset(ad->pads, 0, bytes);
    ad->n_pads = threads;
    return DEV_OK;
}

/* Writes C tile rows [0, rows) x 16 columns: w8a8_out() on 16 lanes, the
 * same two float multiplies in the same order, so the same bits. */
static void store_block(const int32_t acc[16][16], int rows, const float *act_scale, const float *ch_scale,
                        float *out, size_t out_stride) {
    const __m512 cs = _mm512_loadu_ps(ch_scale);
    for (int r = 0; r < rows; r++) {
        __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(acc[r])), _mm512_set1_ps(act_scale[r]));
        _mm512_storeu_ps(out + (size_t)r * out_stride, _mm512_mul_ps(v, cs));
    }
}

/* One block of up to 2 row groups x 2 column tiles over the whole K. a[i]
 * points at row group i's first activation row (stride K), rows[i] its valid
 * rows (0: absent); b[j] at column tile j's first K tile (tiles of one
 * column band are consecutive, 1 KiB apart), cols_tiles 1 or 2. */
static void block_2x2(const int8_t *a0, const int8_t *a1, int rows0, int rows1, const int8_t *b0, const int8_t *b1,
                      int col_tiles, int K, const float *rs0, const float *rs1, const float *cs, float *out0,
                      float *out1, size_t out_stride) {
    _Alignas(64) int32_t acc[16][16];
    const int k_tiles = K / 64;
    AMX_TILE_ZERO(0);
    AMX_TILE_ZERO(1);
    AMX_TILE_ZERO(2);
    AMX_TILE_ZERO(3);
    for (int kb = 0; kb < k_tiles; kb++) {
        AMX_TILE_LOAD(4, a0 + 64 * kb, K);
        AMX_TILE_LOAD(6, b0 + 1024 * kb, 64);
        AMX_DPBSSD(0, 4, 6);
        if (col_tiles == 2) {
            AMX_TILE_LOAD(7, b1 + 1024 * kb, 64);
            AMX_DPBSSD(1, 4, 7);
        }
        if (rows1) {
            AMX_TILE_LOAD(5, a1 + 64 * kb, K);
            AMX_DPBSSD(2, 5, 6);
            if (col_tiles == 2) AMX_DPBSSD(3, 5, 7);
        }
    }
    AMX_TILE_STORE(0, acc, 64);
    store_block(acc, rows0, rs0, cs, out0, out_stride);
    if (col_tiles == 2) {
        AMX_TILE_STORE(1, acc, 64);
        store_block(acc, rows0, rs0, cs + 16, out0 + 16, out_stride);
    }
    if (rows1) {
        AMX_TILE_STORE(2, acc, 64);
        store_block(acc, rows1, rs1, cs, out1, out_stride);
        if (col_tiles == 2) {
            AMX_TILE_STORE(3, acc, 64);
            store_block(acc, rows1, rs1, cs + 16, out1 + 16, out_stride);
        }
    }
}

/* Tasks are (job, band of 32 columns); each runs every row of its job. */
enum { COLS_PER_TASK = 32 };

struct run_ctx {
    struct dev *d;
    const struct dev_exec_job *jobs;
    int64_t task_start[DEV_MAX_JOBS + 1];
};

/* Row group starting at row i of a job: its first row and valid rows, copied
 * into the pad when partial. */
static const int8_t *row_group(const struct dev_exec_job *job, int i, int K, int8_t *pad, int *rows) {
    int n = job->m - i < 16 ? job->m - i : 16;
    *rows = n;
    if (n == 16) return job->act + (size_t)i * (size_t)K;
    memcpy(pad, job->act + (size_t)i * (size_t)K, (size_t)n * (size_t)K);
    memset(pad + (size_t)n * (size_t)K, 0, (size_t)(16 - n) * (size_t)K);
    return pad;
}

static void run_tasks(void *arg, int64_t begin, int64_t end, int thread_index) {
    struct run_ctx *c = arg;
    struct dev *d = c->d;
    struct amx_dev *ad = d->backend;
    int8_t *pad = ad->pads + (size_t)(thread_index % ad->n_pads) * pad_bytes(d);
    _Alignas(64) struct amx_tile_config cfg;
    tile_config_fill(&cfg);
    AMX_CONFIG_LOAD(&cfg);
    int j = 0;
    for (int64_t t = begin; t < end; t++) {
        while (c->task_start[j + 1] <= t) j++;
        const struct dev_exec_job *job = &c->jobs[j];
        const int K = d->slots[job->slot].K, N = d->slots[job->slot].N;
        const int n0 = (int)(t - c->task_start[j]) * COLS_PER_TASK;
        const int col_tiles = N - n0 >= 32 ? 2 : 1;
        const int8_t *w = dev_slot_codes(d, job->slot);
        const size_t band = (size_t)(K / 64) * 1024; /* bytes of one 16-column band */
        const int8_t *b0 = w + (size_t)(n0 / 16) * band, *b1 = col_tiles == 2 ? b0 + band : NULL;
        const float *cs = dev_slot_scales(d, job->slot) + n0;
        for (int i = 0; i < job->m; i += 32) {
            int rows0, rows1 = 0;
            /* only the last row group can be partial, so one pad suffices */
            const int8_t *a0 = row_group(job, i, K, pad, &rows0), *a1 = NULL;
            if (i + 16 < job->m) a1 = row_group(job, i + 16, K, pad, &rows1);
            float *out0 = job->out + (size_t)i * job->out_stride + n0;
            float *out1 = rows1 ? out0 + 16 * job->out_stride : NULL;
            const float *rs1 = rows1 ? job->act_scale + i + 16 : NULL;
            block_2x2(a0, a1, rows0, rows1, b0, b1, col_tiles, K, job->act_scale + i, rs1, cs, out0, out1,
                      job->out_stride);
        }
    }
    AMX_RELEASE();
}

static int amx_submit(struct dev *d, const struct dev_exec_job *jobs, int n_jobs, uint64_t *modelled_ns) {
    (void)modelled_ns;
    struct run_ctx c = {.d = d, .jobs = jobs};
    c.task_start[0] = 0;
    for (int j = 0; j < n_jobs; j++) {
        int N = d->slots[jobs[j].slot].N;
        c.task_start[j + 1] = c.task_start[j] + (N + COLS_PER_TASK - 1) / COLS_PER_TASK;
    }
    threadpool_parallel_for(d->pool, c.task_start[n_jobs], 1, run_tasks, &c);
    return DEV_OK;
}

/* dev.c calls .available (amx_request, plain C) before anything here runs. */
const struct dev_ops dev_amx_ops = {
    .available = amx_request,
    .open = amx_open,
    .close = amx_close,
    .pool_alloc = amx_pool_alloc,
    .submit = amx_submit,
};
