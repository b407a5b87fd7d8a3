/* The delta-net kernels of every ISA this machine runs (AVX-512 through
 * SIMDe and NEON under qemu in their builds) against the scalar ones, each
 * element within 1e-5 of the sum of the magnitudes of its terms: the gemm
 * (rows, depths and widths that do and do not fill a tile or a vector, with
 * leading dimensions wider than the rows; and a row alone the same bits as
 * among others), the dot product, the causal convolution + SiLU (kernel
 * lengths 1 to 7, batches shorter and longer than the state,
 * pre-activations up to +-200), the gated norm; then whole heads, from the
 * start of a chunk and from inside one, within 1e-5 of the largest output
 * and state entry of the scalar kernels' run. */
#include "harness.h"

#include "arch/block_delta_net.h"
#include "quant/delta_net_kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint32_t rng_state = 7;
static float uniform(void) { /* [-1, 1) */
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / (float)(1u << 23) - 1.0f;
}
static void fill(float *v, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) v[i] = uniform() * scale;
}

static int close_to(float got, float want, double mag) {
    return fabs((double)got - (double)want) <= 1e-5 * mag + 1e-30;
}

static void test_gemm(const struct delta_net_kernels *ref, const struct delta_net_kernels *kn, const char *name) {
    enum { MAXR = 9, MAXK = 130, MAXN = 140, PAD = 3 };
    static float a[MAXR * (MAXK + PAD)], x[MAXK * (MAXN + PAD)], y0[MAXR * (MAXN + PAD)], y1[MAXR * (MAXN + PAD)];
    const int rows[] = { 1, 3, 4, 9 }, ks[] = { 0, 1, 5, 16, 128, 130 }, ns[] = { 1, 7, 16, 40, 64, 128, 136 };
    for (int ri = 0; ri < 4; ri++)
        for (int ki = 0; ki < 6; ki++)
            for (int ni = 0; ni < 7; ni++) {
                int R = rows[ri], K = ks[ki], N = ns[ni];
                size_t lda = (size_t)K + PAD, ldx = (size_t)N + PAD, ldy = (size_t)N + PAD;
                fill(a, (size_t)R * lda, 1.0f);
                fill(x, (size_t)K * ldx, 2.0f);
                fill(y0, (size_t)R * ldy, 1.0f);
                memcpy(y1, y0, sizeof(float) * R * ldy);
                ref->gemm(y0, ldy, a, lda, x, ldx, R, K, N);
                kn->gemm(y1, ldy, a, lda, x, ldx, R, K, N);
                int off = 0;
                for (int r = 0; r < R; r++)
                    for (size_t i = 0; i < ldy; i++) {
                        double mag = 0;
                        if (i < (size_t)N) {
                            mag = 1.0; /* |y| before */
                            for (int m = 0; m < K; m++) mag += fabs((double)a[r * lda + m] * x[m * ldx + i]);
                        }
                        /* past the width (the padding) nothing may change */
                        off += !close_to(y1[r * ldy + i], y0[r * ldy + i], mag);
                    }
                CHECKF(off == 0, "%s gemm rows=%d k=%d n=%d: %d off", name, R, K, N, off);
            }
}

/* Each element of a gemm is the same whatever the rows around it: rows
 * alone equal the same rows in one call, bit for bit (the delta net's
 * outputs must not depend on how many tokens share a pass). */
static void test_gemm_rows_alone(const struct delta_net_kernels *kn, const char *name) {
    enum { R = 9, K = 37, N = 40 };
    static float a[R * K], x[K * N], y0[R * N], y1[R * N];
    fill(a, R * K, 1.0f);
    fill(x, K * N, 2.0f);
    fill(y0, R * N, 1.0f);
    memcpy(y1, y0, sizeof y0);
    for (int rows = 1; rows <= R; rows++) {
        memcpy(y1, y0, sizeof y0);
        kn->gemm(y1, N, a, K, x, N, rows, K, N);
        for (int r = 0; r < rows; r++) kn->gemm(y0 + r * N, 0, a + r * K, 0, x, N, 1, K, N);
        CHECKF(memcmp(y0, y1, sizeof y0) == 0, "%s gemm: a row alone differs from the same row among %d", name, rows);
        memcpy(y0, y1, sizeof y0);
    }
}

