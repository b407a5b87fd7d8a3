/* The MoE router's sigmoid gating with a selection bias (LFM2-MoE): the bias steers which experts are
 * chosen, the weights are the unbiased sigmoids of the chosen, renormalised. */
#include "harness.h"
#include "arch/block_moe.h"

#include <string.h>

#include <math.h>

static float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* The router on one token's logits (copied: moe_route overwrites them). */
static void gate(const float *logits, const float *bias, int E, int K, int32_t *ids, float *w) {
    struct moe_router r = { .selection_bias = bias, .gating = MOE_GATING_SIGMOID, .renormalise = true };
    float p[16];
    memcpy(p, logits, sizeof(float) * (size_t)E);
    moe_route(&r, E, K, p, 1, ids, w);
}

int main(void) {
    const float logits[6] = { 2.0f, -1.0f, 0.5f, 1.5f, -3.0f, 0.0f };
    int32_t ids[3];
    float w[3];

    /* No bias: the largest logits, best first. */
    gate(logits, NULL, 6, 3, ids, w);
    CHECK(ids[0] == 0 && ids[1] == 3 && ids[2] == 2);
    float sum = sigmoid(2.0f) + sigmoid(1.5f) + sigmoid(0.5f);
    CHECKF(fabsf(w[0] - sigmoid(2.0f) / sum) < 1e-6f, "w0 %g", w[0]);
    CHECKF(fabsf(w[2] - sigmoid(0.5f) / sum) < 1e-6f, "w2 %g", w[2]);
    CHECK(fabsf(w[0] + w[1] + w[2] - 1.0f) < 1e-6f);

    /* A bias brings expert 4 (the smallest logit) in first and pushes 0 out;
     * the weights still come from the unbiased sigmoids. */
    const float bias[6] = { -5.0f, 0.0f, 0.0f, 0.0f, 2.0f, 0.0f };
    gate(logits, bias, 6, 3, ids, w);
    CHECK(ids[0] == 4 && ids[1] == 3 && ids[2] == 2);
    sum = sigmoid(-3.0f) + sigmoid(1.5f) + sigmoid(0.5f);
    CHECKF(fabsf(w[0] - sigmoid(-3.0f) / sum) < 1e-6f, "biased w0 %g", w[0]);
    CHECKF(fabsf(w[1] - sigmoid(1.5f) / sum) < 1e-6f, "biased w1 %g", w[1]);
    CHECK(w[1] > w[0]);   /* chosen first by the bias, weighted by its own score */

    /* Softmax would renormalise differently: sigmoid weights are not the
     * softmax of the chosen logits. */
    float e0 = expf(-3.0f), e1 = expf(1.5f), e2 = expf(0.5f);
    CHECK(fabsf(w[0] - e0 / (e0 + e1 + e2)) > 1e-3f);

    /* Every expert chosen once when n_used == n_expert. */
    int32_t all[6];
    float wall[6];
    gate(logits, bias, 6, 6, all, wall);
    int seen = 0;
    for (int k = 0; k < 6; k++) seen |= 1 << all[k];
    CHECK(seen == 0x3f);

    /* All sigmoids tiny: the weight sum is kept off zero (llama.cpp's
     * clamp), so the weights stay finite and small instead of summing to 1. */
    const float tiny[2] = { -30.0f, -31.0f };
    gate(tiny, NULL, 2, 2, ids, w);
    CHECK(isfinite(w[0]) && isfinite(w[1]) && w[0] + w[1] < 1e-3f);
    return test_finish();
}
