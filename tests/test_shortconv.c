/* LFM2 short convolution: the batch form, token-by-token decode and uneven
 * splits all equal a plain full-history reference; the whole block (in_proj,
 * mix, out_proj) equals the same written with plain loops. */
#include "harness.h"
#include "arch/block_shortconv.h"
#include "core/threadpool.h"
#include "model/context_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define D 48
#define T 23

static float frand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return ((float)((*s >> 8) & 0xffff) / 32768.0f) - 1.0f;
}

/* y[t][i] = C[t][i] * sum_j k[i][j] * (B*x)[t-L+1+j][i], zero before the start. */
static void reference(const float *bcx, int n, int L, const float *kernel, float *y) {
    for (int t = 0; t < n; t++)
        for (int i = 0; i < D; i++) {
            float sum = 0;
            for (int j = 0; j < L; j++) {
                int s = t - (L - 1) + j;
                float bx = s < 0 ? 0.0f : bcx[(size_t)s * 3 * D + i] * bcx[(size_t)s * 3 * D + 2 * D + i];
                sum += bx * kernel[i * L + j];
            }
            y[t * D + i] = bcx[(size_t)t * 3 * D + D + i] * sum;
        }
}

static float max_diff(const float *a, const float *b, size_t n) {
    float m = 0;
    for (size_t i = 0; i < n; i++) if (fabsf(a[i] - b[i]) > m || a[i] != a[i] || b[i] != b[i]) m = fabsf(a[i] - b[i]);
    return m;
}

/* Runs the mix over the sequence in pieces of the given lengths (cycled). */
static void run_split(const float *bcx, int L, const float *kernel, const int *pieces, int n_pieces, float *y) {
    float *work = malloc(sizeof(float) * T * 3 * D);
    float *state = calloc(shortconv_state_floats(D, L), sizeof(float));
    memcpy(work, bcx, sizeof(float) * T * 3 * D);
    for (int t = 0, p = 0; t < T; p++) {
        int n = pieces[p % n_pieces];
        if (n > T - t) n = T - t;
        shortconv_mix(work + (size_t)t * 3 * D, n, D, kernel, L, state, y + (size_t)t * D);
        t += n;
    }
    free(state);
    free(work);
}

static void test_mix(int L) {
    unsigned seed = 7u + (unsigned)L;
    float *bcx = malloc(sizeof(float) * T * 3 * D), *kernel = malloc(sizeof(float) * D * L);
    for (int i = 0; i < T * 3 * D; i++) bcx[i] = frand(&seed);
    for (int i = 0; i < D * L; i++) kernel[i] = frand(&seed);
    float ref[T * D], batch[T * D], tokens[T * D], uneven[T * D];
    reference(bcx, T, L, kernel, ref);
    int whole[] = { T }, one[] = { 1 }, odd[] = { 2, 1, 5, 1, 1, 7 };
    run_split(bcx, L, kernel, whole, 1, batch);
    run_split(bcx, L, kernel, one, 1, tokens);
    run_split(bcx, L, kernel, odd, 6, uneven);
    CHECKF(max_diff(batch, ref, T * D) <= 1e-6f, "L %d batch vs reference %g", L, max_diff(batch, ref, T * D));
    CHECKF(max_diff(tokens, batch, T * D) <= 1e-6f, "L %d tokens vs batch %g", L, max_diff(tokens, batch, T * D));
    CHECKF(max_diff(uneven, batch, T * D) <= 1e-6f, "L %d uneven vs batch %g", L, max_diff(uneven, batch, T * D));
    /* The state matters: a second sequence started from the first one's
     * state differs from one started fresh. */
    float *state = calloc(shortconv_state_floats(D, L), sizeof(float));
    float *work = malloc(sizeof(float) * T * 3 * D);
    memcpy(work, bcx, sizeof(float) * T * 3 * D);
    shortconv_mix(work, T, D, kernel, L, state, batch);
    memcpy(work, bcx, sizeof(float) * T * 3 * D);
    shortconv_mix(work, 1, D, kernel, L, state, batch);
    CHECKF(max_diff(batch, ref, D) > 1e-3f, "L %d: a carried state changes the first output", L);
    free(work);
    free(state);
    free(bcx);
    free(kernel);
}

static void test_forward(void) {
    unsigned seed = 99;
    float *in_proj = malloc(sizeof(float) * 3 * D * D), *out_proj = malloc(sizeof(float) * D * D);
    float kernel[D * 3], h[T * D];
    for (int i = 0; i < 3 * D * D; i++) in_proj[i] = frand(&seed) * 0.2f;
    for (int i = 0; i < D * D; i++) out_proj[i] = frand(&seed) * 0.2f;
    for (int i = 0; i < D * 3; i++) kernel[i] = frand(&seed);
    for (int i = 0; i < T * D; i++) h[i] = frand(&seed);
    struct shortconv_weights w = {
        .in_proj = { .data = in_proj, .type = QT_F32, .rows = 3 * D, .cols = D, .row_bytes = D * sizeof(float) },
        .kernel = kernel,
        .out_proj = { .data = out_proj, .type = QT_F32, .rows = D, .cols = D, .row_bytes = D * sizeof(float) },
        .l_cache = 3,
    };
    /* Plain loops: bcx = h . in_proj^T, mix by the reference, out = y . out_proj^T. */
    float *bcx = malloc(sizeof(float) * T * 3 * D), y[T * D], want[T * D], got[T * D];
    for (int t = 0; t < T; t++)
        for (int r = 0; r < 3 * D; r++) {
            double s = 0;
            for (int i = 0; i < D; i++) s += (double)h[t * D + i] * in_proj[r * D + i];
            bcx[t * 3 * D + r] = (float)s;
        }
    reference(bcx, T, 3, kernel, y);
    for (int t = 0; t < T; t++)
        for (int r = 0; r < D; r++) {
            double s = 0;
            for (int i = 0; i < D; i++) s += (double)y[t * D + i] * out_proj[r * D + i];
            want[t * D + r] = (float)s;
        }
    struct threadpool *pool = threadpool_new(2, false);
    float state[2 * D] = { 0 }, ybuf[T * D];
    void *act = malloc(matmul_scratch_size(&w.in_proj, T) + matmul_scratch_size(&w.out_proj, T));
    struct context c = { .pool = pool, .act = act }; /* no executor: the CPU's kernels */
    shortconv_forward(&c, &w, h, T, D, state, bcx, ybuf, got);
    CHECKF(max_diff(got, want, T * D) <= 1e-4f, "forward vs plain loops %g", max_diff(got, want, T * D));
    /* Token by token through the whole block gives the batch's result. */
    float step[T * D];
    memset(state, 0, sizeof state);
    for (int t = 0; t < T; t++) shortconv_forward(&c, &w, h + t * D, 1, D, state, bcx, ybuf, step + t * D);
    CHECKF(max_diff(step, got, T * D) <= 1e-5f, "forward tokens vs batch %g", max_diff(step, got, T * D));
    threadpool_free(pool);
    free(act);
    free(bcx);
    free(in_proj);
    free(out_proj);
}

int main(void) {
    test_mix(3);
    test_mix(2);
    test_mix(4);
    CHECK(shortconv_state_floats(2048, 3) == 2 * 2048);
    test_forward();
    return test_finish();
}