static void test_dot(const struct delta_net_kernels *ref, const struct delta_net_kernels *kn, const char *name) {
    enum { MAXN = 136 };
    static float a[MAXN], b[MAXN];
    const int lens[] = { 1, 7, 16, 40, 128, 136 };
    for (int li = 0; li < 6; li++) {
        int n = lens[li];
        fill(a, n, 1.0f);
        fill(b, n, 2.0f);
        double mag = 0;
        for (int i = 0; i < n; i++) mag += fabs((double)a[i] * b[i]);
        float want = ref->dot(a, b, n), got = kn->dot(a, b, n);
        CHECKF(close_to(got, want, mag), "%s dot n=%d: %g vs %g", name, n, got, want);
    }
}

static void test_conv(const struct delta_net_kernels *ref, const struct delta_net_kernels *kn, const char *name) {
    enum { MAXW = 140, MAXN = 9, MAXK = 7 };
    static float x[MAXN * MAXW], state[MAXK * MAXW], w[MAXW * MAXK], out0[MAXN * MAXW], out1[MAXN * MAXW];
    const int widths[] = { 1, 7, 16, 40, 128, 130 }, Ks[] = { 1, 2, 4, 7 }, ns[] = { 1, 3, 9 };
    for (int wi = 0; wi < 6; wi++)
        for (int ki = 0; ki < 4; ki++)
            for (int ni = 0; ni < 3; ni++) {
                int W = widths[wi], K = Ks[ki], n = ns[ni];
                size_t ld = (size_t)W + 2;
                fill(x, (size_t)n * ld, 3.0f);
                for (size_t i = 0; i < (size_t)n * ld; i += 5) x[i] *= 40.0f; /* saturated sigmoids both ways */
                fill(state, (size_t)(K - 1) * ld + 1, 3.0f);
                fill(w, (size_t)W * K, 1.0f);
                ref->conv_silu(x, ld, state, ld, n, W, K, w, out0, ld);
                kn->conv_silu(x, ld, state, ld, n, W, K, w, out1, ld);
                int off = 0;
                for (int t = 0; t < n; t++)
                    for (int c = 0; c < W; c++) {
                        double mag = 0;
                        for (int j = 0; j < K; j++) {
                            int src = t - (K - 1) + j;
                            float in = src < 0 ? state[(size_t)(K - 1 + src) * ld + c] : x[(size_t)src * ld + c];
                            mag += fabs((double)w[(size_t)c * K + j] * in);
                        }
                        off += !close_to(out1[t * ld + c], out0[t * ld + c], 2 * mag);
                    }
                CHECKF(off == 0, "%s conv_silu width=%d K=%d n=%d: %d off", name, W, K, n, off);
            }
}

static void test_gated_norm(const struct delta_net_kernels *ref, const struct delta_net_kernels *kn,
                            const char *name) {
    enum { MAXL = 136 };
    float x0[MAXL], x1[MAXL], z[MAXL], w[MAXL];
    const int lens[] = { 4, 16, 40, 128, 136 };
    for (int li = 0; li < 5; li++) {
        int L = lens[li];
        fill(x0, L, 2.0f);
        memcpy(x1, x0, sizeof x0);
        fill(z, L, 8.0f);
        fill(w, L, 1.5f);
        ref->gated_norm(x0, z, w, L, 1e-6f);
        kn->gated_norm(x1, z, w, L, 1e-6f);
        int off = 0;
        for (int i = 0; i < L; i++) off += !close_to(x1[i], x0[i], fabs(x0[i]));
        CHECKF(off == 0, "%s gated_norm len=%d: %d off", name, L, off);
    }
}

