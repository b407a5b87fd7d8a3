/* The gated delta net block: the delta rule against a plain double-precision
 * reference and bit for bit the same whatever the passes it is split into,
 * the convolution's state carried across batches, and the gates and gated
 * norm against their formulas. */
#include "harness.h"
#include "arch/block_delta_net.h"
#include "quant/delta_net_kernels.h"
#include "core/threadpool.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((double)(rng >> 11) / (double)(1ull << 52)) - 1.0f;
}

struct inputs {
    struct delta_net_dims d;
    int n;
    float *q, *k, *v, *g, *beta, *state0;
};

static struct inputs make_inputs(int n_k, int n_v, int D, int n, float g_min) {
    struct inputs in = { { n_k, n_v, D }, n, NULL, NULL, NULL, NULL, NULL, NULL };
    size_t kq = (size_t)n * n_k * D, vv = (size_t)n * n_v * D;
    in.q = malloc(kq * 4); in.k = malloc(kq * 4); in.v = malloc(vv * 4);
    in.g = malloc((size_t)n * n_v * 4); in.beta = malloc((size_t)n * n_v * 4);
    in.state0 = malloc((size_t)n_v * D * D * 4);
    for (size_t i = 0; i < kq; i++) { in.q[i] = frand(); in.k[i] = frand(); }
    l2_norm_rows(in.q, n * n_k, D, 1e-6f);
    l2_norm_rows(in.k, n * n_k, D, 1e-6f);
    for (size_t i = 0; i < vv; i++) in.v[i] = 2 * frand();
    for (int i = 0; i < n * n_v; i++) {
        in.g[i] = g_min * 0.5f * (frand() + 1.0f);
        in.beta[i] = 0.5f * (frand() + 1.0f) * 0.98f + 0.01f;
    }
    for (size_t i = 0; i < (size_t)n_v * D * D; i++) in.state0[i] = 0.3f * frand();
    return in;
}

static void free_inputs(struct inputs *in) {
    free(in->q); free(in->k); free(in->v); free(in->g); free(in->beta); free(in->state0);
}

/* The rule as written, in double: S = exp(g) S; S += beta (v - S k) k^T;
 * o = S q / sqrt(D), with S stored as the block stores it: S[m][i], key dim
 * m, value dim i. */
static void reference(const struct inputs *in, double *state, double *out) {
    int D = in->d.head_dim, Hk = in->d.n_k_heads, Hv = in->d.n_v_heads;
    for (size_t i = 0; i < (size_t)Hv * D * D; i++) state[i] = in->state0[i];
    double *sk = malloc((size_t)D * sizeof *sk);
    for (int t = 0; t < in->n; t++)
        for (int h = 0; h < Hv; h++) {
            double *S = state + (size_t)h * D * D;
            const float *q = in->q + ((size_t)t * Hk + h % Hk) * D, *k = in->k + ((size_t)t * Hk + h % Hk) * D;
            const float *v = in->v + ((size_t)t * Hv + h) * D;
            double decay = exp((double)in->g[t * Hv + h]), beta = in->beta[t * Hv + h];
            for (int i = 0; i < D * D; i++) S[i] *= decay;
            for (int i = 0; i < D; i++) {
                sk[i] = 0;
                for (int m = 0; m < D; m++) sk[i] += S[m * D + i] * k[m];
            }
            for (int i = 0; i < D; i++)
                for (int m = 0; m < D; m++) S[m * D + i] += beta * (v[i] - sk[i]) * k[m];
            for (int i = 0; i < D; i++) {
                double o = 0;
                for (int m = 0; m < D; m++) o += S[m * D + i] * q[m];
                out[((size_t)t * Hv + h) * D + i] = o / sqrt((double)D);
            }
        }
    free(sk);
}

/* The delta rule over n tokens from a state S0 at position 0, in passes of
 * `pass` tokens (0: one pass), over the pool. */
