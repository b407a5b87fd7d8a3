/* The blocked driver of the cpu device's int8 GEMM, one for every ISA: a
 * kernel file defines ROW_BLOCK, COLS (4) and ROWS (2), and its tiles
 * block_2x4 (two rows by four channels), block_1x4 and dot_1x1, then
 * includes this and calls dev_cpu_blocked (dev_cpu_gemm.h has the contract). */
#ifndef MOEX_DEV_CPU_BLOCKED_H
#define MOEX_DEV_CPU_BLOCKED_H

#include <stddef.h>
#include <stdint.h>

static void dev_cpu_blocked(const int8_t *act, const float *act_scale, int m, const int8_t *w, const float *w_scale,
                            int n, int K, float *out, size_t out_stride) {
    const size_t Kz = (size_t)K;
    for (int i0 = 0; i0 < m; i0 += ROW_BLOCK) {
        const int i1 = i0 + ROW_BLOCK < m ? i0 + ROW_BLOCK : m;
        int c = 0;
        for (; c + COLS <= n; c += COLS) {
            const int8_t *wc = w + (size_t)c * Kz;
            int i = i0;
            for (; i + ROWS <= i1; i += ROWS)
                block_2x4(act + (size_t)i * Kz, act + (size_t)(i + 1) * Kz, wc, K, act_scale + i, w_scale + c,
                          out + (size_t)i * out_stride + c, out + (size_t)(i + 1) * out_stride + c);
            for (; i < i1; i++)
                block_1x4(act + (size_t)i * Kz, wc, K, act_scale[i], w_scale + c, out + (size_t)i * out_stride + c);
        }
        for (; c < n; c++)
            for (int i = i0; i < i1; i++)
                out[(size_t)i * out_stride + c] =
                    dot_1x1(act + (size_t)i * Kz, w + (size_t)c * Kz, K, act_scale[i], w_scale[c]);
    }
}

#endif
