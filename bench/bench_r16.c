/* The interleaved (r16) kernels against the plain rows' kernels of the same
 * ISA, one thread, for every ISA this CPU runs (AVX-512, AVX2, and AVX2 with
 * AVX-VNNI's r16 kernels where it has them): decode (one activation row over
 * a matrix far larger than the caches, GB/s of weights) and prefill tiles
 * (an expert's 768 x 2048 matrix against M activation rows, G multiply-adds
 * per second). Best of 10 runs each, the two kernels alternating. Prints a
 * markdown table (see bench/r16.md).
 *
 * With "m" as the first argument it sweeps M instead, on the selected ISA's
 * r16 kernels only, in the experts' shapes (gate/up 768 x 2048 Q4_K, down
 * 2048 x 768 Q6_K and Q4_K): an expert's matrix hot in the caches, and cold
 * (128 experts one after the other, called in items of ITEM_ROWS weight rows
 * as the expert driver calls it), G multiply-adds per second of the thread's
 * CPU time.
 *
 * usage: bench_r16 [decode matrix MiB, default 96] [isa name: only that one]
 *        bench_r16 m [isa name] */
#include "core/cpu.h"
#include "core/timer.h"
#include "quant/quant.h"
#include "quant/quant_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 2048, EXPERT_ROWS = 768, SEED_ROWS = 64, RUNS = 10 };

/* rows x k weights of type t: SEED_ROWS quantized rows repeated (quantizing
 * a large matrix with the k-quant search takes minutes) */
static void *make_rows_k(enum qtype t, int rows, int k) {
    const size_t rb = quant_row_size(t, k);
    unsigned char *w = aligned_alloc(4096, (rb * rows + 4095) / 4096 * 4096);
    float x[N];
    for (int r = 0; r < SEED_ROWS && r < rows; r++) {
        for (int i = 0; i < k; i++) x[i] = (float)((r * 31 + i * 7) % 97 - 48) * 0.001f;
        quant_traits(t)->from_float(x, w + (size_t)r * rb, k);
    }
    for (int r = SEED_ROWS; r < rows; r++) memcpy(w + (size_t)r * rb, w + (size_t)(r % SEED_ROWS) * rb, rb);
    return w;
}

static void *make_rows(enum qtype t, int rows) { return make_rows_k(t, rows, N); }

/* One ISA's kernels for a type: the plain rows' and the interleaved rows'. */
struct kernel_set {
    const char *name;
    vec_dot_fn vec_dot;
    gemm_tile_fn gemm_tile, gemm_r16;
};

static void bench_set(enum qtype t, const struct kernel_set *k, double mib, const char *act, size_t ab) {
    const size_t rb = quant_row_size(t, N);
    const int rows = (int)(mib * 1048576 / rb) / QUANT_R16_ROWS * QUANT_R16_ROWS;
    unsigned char *w = make_rows(t, rows);
    unsigned char *p = aligned_alloc(4096, (rb * rows + 4095) / 4096 * 4096);
    quant_r16_pack(t, w, rb, rows, N, p);
    float *out = malloc(sizeof(float) * (size_t)rows * 64);
    double best[2] = { 0, 0 };
    for (int run = 0; run < RUNS; run++)
        for (int i = 0; i < 2; i++) {
            int64_t t0 = time_ns();
            if (i == 0) for (int r = 0; r < rows; r++) k->vec_dot(N, &out[r], w + (size_t)r * rb, act);
            else k->gemm_r16(N, p, rb, rows, act, ab, 1, out, (size_t)rows);
            double gbps = (double)rb * rows / (double)(time_ns() - t0);
            if (gbps > best[i]) best[i] = gbps;
        }
    printf("| %s | %s | M=1, %.0f MiB, GB/s | %.1f | %.1f | %.2fx |\n", quant_type_name(t), k->name, mib, best[0], best[1],
           best[1] / best[0]);
    const int ms[] = { 8, 32, 64 };
    for (int mi = 0; mi < 3; mi++) {
        const int M = ms[mi];
        best[0] = best[1] = 0;
        for (int run = 0; run < RUNS; run++)
            for (int i = 0; i < 2; i++) {
                int64_t t0 = time_ns();
                if (i == 0) k->gemm_tile(N, w, rb, EXPERT_ROWS, act, ab, M, out, EXPERT_ROWS);
                else k->gemm_r16(N, p, rb, EXPERT_ROWS, act, ab, M, out, EXPERT_ROWS);
                double gmacs = (double)N * EXPERT_ROWS * M / (double)(time_ns() - t0);
                if (gmacs > best[i]) best[i] = gmacs;
            }
        printf("| %s | %s | M=%d, %dx%d, GMAC/s | %.1f | %.1f | %.2fx |\n", quant_type_name(t), k->name, M, EXPERT_ROWS,
               N, best[0], best[1], best[1] / best[0]);
    }
    free(w); free(p); free(out);
}

