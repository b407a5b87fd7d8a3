/* The NPU's weight layout (pack_rknpu.h). */
#include "pack/pack_rknpu.h"

#include <string.h>

static int slice_len(int total, int start, int slice) { return total - start < slice ? total - start : slice; }

size_t pack_rknpu_buffer(int K, int N, int n0, int k0) {
    int nc = slice_len(N, n0, PACK_RKNPU_N_SLICE);
    return (size_t)n0 * (size_t)K + (size_t)k0 * (size_t)nc;
}

size_t pack_rknpu_offset(int K, int N, int n, int k) {
    int n0 = n / PACK_RKNPU_N_SLICE * PACK_RKNPU_N_SLICE, k0 = k / PACK_RKNPU_K_SLICE * PACK_RKNPU_K_SLICE;
    int kc = slice_len(K, k0, PACK_RKNPU_K_SLICE);
    int nt = (n - n0) / PACK_RKNPU_TILE, nl = (n - n0) % PACK_RKNPU_TILE;
    int kt = (k - k0) / PACK_RKNPU_TILE, kk = (k - k0) % PACK_RKNPU_TILE;
    size_t tile = (size_t)nt * (size_t)(kc / PACK_RKNPU_TILE) + (size_t)kt;
    return pack_rknpu_buffer(K, N, n0, k0) + tile * PACK_RKNPU_TILE * PACK_RKNPU_TILE + (size_t)nl * PACK_RKNPU_TILE +
           (size_t)kk;
}

void pack_rknpu_scatter(const int8_t *q, int K, int N, int n, int8_t *codes) {
    /* 32 consecutive k of one channel are one contiguous tile row */
    for (int k = 0; k < K; k += PACK_RKNPU_TILE) memcpy(codes + pack_rknpu_offset(K, N, n, k), q + k, PACK_RKNPU_TILE);
}
