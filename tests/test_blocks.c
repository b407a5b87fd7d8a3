/* The shared blocks of src/arch/ against plain references: the router's
 * gating variants (softmax, sigmoid with a selection bias, renormalisation,
 * scale), the dense SwiGLU FFN on F32 weights, and the fused residual + norm. */
#include "harness.h"

#include "arch/block_ffn.h"
#include "arch/block_moe.h"
#include "arch/block_norm.h"
#include "core/threadpool.h"
#include "model/context_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float frand(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

static void test_softmax_router(void) {
    enum { E = 8, K = 3, N = 5 };
    uint32_t seed = 7;
    float logits[N * E], keep[N * E], w[N * K];
    int32_t ids[N * K];
    for (int i = 0; i < N * E; i++) keep[i] = logits[i] = 3 * frand(&seed);
    struct moe_router r = { .gating = MOE_GATING_SOFTMAX, .renormalise = true };
    moe_route(&r, E, K, logits, N, ids, w);
    for (int t = 0; t < N; t++) {
        const float *l = keep + t * E;
        /* the chosen are the K largest logits, in order */
        bool taken[E] = { false };
        for (int k = 0; k < K; k++) {
            int best = -1;
            for (int e = 0; e < E; e++) if (!taken[e] && (best < 0 || l[e] > l[best])) best = e;
            taken[best] = true;
            CHECKF(ids[t * K + k] == best, "token %d choice %d: %d, wanted %d", t, k, ids[t * K + k], best);
        }
        double z = 0, chosen = 0;
        for (int e = 0; e < E; e++) z += exp(l[e]);
        for (int k = 0; k < K; k++) chosen += exp(l[ids[t * K + k]]) / z;
        double sum = 0;
        for (int k = 0; k < K; k++) {
            double want = exp(l[ids[t * K + k]]) / z / chosen;
            CHECKF(fabs(w[t * K + k] - want) < 1e-6, "weight %g, wanted %g", w[t * K + k], want);
            sum += w[t * K + k];
        }
        CHECK(fabs(sum - 1) < 1e-6);
    }
}

/* The one-pass top-k against K scans for the largest not taken (the first
 * of equal values winning): values drawn from few levels, so that ties
 * are everywhere, and plain random ones; K from 1 to E. */
static void test_topk_ties(void) {
    enum { E = 40, N = 300 };
    uint32_t seed = 11;
    static float logits[N * E], w[N * E];
    static int32_t ids[N * E];
    int off = 0;
    for (int K = 1; K <= E; K += K < 10 ? 1 : 7)
        for (int levels = 3; levels <= 1000; levels *= 10) {
            for (int i = 0; i < N * E; i++) logits[i] = (float)((int)((frand(&seed) + 1) * levels) % levels) * 0.1f;
            struct moe_router r = { .gating = MOE_GATING_SOFTMAX };
            moe_route(&r, E, K, logits, N, ids, w);
            for (int t = 0; t < N; t++) {
                const float *l = logits + t * E; /* the probabilities now: their ties decide */
                bool taken[E] = { false };
                for (int k = 0; k < K; k++) {
                    int best = -1;
                    for (int e = 0; e < E; e++) if (!taken[e] && (best < 0 || l[e] > l[best])) best = e;
                    taken[best] = true;
                    off += ids[t * K + k] != best || w[t * K + k] != l[best];
                }
            }
        }
    CHECKF(off == 0, "top-k: %d choices or weights differ from K scans", off);
}

/* Sigmoid gating with a selection bias (LFM2's exp_probs_b): the bias picks
 * the experts, the weights are the unbiased sigmoids, renormalised and scaled. */