static void run_passes(const struct inputs *in, int pass, struct threadpool *pool, float *state, float *out) {
    const struct delta_net_dims *d = &in->d;
    size_t HF = delta_net_head_floats(d), D = (size_t)d->head_dim;
    memset(state, 0, (size_t)d->n_v_heads * HF * 4);
    for (int h = 0; h < d->n_v_heads; h++) memcpy(state + h * HF, in->state0 + h * D * D, D * D * 4);
    memset(out, 0xff, (size_t)in->n * d->n_v_heads * D * 4); /* NaN: every output must be written */
    float *scratch = malloc(delta_net_run_scratch(d, threadpool_size(pool)) * 4);
    size_t kq = (size_t)d->n_k_heads * D, vv = (size_t)d->n_v_heads * D;
    for (int t0 = 0; t0 < in->n; t0 += pass ? pass : in->n) {
        int len = pass && in->n - t0 > pass ? pass : in->n - t0;
        struct delta_net_io p = { len, t0, in->q + t0 * kq, in->k + t0 * kq, in->v + t0 * vv,
                                  in->g + (size_t)t0 * d->n_v_heads, in->beta + (size_t)t0 * d->n_v_heads, state,
                                  out + t0 * vv };
        delta_net_run(pool, d, &p, scratch);
    }
    free(scratch);
}

static void check_forms(int n_k, int n_v, int D, int n, float g_min, struct threadpool *pool) {
    struct inputs in = make_inputs(n_k, n_v, D, n, g_min);
    size_t HF = delta_net_head_floats(&in.d), SS = (size_t)D * D;
    size_t S_n = (size_t)n_v * SS, O_n = (size_t)n * n_v * D;
    double *ref_s = malloc(S_n * sizeof *ref_s), *ref_o = malloc(O_n * sizeof *ref_o);
    reference(&in, ref_s, ref_o);
    float *state = malloc(n_v * HF * 4), *out = malloc(O_n * 4);
    float *state1 = malloc(n_v * HF * 4), *out1 = malloc(O_n * 4), *S = malloc(S_n * 4);

    run_passes(&in, 0, pool, state, out);
    double eo = rel_diff_f64(out, ref_o, O_n);
    CHECKF(eo <= 1e-5, "one pass n=%d heads %d/%d D=%d g>=%.1f: out %.2e", n, n_k, n_v, D, g_min, eo);
    if (n % DELTA_NET_CHUNK == 0) { /* at a chunk's end S is the whole state */
        for (int h = 0; h < n_v; h++) memcpy(S + h * SS, state + h * HF, SS * 4);
        double es = rel_diff_f64(S, ref_s, S_n);
        CHECKF(es <= 1e-5, "one pass n=%d heads %d/%d D=%d: state %.2e", n, n_k, n_v, D, es);
    }
    /* Any split into passes (decode steps, passes that start and end
     * inside chunks, whole chunks) gives the same bits. */
    const int passes[] = { 1, 5, 7, DELTA_NET_CHUNK, 37 };
    for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++) {
        if (passes[i] >= n) continue;
        run_passes(&in, passes[i], pool, state1, out1);
        CHECKF(memcmp(out1, out, O_n * 4) == 0 && memcmp(state1, state, n_v * HF * 4) == 0,
               "passes of %d tokens n=%d heads %d/%d D=%d: not the bits of one pass", passes[i], n, n_k, n_v, D);
    }
    free(state); free(out); free(state1); free(out1); free(S); free(ref_s); free(ref_o);
    free_inputs(&in);
}

