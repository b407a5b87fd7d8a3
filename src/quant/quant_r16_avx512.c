/* AVX-512 VNNI GEMM on Q4_K rows interleaved by 16 (layout: quant_r16.c).
 * A 16-row group stays in L1 while tiles of up to R16_COLS activation rows
 * pass over it; per sub-block of 32 values and activation row, eight
 * vpdpbusd (16 rows x 4 values each, the activation's 4 bytes broadcast)
 * give the 16 rows' sums at once, then one multiply by the rows' 6-bit
 * scales. Integer sums are exact, so the float steps alone fix the result:
 * two fused multiply-adds per block, as gemm_q4_K_r16_ref does them. */
#include "quant/quant_impl.h"

#include <immintrin.h>
#include <string.h>

enum { R16_COLS = 8, R16_PANEL = 16, R16_BLOCK = QUANT_R16_ROWS * (int)sizeof(struct block_q4_K) };

static inline __m512i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* Byte k of each dword, zero-extended to the dword. */
static inline __m512i dword_byte(__m512i v, int k) {
    const __m512i idx = _mm512_set1_epi32((int)(0x80808000u | (unsigned)k));
    /* vpshufb indexes within each 128-bit lane: add the dword's base */
    const __m512i base = _mm512_set_epi32(12, 8, 4, 0, 12, 8, 4, 0, 12, 8, 4, 0, 12, 8, 4, 0);
    return _mm512_shuffle_epi8(v, _mm512_add_epi32(idx, base));
}

/* Bytes k and k+1 of each dword as two int16 (the pair vpdpwssd takes). */
static inline __m512i dword_pair(__m512i v, int k) {
    const __m512i idx = _mm512_set1_epi32((int)(0x80008000u | (unsigned)(k + 1) << 16 | (unsigned)k));
    const __m512i base = _mm512_set_epi32(0x000c000c, 0x00080008, 0x00040004, 0, 0x000c000c, 0x00080008, 0x00040004, 0,
                                          0x000c000c, 0x00080008, 0x00040004, 0, 0x000c000c, 0x00080008, 0x00040004, 0);
    return _mm512_shuffle_epi8(v, _mm512_add_epi32(idx, base));
}

static inline __attribute__((always_inline)) void r16_tile(const int nc, int nb, const uint8_t *wg, const char *a,
                                                           size_t a_stride, float *out, size_t out_stride) {
    const __m512i m4 = _mm512_set1_epi8(0xF), m6 = _mm512_set1_epi32(0x3f3f3f3f);
    const __m512i lo4 = _mm512_set1_epi32(0x0f0f0f0f), lo2 = _mm512_set1_epi32(0x03030303);
    __m512 acc[R16_COLS];
    for (int c = 0; c < nc; c++) acc[c] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = wg + (size_t)b * R16_BLOCK;
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
        const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + 32)));
        const __m512i u0 = _mm512_loadu_si512(blk + 64), u1 = _mm512_loadu_si512(blk + 128);
        const __m512i u2 = _mm512_loadu_si512(blk + 192);
        /* unpack_scales_mins_k4, 16 rows at once */
        const __m512i sc03 = _mm512_and_si512(u0, m6);
        const __m512i sc47 = _mm512_or_si512(_mm512_and_si512(u2, lo4),
                                             _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u0, 6), lo2), 4));
        const __m512i mn03 = _mm512_and_si512(u1, m6);
        const __m512i mn47 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), lo4),
                                             _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u1, 6), lo2), 4));
        const struct block_q8_K *y[R16_COLS];
        __m512i isum[R16_COLS];
        for (int c = 0; c < nc; c++) {
            y[c] = (const struct block_q8_K *)(a + (size_t)c * a_stride) + b;
            isum[c] = _mm512_setzero_si512();
        }
        for (int s = 0; s < 8; s++) {
            const __m512i sc = dword_byte(s < 4 ? sc03 : sc47, s & 3);
            const uint8_t *q = blk + 256 + 256 * s;
            __m512i w[8];
            for (int i = 0; i < 4; i++) {
                const __m512i bits = _mm512_loadu_si512(q + 64 * i);
                w[i] = _mm512_and_si512(bits, m4);
                w[i + 4] = _mm512_and_si512(_mm512_srli_epi16(bits, 4), m4);
            }
            for (int c = 0; c < nc; c++) {
                const int8_t *ys = y[c]->qs + 32 * s;
                __m512i t = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[0], bcast4(ys));
                for (int i = 1; i < 8; i++) t = _mm512_dpbusd_epi32(t, w[i], bcast4(ys + 4 * i));
                isum[c] = _mm512_add_epi32(isum[c], _mm512_mullo_epi32(t, sc));
            }
        }
        const __m512i mp0 = dword_pair(mn03, 0), mp1 = dword_pair(mn03, 2);
        const __m512i mp2 = dword_pair(mn47, 0), mp3 = dword_pair(mn47, 2);
        for (int c = 0; c < nc; c++) {
            int16_t bs[8];
            for (int s = 0; s < 8; s++) bs[s] = (int16_t)(y[c]->bsums[2 * s] + y[c]->bsums[2 * s + 1]);
            __m512i msum = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mp0, bcast4((const int8_t *)bs));
            msum = _mm512_dpwssd_epi32(msum, mp1, bcast4((const int8_t *)bs + 4));
            msum = _mm512_dpwssd_epi32(msum, mp2, bcast4((const int8_t *)bs + 8));
            msum = _mm512_dpwssd_epi32(msum, mp3, bcast4((const int8_t *)bs + 12));
            const __m512 dy = _mm512_set1_ps(y[c]->d);
            acc[c] = _mm512_fmadd_ps(_mm512_mul_ps(d, dy), _mm512_cvtepi32_ps(isum[c]), acc[c]);
            acc[c] = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, dy), _mm512_cvtepi32_ps(msum), acc[c]);
        }
    }
    for (int c = 0; c < nc; c++) _mm512_storeu_ps(out + (size_t)c * out_stride, acc[c]);
}

#define R16_TILE_CASE(N)                                                                             \
    case N: r16_tile(N, nb, wg, (const char *)a + (size_t)c0 * a_stride, a_stride,                  \
                     out + (size_t)c0 * out_stride + (size_t)g * QUANT_R16_ROWS, out_stride);        \
        break

void gemm_q4_K_r16_avx512(int n, const void *w, size_t w_stride, int n_w_rows, const void *a, size_t a_stride,
                          int n_a_rows, float *out, size_t out_stride) {
    const int nb = n / QK_K;
    /* R16_PANEL activation rows (~37 KiB at n = 2048) stay in L1 while the
     * groups stream past them from L2; wider panels thrash L1 (3x slower). */
    for (int p0 = 0; p0 < n_a_rows; p0 += R16_PANEL) {
        const int p1 = n_a_rows - p0 < R16_PANEL ? n_a_rows : p0 + R16_PANEL;
        for (int g = 0; g < n_w_rows / QUANT_R16_ROWS; g++) {
            const uint8_t *wg = (const uint8_t *)w + (size_t)g * QUANT_R16_ROWS * w_stride;
            for (int c0 = p0; c0 < p1; c0 += R16_COLS) {
                switch (p1 - c0 < R16_COLS ? p1 - c0 : R16_COLS) {
                    R16_TILE_CASE(1); R16_TILE_CASE(2); R16_TILE_CASE(3); R16_TILE_CASE(4);
                    R16_TILE_CASE(5); R16_TILE_CASE(6); R16_TILE_CASE(7); R16_TILE_CASE(8);
                }
            }
        }
    }
}
