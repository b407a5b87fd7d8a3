/* The inner loops of tiled causal attention, per ISA (attn_tiled.c runs
 * them). One tile is a block of key rows against a block of query columns:
 * the columns are the query heads of one KV group for consecutive tokens
 * (column t*group + h), padded with zero queries to a multiple of `lanes`. */
#ifndef MOEX_ATTN_KERNELS_H
#define MOEX_ATTN_KERNELS_H

#include "quant/quant.h"

#include <stddef.h>

struct attn_kernels {
    int lanes; /* query columns per vector: the column count mp is a multiple */
    /* s (n_keys, mp) = k (n_keys, hd) times qt (hd, mp); n_keys a multiple of 8. */
    void (*scores)(const float *qt, int mp, int hd, const float *k, int n_keys, float *s);
    /* One key block of the online softmax, in place: s (n_keys, mp) -> the
     * weights exp(scale*s - max') of the visible entries, 0 for the others,
     * where max' is each column's running maximum with this block in it.
     * Row j hides its first masked0 + j*step columns (keys after a query's
     * own position). Per column: alpha = exp(max - max') (1 while nothing
     * is visible yet), sum = sum*alpha + the block's weights, max = max'. */
    void (*softmax)(float *s, int n_keys, int mp, float scale, int masked0, int step, float *max, float *sum,
                    float *alpha);
    /* softmax's max, sum and alpha, bit for bit, leaving s as it was (the
     * first of two passes over an f16 cache needs only those). */
    void (*stats)(float *s, int n_keys, int mp, float scale, int masked0, int step, float *max, float *sum,
                  float *alpha);
    /* The second pass over an f16 cache, once max and sum are final: s ->
     * the normalised weights exp(scale*s - max) * inv_sum, each rounded to
     * f16, of the visible entries (0 for the others, masks as above). */
    void (*weights)(float *s, int n_keys, int mp, float scale, int masked0, int step, const float *max,
                    const float *inv_sum);
    /* o (mp, hdp) = alpha[i] * o_i + sum_j s[j][i] * v_j for j < n_keys,
     * v (n_keys, hdp); hdp a multiple of 16. */
    void (*accumulate)(const float *s, int mp, int n_keys, const float *v, int hdp, const float *alpha, float *o);
};

/* The kernels of the ISA the quantized kernels run on (quant_active_isa). */
const struct attn_kernels *attn_kernels(void);
/* One ISA's kernels; NULL where that ISA has none or cannot run here. */
const struct attn_kernels *attn_kernels_isa(enum isa isa);
extern const struct attn_kernels attn_kernels_avx2, attn_kernels_avx512, attn_kernels_neon;

#endif
