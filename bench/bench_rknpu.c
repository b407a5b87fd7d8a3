/* The board check of the rknpu device (bench/rknpu-check.sh runs it): every
 * expert shape of the three supported architectures at several M through
 * the device, each result against the cpu device bit for bit, the time per
 * submission (median of reps), the submits and tasks, a figures line for
 * the sim (--figures FILE) and golden captures of one small submit per
 * shape (--captures DIR, replayed by tests/test_rknpu_replay.c).
 *
 *   bench_rknpu [--opts OPTS] [--reps N] [--m 1,8,64] [--shape KxN] [--figures FILE] [--captures DIR]
 *
 * OPTS is the device's option string (fake=rocket on a machine without an
 * NPU). Exit status 1 when a result differs from the cpu device's. */
#include "../tests/dev_host.h" /* jobs over host arrays through a staging buffer */
#include "core/error.h"
#include "core/timer.h"
#include "dev/dev.h"
#include "quant/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

/* A Q8_0 weight of random codes and small finite scales. */
static void *weight(int K, int N) {
    size_t row = quant_row_size(QT_Q8_0, K);
    uint8_t *q = malloc(row * (size_t)N);
    for (size_t i = 0; i < row * (size_t)N; i++) q[i] = (uint8_t)next();
    for (size_t b = 0; b < row * (size_t)N; b += 34) {
        uint16_t d = (uint16_t)(0x1c00 + next() % 0x0c00);
        memcpy(q + b, &d, 2);
    }
    return q;
}

struct shape {
    const char *arch, *what;
    int K, N;
};

static struct shape shapes[] = {
    {"qwen3moe", "gate/up", 2048, 768}, {"qwen3moe", "down", 768, 2048},   {"qwen35moe", "gate/up", 2048, 512},
    {"qwen35moe", "down", 512, 2048},   {"lfm2moe", "gate/up", 2048, 1792}, {"lfm2moe", "down", 1792, 2048},
};

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Runs one job of M rows `reps` times on both devices; the median device
 * time (ns) of a submission of `jobs` such jobs, and whether every result
 * equals the cpu device's. */
static int run_shape(struct dev *npu, struct dev *cpu, int slot, int K, int N, int M, int jobs, int reps,
                     double *median_ns, bool *exact) {
    struct dev_exec_job job[8];
    int8_t *act = malloc((size_t)M * K);
    float *scale = malloc((size_t)M * sizeof *scale), *out_n = malloc((size_t)jobs * M * N * sizeof(float)),
          *out_c = malloc((size_t)jobs * M * N * sizeof(float));
    for (size_t i = 0; i < (size_t)M * K; i++) act[i] = (int8_t)((int)(next() % 255) - 127);
    for (int i = 0; i < M; i++) scale[i] = 0.001f * (float)(1 + next() % 1000);
    int rc = DEV_OK;
    double *t = malloc((size_t)reps * sizeof *t);
    for (int pass = 0; pass < 2 && rc == DEV_OK; pass++) {
        struct dev *d = pass ? npu : cpu;
        float *out = pass ? out_n : out_c;
        for (int j = 0; j < jobs; j++) job[j] = (struct dev_exec_job){slot, M, act, scale, out + (size_t)j * M * N, (size_t)N};
        for (int r = 0; r < (pass ? reps : 1) && rc == DEV_OK; r++) {
            int64_t t0 = time_ns();
            rc = dev_run_host(d, job, jobs);
            if (pass) t[r] = (double)(time_ns() - t0);
        }
    }
    if (rc == DEV_OK) {
        qsort(t, (size_t)reps, sizeof *t, cmp_double);
        *median_ns = t[reps / 2];
        *exact = memcmp(out_n, out_c, (size_t)jobs * M * N * sizeof(float)) == 0;
    }
    free(t);
    free(act);
    free(scale);
    free(out_n);
    free(out_c);
    return rc;
}

