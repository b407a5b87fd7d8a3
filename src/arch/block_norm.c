#include "arch/block_norm.h"

#include <math.h>
#include <stddef.h>

void rms_norm(const float *x, const float *w, float *y, int n, float eps) {
    /* Sum of squares in double, scale in float: the reference does the same. */
    double sum = 0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    float scale = 1.0f / sqrtf((float)(sum / n) + eps);
    for (int i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
}

void rms_norm_rows(const float *x, const float *w, float *y, int rows, int n, float eps) {
    for (int r = 0; r < rows; r++) rms_norm(x + (size_t)r * n, w, y + (size_t)r * n, n, eps);
}

void add_residual(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}