static void test_conv(void) {
    enum { C = 6, K = 4, N = 9 };
    float x[N * C], w[C * K], state[(K - 1) * C], out[N * C], want[N * C];
    for (int i = 0; i < N * C; i++) x[i] = frand();
    for (int i = 0; i < C * K; i++) w[i] = frand();
    float state0[(K - 1) * C];
    for (int i = 0; i < (K - 1) * C; i++) state0[i] = frand();
    /* Direct: the inputs preceded by the state. */
    for (int t = 0; t < N; t++)
        for (int c = 0; c < C; c++) {
            double s = 0;
            for (int j = 0; j < K; j++) {
                int src = t - (K - 1) + j;
                s += (double)w[c * K + j] * (src < 0 ? state0[(K - 1 + src) * C + c] : x[src * C + c]);
            }
            want[t * C + c] = (float)(s / (1 + exp(-s)));
        }
    /* In batches of 1, 2 and 6 tokens: 1 and 2 are shorter than the state. */
    memcpy(state, state0, sizeof state);
    int cuts[] = { 0, 1, 3, 9 };
    for (int b = 0; b < 3; b++)
        delta_net_conv_silu(x + cuts[b] * C, cuts[b + 1] - cuts[b], C, K, w, state, out + cuts[b] * C);
    double worst = max_abs_diff(out, want, N * C);
    CHECKF(worst < 1e-5, "conv over batches: %.2e", worst);
    /* The state ends as the last K-1 inputs. */
    CHECK(memcmp(state, x + (N - (K - 1)) * C, sizeof state) == 0);
}

static void test_gates_and_norms(void) {
    float alpha[6] = { -3, 0, 2, 25, -30, 1 }, b[6] = { -2, 0, 2, 5, -5, 1 };
    float dt[3] = { 0.5f, -1, 0 }, a[3] = { -1, -0.1f, -2 };
    float a0[6], b0[6];
    memcpy(a0, alpha, sizeof a0);
    memcpy(b0, b, sizeof b0);
    delta_net_gates(alpha, b, 2, 3, dt, a);
    for (int i = 0; i < 6; i++) {
        double x = a0[i] + dt[i % 3];
        double sp = x > 20 ? x : log1p(exp(x));
        CHECKF(fabs(alpha[i] - sp * a[i % 3]) < 1e-5 * (1 + fabs(sp)), "g[%d] = %g", i, alpha[i]);
        CHECK(alpha[i] <= 0);
        CHECK(fabs(b[i] - 1 / (1 + exp(-b0[i]))) < 1e-6);
    }
    float v[8] = { 3, 4, 0, 0, 0, 0, 0, 0 };
    l2_norm_rows(v, 2, 4, 1e-6f);
    CHECK(fabsf(v[0] - 0.6f) < 1e-6f && fabsf(v[1] - 0.8f) < 1e-6f);
    CHECK(v[4] == 0 && v[7] == 0); /* a zero row stays zero (eps, not a division by zero) */
    float o[4] = { 1, -1, 2, 0 }, z[4] = { 0, 1, -1, 3 }, wn[4] = { 1, 2, 0.5f, 1 };
    gated_rms_norm_rows(o, z, wn, 1, 4, 1e-6f);
    double rms = sqrt((1 + 1 + 4 + 0) / 4.0 + 1e-6);
    const double x0[4] = { 1, -1, 2, 0 };
    for (int i = 0; i < 4; i++) {
        double want = x0[i] / rms * wn[i] * (z[i] / (1 + exp(-z[i])));
        CHECKF(fabs(o[i] - want) < 1e-6, "gated norm [%d] %g vs %g", i, o[i], want);
    }
}

int main(void) {
    struct threadpool *pool = threadpool_new(2, false);
    CHECK(pool != NULL);
    check_forms(2, 4, 64, 1, -1.0f, pool);
    check_forms(2, 4, 64, 37, -1.0f, pool);
    check_forms(2, 4, 64, 130, -0.5f, pool);  /* several chunks, the last partial */
    check_forms(2, 4, 64, 96, -0.5f, pool);   /* whole chunks: the state against the reference */
    check_forms(1, 3, 16, 64, -4.0f, pool);   /* strong decay */
    check_forms(3, 3, 32, 50, -0.01f, pool);  /* almost no decay */
    test_conv();
    test_gates_and_norms();
    threadpool_free(pool);
    return test_finish();
}
