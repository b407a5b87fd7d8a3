/* moex probe for the public API: per expert shape and rows M, the CPU
 * quantized path (Q4_K weights, Q8_K activations, the best kernels of
 * src/quant) against a device with resident W8A8 weights; pack time and
 * throughput next to the memory bandwidth measured in the same run. A
 * microbenchmark in the style of the NPU probe tools: it measures, it
 * asserts nothing, and its report goes to the caller as it is made. */
#include "api/api_impl.h"

#include "core/cpu.h"
#include "core/membw.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "dev/dev.h"
#include "dev/dev_cuda.h"
#include "dev/sim.h"
#include "pack/pack.h"
#include "pack/w8a8.h"
#include "quant/matmul.h"
#include "quant/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float gauss(uint64_t *state) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    double u = ((double)(*state >> 11) + 0.5) * 0x1p-53;
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    double v = (double)(*state >> 11) * 0x1p-53;
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

/* The best run time of fn over at least `min_reps` runs and 50 ms: this
 * machine is shared, and the minimum is the least disturbed figure. */
typedef void (*timed_fn)(void *ctx);
static double best_ns(timed_fn fn, void *ctx, int min_reps) {
    double t[64];
    int n = 0;
    int64_t start = time_ns();
    fn(ctx); /* warm-up */
    while (n < 64 && (n < min_reps || time_ns() - start < 50000000)) {
        int64_t t0 = time_ns();
        fn(ctx);
        t[n++] = (double)(time_ns() - t0);
    }
    double best = t[0];
    for (int i = 1; i < n; i++) best = t[i] < best ? t[i] : best;
    return best;
}

/* ---- memory bandwidth: every thread streams its share of a large buffer ---- */

static double memory_gbps(struct threadpool *pool) {
    struct membw_result bw;
    return membw_measure(pool, (size_t)256 << 20, 5, &bw) ? 0 : bw.best_gbps;
}

/* ---- the two paths ---- */

struct cpu_run {
    struct threadpool *pool;
    struct matrix w;
    const void *xq;
    size_t stride;
    int M;
    float *y;
};
static void cpu_once(void *arg) {
    struct cpu_run *r = arg;
    matmul_preq(r->pool, &r->w, r->xq, r->stride, r->M, r->y, (size_t)r->w.rows);
}

struct dev_run {
    struct dev *d;
    struct dev_job job;
    int rc;
};
static void dev_once(void *arg) {
    struct dev_run *r = arg;
    if (r->rc == DEV_OK) r->rc = dev_run(r->d, &r->job, 1);
}

/* Packs `copies` distinct copies of a weight one after the other, so that
 * the source streams from DRAM as it would at load time. */
struct pack_run {
    struct dev *d;
    const char *w;
    size_t bytes;
    int copies, K, N, rc;
};
static void pack_once(void *arg) {
    struct pack_run *r = arg;
    for (int c = 0; c < r->copies && r->rc == DEV_OK; c++)
        r->rc = dev_pack(r->d, 0, QT_Q4_K, r->w + (size_t)c * r->bytes, r->K, r->N);
}

/* Modelled time of the last submission (sim) or of one pack. */
static uint64_t busy_of(struct dev *d) {
    struct dev_counters c;
    dev_get_counters(d, &c);
    return c.busy_ns;
}
static uint64_t pack_ns_of(struct dev *d) {
    struct dev_counters c;
    dev_get_counters(d, &c);
    return c.pack_ns;
}

struct totals {
    double q4k_bytes, pack_ns;
};

/* The device's staging buffer: activations at 0, their scales, the outputs. */
struct probe_stage {
    int buf;
    uint64_t scale_offset, out_offset;
};