static void test_sigmoid_router(void) {
    enum { E = 4, K = 2 };
    float logits[E] = { 2.0f, 1.0f, 0.0f, -1.0f };
    const float bias[E] = { 0.0f, 0.0f, 0.0f, 0.9f };
    float w[K];
    int32_t ids[K];
    struct moe_router r = { .gating = MOE_GATING_SIGMOID, .selection_bias = bias, .renormalise = true,
                            .weight_scale = 2.0f };
    moe_route(&r, E, K, logits, 1, ids, w);
    /* sigmoid: .881 .731 .5 .269; with the bias expert 3 scores 1.169 */
    CHECKF(ids[0] == 3 && ids[1] == 0, "chose %d %d", ids[0], ids[1]);
    double s0 = 1 / (1 + exp(1.0)), s3 = 1 / (1 + exp(-2.0));
    CHECKF(fabs(w[0] - 2 * s0 / (s0 + s3)) < 1e-6 && fabs(w[1] - 2 * s3 / (s0 + s3)) < 1e-6, "weights %g %g", w[0],
           w[1]);
    float plain[E] = { 2.0f, 1.0f, 0.0f, -1.0f };
    struct moe_router no_norm = { .gating = MOE_GATING_SIGMOID };
    moe_route(&no_norm, E, K, plain, 1, ids, w);
    CHECK(ids[0] == 0 && ids[1] == 1 && fabs(w[0] - s3) < 1e-6 && fabs(w[1] - 1 / (1 + exp(-1.0))) < 1e-6);
    /* All sigmoids tiny: the weight sum is kept off zero (llama.cpp's clamp
     * at the smallest normal f16), so the weights stay finite and small. */
    float tiny[E] = { -30.0f, -31.0f, -32.0f, -33.0f };
    struct moe_router norm = { .gating = MOE_GATING_SIGMOID, .renormalise = true };
    moe_route(&norm, E, K, tiny, 1, ids, w);
    CHECK(isfinite(w[0]) && isfinite(w[1]) && w[0] + w[1] < 1e-3f);
}

static void test_ffn(struct threadpool *pool) {
    enum { D = 32, F = 48, N = 3 };
    uint32_t seed = 11;
    static float wg[F * D], wu[F * D], wd[D * F], x[N * D], out[N * D];
    for (int i = 0; i < F * D; i++) { wg[i] = frand(&seed); wu[i] = frand(&seed); wd[i] = frand(&seed); }
    for (int i = 0; i < N * D; i++) x[i] = frand(&seed);
    struct ffn_weights w = {
        { wg, QT_F32, F, D, D * sizeof(float), NULL },
        { wu, QT_F32, F, D, D * sizeof(float), NULL },
        { wd, QT_F32, D, F, F * sizeof(float), NULL },
    };
    struct context c = { 0 };
    c.pool = pool;
    size_t act = matmul_scratch_size(&w.down, N) > matmul_scratch_size(&w.gate, N) ? matmul_scratch_size(&w.down, N)
                                                                                    : matmul_scratch_size(&w.gate, N);
    c.act = malloc(act);
    struct ffn_scratch *s = ffn_scratch_new(F, N);
    CHECK(s != NULL && c.act != NULL);
    ffn_swiglu(&c, &w, s, x, N, out);
    double worst = 0;
    for (int t = 0; t < N; t++) {
        double h[F];
        for (int f = 0; f < F; f++) {
            double g = 0, u = 0;
            for (int i = 0; i < D; i++) { g += wg[f * D + i] * x[t * D + i]; u += wu[f * D + i] * x[t * D + i]; }
            h[f] = g / (1 + exp(-g)) * u;
        }
        for (int i = 0; i < D; i++) {
            double y = 0;
            for (int f = 0; f < F; f++) y += wd[i * F + f] * h[f];
            double d = fabs(y - out[t * D + i]) / (1 + fabs(y));
            if (d > worst) worst = d;
        }
    }
    CHECKF(worst < 1e-4, "ffn differs from the reference by %g", worst);
    ffn_scratch_free(s);
    free(c.act);
}

