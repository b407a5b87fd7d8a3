/* The interleaved (r16) kernels against the plain rows' kernels, one thread:
 * decode (one activation row over a matrix far larger than the caches, GB/s
 * of weights) and prefill tiles (an expert's 768 x 2048 matrix against M
 * activation rows, G multiply-adds/s). Best of 10 runs each, the two kernels
 * alternating. Prints a markdown table (see bench/r16.md).
 *
 * usage: bench_r16 [decode matrix MiB, default 96] */
#include "core/cpu.h"
#include "core/timer.h"
#include "quant/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 2048, EXPERT_ROWS = 768, SEED_ROWS = 64, RUNS = 10 };

/* rows x N weights of type t: SEED_ROWS quantized rows repeated (quantizing
 * a large matrix with the k-quant search takes minutes) */
static void *make_rows(enum qtype t, int rows) {
    const size_t rb = quant_row_size(t, N);
    unsigned char *w = aligned_alloc(4096, (rb * rows + 4095) / 4096 * 4096);
    float x[N];
    for (int r = 0; r < SEED_ROWS && r < rows; r++) {
        for (int i = 0; i < N; i++) x[i] = (float)((r * 31 + i * 7) % 97 - 48) * 0.001f;
        quant_traits(t)->from_float(x, w + (size_t)r * rb, N);
    }
    for (int r = SEED_ROWS; r < rows; r++) memcpy(w + (size_t)r * rb, w + (size_t)(r % SEED_ROWS) * rb, rb);
    return w;
}

int main(int argc, char **argv) {
    const double mib = argc > 1 ? atof(argv[1]) : 96;
    const size_t ab = quant_row_size(QT_Q8_K, N);
    char *act = malloc(ab * 64);
    float x[N];
    for (int c = 0; c < 64; c++) {
        for (int i = 0; i < N; i++) x[i] = (float)((i * 13 + c * 5) % 29 - 14) * 0.1f;
        quant_quantize_act(QT_Q8_K, x, act + (size_t)c * ab, N);
    }
    printf("%s, kernels: %s, 1 thread, best of %d\n\n", cpu_features_string(), isa_name(quant_active_isa()), RUNS);
    printf("| type | test | plain rows | r16 | r16 / plain |\n|---|---|---:|---:|---:|\n");
    const enum qtype types[] = { QT_Q4_K, QT_Q6_K };
    for (int ti = 0; ti < 2; ti++) {
        const struct qtype_traits *tr = quant_traits(types[ti]);
        if (!tr->gemm_r16) { printf("| %s | - | no r16 kernel on this machine | | |\n", tr->name); continue; }
        const size_t rb = quant_row_size(types[ti], N);
        const int rows = (int)(mib * 1048576 / rb) / QUANT_R16_ROWS * QUANT_R16_ROWS;
        unsigned char *w = make_rows(types[ti], rows);
        unsigned char *p = aligned_alloc(4096, (rb * rows + 4095) / 4096 * 4096);
        quant_r16_pack(types[ti], w, rb, rows, N, p);
        float *out = malloc(sizeof(float) * (size_t)rows * 64);
        double best[2] = { 0, 0 };
        for (int run = 0; run < RUNS; run++)
            for (int k = 0; k < 2; k++) {
                int64_t t0 = time_ns();
                if (k == 0) for (int r = 0; r < rows; r++) tr->vec_dot(N, &out[r], w + (size_t)r * rb, act);
                else tr->gemm_r16(N, p, rb, rows, act, ab, 1, out, (size_t)rows);
                double gbps = (double)rb * rows / (double)(time_ns() - t0);
                if (gbps > best[k]) best[k] = gbps;
            }
        printf("| %s | M=1, %.0f MiB, GB/s | %.1f | %.1f | %.2fx |\n", tr->name, mib, best[0], best[1], best[1] / best[0]);
        const int ms[] = { 8, 32, 64 };
        for (int mi = 0; mi < 3; mi++) {
            const int M = ms[mi];
            best[0] = best[1] = 0;
            for (int run = 0; run < RUNS; run++)
                for (int k = 0; k < 2; k++) {
                    int64_t t0 = time_ns();
                    if (k == 0) tr->gemm_tile(N, w, rb, EXPERT_ROWS, act, ab, M, out, EXPERT_ROWS);
                    else tr->gemm_r16(N, p, rb, EXPERT_ROWS, act, ab, M, out, EXPERT_ROWS);
                    double gmacs = (double)N * EXPERT_ROWS * M / (double)(time_ns() - t0);
                    if (gmacs > best[k]) best[k] = gmacs;
                }
            printf("| %s | M=%d, %dx%d, GMAC/s | %.1f | %.1f | %.2fx |\n", tr->name, M, EXPERT_ROWS, N, best[0], best[1],
                   best[1] / best[0]);
        }
        free(w); free(p); free(out);
    }
    free(act);
    return 0;
}
