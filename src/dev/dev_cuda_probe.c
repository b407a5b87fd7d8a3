/* moex probe on a block device: what the GPU is, what moving bytes to and
 * from it costs through the device's own path (pinned staging), and the
 * GEMV / GEMM rates on Q4_K weights of the model's shapes with the weight
 * resident, alone and as a layer's routed experts in one submission. The
 * planner's figures (caps' submit and per-byte costs) come from these. */
#include "dev/dev_cuda.h"

#include "core/error.h"
#include "core/timer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PROBE_EXPERTS 8 /* a layer's routed experts for one token (Qwen3-30B-A3B: 8) */

/* The best time of a call repeated at least 3 times and for 50 ms (ns). */
typedef int (*probe_fn)(struct dev *d, void *arg);
static double best_ns(struct dev *d, probe_fn fn, void *arg, int *rc) {
    double best = INFINITY;
    int64_t start = time_ns();
    for (int run = 0; *rc == DEV_OK && (run < 3 || time_ns() - start < 50000000); run++) {
        int64_t t0 = time_ns();
        *rc = fn(d, arg);
        double t = (double)(time_ns() - t0);
        if (t < best) best = t;
    }
    return best;
}

struct copy_arg {
    int buf;
    void *host;
    uint64_t bytes;
};
static int copy_in(struct dev *d, void *arg) {
    struct copy_arg *c = arg;
    return dev_write(d, (struct dev_ref){c->buf, 0}, c->host, c->bytes);
}
static int copy_out(struct dev *d, void *arg) {
    struct copy_arg *c = arg;
    return dev_read(d, (struct dev_ref){c->buf, 0}, c->host, c->bytes);
}

struct run_arg {
    const struct dev_job *jobs;
    int n;
};
static int run_jobs(struct dev *d, void *arg) {
    struct run_arg *r = arg;
    return dev_run(d, r->jobs, r->n);
}

/* A random Q4_K weight: scales and codes random, d and dmin small halves. */
static void *random_q4k(int K, int N) {
    size_t bytes = quant_row_size(QT_Q4_K, K) * (size_t)N;
    uint8_t *w = malloc(bytes);
    if (!w) return NULL;
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < bytes; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        w[i] = (uint8_t)x;
    }
    for (size_t b = 0; b < bytes / 144; b++) {
        w[b * 144 + 0] = 0x00, w[b * 144 + 1] = 0x1c; /* d = 2^-8 */
        w[b * 144 + 2] = 0x00, w[b * 144 + 3] = 0x1c;
    }
    return w;
}

