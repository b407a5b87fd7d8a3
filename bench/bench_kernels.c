/* Kernel throughput against memory bandwidth. Decode multiplies one
 * activation row by a weight matrix far larger than cache, so vec_dot should
 * stream weights near the machine's read bandwidth; prefill feeds many
 * activation rows through gemm_tile, which should beat a loop of vec_dot per
 * (row, column) pair. Prints a markdown table (see bench/kernels.md).
 *
 * usage: bench_kernels [weight MiB, default 64] [threads, default all cores] */
#include "core/cpu.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "quant/quant.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Read bandwidth: OR every 32-byte word into four registers (no
 * floating-point latency chain, aligned loads). */
#if defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("avx2"))) static uint64_t read_avx2(const uint8_t *p, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 128 <= n; i += 128) {
        a0 = _mm256_or_si256(a0, _mm256_load_si256((const __m256i *)(p + i)));
        a1 = _mm256_or_si256(a1, _mm256_load_si256((const __m256i *)(p + i + 32)));
        a2 = _mm256_or_si256(a2, _mm256_load_si256((const __m256i *)(p + i + 64)));
        a3 = _mm256_or_si256(a3, _mm256_load_si256((const __m256i *)(p + i + 96)));
    }
    a0 = _mm256_or_si256(_mm256_or_si256(a0, a1), _mm256_or_si256(a2, a3));
    return (uint64_t)_mm256_extract_epi64(a0, 0) | (uint64_t)_mm256_extract_epi64(a0, 3);
}
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

static uint64_t read_best(const uint8_t *p, size_t n) {
#if defined(__x86_64__)
    if (cpu_features()->avx2) return read_avx2(p, n);
#elif defined(__aarch64__)
    uint64x2_t a0 = vdupq_n_u64(0), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 64 <= n; i += 64) {
        a0 = vorrq_u64(a0, vld1q_u64((const uint64_t *)(p + i)));
        a1 = vorrq_u64(a1, vld1q_u64((const uint64_t *)(p + i + 16)));
        a2 = vorrq_u64(a2, vld1q_u64((const uint64_t *)(p + i + 32)));
        a3 = vorrq_u64(a3, vld1q_u64((const uint64_t *)(p + i + 48)));
    }
    a0 = vorrq_u64(vorrq_u64(a0, a1), vorrq_u64(a2, a3));
    return vgetq_lane_u64(a0, 0) | vgetq_lane_u64(a0, 1);
#endif
    uint64_t s = 0;
    for (size_t i = 0; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        s |= v;
    }
    return s;
}

enum { BW_CHUNK = 1 << 18 }; /* bytes per work item */

struct bw_ctx { const uint8_t *buf; size_t n; uint64_t sink[64]; };
static void bw_range(void *arg, int64_t begin, int64_t end, int thread) {
    struct bw_ctx *c = arg;
    for (int64_t i = begin; i < end; i++) {
        size_t off = (size_t)i * BW_CHUNK, len = off + BW_CHUNK <= c->n ? BW_CHUNK : c->n - off;
        c->sink[thread & 63] |= read_best(c->buf + off, len);
    }
}

static double bench_bandwidth(struct threadpool *pool, const uint8_t *buf, size_t n) {
    struct bw_ctx c = {buf, n, {0}};
    int64_t items = (int64_t)((n + BW_CHUNK - 1) / BW_CHUNK);
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = time_s();
        threadpool_parallel_for(pool, items, 4, bw_range, &c);
        double gbs = (double)n / (time_s() - t0) / 1e9;
        if (gbs > best) best = gbs;
    }
    return best;
}

struct mat_ctx {
    const struct qtype_kernels *k;
    const uint8_t *w;
    size_t row_bytes;
    const uint8_t *a;
    size_t a_row_bytes;
    int n, n_a;
    float *out; /* [n_a][rows] */
    int64_t rows;
};

static void gemv_range(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    struct mat_ctx *c = arg;
    for (int64_t r = begin; r < end; r++) c->k->vec_dot(c->n, &c->out[r], c->w + (size_t)r * c->row_bytes, c->a);
}

enum { GEMM_BLOCK_ROWS = 64 };

static void gemm_range(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    struct mat_ctx *c = arg;
    for (int64_t blk = begin; blk < end; blk++) {
        int64_t r0 = blk * GEMM_BLOCK_ROWS;
        int nr = (int)(c->rows - r0 < GEMM_BLOCK_ROWS ? c->rows - r0 : GEMM_BLOCK_ROWS);
        c->k->gemm_tile(c->n, c->w + (size_t)r0 * c->row_bytes, c->row_bytes, nr, c->a, c->a_row_bytes, c->n_a,
                        c->out + r0, (size_t)c->rows);
    }
}

