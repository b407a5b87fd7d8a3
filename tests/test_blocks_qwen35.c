/* Qwen3.5's options of the shared blocks against plain double references:
 * gated attention (q projection with a per-head gate, per-head q/k RMSNorm,
 * partial rotary with IMRoPE sections whose extra axis stands still for
 * text, GQA, causal softmax, output times sigmoid(gate)) over two batches
 * that share the KV cache, and the sigmoid-gated shared expert added to what
 * the routed experts wrote. */
#include "harness.h"

#include "arch/block_attention.h"
#include "arch/block_shared_expert.h"
#include "core/threadpool.h"
#include "model/context_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float frand(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

static struct matrix f32_matrix(const float *w, int rows, int cols) {
    return (struct matrix){ w, QT_F32, rows, cols, (size_t)cols * sizeof(float), NULL };
}

enum { D = 32, HD = 16, NH = 4, NKV = 2, NROT = 8, N = 7, N_CTX = 16 };
static const int sections[4] = { 1, 1, 0, 1 }; /* pair 2 falls in the extra axis */
static const float base = 10000.0f, eps = 1e-6f;

static void rms(double *v, const float *w, int n) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += v[i] * v[i];
    double sc = 1 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) v[i] = v[i] * sc * w[i];
}

/* ggml's IMRoPE sector rule, and NEOX rotation of the first NROT dims. */
static void rope(double *v, int pos) {
    int all = sections[0] + sections[1] + sections[2] + sections[3];
    for (int i = 0; i < NROT / 2; i++) {
        int s = i % all;
        bool text = (s % 3 == 0 && s < 3 * sections[0]) || (s % 3 == 1 && s < 3 * sections[1]) ||
                    (s % 3 == 2 && s < 3 * sections[2]);
        double th = text ? pos * pow(base, -2.0 * i / NROT) : 0, x0 = v[i], x1 = v[i + NROT / 2];
        v[i] = x0 * cos(th) - x1 * sin(th);
        v[i + NROT / 2] = x0 * sin(th) + x1 * cos(th);
    }
}

static void test_gated_attention(struct threadpool *pool) {
    uint32_t seed = 5;
    static float wq[2 * NH * HD * D], wk[NKV * HD * D], wv[NKV * HD * D], wo[D * NH * HD], qn[HD], kn[HD];
    static float x[N * D], out[N * D], kc[N_CTX * NKV * HD], vc[N_CTX * NKV * HD];
    for (size_t i = 0; i < sizeof wq / 4; i++) wq[i] = frand(&seed);
    for (size_t i = 0; i < sizeof wk / 4; i++) { wk[i] = frand(&seed); wv[i] = frand(&seed); }
    for (size_t i = 0; i < sizeof wo / 4; i++) wo[i] = frand(&seed) / 4;
    for (int i = 0; i < HD; i++) { qn[i] = 1 + frand(&seed) / 2; kn[i] = 1 + frand(&seed) / 2; }
    for (int i = 0; i < N * D; i++) x[i] = frand(&seed);
    struct attn_weights w = { f32_matrix(wq, 2 * NH * HD, D), f32_matrix(wk, NKV * HD, D), f32_matrix(wv, NKV * HD, D),
                              f32_matrix(wo, D, NH * HD), qn, kn };
    struct attn_shape sh = { .n_embd = D, .n_head = NH, .n_head_kv = NKV, .head_dim = HD, .rope_base = base,
                             .rms_eps = eps, .n_rot = NROT, .imrope_sections = sections, .output_gate = true };
    struct context c = { 0 };
    c.pool = pool;
    c.kv_elem = 4;
    c.act = malloc(matmul_scratch_size(&w.wq, N) + matmul_scratch_size(&w.wo, N));
    struct attn_scratch *s = attn_scratch_new(&sh, N, N_CTX, threadpool_size(pool));
    struct layer_slice kv = { kc, vc, NULL, NULL };
    CHECK(s && c.act);
    /* Two batches: 4 tokens, then 3 more at positions 4.. reading the cache. */
    for (int part = 0; part < 2; part++) {
        int t0 = part ? 4 : 0, n = part ? N - 4 : 4;
        c.n_past = t0;
        attn_rope_prepare(s, &sh, t0, n);
        attention(&c, &sh, &w, s, &kv, n, x + t0 * D, out + t0 * D);
    }
    /* The reference, all in double. */
    static double q[N][NH][HD], g[N][NH][HD], k[N][NKV][HD], v[N][NKV][HD];
    for (int t = 0; t < N; t++) {
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < 2 * HD; i++) {
                double a = 0;
                for (int j = 0; j < D; j++) a += (double)wq[(h * 2 * HD + i) * D + j] * x[t * D + j];
                if (i < HD) q[t][h][i] = a; else g[t][h][i - HD] = a;
            }
        for (int h = 0; h < NKV; h++)
            for (int i = 0; i < HD; i++) {
                double a = 0, b = 0;
                for (int j = 0; j < D; j++) {
                    a += (double)wk[(h * HD + i) * D + j] * x[t * D + j];
                    b += (double)wv[(h * HD + i) * D + j] * x[t * D + j];
                }
                k[t][h][i] = a;
                v[t][h][i] = b;
            }
        for (int h = 0; h < NH; h++) { rms(q[t][h], qn, HD); rope(q[t][h], t); }
        for (int h = 0; h < NKV; h++) { rms(k[t][h], kn, HD); rope(k[t][h], t); }
    }
    double worst = 0;
    for (int t = 0; t < N; t++) {
        double att[NH * HD];
        for (int h = 0; h < NH; h++) {
            int kh = h / (NH / NKV);
            double sc[N], mx = -1e300, sum = 0;
            for (int p = 0; p <= t; p++) {
                sc[p] = 0;
                for (int i = 0; i < HD; i++) sc[p] += q[t][h][i] * k[p][kh][i];
                sc[p] /= sqrt((double)HD);
                if (sc[p] > mx) mx = sc[p];
            }
            for (int p = 0; p <= t; p++) { sc[p] = exp(sc[p] - mx); sum += sc[p]; }
            for (int i = 0; i < HD; i++) {
                double a = 0;
                for (int p = 0; p <= t; p++) a += sc[p] / sum * v[p][kh][i];
                att[h * HD + i] = a / (1 + exp(-g[t][h][i]));
            }
        }
        for (int i = 0; i < D; i++) {
            double y = 0;
            for (int j = 0; j < NH * HD; j++) y += (double)wo[i * NH * HD + j] * att[j];
            double d = fabs(y - out[t * D + i]) / (1 + fabs(y));
            if (d > worst) worst = d;
        }
    }
    CHECKF(worst < 1e-4, "gated attention differs from the reference by %g", worst);
    attn_scratch_free(s);
    free(c.act);
}

