/* LFM2 short convolution: in_proj, gate, causal depthwise conv, gate,
 * out_proj. The two matmuls dominate; the convolution itself is 3 fused
 * multiply-adds per channel and token. */
#include "arch/block_shortconv.h"

#include "arch/block_proj.h"

#include <string.h>

size_t shortconv_state_floats(int n_embd, int l_cache) {
    return (size_t)(l_cache - 1) * (size_t)n_embd;
}

void shortconv_mix(float *bcx, int n, int n_embd, const float *kernel, int l_cache,
                   float *state, float *y) {
    size_t D = (size_t)n_embd, row = 3 * D;
    int hist = l_cache - 1;
    for (int t = 0; t < n; t++) {
        float *b = bcx + (size_t)t * row;
        const float *x = b + 2 * D;
        for (size_t i = 0; i < D; i++) b[i] *= x[i];
    }
    /* Tap j of the output at t reads B*x at time t - hist + j: from the
     * state while that is before this batch. Summed oldest first, in float. */
    for (int t = 0; t < n; t++) {
        const float *src[SHORTCONV_MAX_L_CACHE];
        for (int j = 0; j < l_cache; j++) {
            int s = t - hist + j;
            src[j] = s >= 0 ? bcx + (size_t)s * row : state + (size_t)(hist + s) * D;
        }
        const float *c = bcx + (size_t)t * row + D;
        float *out = y + (size_t)t * D;
        for (size_t i = 0; i < D; i++) {
            const float *k = kernel + i * (size_t)l_cache;
            float sum = 0.0f;
            for (int j = 0; j < l_cache; j++) sum += src[j][i] * k[j];
            out[i] = c[i] * sum;
        }
    }
    /* The new state: the last hist values of B*x, from the batch and, when
     * the batch is shorter than that, the end of the old state. */
    int keep = hist > n ? hist - n : 0;
    if (keep) memmove(state, state + (size_t)(hist - keep) * D, (size_t)keep * D * sizeof *state);
    for (int s = keep; s < hist; s++)
        memcpy(state + (size_t)s * D, bcx + (size_t)(n - hist + s) * row, D * sizeof *state);
}

void shortconv_forward(struct context *c, const struct shortconv_weights *w, const float *h, int n, int n_embd,
                       float *state, float *bcx, float *y, float *out) {
    dense_matmul(c, &w->in_proj, h, n, bcx);
    shortconv_mix(bcx, n, n_embd, w->kernel, w->l_cache, state, y);
    dense_matmul(c, &w->out_proj, y, n, out);
}
