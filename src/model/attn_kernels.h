/* The inner loops of attention over the KV cache, per ISA. */
#ifndef MOEX_ATTN_KERNELS_H
#define MOEX_ATTN_KERNELS_H

#include <stdint.h>

struct attn_kernels {
    float (*dot_f16)(const float *q, const uint16_t *k, int n);        /* sum q[i]*k[i] */
    void (*axpy_f16)(float w, const uint16_t *v, float *acc, int n);   /* acc += w*v */
    float (*dot_f32)(const float *q, const float *k, int n);
    void (*axpy_f32)(float w, const float *v, float *acc, int n);
};

/* The best kernels for this CPU, chosen once. */
const struct attn_kernels *attn_kernels(void);
/* Per ISA (NULL where that ISA cannot run here): 0 scalar, 1 AVX2 or NEON. */
const struct attn_kernels *attn_kernels_isa(int isa);
extern const struct attn_kernels attn_kernels_avx2;
extern const struct attn_kernels attn_kernels_neon;

#endif