static int probe_shape(FILE *out, struct threadpool *pool, struct dev *d, const struct probe_stage *st, struct moex_probe_shape sh,
                       const int64_t *ms, int n_m, struct totals *tot) {
    const bool modelled = dev_caps(d)->modelled_time;
    const int K = sh.K, N = sh.N;
    int M_max = 1;
    for (int i = 0; i < n_m; i++) M_max = ms[i] > M_max ? (int)ms[i] : M_max;
    const size_t row = quant_row_size(QT_Q4_K, K);
    uint64_t seed = 0x5eed0000u + (uint64_t)K * 31 + (uint64_t)N;
    float *x = malloc((size_t)(K > M_max ? K : M_max) * (size_t)K * sizeof *x);
    char *wq = malloc(row * (size_t)N);
    const size_t q8_stride = quant_row_size(QT_Q8_K, K);
    void *xq = malloc(q8_stride * (size_t)M_max);
    int8_t *xa = malloc((size_t)M_max * (size_t)K);
    float *xs = malloc((size_t)M_max * sizeof *xs), *y = malloc((size_t)M_max * (size_t)N * sizeof *y);
    int rc = !x || !wq || !xq || !xa || !xs || !y ? DEV_E_NOMEM : DEV_OK;
    if (rc == DEV_OK) {
        for (int n = 0; n < N; n++) {
            for (int k = 0; k < K; k++) x[k] = 0.02f * gauss(&seed);
            quant_traits(QT_Q4_K)->from_float(x, wq + row * (size_t)n, K);
        }
        for (int i = 0; i < M_max * K; i++) x[i] = gauss(&seed);
        quantize_rows(pool, QT_Q4_K, x, M_max, K, xq, q8_stride);
        if (w8a8_quantize_act(x, M_max, K, K, xa, xs) != 0) rc = DEV_E_VALUE;
    }
    if (rc == DEV_OK) rc = dev_write(d, (struct dev_ref){st->buf, 0}, xa, (uint64_t)M_max * K);
    if (rc == DEV_OK) rc = dev_write(d, (struct dev_ref){st->buf, st->scale_offset}, xs, (uint64_t)M_max * sizeof *xs);
    /* 64 MiB of copies: more than any last-level cache */
    const size_t w_bytes = row * (size_t)N;
    const int copies = modelled ? 1 : (int)((64u << 20) / w_bytes + 1);
    char *wcopies = modelled ? wq : malloc(w_bytes * (size_t)copies);
    if (!wcopies) rc = DEV_E_NOMEM;
    for (int c = 0; rc == DEV_OK && !modelled && c < copies; c++) memcpy(wcopies + (size_t)c * w_bytes, wq, w_bytes);
    struct pack_run pr = {d, wcopies, w_bytes, copies, K, N, rc};
    double pack_ns = 0;
    if (rc == DEV_OK) {
        uint64_t p0 = pack_ns_of(d);
        pack_once(&pr);
        pack_ns = (double)(pack_ns_of(d) - p0);
        if (!modelled && pr.rc == DEV_OK) pack_ns = best_ns(pack_once, &pr, 2) / copies;
        rc = pr.rc;
    }
    if (wcopies != wq) free(wcopies);
    if (rc != DEV_OK) {
        moex_errorf("probe %dx%d: %s (%s)", K, N, moex_error(), dev_status_string(rc));
        goto out;
    }
    tot->q4k_bytes += (double)row * N;
    tot->pack_ns += pack_ns;
    fprintf(out, "\n### %d x %d (Q4_K %.2f MiB, int8 %.2f MiB)\n\n", K, N, (double)row * N / 1048576.0,
           (double)K * N / 1048576.0);
    fprintf(out, "pack: %.3f ms%s, %.2f GB/s of Q4_K read\n\n", pack_ns / 1e6,
           modelled ? " (modelled)" : " (each of 64 MiB of copies, source from DRAM)", (double)row * N / pack_ns);
    /* On sim the host still computes every result (the cpu kernel): its
     * wall time is what a --device sim run waits for on this machine. */
    if (modelled)
        fprintf(out, "| M | cpu Q4_K x Q8_K (us) | %s W8A8 (us) modelled | device speedup | host wall of the submit (us) |\n"
               "|---:|---:|---:|---:|---:|\n", dev_caps(d)->name);
    else
        fprintf(out, "| M | cpu Q4_K x Q8_K (us) | %s W8A8 (us) | device speedup |\n|---:|---:|---:|---:|\n",
               dev_caps(d)->name);
    int crossover = 0;
    for (int i = 0; i < n_m; i++) {
        const int M = (int)ms[i];
        struct cpu_run cr = {pool, {wq, QT_Q4_K, N, K, row, NULL}, xq, q8_stride, M, y};
        double cpu_ns = best_ns(cpu_once, &cr, 3);
        struct dev_run dr = {d,
                             {0, M, {st->buf, 0}, {st->buf, st->scale_offset}, {st->buf, st->out_offset}, (size_t)N},
                             DEV_OK};
        double dev_ns, host_ns = 0;
        if (modelled) {
            uint64_t b0 = busy_of(d);
            dev_once(&dr);
            dev_ns = (double)(busy_of(d) - b0);
            host_ns = best_ns(dev_once, &dr, 3);
        } else {
            dev_ns = best_ns(dev_once, &dr, 3);
        }
        if (dr.rc != DEV_OK) {
            moex_errorf("probe %dx%d M=%d: %s", K, N, M, moex_error());
            rc = dr.rc;
            goto out;
        }
        bool wins = dev_ns < cpu_ns;
        if (wins && !crossover) crossover = M;
        if (!wins) crossover = 0; /* the device must keep winning at larger M */
        fprintf(out, "| %d | %.1f | %.1f | %.2fx%s |", M, cpu_ns / 1e3, dev_ns / 1e3, cpu_ns / dev_ns, wins ? " *" : "");
        if (modelled) fprintf(out, " %.1f |", host_ns / 1e3);
        fprintf(out, "\n");
    }
    if (crossover) fprintf(out, "\ncrossover: the device wins from M = %d on (min M of the device: %d)\n", crossover,
                          dev_caps(d)->min_m);
    else fprintf(out, "\ncrossover: none in the M tried (the CPU path wins at the largest M)\n");
out:
    free(x);
    free(wq);
    free(xq);
    free(xa);
    free(xs);
    free(y);
    return rc;
}