int dev_cuda_probe(FILE *out, const char *device, const int *shape_k, const int *shape_n, int n_shapes,
                   const int64_t *ms, int n_m) {
    struct dev *d = NULL;
    if (!device || strcmp(device, "cuda")) return 1; /* only cuda computes on blocks; others are not opened here */
    int rc = dev_open_blocks(device, &(struct dev_options){.n_threads = 1}, QT_Q4_K, &d);
    if (rc != DEV_OK) return rc;
    if (dev_caps(d)->compute != DEV_COMPUTE_BLOCKS) {
        dev_close(d);
        return 1;
    }
    struct dev_cuda_info info;
    dev_cuda_info(d, &info);
    const struct cuda_props *p = &info.props;
    fprintf(out, "## moex probe: cuda (%s)\n\n", dev_caps(d)->description);
    fprintf(out, "device %d: %s, compute capability %d.%d, %d SMs, %.2f GiB, %.2f GiB free at open (layer: %s)\n",
            p->ordinal, p->name, p->cc_major, p->cc_minor, p->sm_count, (double)p->total_bytes / 1073741824.0,
            (double)p->free_bytes / 1073741824.0, info.layer);
    int K_max = 256, N_max = 1;
    int64_t m_max = 1;
    for (int s = 0; s < n_shapes; s++) {
        K_max = shape_k[s] > K_max ? shape_k[s] : K_max;
        N_max = shape_n[s] > N_max ? shape_n[s] : N_max;
    }
    for (int i = 0; i < n_m; i++) m_max = ms[i] > m_max ? ms[i] : m_max;
    /* per expert: rows of floats, their q8 scratch, outputs */
    uint64_t act = (uint64_t)m_max * (uint64_t)K_max * 4, q8 = dev_act_q8_bytes((int)m_max, K_max),
             outb = (uint64_t)m_max * (uint64_t)N_max * 4;
    uint64_t per_expert = (act + q8 + outb + 255) / 256 * 256, copy_bytes = 64ull << 20;
    uint64_t stage = per_expert * PROBE_EXPERTS > copy_bytes ? per_expert * PROBE_EXPERTS : copy_bytes;
    int buf = -1;
    void *host = malloc((size_t)stage);
    rc = host ? dev_buffer_alloc(d, stage, &buf) : DEV_E_NOMEM;
    if (rc == DEV_OK) rc = dev_pool_alloc(d, PROBE_EXPERTS, (int64_t)K_max * N_max, N_max);
    if (rc == DEV_OK) {
        memset(host, 0, (size_t)stage);
        struct copy_arg c = {buf, host, copy_bytes};
        double in = best_ns(d, copy_in, &c, &rc), back = rc == DEV_OK ? best_ns(d, copy_out, &c, &rc) : 0;
        if (rc == DEV_OK)
            fprintf(out, "host -> device %.1f GB/s, device -> host %.1f GB/s (64 MiB through the pinned staging)\n\n",
                    (double)copy_bytes / in, (double)copy_bytes / back);
    }
    if (rc == DEV_OK)
        fprintf(out, "Q4_K weights resident; activations f32, quantized on the device for the GEMV (M <= %d);\n"
                     "best of >= 3 runs and 50 ms, each a whole submission (descriptors, launches, the wait).\n\n"
                     "| shape | M | kernel | us, 1 expert | weight GB/s | GMAC/s | us per expert, %d in one submission |\n"
                     "|---|---|---|---|---|---|---|\n",
                CUDA_GEMV_MAX_M, PROBE_EXPERTS);
    for (int s = 0; s < n_shapes && rc == DEV_OK; s++) {
        int K = shape_k[s], N = shape_n[s];
        void *w = random_q4k(K, N);
        if (!w) rc = DEV_E_NOMEM;
        for (int e = 0; e < PROBE_EXPERTS && rc == DEV_OK; e++) rc = dev_pack(d, e, QT_Q4_K, w, K, N);
        free(w);
        for (int i = 0; i < n_m && rc == DEV_OK; i++) {
            int m = (int)ms[i];
            struct dev_job jobs[PROBE_EXPERTS];
            for (int e = 0; e < PROBE_EXPERTS; e++) {
                uint64_t base = (uint64_t)e * per_expert;
                jobs[e] = (struct dev_job){e, m, {buf, base}, {buf, base + act}, {buf, base + act + q8}, (size_t)N};
            }
            struct run_arg one = {jobs, 1}, all = {jobs, PROBE_EXPERTS};
            double t1 = best_ns(d, run_jobs, &one, &rc), t8 = rc == DEV_OK ? best_ns(d, run_jobs, &all, &rc) : 0;
            if (rc != DEV_OK) break;
            double wbytes = (double)quant_row_size(QT_Q4_K, K) * N, macs = (double)m * K * N;
            fprintf(out, "| %dx%d | %d | %s | %.1f | %.1f | %.1f | %.1f |\n", K, N, m,
                    m <= CUDA_GEMV_MAX_M ? "gemv" : "gemm", t1 / 1e3, wbytes / t1, macs / t1,
                    t8 / 1e3 / PROBE_EXPERTS);
        }
    }
    free(host);
    if (rc != DEV_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", moex_error());
        dev_close(d);
        return moex_errorf("%s", why), rc;
    }
    dev_close(d);
    return 0;
}