/* The same work as gemm_range, as a loop of vec_dot per (row, column). */
static void dotloop_range(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    struct mat_ctx *c = arg;
    for (int64_t blk = begin; blk < end; blk++) {
        int64_t r0 = blk * GEMM_BLOCK_ROWS;
        int nr = (int)(c->rows - r0 < GEMM_BLOCK_ROWS ? c->rows - r0 : GEMM_BLOCK_ROWS);
        for (int j = 0; j < c->n_a; j++)
            for (int i = 0; i < nr; i++)
                c->k->vec_dot(c->n, &c->out[(size_t)j * (size_t)c->rows + (size_t)(r0 + i)],
                              c->w + (size_t)(r0 + i) * c->row_bytes, c->a + (size_t)j * c->a_row_bytes);
    }
}

static double time_best(struct threadpool *pool, int64_t items, int64_t grain, threadpool_range_fn fn, void *ctx,
                        int reps) {
    double best = 1e30;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = time_s();
        threadpool_parallel_for(pool, items, grain, fn, ctx);
        double t = time_s() - t0;
        if (t < best) best = t;
    }
    return best;
}

/* Compute rate with everything in cache: a 64 x 32 tile (weights 64 rows,
 * 32 activation rows, K = n), ns per (row, column) pair and 256 values. */
static void bench_in_cache(int n) {
    static const enum qtype types[] = {QT_Q4_K, QT_Q5_K, QT_Q6_K, QT_Q8_0, QT_Q4_0, QT_Q5_0, QT_Q4_1, QT_Q5_1};
    const int nw = 64, na = 32;
    printf("\nIn cache (64 weight rows x %d activation rows, K=%d, one thread): ns per (row, column) pair per 256 values\n\n", na, n);
    printf("| type | ISA | gemm_tile | vec_dot loop | gemm speed-up |\n|---|---|---|---|---|\n");
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        enum qtype t = types[ti];
        const struct qtype_traits *tr = quant_traits(t);
        size_t rb = quant_row_size(t, n), ab = quant_row_size(tr->vec_dot_type, n);
        uint8_t *w = malloc(rb * nw), *a = malloc(ab * na);
        float *x = malloc((size_t)n * sizeof(float)), *out = malloc(sizeof(float) * nw * na);
        srand(2);
        for (int r = 0; r < nw; r++) {
            for (int i = 0; i < n; i++) x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
            tr->from_float(x, w + (size_t)r * rb, n);
        }
        for (int c = 0; c < na; c++) {
            for (int i = 0; i < n; i++) x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
            quant_quantize_act(tr->vec_dot_type, x, a + (size_t)c * ab, n);
        }
        for (int isa = 0; isa < ISA_COUNT; isa++) {
            const struct qtype_kernels *k = quant_kernels(t, (enum isa)isa);
            if (!k || !k->vec_dot || !k->gemm_tile) continue;
            int reps = isa == ISA_SCALAR ? 3 : 100;
            double tg = 1e30, td = 1e30;
            for (int rep = 0; rep < reps; rep++) {
                double t0 = time_s();
                k->gemm_tile(n, w, rb, nw, a, ab, na, out, (size_t)nw);
                double t1 = time_s();
                for (int c = 0; c < na; c++)
                    for (int r = 0; r < nw; r++) k->vec_dot(n, &out[c * nw + r], w + (size_t)r * rb, a + (size_t)c * ab);
                double t2 = time_s();
                if (t1 - t0 < tg) tg = t1 - t0;
                if (t2 - t1 < td) td = t2 - t1;
            }
            double per = (double)nw * na * (n / 256.0) / 1e9;
            printf("| %s | %s | %.2f | %.2f | %.2fx |\n", tr->name, isa_name((enum isa)isa), tg / per, td / per, td / tg);
            fflush(stdout);
        }
        free(w);
        free(a);
        free(x);
        free(out);
    }
}

