/* The tiled attention kernel alone, Qwen3-30B-A3B's heads (32 query heads,
 * 4 KV heads, 128 dims): a prompt of P tokens from position 0 (the causal
 * triangle) and one decoded token at a few cache depths, for each ISA that
 * runs here, f16 and f32 caches. Times are the process's CPU time (best of
 * several calls), so that a shared machine's other work does not count;
 * GFLOP/s counts 4*head_dim flops per (query head, visible key) pair.
 * Prints a markdown table (see bench/attention.md).
 *
 * usage: bench_attention [prompt tokens, default 512] [threads, default 1] */
#include "quant/attn_kernels.h"
#include "arch/attn_tiled.h"
#include "core/threadpool.h"
#include "quant/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { HEADS = 32, KV_HEADS = 4, HEAD_DIM = 128 };

static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Best CPU seconds of reps calls attending tokens pos0..pos0+n-1. */
static double time_run(struct threadpool *pool, const struct attn_kernels *ak, struct attn_tiles *t, const float *q,
                       float *out, const void *k, const void *v, size_t elem, int n, int pos0, int reps) {
    struct attn_run r = { q, out, n, pos0, k, v, (size_t)KV_HEADS * HEAD_DIM, elem };
    double best = 1e30;
    for (int i = 0; i < reps; i++) {
        double c0 = cpu_seconds();
        attn_tiled(pool, ak, t, &r, 1);
        double dt = cpu_seconds() - c0;
        if (dt < best) best = dt;
    }
    return best;
}

int main(int argc, char **argv) {
    const int P = argc > 1 ? atoi(argv[1]) : 512, threads = argc > 2 ? atoi(argv[2]) : 1;
    const int depths[] = { 0, 15, 127, 511, 2047 };
    const int n_pos = P > 2048 ? P : 2048;
    const size_t qd = (size_t)HEADS * HEAD_DIM, kvd = (size_t)KV_HEADS * HEAD_DIM;
    float *q = malloc(P * qd * 4), *out = malloc(P * qd * 4), *kf = malloc(n_pos * kvd * 4), *vf = malloc(n_pos * kvd * 4);
    uint16_t *kh = malloc(n_pos * kvd * 2), *vh = malloc(n_pos * kvd * 2);
    struct threadpool *pool = threadpool_new(threads, true);
    struct attn_tiles *t = attn_tiles_new(HEADS, KV_HEADS, HEAD_DIM, n_pos, threads);
    if (!q || !out || !kf || !vf || !kh || !vh || !pool || !t) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    uint32_t x = 1;
    for (size_t i = 0; i < P * qd; i++) q[i] = (float)((x = x * 1664525u + 1013904223u) >> 9) / (float)(1u << 22) - 1.0f;
    for (size_t i = 0; i < n_pos * kvd; i++) {
        kf[i] = (float)((x = x * 1664525u + 1013904223u) >> 9) / (float)(1u << 22) - 1.0f;
        vf[i] = (float)((x = x * 1664525u + 1013904223u) >> 9) / (float)(1u << 22) - 1.0f;
    }
    f32_to_fp16_row(kf, kh, (int64_t)(n_pos * kvd));
    f32_to_fp16_row(vf, vh, (int64_t)(n_pos * kvd));
    printf("| isa | cache | test | ms | GFLOP/s |\n| --- | --- | --- | ---: | ---: |\n");
    const enum isa isas[] = { ISA_SCALAR, ISA_AVX2, ISA_AVX512, ISA_NEON };
    for (int ii = 1; ii < 4; ii++) {
        const struct attn_kernels *ak = attn_kernels_isa(isas[ii]);
        if (!ak) continue;
        for (size_t elem = 2; elem <= 4; elem += 2) {
            const void *k = elem == 2 ? (const void *)kh : kf, *v = elem == 2 ? (const void *)vh : vf;
            double pairs = (double)P * (P + 1) / 2 * HEADS;
            double s = time_run(pool, ak, t, q, out, k, v, elem, P, 0, 3);
            printf("| %s | f%zu | prompt %d | %.2f | %.1f |\n", isa_name(isas[ii]), 8 * elem, P, s * 1e3,
                   pairs * 4 * HEAD_DIM / s * 1e-9);
            for (size_t di = 0; di < sizeof depths / sizeof depths[0]; di++) {
                double d = time_run(pool, ak, t, q, out, k, v, elem, 1, depths[di], 2000);
                printf("| %s | f%zu | 1 token at %d | %.4f | %.1f |\n", isa_name(isas[ii]), 8 * elem, depths[di], d * 1e3,
                       (double)(depths[di] + 1) * HEADS * 4 * HEAD_DIM / d * 1e-9);
            }
        }
    }
    attn_tiles_free(t);
    threadpool_free(pool);
    free(q); free(out); free(kf); free(vf); free(kh); free(vh);
    return 0;
}
