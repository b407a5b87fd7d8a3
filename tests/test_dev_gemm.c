/* The cpu device's int8 GEMM kernels: every SIMD kernel that runs here
 * equals the plain C reference bit for bit, on the Qwen3-30B-A3B expert
 * shapes, on odd K and channel counts (tails of every block size), on M
 * from 1 to 300, and at the extremes of the codes (activations of -128,
 * weights of +-127, the largest K). Columns past n are never written. */
#include "harness.h"

#include "dev/dev_cpu_gemm.h"
#include "pack/w8a8.h"
#include "quant/quant.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static uint32_t rnd(void) { return (uint32_t)(test_rand() >> 16); }

enum fill { FILL_RANDOM, FILL_EXTREME, FILL_SMALL };

/* Weights in [-127, 127] (the W8A8 codes); activations any int8. */
static void fill_codes(int8_t *w, size_t n_w, int8_t *a, size_t n_a, enum fill f) {
    for (size_t i = 0; i < n_w; i++) {
        int v = (int)(rnd() % 255) - 127;
        if (f == FILL_EXTREME) v = rnd() & 1 ? 127 : -127;
        if (f == FILL_SMALL) v = (int)(rnd() % 5) - 2;
        w[i] = (int8_t)v;
    }
    for (size_t i = 0; i < n_a; i++) {
        int v = (int)(rnd() % 256) - 128;
        if (f == FILL_EXTREME) v = rnd() & 1 ? -128 : 127;
        if (f == FILL_SMALL) v = (int)(rnd() % 7) - 3;
        a[i] = (int8_t)v;
    }
}

static float scale(void) { return (float)(rnd() % 100000 + 1) * 1e-7f; }

/* Runs fn and the reference on one case; returns the differing outputs. */
static int compare(dev_cpu_gemm_fn fn, int m, int n, int K, enum fill f) {
    const size_t stride = (size_t)n + 3;
    int8_t *a = malloc((size_t)m * (size_t)K), *w = malloc((size_t)n * (size_t)K);
    float *as = malloc((size_t)m * sizeof *as), *ws = malloc((size_t)n * sizeof *ws);
    float *o_ref = malloc((size_t)m * stride * sizeof *o_ref), *o = malloc((size_t)m * stride * sizeof *o);
    fill_codes(w, (size_t)n * (size_t)K, a, (size_t)m * (size_t)K, f);
    for (int i = 0; i < m; i++) as[i] = scale();
    for (int c = 0; c < n; c++) ws[c] = c % 11 == 5 ? 0.0f : scale(); /* a zero row's scale is 0 */
    for (size_t i = 0; i < (size_t)m * stride; i++) o_ref[i] = o[i] = -7.0f;
    dev_cpu_gemm_ref(a, as, m, w, ws, n, K, o_ref, stride);
    fn(a, as, m, w, ws, n, K, o, stride);
    int bad = 0;
    for (int i = 0; i < m; i++) {
        bad += memcmp(o_ref + (size_t)i * stride, o + (size_t)i * stride, (size_t)n * sizeof(float)) != 0;
        for (size_t c = (size_t)n; c < stride; c++) bad += o[(size_t)i * stride + c] != -7.0f;
    }
    free(a);
    free(w);
    free(as);
    free(ws);
    free(o_ref);
    free(o);
    return bad;
}

/* The reference against int64 sums written out here. */
static void test_reference(void) {
    const int m = 3, n = 5, K = 70;
    int8_t a[3 * 70], w[5 * 70];
    float as[3] = {0.5f, 1e-3f, 3.0f}, ws[5] = {0.25f, 0.0f, 1e-5f, 2.0f, 7.5f}, o[3 * 5];
    fill_codes(w, sizeof w, a, sizeof a, FILL_RANDOM);
    dev_cpu_gemm_ref(a, as, m, w, ws, n, K, o, n);
    int bad = 0;
    for (int i = 0; i < m; i++)
        for (int c = 0; c < n; c++) {
            int64_t acc = 0;
            for (int k = 0; k < K; k++) acc += (int64_t)a[i * K + k] * w[c * K + k];
            bad += o[i * n + c] != w8a8_out((int32_t)acc, as[i], ws[c]);
        }
    CHECK(bad == 0);
}

static void test_kernel(const char *name, dev_cpu_gemm_fn fn) {
    /* every M from 1 to 300 on a shape with tails in K and in the channels */
    int bad = 0;
    for (int m = 1; m <= 300; m++) bad += compare(fn, m, 13, 100, FILL_RANDOM);
    CHECKF(bad == 0, "%s: M = 1..300 at 100 x 13: %d rows differ", name, bad);
    /* the Qwen3-30B-A3B expert shapes (K x N), channels split as the device
     * splits them (32 at a time) and whole */
    const int qwen[2][2] = {{2048, 768}, {768, 2048}};
    const int ms[] = {1, 2, 3, 8, 17, 64, 65, 128, 300};
    for (int s = 0; s < 2; s++)
        for (int mi = 0; mi < (int)(sizeof ms / sizeof ms[0]); mi++) {
            int b = compare(fn, ms[mi], 32, qwen[s][0], FILL_RANDOM);
            if (ms[mi] <= 3) b += compare(fn, ms[mi], qwen[s][1], qwen[s][0], FILL_RANDOM);
            CHECKF(b == 0, "%s: %d x %d, M = %d: %d rows differ", name, qwen[s][0], qwen[s][1], ms[mi], b);
        }
    /* K and channel counts around every block boundary */
    const int Ks[] = {1, 7, 16, 31, 32, 33, 63, 64, 65, 95, 96, 255, 256, 257, 320};
    bad = 0;
    for (int ki = 0; ki < (int)(sizeof Ks / sizeof Ks[0]); ki++)
        for (int n = 1; n <= 9; n++)
            for (int m = 1; m <= 5; m++) bad += compare(fn, m, n, Ks[ki], ki % 3 ? FILL_RANDOM : FILL_SMALL);
    CHECKF(bad == 0, "%s: odd shapes: %d rows differ", name, bad);
    /* the extremes: -128 activations (|a| = 128) against +-127 weights, the
     * largest pair sums vpmaddubsw-style kernels meet, up to the largest K */
    bad = compare(fn, 3, 6, 64, FILL_EXTREME) + compare(fn, 2, 5, 32768, FILL_EXTREME);
    bad += compare(fn, 1, 4, 32768 - 1, FILL_EXTREME);
    CHECKF(bad == 0, "%s: extreme codes: %d rows differ", name, bad);
}

int main(void) {
    test_reference();
    dev_cpu_gemm_fn tested[ISA_COUNT];
    int kernels = 0;
    for (int isa = 0; isa < ISA_COUNT; isa++) {
        dev_cpu_gemm_fn fn = dev_cpu_gemm_for((enum isa)isa);
        bool seen = !fn || fn == dev_cpu_gemm_ref;
        for (int i = 0; i < kernels; i++) seen |= tested[i] == fn;
        if (seen) continue; /* none, or one ISA's kernel serving another */
        tested[kernels++] = fn;
        test_kernel(isa_name((enum isa)isa), fn);
    }
    /* the device's choice follows the active ISA: a SIMD kernel wherever one runs */
    dev_cpu_gemm_fn best = dev_cpu_gemm_best();
    enum isa active = quant_active_isa();
    CHECKF((best == dev_cpu_gemm_ref) == (dev_cpu_gemm_for(active) == NULL || active == ISA_SCALAR),
           "active %s", isa_name(active));
    printf("SIMD kernels checked: %d (active ISA %s)\n", kernels, isa_name(active));
    return test_finish();
}
