/* Internal to src/quant: what the SIMD kernels of the 32-value types share
 * across ISAs. Q4_0 and Q5_0 have signed codes (q - 8, q - 16) and Q8_0
 * activations; Q4_1 and Q5_1 have codes 0..15 / 0..31, a min, and Q8_1
 * activations, whose s = d * sum(q) makes a block's min term m * s. An ISA
 * file writes b32_vec_dot(kind, ...) and b32_gemm(kind, ...) once, as
 * always-inline functions of a constant kind, then B32_DEFINE_KERNELS gives
 * it the four types' kernels and b32_fill() to put them in its table. */
#ifndef MOEX_QUANT_B32_H
#define MOEX_QUANT_B32_H

#include "quant/quant_impl.h"

#include <stdbool.h>
#include <stddef.h>

enum b32_kind { B32_Q4_0, B32_Q5_0, B32_Q4_1, B32_Q5_1 };

static inline bool b32_has_min(enum b32_kind k) { return k == B32_Q4_1 || k == B32_Q5_1; }

static inline size_t b32_block_bytes(enum b32_kind k) {
    return k == B32_Q4_0 ? sizeof(struct block_q4_0) : k == B32_Q5_0 ? sizeof(struct block_q5_0)
         : k == B32_Q4_1 ? sizeof(struct block_q4_1) : sizeof(struct block_q5_1);
}

/* An activation block: Q8_0 {d, qs} or Q8_1 {d, s, qs}. */
static inline size_t b32_act_bytes(enum b32_kind k) {
    return b32_has_min(k) ? sizeof(struct block_q8_1) : sizeof(struct block_q8_0);
}
static inline size_t b32_act_qs_offset(enum b32_kind k) {
    return b32_has_min(k) ? offsetof(struct block_q8_1, qs) : offsetof(struct block_q8_0, qs);
}

#define B32_KERNEL_PAIR(type)                                                                          \
    static void vec_dot_##type(int n, float *s, const void *x, const void *y) {                        \
        b32_vec_dot(B32_##type, n, s, x, y);                                                           \
    }                                                                                                  \
    static void gemm_##type(int n, const void *w, size_t ws, int nw, const void *a, size_t as, int na, \
                            float *out, size_t os) {                                                   \
        b32_gemm(B32_##type, n, w, ws, nw, a, as, na, out, os);                                        \
    }

#define B32_DEFINE_KERNELS                                                                               \
    B32_KERNEL_PAIR(Q4_0)                                                                                \
    B32_KERNEL_PAIR(Q5_0)                                                                                \
    B32_KERNEL_PAIR(Q4_1)                                                                                \
    B32_KERNEL_PAIR(Q5_1)                                                                                \
    static void b32_fill(struct qtype_kernels *k) {                                                      \
        k[QT_Q4_0].vec_dot = vec_dot_Q4_0, k[QT_Q4_0].gemm_tile = gemm_Q4_0;                             \
        k[QT_Q5_0].vec_dot = vec_dot_Q5_0, k[QT_Q5_0].gemm_tile = gemm_Q5_0;                             \
        k[QT_Q4_1].vec_dot = vec_dot_Q4_1, k[QT_Q4_1].gemm_tile = gemm_Q4_1;                             \
        k[QT_Q5_1].vec_dot = vec_dot_Q5_1, k[QT_Q5_1].gemm_tile = gemm_Q5_1;                             \
    }

#endif