/* ---- host packing per source type ----
 * pack_matrix on this machine's threads, whatever the device (the sim
 * models its board's repack time, but the host work is real): the best
 * path against the generic one (dequantize a block, then quantize). */

struct type_pack_run {
    struct threadpool *pool;
    enum pack_path path;
    enum qtype t;
    const char *src;
    size_t bytes;
    int copies, K, N, rc;
    int8_t *codes;
    float *scales;
};
static void type_pack_once(void *arg) {
    struct type_pack_run *r = arg;
    for (int c = 0; c < r->copies && r->rc == PACK_OK; c++)
        r->rc = pack_matrix(r->pool, r->path, r->t, r->src + (size_t)c * r->bytes, r->K, r->N, PACK_ROWS, r->codes,
                            r->scales);
}

static void probe_pack_types(FILE *out, struct threadpool *pool, int K, int N, double gbps) {
    const enum qtype types[] = {QT_Q4_K, QT_Q5_K, QT_Q6_K, QT_Q8_0, QT_Q5_0, QT_F16, QT_BF16};
    fprintf(out, "\n### host packing per source type: %d x %d, %d threads, 64 MiB of copies (source from DRAM)\n\n", K, N,
           threadpool_size(pool));
    fprintf(out, "| type | best path GB/s of source | G values/s | of the bandwidth | generic path GB/s | best / generic |\n"
           "|---|---:|---:|---:|---:|---:|\n");
    float *x = malloc((size_t)K * sizeof *x);
    int8_t *codes = malloc((size_t)K * (size_t)N);
    float *scales = malloc((size_t)N * sizeof *scales);
    uint64_t seed = 0x7a9e5eedu;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0] && x && codes && scales; ti++) {
        const enum qtype t = types[ti];
        const size_t row = quant_row_size(t, K), bytes = row * (size_t)N;
        const int copies = (int)((64u << 20) / bytes + 1);
        char *src = malloc(bytes * (size_t)copies);
        if (!src) break;
        for (int n = 0; n < N; n++) {
            for (int k = 0; k < K; k++) x[k] = 0.02f * gauss(&seed);
            quant_traits(t)->from_float(x, src + row * (size_t)n, K);
        }
        for (int c = 1; c < copies; c++) memcpy(src + (size_t)c * bytes, src, bytes);
        double ns[2];
        int rc = PACK_OK;
        for (int p = 0; p < 2; p++) {
            struct type_pack_run r = {pool, p ? PACK_PATH_GENERIC : PACK_PATH_BEST, t, src, bytes, copies, K, N,
                                      PACK_OK, codes, scales};
            ns[p] = best_ns(type_pack_once, &r, 3) / copies;
            if (r.rc != PACK_OK) rc = r.rc;
        }
        free(src);
        if (rc != PACK_OK) {
            fprintf(out, "| %s | %s | | | | |\n", quant_type_name(t), pack_status_string(rc));
            continue;
        }
        const double best = (double)bytes / ns[0];
        fprintf(out, "| %s | %.2f | %.2f | %.2f | %.2f | %.2fx |\n", quant_type_name(t), best, (double)K * N / ns[0],
               best / gbps, (double)bytes / ns[1], ns[1] / ns[0]);
    }
    free(x);
    free(codes);
    free(scales);
}


