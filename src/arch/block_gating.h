/* Router gating functions beyond softmax. */
#ifndef MOEX_ARCH_BLOCK_GATING_H
#define MOEX_ARCH_BLOCK_GATING_H

#include <stdint.h>

/* Sigmoid gating with a selection bias (DeepSeek V3, LFM2-MoE): p =
 * sigmoid(logits); the n_used experts with the largest p + selection_bias
 * (NULL: no bias) are chosen; their weights are the unbiased p renormalised
 * to sum to one. logits: (n_expert); ids, weights: (n_used), best first. */
void moe_gate_sigmoid(const float *logits, const float *selection_bias, int n_expert, int n_used,
                      int32_t *ids, float *weights);

#endif
