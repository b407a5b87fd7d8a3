/* The int8 GEMM behind the cpu device (and the sim, which computes with it):
 * one block of a job's output, per ISA. Every kernel returns the same floats
 * bit for bit: the int32 sums are exact in any order and the output is
 * w8a8_out(acc, row_scale, channel_scale). The plain C one is the reference
 * the others are tested against. */
#ifndef MOEX_DEV_CPU_GEMM_H
#define MOEX_DEV_CPU_GEMM_H

#include "quant/quant.h"

#include <stddef.h>
#include <stdint.h>

/* out[i * out_stride + c] = w8a8_out(act[i] . w[c], act_scale[i], w_scale[c])
 * for i < m, c < n; act rows and w rows are K bytes apart. Weight codes are
 * in [-127, 127] (the W8A8 rule); activations may be any int8. */
typedef void (*dev_cpu_gemm_fn)(const int8_t *act, const float *act_scale, int m, const int8_t *w,
                                const float *w_scale, int n, int K, float *out, size_t out_stride);

void dev_cpu_gemm_ref(const int8_t *act, const float *act_scale, int m, const int8_t *w, const float *w_scale, int n,
                      int K, float *out, size_t out_stride);
#if defined(__x86_64__)
void dev_cpu_gemm_avx2(const int8_t *act, const float *act_scale, int m, const int8_t *w, const float *w_scale,
                       int n, int K, float *out, size_t out_stride);
#endif
#if defined(__aarch64__)
void dev_cpu_gemm_neon(const int8_t *act, const float *act_scale, int m, const int8_t *w, const float *w_scale,
                       int n, int K, float *out, size_t out_stride);
#endif

/* The kernel of an ISA, or NULL where it has none or cannot run here
 * (ISA_SCALAR: the reference). */
dev_cpu_gemm_fn dev_cpu_gemm_for(enum isa isa);
/* The kernel the cpu device uses: the one of quant_active_isa() (so the ISA
 * ceiling lowers it too), else the reference. */
dev_cpu_gemm_fn dev_cpu_gemm_best(void);

#endif