enum { N_EXPERTS = 128, ITEM_ROWS = 32 };

/* This thread's CPU time: the host is shared, and time other processes
 * take from this core is not the kernel's. */
static int64_t cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* GMAC/s of r16 at M activation rows over N_EXPERTS packed experts of rows x
 * k weights (rb bytes a row) at p, in items of ITEM_ROWS rows, best of 3
 * passes; expert e reads its activation rows from act + e * act_step. */
static double cold_rate(gemm_tile_fn r16, int rows, int k, size_t rb, const unsigned char *p, const char *act,
                        size_t act_step, size_t ab, int M, float *out) {
    double best = 0;
    for (int pass = 0; pass < 3; pass++) {
        int64_t t0 = cpu_ns();
        for (int e = 0; e < N_EXPERTS; e++)
            for (int r = 0; r < rows; r += ITEM_ROWS)
                r16(k, p + rb * rows * e + (size_t)r * rb, rb, ITEM_ROWS, act + act_step * e, ab, M, out + r,
                    (size_t)rows);
        double g = (double)k * rows * M * N_EXPERTS / (double)(cpu_ns() - t0);
        if (g > best) best = g;
    }
    return best;
}

/* GMAC/s of the r16 kernel at M rows of a rows x k expert matrix: hot (one
 * expert, best of RUNS) and cold (every expert once per pass, in items,
 * best of 3 passes). act: 64 rows of k columns. */
static void sweep_m(enum qtype t, const char *isa, gemm_tile_fn r16, int rows, int k, const char *act, size_t ab) {
    const size_t rb = quant_row_size(t, k), eb = rb * rows;
    unsigned char *w = make_rows_k(t, rows, k);
    unsigned char *p = aligned_alloc(4096, (eb * N_EXPERTS + 4095) / 4096 * 4096);
    for (int e = 0; e < N_EXPERTS; e++) quant_r16_pack(t, w, rb, rows, k, p + eb * e);
    float *out = malloc(sizeof(float) * (size_t)rows * 64);
    char *fresh = malloc(ab * 64 * N_EXPERTS);
    for (int e = 0; e < N_EXPERTS; e++) memcpy(fresh + (size_t)e * 64 * ab, act, ab * 64);
    const int ms[] = { 1, 4, 8, 12, 16, 22, 24, 32, 40, 48, 64 };
    for (int mi = 0; mi < (int)(sizeof ms / sizeof ms[0]); mi++) {
        const int M = ms[mi];
        double hot = 0;
        for (int run = 0; run < RUNS; run++) {
            int64_t t0 = cpu_ns();
            r16(k, p, rb, rows, act, ab, M, out, (size_t)rows);
            double g = (double)k * rows * M / (double)(cpu_ns() - t0);
            if (g > hot) hot = g;
        }
        const double cold = cold_rate(r16, rows, k, rb, p, act, 0, ab, M, out);
        /* as the model has them: each expert's own activation rows, not in the caches */
        const double cold_fresh = cold_rate(r16, rows, k, rb, p, fresh, 64 * ab, ab, M, out);
        printf("| %s %dx%d | %s | %d | %.1f | %.1f | %.1f |\n", quant_type_name(t), rows, k, isa, M, hot, cold, cold_fresh);
    }
    free(w); free(p); free(out); free(fresh);
}