static void test_norm(void) {
    float x[6] = { 1, -2, 3, -4, 5, -6 }, w[6] = { 1, 1, 1, 2, 2, 2 }, y[6];
    rms_norm(x, w, y, 6, 1e-6f);
    double ms = (1 + 4 + 9 + 16 + 25 + 36) / 6.0, sc = 1 / sqrt(ms + 1e-6);
    for (int i = 0; i < 6; i++) CHECK(fabs(y[i] - x[i] * sc * w[i]) < 1e-6);
    add_residual(y, x, 6);
    CHECK(fabs(y[5] - (-6 - 12 * sc)) < 1e-5);
}

/* The fused residual + norm (+ quantize) over the pool against the three
 * steps one row at a time, bit for bit: every row count around the items'
 * 8 rows, with and without the quantized copy, and rms_norm against the
 * plain sequential double sum within float rounding. */
static void test_residual_norm(struct threadpool *pool) {
    enum { D = 2048 + 64, R = 70 }; /* whole Q8_0 blocks */
    uint32_t seed = 7;
    float *x0 = malloc(sizeof(float) * R * D), *add = malloc(sizeof(float) * R * D), *w = malloc(sizeof(float) * D);
    float *xa = malloc(sizeof(float) * R * D), *xb = malloc(sizeof(float) * R * D);
    float *ya = malloc(sizeof(float) * R * D), *yb = malloc(sizeof(float) * R * D);
    const size_t qrow = quant_row_size(QT_Q8_0, D);
    char *qa = malloc(qrow * R), *qb = malloc(qrow * R);
    for (int i = 0; i < R * D; i++) x0[i] = frand(&seed) * 4.0f, add[i] = frand(&seed);
    for (int i = 0; i < D; i++) w[i] = 1.0f + 0.5f * frand(&seed);
    int off = 0;
    for (int rows = 1; rows <= R; rows += rows < 40 ? 1 : 13)
        for (int quantize = 0; quantize < 2; quantize++) {
            memcpy(xa, x0, sizeof(float) * R * D);
            memcpy(xb, x0, sizeof(float) * R * D);
            for (int r = 0; r < rows; r++) {
                add_residual(xa + (size_t)r * D, add + (size_t)r * D, D);
                rms_norm(xa + (size_t)r * D, w, ya + (size_t)r * D, D, 1e-6f);
                if (quantize) quant_quantize_act(QT_Q8_0, ya + (size_t)r * D, qa + (size_t)r * qrow, D);
            }
            size_t stride = residual_norm_quantize_rows(pool, xb, add, w, yb, rows, D, 1e-6f, QT_Q8_0, quantize ? qb : NULL);
            off += stride != (quantize ? qrow : 0);
            off += memcmp(xa, xb, sizeof(float) * (size_t)rows * D) != 0;
            off += memcmp(ya, yb, sizeof(float) * (size_t)rows * D) != 0;
            if (quantize) off += memcmp(qa, qb, qrow * (size_t)rows) != 0;
        }
    CHECKF(off == 0, "residual_norm_quantize_rows: %d differences from the steps one by one", off);
    /* the interleaved partial sums against one sequential sum */
    int far = 0;
    for (int r = 0; r < R; r++) {
        const float *xr = x0 + (size_t)r * D;
        double sum = 0;
        for (int i = 0; i < D; i++) sum += (double)(xr[i] * xr[i]);
        float scale = 1.0f / sqrtf((float)(sum / D) + 1e-6f);
        rms_norm(xr, w, ya, D, 1e-6f);
        for (int i = 0; i < D; i++) far += fabsf(ya[i] - (xr[i] * scale) * w[i]) > 1e-6f * fabsf(ya[i]);
    }
    CHECKF(far == 0, "rms_norm: %d values off the sequential sum's by more than 1e-6 relative", far);
    free(x0); free(add); free(w); free(xa); free(xb); free(ya); free(yb); free(qa); free(qb);
}

int main(void) {
    struct threadpool *pool = threadpool_new(2, false);
    test_residual_norm(pool);
    test_topk_ties();
    test_softmax_router();
    test_sigmoid_router();
    test_ffn(pool);
    test_norm();
    threadpool_free(pool);
    return test_finish();
}
