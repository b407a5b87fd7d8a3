/* The W8A8 device number format, defined once for every backend.
 *
 * Weights: symmetric int8, one float scale per output channel (row of the
 * GGUF matrix): scale = max|w| / 127 over the dequantized row, q =
 * round-to-nearest-even(w / scale) clamped to [-127, 127]; a row of zeros has
 * scale 0 and q = 0. Activations: the same rule per row.
 * Result: out = (float)acc * row_scale * channel_scale, evaluated in exactly
 * that order (two float multiplies, left to right) with acc the exact int32
 * sum of q_a * q_w. Every backend reproduces this bit for bit. */
#ifndef MOEX_W8A8_H
#define MOEX_W8A8_H

#include <stdint.h>

/* The largest |q|; -128 is never produced, so negating a row is exact. */
#define W8A8_QMAX 127

/* scale = amax / 127 (0 when amax is 0). */
float w8a8_scale(float amax);

/* max |x[i]|, or -1 when a value is NaN or infinite. */
float w8a8_amax(const float *x, int64_t n);

/* q[i] = clamp(rne(x[i] / scale)), q = 0 when scale is 0. x must be finite.
 * Scalar reference; w8a8_quantize uses the best SIMD version (same bytes). */
void w8a8_quantize_ref(const float *x, int64_t n, float scale, int8_t *q);
void w8a8_quantize(const float *x, int64_t n, float scale, int8_t *q);

/* One row: q and *scale from x by the rule above. -1 (and q, *scale
 * untouched) when x holds a NaN or an infinity. */
int w8a8_quantize_row(const float *x, int64_t n, int8_t *q, float *scale);

/* Activations: M rows of K floats (x_stride floats apart) into q[M][K]
 * (K bytes apart) and scales[M]. -1 when a value is not finite. */
int w8a8_quantize_act(const float *x, int M, int64_t K, int64_t x_stride, int8_t *q, float *scales);

/* The output expression, the one place it is written in scalar code. */
static inline float w8a8_out(int32_t acc, float row_scale, float channel_scale) {
    float v = (float)acc * row_scale;
    return v * channel_scale;
}

#endif