/* The report as a stream whose lines go to the caller's write function. */
static ssize_t write_out(void *cookie, const char *buf, size_t size) {
    const struct moex_probe_params *p = cookie;
    p->write(p->user, buf, size);
    return (ssize_t)size;
}

const char *moex_sim_figures_help(void) { return sim_figures_help(); }

int moex_probe(const struct moex_probe_params *p) {
    static const struct moex_probe_shape default_shapes[] = { {2048, 768}, {768, 2048} };
    static const int default_rows[] = { 1, 8, 16, 32, 64, 128 };
    API_CHECK(p, -1);
    if (p->n_shapes < 0 || p->n_rows < 0 || (p->n_shapes && !p->shapes) || (p->n_rows && !p->rows))
        return moex_errorf("moex_probe: %d shapes and %d rows given with shapes %s and rows %s", p->n_shapes, p->n_rows,
                           p->shapes ? "set" : "NULL", p->rows ? "set" : "NULL");
    const struct moex_probe_shape *shapes = p->n_shapes ? p->shapes : default_shapes;
    int n_shapes = p->n_shapes ? p->n_shapes : 2;
    const int *rows = p->n_rows ? p->rows : default_rows;
    int n_m = p->n_rows ? p->n_rows : 6;
    if (!p->write) return moex_errorf("moex_probe: no write function");
    for (int s = 0; s < n_shapes; s++)
        if (shapes[s].K < 256 || shapes[s].K % 256 || shapes[s].N < 1)
            return moex_errorf("shape %dx%d: K must be a positive multiple of 256 (a Q4_K block), N positive",
                               shapes[s].K, shapes[s].N);
    for (int i = 0; i < n_m; i++)
        if (rows[i] < 1) return moex_errorf("rows %d: M must be at least 1", rows[i]);
    const char *device = dev_probe_device(p->device);
    if (!device) return moex_errorf("probe: device '%s' cannot be probed here", p->device);
    int64_t *ms = malloc(sizeof *ms * (size_t)n_m);
    struct threadpool *pool = ms ? threadpool_new(p->n_threads, true) : NULL;
    FILE *out = pool ? fopencookie((void *)p, "w", (cookie_io_functions_t){ .write = write_out }) : NULL;
    if (!out) {
        free(ms);
        threadpool_free(pool);
        return moex_errorf("probe: out of memory");
    }
    setvbuf(out, NULL, _IOLBF, 0);
    for (int i = 0; i < n_m; i++) ms[i] = rows[i];
    /* a block device (cuda) has a probe of its own; 1: not one */
    int shape_k[n_shapes], shape_n[n_shapes];
    for (int s = 0; s < n_shapes; s++) shape_k[s] = shapes[s].K, shape_n[s] = shapes[s].N;
    int blocks = dev_cuda_probe(out, device, shape_k, shape_n, n_shapes, ms, n_m);
    if (blocks != 1) {
        fclose(out);
        threadpool_free(pool);
        free(ms);
        return blocks == 0 ? 0 : moex_errorf("probe: %s", moex_error());
    }
    struct dev *d = NULL;
    int64_t slot_values = 0;
    int max_n = 0;
    for (int s = 0; s < n_shapes; s++) {
        if ((int64_t)shapes[s].K * shapes[s].N > slot_values) slot_values = (int64_t)shapes[s].K * shapes[s].N;
        if (shapes[s].N > max_n) max_n = shapes[s].N;
    }
    int64_t m_max = 1, k_max = 1;
    for (int i = 0; i < n_m; i++) m_max = ms[i] > m_max ? ms[i] : m_max;
    for (int s = 0; s < n_shapes; s++) k_max = shapes[s].K > k_max ? shapes[s].K : k_max;
    struct probe_stage st = {-1, ((uint64_t)m_max * (uint64_t)k_max + 63) / 64 * 64, 0};
    st.out_offset = st.scale_offset + ((uint64_t)m_max * sizeof(float) + 63) / 64 * 64;
    int rc = dev_open(device, &(struct dev_options){.pool = pool, .spec = p->sim_figures}, &d);
    if (rc == DEV_OK) rc = dev_pool_alloc(d, 1, slot_values, max_n);
    if (rc == DEV_OK) rc = dev_buffer_alloc(d, st.out_offset + (uint64_t)m_max * (uint64_t)max_n * sizeof(float), &st.buf);
    int result = rc == DEV_OK ? 0 : moex_errorf("probe: %s", moex_error());
    const struct dev_caps *caps = rc == DEV_OK ? dev_caps(d) : NULL;
    for (int s = 0; s < n_shapes && result == 0; s++) {
        int K = shapes[s].K, N = shapes[s].N;
        if (K % caps->k_multiple == 0 && N % caps->n_multiple == 0 && K <= caps->k_max && N <= caps->n_max) continue;
        moex_errorf("'%dx%d' for device %s (expected K a multiple of %d up to %d, N a multiple of %d up to %d)",
                    K, N, caps->name, caps->k_multiple, caps->k_max, caps->n_multiple, caps->n_max);
        result = -2;
    }
    if (result == 0) {
        fprintf(out, "## moex probe: %s (%s)\n\n", caps->name, caps->description);
        fprintf(out, "CPU: %s, %d threads; CPU path kernels: %s. Activations are quantized once, outside the timings;\n"
                     "times are the best of at least 3 runs and 50 ms, weights warm in cache.\n",
                cpu_features_string(), threadpool_size(pool), isa_name(quant_active_isa()));
        if (caps->modelled_time)
            fprintf(out, "Device times are the sim's RK3588 cost model (modelled, not measured); CPU times are "
                         "measured on this machine.\n");
        double gbps = memory_gbps(pool);
        struct totals tot = {0, 0};
        for (int s = 0; s < n_shapes && rc == DEV_OK; s++) rc = probe_shape(out, pool, d, &st, shapes[s], ms, n_m, &tot);
        if (rc == DEV_OK) {
            double pack_gbps = tot.q4k_bytes / tot.pack_ns;
            fprintf(out, "\nmemory read bandwidth (measured now, %d threads): %.1f GB/s\n", threadpool_size(pool), gbps);
            fprintf(out, "packing (%s): %.2f GB/s of Q4_K read = %.2f of the memory bandwidth\n",
                    caps->modelled_time ? "modelled" : "measured", pack_gbps, pack_gbps / gbps);
            if (!p->no_pack_types) probe_pack_types(out, pool, shapes[0].K, shapes[0].N, gbps);
        } else {
            result = -1;
        }
    }
    fclose(out);
    dev_close(d);
    threadpool_free(pool);
    free(ms);
    return result;
}
