/* The delta rule alone (delta_net_run: every head of one layer, one
 * thread), Qwen3.5-35B-A3B's heads (16 key heads, 32 value heads, 128
 * dims): a prompt of P tokens in one pass from position 0, then decode
 * steps of one token each from there. Times are the process's CPU time
 * (best of several runs), so that a shared machine's other work does not
 * count. Prints a markdown table (see bench/split.md).
 *
 * usage: bench_delta_net [prompt tokens, default 512] [decode steps, default 64] */
#include "arch/block_delta_net.h"
#include "quant/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { K_HEADS = 16, V_HEADS = 32, HEAD_DIM = 128, REPS = 5 };

static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static float *random_floats(size_t n, float lo, float hi) {
    float *v = malloc(n * sizeof *v);
    uint32_t s = 12345;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        v[i] = lo + (hi - lo) * (float)(s >> 8) / (float)(1u << 24);
    }
    return v;
}

int main(int argc, char **argv) {
    int P = argc > 1 ? atoi(argv[1]) : 512, steps = argc > 2 ? atoi(argv[2]) : 64;
    if (P < 1 || steps < 1) {
        fprintf(stderr, "usage: bench_delta_net [prompt tokens >= 1] [decode steps >= 1]\n");
        return 2;
    }
    const struct delta_net_dims d = { K_HEADS, V_HEADS, HEAD_DIM };
    int n = P + steps;
    size_t kq = (size_t)K_HEADS * HEAD_DIM, vv = (size_t)V_HEADS * HEAD_DIM;
    float *q = random_floats((size_t)n * kq, -1, 1), *k = random_floats((size_t)n * kq, -1, 1);
    l2_norm_rows(q, n * K_HEADS, HEAD_DIM, 1e-6f);
    l2_norm_rows(k, n * K_HEADS, HEAD_DIM, 1e-6f);
    float *v = random_floats((size_t)n * vv, -1, 1), *g = random_floats((size_t)n * V_HEADS, -2, -0.01f);
    float *beta = random_floats((size_t)n * V_HEADS, 0.05f, 0.95f), *out = malloc((size_t)n * vv * sizeof(float));
    size_t state_floats = (size_t)V_HEADS * delta_net_head_floats(&d);
    float *state = malloc(state_floats * sizeof(float)), *scratch = malloc(delta_net_run_scratch(&d, 1) * sizeof(float));
    double best_prefill = 1e30, best_decode = 1e30;
    for (int rep = 0; rep < REPS; rep++) {
        memset(state, 0, state_floats * sizeof(float));
        struct delta_net_io io = { P, 0, q, k, v, g, beta, state, out };
        double t0 = cpu_seconds();
        delta_net_run(NULL, &d, &io, scratch);
        double t1 = cpu_seconds();
        for (int t = P; t < n; t++) {
            struct delta_net_io step = { 1, t, q + t * kq, k + t * kq, v + t * vv, g + (size_t)t * V_HEADS,
                                         beta + (size_t)t * V_HEADS, state, out + t * vv };
            delta_net_run(NULL, &d, &step, scratch);
        }
        double t2 = cpu_seconds();
        if (t1 - t0 < best_prefill) best_prefill = t1 - t0;
        if (t2 - t1 < best_decode) best_decode = t2 - t1;
    }
    printf("| kernels | prompt | prefill ms (one layer) | decode us per token (one layer) |\n|---|---:|---:|---:|\n");
    printf("| %s | %d | %.2f | %.1f |\n", isa_name(quant_active_isa()), P, best_prefill * 1e3, best_decode * 1e6 / steps);
    free(q); free(k); free(v); free(g); free(beta); free(out); free(state); free(scratch);
    return 0;
}
