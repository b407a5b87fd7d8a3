/* The inner loops of attention over the KV cache, per ISA. A key or value
 * row is read once for all the query heads that share it (GQA group). */
#ifndef MOEX_ATTN_KERNELS_H
#define MOEX_ATTN_KERNELS_H

#include <stddef.h>
#include <stdint.h>

struct attn_kernels {
    /* out[j] = q_j . k for j < nq, q_j = q + j*n: one key row, nq query heads. */
    void (*dot_f16)(const float *q, int nq, int n, const uint16_t *k, float *out);
    /* out_j = sum_p w[p][j] * v_p for j < nq (out_j = out + j*n, overwritten),
     * p < n_keys, v_p = v + p*v_stride: all the value rows at once, so the
     * accumulators stay in registers. */
    void (*wsum_f16)(const float *w, int nq, int n_keys, const uint16_t *v, size_t v_stride, int n, float *out);
    void (*dot_f32)(const float *q, int nq, int n, const float *k, float *out);
    void (*wsum_f32)(const float *w, int nq, int n_keys, const float *v, size_t v_stride, int n, float *out);
    /* scores (n_keys, nq) -> the causal softmax of scale*scores over the
     * keys of each head, in place; round_f16: each probability rounded to
     * f16, as with an f16 cache. */
    void (*softmax)(float *scores, int n_keys, int nq, float scale, int round_f16);
};

/* The best kernels for this CPU, chosen once. */
const struct attn_kernels *attn_kernels(void);
/* Per ISA (NULL where that ISA cannot run here): 0 scalar, 1 AVX2 or NEON. */
const struct attn_kernels *attn_kernels_isa(int isa);
extern const struct attn_kernels attn_kernels_avx2;
/* The scalar softmax (the others fall back to it for head counts that are
 * not a multiple of 8). */
void attn_softmax_scalar(float *scores, int n_keys, int nq, float scale, int round_f16);
extern const struct attn_kernels attn_kernels_neon;

#endif
