#include "arch/block_gating.h"

#include <math.h>

void moe_gate_sigmoid(const float *logits, const float *selection_bias, int n_expert, int n_used,
                      int32_t *ids, float *weights) {
    for (int k = 0; k < n_used; k++) {
        int best = -1;
        float best_score = 0;
        for (int e = 0; e < n_expert; e++) {
            int taken = 0;
            for (int j = 0; j < k; j++) taken |= ids[j] == e;
            if (taken) continue;
            float p = 1.0f / (1.0f + expf(-logits[e]));
            float score = selection_bias ? p + selection_bias[e] : p;
            if (best < 0 || score > best_score) { best = e; best_score = score; }
        }
        ids[k] = best;
        weights[k] = 1.0f / (1.0f + expf(-logits[best]));
    }
    /* The sum is kept off zero as llama.cpp does (the smallest normal f16). */
    float sum = 0;
    for (int k = 0; k < n_used; k++) sum += weights[k];
    if (sum < 6.103515625e-5f) sum = 6.103515625e-5f;
    for (int k = 0; k < n_used; k++) weights[k] /= sum;
}