int main(int argc, char **argv) {
    const size_t ab = quant_row_size(QT_Q8_K, N);
    char *act = malloc(ab * 64);
    float x[N];
    for (int c = 0; c < 64; c++) {
        for (int i = 0; i < N; i++) x[i] = (float)((i * 13 + c * 5) % 29 - 14) * 0.1f;
        quant_quantize_act(QT_Q8_K, x, act + (size_t)c * ab, N);
    }
    if (argc > 1 && !strcmp(argv[1], "m")) {
        /* the expert shapes: gate and up (n_ff x n_embd), down (n_embd x n_ff) */
        const size_t ab_down = quant_row_size(QT_Q8_K, EXPERT_ROWS);
        char *act_down = malloc(ab_down * 64);
        for (int c = 0; c < 64; c++) {
            for (int i = 0; i < EXPERT_ROWS; i++) x[i] = (float)((i * 13 + c * 5) % 29 - 14) * 0.1f;
            quant_quantize_act(QT_Q8_K, x, act_down + (size_t)c * ab_down, EXPERT_ROWS);
        }
        printf("%s, 1 thread\n\n| matrix | kernels | M | hot GMAC/s | cold, items of %d rows, GMAC/s | cold, and each expert's own activations |\n|---|---|---:|---:|---:|---:|\n",
               cpu_features_string(), ITEM_ROWS);
        const struct { enum qtype t; int rows, k; } shapes[] = {
            { QT_Q4_K, EXPERT_ROWS, N }, { QT_Q6_K, N, EXPERT_ROWS }, { QT_Q4_K, N, EXPERT_ROWS } };
        for (int si = 0; si < 3; si++)
            for (int isa = ISA_COUNT - 1; isa > ISA_SCALAR; isa--) {
                const gemm_tile_fn r16 = quant_r16_kernel(shapes[si].t, (enum isa)isa);
                if (!r16 || (argc > 2 && strcmp(argv[2], isa_name((enum isa)isa)))) continue;
                const int down = shapes[si].k == EXPERT_ROWS;
                sweep_m(shapes[si].t, isa_name((enum isa)isa), r16, shapes[si].rows, shapes[si].k,
                        down ? act_down : act, down ? ab_down : ab);
                break;
            }
        free(act); free(act_down);
        return 0;
    }
    const double mib = argc > 1 ? atof(argv[1]) : 96;
    const char *only = argc > 2 ? argv[2] : NULL;
    printf("%s, 1 thread, best of %d\n\n", cpu_features_string(), RUNS);
    printf("| type | kernels | test | plain rows | r16 | r16 / plain |\n|---|---|---|---:|---:|---:|\n");
    const enum qtype types[] = { QT_Q4_K, QT_Q6_K };
    for (int ti = 0; ti < 2; ti++) {
        const enum qtype t = types[ti];
        int found = 0;
        for (int isa = ISA_COUNT - 1; isa > ISA_SCALAR; isa--) {
            const struct qtype_kernels *plain = quant_kernels(t, (enum isa)isa);
            const gemm_tile_fn r16 = quant_r16_kernel(t, (enum isa)isa);
            if (!plain || !plain->vec_dot || !plain->gemm_tile || !r16) continue;
            struct kernel_set k = { isa_name((enum isa)isa), plain->vec_dot, plain->gemm_tile, r16 };
            if (!only || !strcmp(only, k.name)) bench_set(t, &k, mib, act, ab), found++;
#if defined(__x86_64__)
            /* AVX-VNNI's r16 kernels against the same plain AVX2 ones */
            if (isa == ISA_AVX2 && cpu_features()->avxvnni && (!only || !strcmp(only, "avxvnni"))) {
                k.name = "avx2 + avx-vnni r16";
                k.gemm_r16 = t == QT_Q4_K ? gemm_q4_K_r16_avxvnni : gemm_q6_K_r16_avxvnni;
                bench_set(t, &k, mib, act, ab), found++;
            }
#endif
        }
        if (!found) printf("| %s | - | no r16 kernel on this machine | | | |\n", quant_type_name(t));
    }
    free(act);
    return 0;
}
