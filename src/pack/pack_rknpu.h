/* The RK3588 NPU's resident weight layout (PACK_RKNPU): a K x N weight is cut
 * into buffers of at most PACK_RKNPU_N_SLICE output channels by at most
 * PACK_RKNPU_K_SLICE inputs, each the weight operand of one 1x1-convolution
 * program; a buffer of Nc x Kc holds tiles [Nc/32][Kc/32][32 n][32 k], K
 * contiguous inside a 32-wide row (the tile mtx512 and ork-driver use,
 * RKNPU.md 2, 4, 8). Buffers follow each other N-slice by N-slice, the
 * K-slices of one N-slice in order, so the (n0, k0) buffer starts at
 * n0 * K + k0 * Nc. K and N are multiples of 32. */
#ifndef MOEX_PACK_RKNPU_H
#define MOEX_PACK_RKNPU_H

#include <stddef.h>
#include <stdint.h>

#define PACK_RKNPU_K_SLICE 1024 /* int8 K per program (ork-driver, RKNPU.md 6, 8) */
#define PACK_RKNPU_N_SLICE 8192 /* output channels per program: 13-bit DPU channel fields (RKNPU.md 6) */
#define PACK_RKNPU_TILE 32      /* WEIGHT_ATOMIC (Mesa rkt_coefs.c, RKNPU.md 2) */

/* Where the (n0, k0) buffer of a K x N weight starts (n0, k0 slice starts). */
size_t pack_rknpu_buffer(int K, int N, int n0, int k0);
/* Where channel n, input k lies. */
size_t pack_rknpu_offset(int K, int N, int n, int k);
/* Channel n's K codes (q, in input order) into their places in codes. */
void pack_rknpu_scatter(const int8_t *q, int K, int N, int n, int8_t *codes);

#endif
