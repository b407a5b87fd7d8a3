/* LFM2 short convolution: in_proj, gate, causal depthwise conv, gate,
 * out_proj. The two matmuls dominate; the convolution itself is 3
 * multiply-adds per channel and token, in one pass over in_proj's output. */
#include "arch/block_shortconv.h"

#include "arch/block_proj.h"

#include <stddef.h>
#include <string.h>

size_t shortconv_state_floats(int n_embd, int l_cache) {
    return (size_t)(l_cache - 1) * (size_t)n_embd;
}

/* Channels per block of the single pass: a block's window of past B*x
 * values stays in registers or L1 while its tokens go by. */
enum { MIX_BLOCK = 16 };

void shortconv_mix(const float *bcx, int n, int n_embd, const float *kernel, int l_cache,
                   float *state, float *y) {
    size_t D = (size_t)n_embd, row = 3 * D;
    int hist = l_cache - 1;
    /* One pass per block of channels over the batch's tokens: B*x, the
     * conv from a window of the last hist values of B*x (the state's at the
     * start, summed oldest first in float), the gate C, and at the end the
     * window back into the state. */
    for (size_t i0 = 0; i0 < D; i0 += MIX_BLOCK) {
        size_t w = D - i0 < MIX_BLOCK ? D - i0 : MIX_BLOCK;
        float win[SHORTCONV_MAX_L_CACHE][MIX_BLOCK]; /* win[j]: B*x at hist-j steps back, oldest first */
        for (int j = 0; j < hist; j++) memcpy(win[j], state + (size_t)j * D + i0, w * sizeof(float));
        float taps[SHORTCONV_MAX_L_CACHE][MIX_BLOCK];
        for (int j = 0; j < l_cache; j++)
            for (size_t i = 0; i < w; i++) taps[j][i] = kernel[(i0 + i) * (size_t)l_cache + j];
        for (int t = 0; t < n; t++) {
            const float *b = bcx + (size_t)t * row + i0, *c = b + D, *x = b + 2 * D;
            float *out = y + (size_t)t * D + i0;
            for (size_t i = 0; i < w; i++) {
                float bx = b[i] * x[i], sum = 0.0f;
                for (int j = 0; j < hist; j++) sum += win[j][i] * taps[j][i];
                sum += bx * taps[hist][i];
                out[i] = c[i] * sum;
                for (int j = 0; j + 1 < hist; j++) win[j][i] = win[j + 1][i];
                if (hist) win[hist - 1][i] = bx;
            }
        }
        for (int j = 0; j < hist; j++) memcpy(state + (size_t)j * D + i0, win[j], w * sizeof(float));
    }
}

void shortconv_forward(struct context *c, const struct shortconv_weights *w, const float *h, int n, int n_embd,
                       float *state, float *bcx, float *y, float *out) {
    dense_matmul(c, &w->in_proj, h, n, bcx);
    shortconv_mix(bcx, n, n_embd, w->kernel, w->l_cache, state, y);
    dense_matmul(c, &w->out_proj, y, n, out);
}