int main(int argc, char **argv) {
    double mib = argc > 1 ? atof(argv[1]) : 64;
    int max_threads = argc > 2 ? atoi(argv[2]) : cpu_physical_cores();
    if (mib < 1 || max_threads < 1) {
        fprintf(stderr, "usage: bench_kernels [weight MiB >= 1] [threads >= 1]\n");
        return 2;
    }
    const int n = 2048, n_a = 16;
    size_t bytes = (size_t)(mib * 1024 * 1024);
    int thread_counts[2] = {1, max_threads};
    int n_counts = max_threads > 1 ? 2 : 1;
    struct threadpool *pools[2];
    for (int i = 0; i < n_counts; i++) {
        pools[i] = threadpool_new(thread_counts[i], true);
        if (!pools[i]) return 1;
    }

    printf("CPU: %s; %d physical cores; weights %.0f MiB, rows of %d values; gemm tiles of %d weight rows x %d "
           "activation rows\n\n",
           cpu_features_string(), cpu_physical_cores(), mib, n, GEMM_BLOCK_ROWS, n_a);
    /* memory read bandwidth over a buffer 4x the weight size */
    size_t nbuf = 4 * bytes / BW_CHUNK * BW_CHUNK;
    uint8_t *buf = aligned_alloc(64, nbuf);
    for (size_t i = 0; i < nbuf; i++) buf[i] = (uint8_t)i;
    double bw[2];
    for (int i = 0; i < n_counts; i++) {
        bw[i] = bench_bandwidth(pools[i], buf, nbuf);
        printf("memory read bandwidth, %d thread%s: %.1f GB/s\n", thread_counts[i], thread_counts[i] > 1 ? "s" : "", bw[i]);
    }
    free(buf);
    printf("\n| type | ISA | threads | vec_dot GB/s | of bandwidth | gemm_tile GB/s (M=%d) | vec_dot loop GB/s (M=%d) | gemm speed-up |\n",
           n_a, n_a);
    printf("|---|---|---|---|---|---|---|---|\n");

    static const enum qtype types[] = {QT_Q4_K, QT_Q6_K, QT_Q8_0, QT_Q5_0};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        enum qtype t = types[ti];
        const struct qtype_traits *tr = quant_traits(t);
        size_t row_bytes = quant_row_size(t, n), a_row_bytes = quant_row_size(tr->vec_dot_type, n);
        int64_t rows = (int64_t)(bytes / row_bytes);
        uint8_t *w = malloc((size_t)rows * row_bytes);
        /* 64 distinct quantized rows, repeated: the values do not matter, only the bytes read */
        float *x = malloc((size_t)n * sizeof(float));
        srand(1);
        for (int r = 0; r < 64 && r < rows; r++) {
            for (int i = 0; i < n; i++) x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
            tr->from_float(x, w + (size_t)r * row_bytes, n);
        }
        for (int64_t r = 64; r < rows; r++) memcpy(w + (size_t)r * row_bytes, w + (size_t)(r % 64) * row_bytes, row_bytes);
        uint8_t *a = malloc((size_t)n_a * a_row_bytes);
        for (int j = 0; j < n_a; j++) {
            for (int i = 0; i < n; i++) x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
            quant_quantize_act(tr->vec_dot_type, x, a + (size_t)j * a_row_bytes, n);
        }
        float *out = malloc((size_t)rows * n_a * sizeof(float));
        for (int isa = 0; isa < ISA_COUNT; isa++) {
            const struct qtype_kernels *k = quant_kernels(t, (enum isa)isa);
            if (!k || !k->vec_dot) continue;
            /* an ISA without its own gemm tile would be measured with another's: skip it */
            if (!k->gemm_tile) continue;
            for (int ci = 0; ci < n_counts; ci++) {
                struct mat_ctx c = {k, w, row_bytes, a, a_row_bytes, n, n_a, out, rows};
                double t_dot = time_best(pools[ci], rows, 256, gemv_range, &c, 5);
                int64_t blocks = (rows + GEMM_BLOCK_ROWS - 1) / GEMM_BLOCK_ROWS;
                int reps = isa == ISA_SCALAR ? 1 : 3;
                double t_gemm = time_best(pools[ci], blocks, 4, gemm_range, &c, reps);
                double t_loop = time_best(pools[ci], blocks, 4, dotloop_range, &c, reps);
                double gb = (double)rows * (double)row_bytes / 1e9;
                printf("| %s | %s | %d | %.1f | %.0f%% | %.2f | %.2f | %.2fx |\n", tr->name, isa_name((enum isa)isa),
                       thread_counts[ci], gb / t_dot, 100 * gb / t_dot / bw[ci], gb / t_gemm, gb / t_loop, t_loop / t_gemm);
                fflush(stdout);
            }
        }
        free(w);
        free(a);
        free(x);
        free(out);
    }
    for (int i = 0; i < n_counts; i++) threadpool_free(pools[i]);
    bench_in_cache(n);
    return 0;
}