int main(int argc, char **argv) {
    const char *opts = "", *figures = NULL, *captures = NULL, *m_list = "1,8,64,320";
    int reps = 5;
    bool one_shape = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--opts") && i + 1 < argc) opts = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--m") && i + 1 < argc) m_list = argv[++i];
        else if (!strcmp(argv[i], "--figures") && i + 1 < argc) figures = argv[++i];
        else if (!strcmp(argv[i], "--captures") && i + 1 < argc) captures = argv[++i];
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc && sscanf(argv[++i], "%dx%d", &shapes[0].K, &shapes[0].N) == 2)
            one_shape = true, shapes[0].arch = "given", shapes[0].what = "--shape";
        else return fprintf(stderr, "usage: bench_rknpu [--opts OPTS] [--reps N] [--m LIST] [--shape KxN] [--figures FILE] [--captures DIR]\n"), 2;
    }
    if (reps < 1) reps = 1;
    int ms[16], n_m = 0;
    for (const char *p = m_list; *p && n_m < 16; p = strchr(p, ',') ? strchr(p, ',') + 1 : p + strlen(p)) ms[n_m++] = atoi(p);
    struct dev *npu = NULL, *cpu = NULL;
    if (dev_open("rknpu", &(struct dev_options){.spec = opts}, &npu) != DEV_OK) {
        fprintf(stderr, "bench_rknpu: %s\n", moex_error());
        return 1;
    }
    int n_shapes = one_shape ? 1 : (int)(sizeof shapes / sizeof shapes[0]);
    if (dev_open("cpu", NULL, &cpu) != DEV_OK || dev_pool_alloc(npu, n_shapes, 2048 * 1792, 2048) != DEV_OK ||
        dev_pool_alloc(cpu, n_shapes, 2048 * 1792, 2048) != DEV_OK || dev_host_reserve(npu, 8u << 20) != DEV_OK ||
        dev_host_reserve(cpu, 8u << 20) != DEV_OK) {
        fprintf(stderr, "bench_rknpu: %s\n", moex_error());
        return 1;
    }
    printf("## rknpu check: %s\n\n| arch | matrix | K x N | M | jobs | submit (us) | GMAC/s | exact |\n|---|---|---|---:|---:|---:|---:|---|\n",
           dev_caps(npu)->description);
    int bad = 0;
    double single_min = 1e30, per_job_sum = 0, best_gmacs = 0, one_ns = 0;
    int per_job_n = 0;
    for (int s = 0; s < n_shapes; s++) {
        void *w = weight(shapes[s].K, shapes[s].N);
        if (dev_pack(npu, s, QT_Q8_0, w, shapes[s].K, shapes[s].N) != DEV_OK ||
            dev_pack(cpu, s, QT_Q8_0, w, shapes[s].K, shapes[s].N) != DEV_OK) {
            fprintf(stderr, "bench_rknpu: %s\n", moex_error());
            return 1;
        }
        free(w);
        for (int i = 0; i < n_m; i++)
            for (int jobs = 1; jobs <= 8; jobs += 7) {
                double ns = 0;
                bool exact = false;
                int rc = run_shape(npu, cpu, s, shapes[s].K, shapes[s].N, ms[i], jobs, reps, &ns, &exact);
                if (rc != DEV_OK) {
                    printf("| %s | %s | %dx%d | %d | %d | failed: %s | | no |\n", shapes[s].arch, shapes[s].what,
                           shapes[s].K, shapes[s].N, ms[i], jobs, moex_error());
                    bad++;
                    continue;
                }
                double gmacs = (double)ms[i] * shapes[s].K * shapes[s].N * jobs / ns;
                printf("| %s | %s | %dx%d | %d | %d | %.1f | %.2f | %s |\n", shapes[s].arch, shapes[s].what,
                       shapes[s].K, shapes[s].N, ms[i], jobs, ns / 1e3, gmacs, exact ? "yes" : "NO");
                bad += !exact;
                if (gmacs > best_gmacs) best_gmacs = gmacs;
                if (i == 0 && jobs == 1) { /* the smallest M: one job's time, then eight jobs' */
                    one_ns = ns;
                    if (ns < single_min) single_min = ns;
                }
                if (i == 0 && jobs == 8 && ns > one_ns) per_job_sum += (ns - one_ns) / 7, per_job_n++;
            }
    }
    /* the sim's figures from what was measured at the smallest M: a submission
     * of one job (its fixed cost, an upper bound), each further job in it,
     * and the best MAC rate seen */
    if (figures && single_min < 1e30) {
        FILE *f = fopen(figures, "w");
        double job_us = per_job_n ? per_job_sum / per_job_n / 1e3 : 1;
        if (!f || fprintf(f, "rk3588,submit_us=%.1f,job_us=%.1f,core_gmacs=%.1f\n", single_min / 1e3,
                          job_us > 0.1 ? job_us : 0.1, best_gmacs > 0.1 ? best_gmacs : 0.1) < 0 || fclose(f) != 0) {
            fprintf(stderr, "bench_rknpu: writing %s failed\n", figures);
            return 1;
        }
        printf("\nfigures for the sim (--sim \"$(cat %s)\") written\n", figures);
    }
    dev_close(npu);
    if (captures) { /* one small submit per shape, recorded */
        char o[512];
        snprintf(o, sizeof o, "%s%scapture=%s", opts, *opts ? "," : "", captures);
        struct dev *rec = NULL;
        if (dev_open("rknpu", &(struct dev_options){.spec = o}, &rec) != DEV_OK || dev_pool_alloc(rec, 1, 2048 * 1792, 2048) != DEV_OK ||
            dev_host_reserve(rec, 8u << 20) != DEV_OK) {
            fprintf(stderr, "bench_rknpu: %s\n", moex_error());
            return 1;
        }
        for (int s = 0; s < n_shapes; s++) {
            void *w = weight(shapes[s].K, shapes[s].N);
            double ns;
            bool exact;
            if (dev_pack(rec, 0, QT_Q8_0, w, shapes[s].K, shapes[s].N) != DEV_OK ||
                dev_pack(cpu, 0, QT_Q8_0, w, shapes[s].K, shapes[s].N) != DEV_OK ||
                run_shape(rec, cpu, 0, shapes[s].K, shapes[s].N, 8, 1, 1, &ns, &exact) != DEV_OK || !exact) {
                fprintf(stderr, "bench_rknpu: capture of %dx%d: %s\n", shapes[s].K, shapes[s].N, moex_error());
                bad++;
            }
            free(w);
        }
        printf("captures of M = 8 on every shape written to %s\n", captures);
        dev_close(rec);
    }
    dev_close(cpu);
    printf("\n%s\n", bad ? "FAILED: results differ from the cpu device" : "every result equals the cpu device's");
    return bad ? 1 : 0;
}