/* One batch of two heads with both kernel sets, from a state at position
 * pos0 (inside a chunk when pos0 is not a multiple of DELTA_NET_CHUNK). */
static void test_heads(const struct delta_net_kernels *ref, const struct delta_net_kernels *kn, const char *name,
                       int D, int n, int pos0) {
    struct delta_net_dims d = { 1, 2, D };
    size_t kq = (size_t)n * D, vv = (size_t)n * 2 * D, SN = 2 * delta_net_head_floats(&d);
    float *q = malloc(kq * 4), *k = malloc(kq * 4), *v = malloc(vv * 4), *g = malloc((size_t)n * 2 * 4);
    float *beta = malloc((size_t)n * 2 * 4), *S0 = malloc(SN * 4), *S[2], *o[2];
    float *scratch = malloc(delta_net_head_scratch(&d) * 4);
    fill(q, kq, 1.0f);
    fill(k, kq, 1.0f);
    l2_norm_rows(q, n, D, 1e-6f);
    l2_norm_rows(k, n, D, 1e-6f);
    fill(v, vv, 2.0f);
    for (int i = 0; i < n * 2; i++) {
        g[i] = -0.5f * (uniform() + 1.0f);
        beta[i] = 0.5f * (uniform() + 1.0f) * 0.98f + 0.01f;
    }
    fill(S0, SN, 0.3f); /* the chunk's earlier keys, updates and decays too */
    for (size_t h = 0; h < 2; h++) {
        float *g0 = S0 + h * delta_net_head_floats(&d) + (size_t)D * D + 2 * DELTA_NET_CHUNK * (size_t)D;
        for (int t = 0; t < DELTA_NET_CHUNK; t++) g0[t] = -0.5f * (uniform() + 1.0f);
    }
    for (int e = 0; e < 2; e++) {
        const struct delta_net_kernels *kk = e ? kn : ref;
        S[e] = malloc(SN * 4);
        o[e] = malloc(vv * 4);
        memcpy(S[e], S0, SN * 4);
        memset(o[e], 0xff, vv * 4); /* NaN: every output must be written */
        struct delta_net_io io = { n, pos0, q, k, v, g, beta, S[e], o[e] };
        for (int h = 0; h < 2; h++) delta_net_head(kk, &d, &io, h, scratch);
    }
    double eo = rel_diff(o[1], o[0], vv), es = rel_diff(S[1], S[0], SN);
    CHECKF(eo <= 1e-5 && es <= 1e-5, "%s D=%d n=%d from position %d: out %.2e state %.2e", name, D, n, pos0, eo, es);
    for (int e = 0; e < 2; e++) { free(S[e]); free(o[e]); }
    free(q); free(k); free(v); free(g); free(beta); free(S0); free(scratch);
}

int main(void) {
    static const enum isa isas[] = { ISA_AVX2, ISA_AVX512, ISA_NEON };
    const struct delta_net_kernels *ref = delta_net_kernels_isa(ISA_SCALAR);
    int tested = 0;
    for (int i = 0; i < 3; i++) {
        const struct delta_net_kernels *kn = delta_net_kernels_isa(isas[i]);
        if (!kn) continue;
        const char *name = isa_name(isas[i]);
        printf("%s: delta-net kernels against the scalar ones\n", name);
        test_gemm(ref, kn, name);
        test_gemm_rows_alone(kn, name);
        test_dot(ref, kn, name);
        test_conv(ref, kn, name);
        test_gated_norm(ref, kn, name);
        test_heads(ref, kn, name, 128, 1, 0);
        test_heads(ref, kn, name, 128, 67, 0);
        test_heads(ref, kn, name, 128, 1, 5);
        test_heads(ref, kn, name, 40, 37, 11);
        tested++;
    }
    if (!tested) {
        printf("SKIP: no SIMD build of the delta-net kernels runs on this CPU\n");
        return 77;
    }
    return test_finish();
}