static void test_shared_expert(struct threadpool *pool) {
    enum { F = 24 };
    uint32_t seed = 9;
    static float wg[F * D], wu[F * D], wd[D * F], gi[D], x[N * D], out[N * D], routed[N * D];
    for (int i = 0; i < F * D; i++) { wg[i] = frand(&seed); wu[i] = frand(&seed); wd[i] = frand(&seed); }
    for (int i = 0; i < D; i++) gi[i] = frand(&seed);
    for (int i = 0; i < N * D; i++) { x[i] = frand(&seed); routed[i] = out[i] = frand(&seed); }
    struct shared_expert w = { { f32_matrix(wg, F, D), f32_matrix(wu, F, D), f32_matrix(wd, D, F) },
                               f32_matrix(gi, 1, D) };
    struct context c = { 0 };
    c.pool = pool;
    c.act = malloc(matmul_scratch_size(&w.ffn.down, N) + matmul_scratch_size(&w.ffn.gate, N));
    struct shared_expert_scratch *s = shared_expert_scratch_new(F, D, N);
    CHECK(s && c.act);
    shared_expert_add(&c, &w, s, x, N, out);
    double worst = 0;
    for (int t = 0; t < N; t++) {
        double h[F], gate = 0;
        for (int i = 0; i < D; i++) gate += (double)gi[i] * x[t * D + i];
        gate = 1 / (1 + exp(-gate));
        for (int f = 0; f < F; f++) {
            double a = 0, b = 0;
            for (int i = 0; i < D; i++) { a += (double)wg[f * D + i] * x[t * D + i]; b += (double)wu[f * D + i] * x[t * D + i]; }
            h[f] = a / (1 + exp(-a)) * b;
        }
        for (int i = 0; i < D; i++) {
            double y = 0;
            for (int f = 0; f < F; f++) y += (double)wd[i * F + f] * h[f];
            double want = routed[t * D + i] + gate * y, d = fabs(want - out[t * D + i]) / (1 + fabs(want));
            if (d > worst) worst = d;
        }
    }
    CHECKF(worst < 1e-4, "shared expert differs from the reference by %g", worst);
    shared_expert_scratch_free(s);
    free(c.act);
}

int main(void) {
    struct threadpool *pool = threadpool_new(2, false);
    test_gated_attention(pool);
    test_shared_expert(pool);
    threadpool_free(pool);
    return test_finish();
}
