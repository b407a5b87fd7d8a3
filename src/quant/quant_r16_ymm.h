/* Internal to the 256-bit x86 kernel files: the GEMMs on Q4_K and Q6_K rows
 * interleaved by 16 (layouts: quant_r16.c), written once for AVX2 and for
 * AVX-VNNI. A 64-byte vector of the layout is two ymm: rows 0-7, rows 8-15.
 * A tile is a group against up to R16Y_COLS activation rows, block by
 * block, one half (8 rows, one per dword lane) after the other: the
 * activation rows' per-block sums serve both halves, and each line of the
 * block is used as it comes (decode streams the rows from DRAM).
 * Within a half the quants are unpacked one vector (4 values of 8 rows) at
 * a time and serve every activation row before the next: with a whole
 * sub-block unpacked (8 vectors) and R16Y_COLS sums live, the tile needed
 * more than the 16 ymm registers and spilled in its inner loop.
 * That streaming tile serves decode and batches of fewer than 8 rows. From
 * 8 activation rows on (prefill), each block of a group is unpacked once
 * per panel of up to 32 activation rows into an L1 buffer (values a byte
 * each, scale operands, float scales) that the panel's tiles read: the
 * unpacking was a quarter of the Q6_K tile's work and a tenth of Q4_K's.
 * (The AVX-VNNI kernels stream at every batch size: with vpdpbusd the
 * buffer did not pay, 1.02x at 64 rows and 0.89x at 8 for Q4_K.)
 *
 * The includer is compiled with at least AVX2 + FMA + F16C, defines
 * R16Y_NAME(x), the exported name of kernel x (gemm_q4_K_r16 -> ..._avx2),
 * and R16Y_WITH_Q6 to have the Q6_K kernel too (R16Y_Q6_DPBUSD: its AVX-VNNI
 * form), R16Y_STREAM_ONLY to stream at every batch size, before including this file,
 * and after it the integer steps declared below.
 * Integer sums are exact, so the float steps alone fix the result: the
 * reference's fused multiply-adds per block, in its order. */
#ifndef MOEX_QUANT_R16_YMM_H
#define MOEX_QUANT_R16_YMM_H

#include "quant/quant_impl.h"

#include <immintrin.h>
#include <string.h>

#define R16Y_INLINE static inline __attribute__((always_inline))

enum {
    R16Y_COLS = 4, R16Y_PANEL = 16, R16Y_UNPACKED_PANEL = 32,
    R16Y_Q4_BLOCK = QUANT_R16_ROWS * (int)sizeof(struct block_q4_K),
    R16Y_Q6_BLOCK = QUANT_R16_ROWS * (int)sizeof(struct block_q6_K),
};

R16Y_INLINE __m256i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* Byte k of each dword of v (a 6-bit scale) as q4_scaled's operand. */
R16Y_INLINE __m256i q4_scale(__m256i v, int k);
/* Per dword r, the sum over j < 4 of byte 4r+j of w (0..15) times ys[j],
 * added to sum (q4_dot) or alone (q4_dot_first): int16 pairs (AVX2, 8
 * steps add up without overflow) or int32 (AVX-VNNI). */
R16Y_INLINE __m256i q4_dot_first(__m256i w, const int8_t *ys);
R16Y_INLINE __m256i q4_dot(__m256i sum, __m256i w, const int8_t *ys);
/* A sub-block's 8 steps times its scale (from q4_scale), as int32. */
R16Y_INLINE __m256i q4_scaled(__m256i sum, __m256i scale);
/* acc + vpmaddwd(a, b) */
R16Y_INLINE __m256i dot_i16_add(__m256i acc, __m256i a, __m256i b);

/* Bytes lo and hi of each dword, zero-extended, as its two int16. */
R16Y_INLINE __m256i dword_bytes_i16(__m256i v, int lo, int hi) {
    const __m256i idx = _mm256_set1_epi32((int)(0x80008000u | (unsigned)hi << 16 | (unsigned)lo));
    /* vpshufb indexes within each 128-bit lane: add the dword's base */
    const __m256i base = _mm256_setr_epi32(0, 0x00040004, 0x00080008, 0x000c000c, 0, 0x00040004, 0x00080008, 0x000c000c);
    return _mm256_shuffle_epi8(v, _mm256_add_epi32(idx, base));
}

/* Bytes k and k+1 of each dword as two int16 (a vpmaddwd pair). */
R16Y_INLINE __m256i dword_pair(__m256i v, int k) { return dword_bytes_i16(v, k, k + 1); }

/* fn(1..R16Y_COLS, args...) for nc: constant widths, so that the
 * accumulators stay in registers. */
#define R16Y_BY_WIDTH(nc, fn, ...)                           \
    do {                                                     \
        switch (nc) {                                        \
        case 1: fn(1, __VA_ARGS__); break;                   \
        case 2: fn(2, __VA_ARGS__); break;                   \
        case 3: fn(3, __VA_ARGS__); break;                   \
        default: fn(R16Y_COLS, __VA_ARGS__); break;          \
        }                                                    \
    } while (0)

/* The decode pass streams the rows from DRAM: ask for the block after next. */
R16Y_INLINE void prefetch_block(const uint8_t *blk, int bytes) {
    for (int off = 0; off < bytes; off += 64) _mm_prefetch((const char *)blk + 2 * bytes + off, _MM_HINT_T0);
}

/* unpack_scales_mins_k4 of half h, 8 rows at once: per dword, the scales
 * of sub-blocks 0-3 and 4-7 and the mins of 0-3 and 4-7, a byte each. */
R16Y_INLINE void q4_scales_mins(const uint8_t *blk, int h, __m256i *sc03, __m256i *sc47, __m256i *mn03, __m256i *mn47) {
    const __m256i m6 = _mm256_set1_epi32(0x3f3f3f3f);
    const __m256i lo4 = _mm256_set1_epi32(0x0f0f0f0f), lo2 = _mm256_set1_epi32(0x03030303);
    const __m256i u0 = _mm256_loadu_si256((const __m256i *)(blk + 64 + 32 * h));
    const __m256i u1 = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h));
    const __m256i u2 = _mm256_loadu_si256((const __m256i *)(blk + 192 + 32 * h));
    *sc03 = _mm256_and_si256(u0, m6);
    *sc47 = _mm256_or_si256(_mm256_and_si256(u2, lo4), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u0, 6), lo2), 4));
    *mn03 = _mm256_and_si256(u1, m6);
    *mn47 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), lo4),
                            _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u1, 6), lo2), 4));
}

/* A Q4_K group against nc activation rows. */
R16Y_INLINE void q4_tile(const int nc, int nb, const uint8_t *wg, const char *a, size_t a_stride, float *out,
                         size_t out_stride) {
    const __m256i m4 = _mm256_set1_epi8(0xF);
    __m256 acc[2][R16Y_COLS];
    for (int h = 0; h < 2; h++)
        for (int c = 0; c < nc; c++) acc[h][c] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = wg + (size_t)b * R16Y_Q4_BLOCK;
        prefetch_block(blk, R16Y_Q4_BLOCK);
        /* dword k of bsp[c]: the activation sums of sub-blocks 2k and 2k+1
         * (pairs of bsums) as int16, once for both halves */
        int32_t bsp[R16Y_COLS][4];
        for (int c = 0; c < nc; c++) {
            const struct block_q8_K *yc = (const struct block_q8_K *)(a + (size_t)c * a_stride) + b;
            const __m256i b16 = _mm256_loadu_si256((const __m256i *)yc->bsums);
            _mm_storeu_si128((__m128i *)bsp[c], _mm_hadd_epi16(_mm256_castsi256_si128(b16), _mm256_extracti128_si256(b16, 1)));
        }
        for (int h = 0; h < 2; h++) {
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * h)));
        const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 32 + 16 * h)));
        __m256i sc03, sc47, mn03, mn47;
        q4_scales_mins(blk, h, &sc03, &sc47, &mn03, &mn47);
        const struct block_q8_K *y[R16Y_COLS];
        __m256i isum[R16Y_COLS];
        for (int c = 0; c < nc; c++) {
            y[c] = (const struct block_q8_K *)(a + (size_t)c * a_stride) + b;
            isum[c] = _mm256_setzero_si256();
        }
        for (int s = 0; s < 8; s++) {
            const __m256i sc = q4_scale(s < 4 ? sc03 : sc47, s & 3);
            const uint8_t *q = blk + 256 + 256 * s + 32 * h;
            /* one vector of quants at a time against every activation row:
             * 2 unpacked registers live, not 8 (with 8 and R16Y_COLS sums
             * the tile spilled) */
            __m256i sum[R16Y_COLS];
            for (int i = 0; i < 4; i++) {
                const __m256i bits = _mm256_loadu_si256((const __m256i *)(q + 64 * i));
                const __m256i wl = _mm256_and_si256(bits, m4);
                const __m256i wh = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
                for (int c = 0; c < nc; c++) {
                    const int8_t *ys = y[c]->qs + 32 * s + 4 * i;
                    sum[c] = i ? q4_dot(sum[c], wl, ys) : q4_dot_first(wl, ys);
                    sum[c] = q4_dot(sum[c], wh, ys + 16);
                }
            }
            for (int c = 0; c < nc; c++) isum[c] = _mm256_add_epi32(isum[c], q4_scaled(sum[c], sc));
        }
        const __m256i mp0 = dword_pair(mn03, 0), mp1 = dword_pair(mn03, 2);
        const __m256i mp2 = dword_pair(mn47, 0), mp3 = dword_pair(mn47, 2);
        for (int c = 0; c < nc; c++) {
            __m256i msum = dot_i16_add(_mm256_setzero_si256(), mp0, _mm256_set1_epi32(bsp[c][0]));
            msum = dot_i16_add(msum, mp1, _mm256_set1_epi32(bsp[c][1]));
            msum = dot_i16_add(msum, mp2, _mm256_set1_epi32(bsp[c][2]));
            msum = dot_i16_add(msum, mp3, _mm256_set1_epi32(bsp[c][3]));
            const __m256 dy = _mm256_set1_ps(y[c]->d);
            acc[h][c] = _mm256_fmadd_ps(_mm256_mul_ps(d, dy), _mm256_cvtepi32_ps(isum[c]), acc[h][c]);
            acc[h][c] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, dy), _mm256_cvtepi32_ps(msum), acc[h][c]);
        }
        }
    }
    for (int h = 0; h < 2; h++)
        for (int c = 0; c < nc; c++) _mm256_storeu_ps(out + (size_t)c * out_stride + 8 * h, acc[h][c]);
}

/* One group (both halves, one after the other per block) against nc
 * (1..R16Y_COLS) activation rows. */
typedef void (*r16y_tile_fn)(int nc, int nb, const uint8_t *wg, const char *a, size_t a_stride, float *out,
                             size_t out_stride);

static void q4_tile_n(int nc, int nb, const uint8_t *wg, const char *a, size_t a_stride, float *out,
                      size_t out_stride) {
    R16Y_BY_WIDTH(nc, q4_tile, nb, wg, a, a_stride, out, out_stride);
}

/* R16Y_PANEL activation rows stay in L1/L2 while the groups stream past
 * them; each group is read from memory once per panel and then from L1 by
 * its tiles (both halves of a group share its cache lines). */
static void r16y_gemm(r16y_tile_fn tile, int n, const void *w, size_t w_stride, int n_w_rows, const void *a,
                      size_t a_stride, int n_a_rows, float *out, size_t out_stride) {
    const int nb = n / QK_K;
    for (int p0 = 0; p0 < n_a_rows; p0 += R16Y_PANEL) {
        const int p1 = n_a_rows - p0 < R16Y_PANEL ? n_a_rows : p0 + R16Y_PANEL;
        for (int g = 0; g < n_w_rows / QUANT_R16_ROWS; g++) {
            const uint8_t *wg = (const uint8_t *)w + (size_t)g * QUANT_R16_ROWS * w_stride;
            for (int c0 = p0; c0 < p1; c0 += R16Y_COLS) {
                const int nc = p1 - c0 < R16Y_COLS ? p1 - c0 : R16Y_COLS;
                tile(nc, nb, wg, (const char *)a + (size_t)c0 * a_stride, a_stride,
                     out + (size_t)c0 * out_stride + (size_t)g * QUANT_R16_ROWS, out_stride);
            }
        }
    }
}

#if defined(R16Y_STREAM_ONLY)
void R16Y_NAME(gemm_q4_K_r16)(int n, const void *w, size_t w_stride, int n_w_rows, const void *a, size_t a_stride,
                              int n_a_rows, float *out, size_t out_stride) {
    r16y_gemm(q4_tile_n, n, w, w_stride, n_w_rows, a, a_stride, n_a_rows, out, out_stride);
}
#else
/* Prefill: a group's block is unpacked once per panel (R16Y_UNPACKED_PANEL
 * activation rows) into a buffer that stays in L1, and every tile of the
 * panel reads its vectors from there. Unpacking in the tile served only
 * R16Y_COLS activation rows (the registers allow no more). Fewer than
 * R16Y_MIN_UNPACKED activation rows, and decode, stream the packed rows. */
enum { R16Y_MIN_UNPACKED = 8 };
/* Unpacks the group block blk into u. */
typedef void (*r16y_unpack_fn)(const uint8_t *blk, void *u);
/* An unpacked block against nc activation rows (blocks y[c]): acc[c] (the
 * group's 16 rows) takes the block's fused multiply-adds. */
typedef void (*r16y_unpacked_tile_fn)(int nc, const void *u, const struct block_q8_K *const *y,
                                      float (*acc)[QUANT_R16_ROWS]);

static void r16y_unpacked_panel(r16y_unpack_fn unpack, r16y_unpacked_tile_fn tile, size_t block_bytes, void *u, int nb,
                                const void *w, size_t w_stride, int n_w_rows, const char *a, size_t a_stride, int p0,
                                int p1, float *out, size_t out_stride) {
    float acc[R16Y_UNPACKED_PANEL][QUANT_R16_ROWS] __attribute__((aligned(32)));
    for (int g = 0; g < n_w_rows / QUANT_R16_ROWS; g++) {
        const uint8_t *wg = (const uint8_t *)w + (size_t)g * QUANT_R16_ROWS * w_stride;
        memset(acc, 0, sizeof acc);
        for (int b = 0; b < nb; b++) {
            /* the experts' weights come from DRAM: the next block (the next
             * group's first after the last) arrives while this one's tiles run */
            const uint8_t *blk = wg + (size_t)b * block_bytes;
            for (size_t off = 0; off < block_bytes; off += 64)
                _mm_prefetch((const char *)blk + block_bytes + off, _MM_HINT_T0);
            unpack(blk, u);
            for (int c0 = p0; c0 < p1; c0 += R16Y_COLS) {
                const int nc = p1 - c0 < R16Y_COLS ? p1 - c0 : R16Y_COLS;
                const struct block_q8_K *y[R16Y_COLS];
                for (int c = 0; c < nc; c++) y[c] = (const struct block_q8_K *)(a + (size_t)(c0 + c) * a_stride) + b;
                tile(nc, u, y, acc + (c0 - p0));
            }
        }
        for (int c = p0; c < p1; c++)
            memcpy(out + (size_t)c * out_stride + (size_t)g * QUANT_R16_ROWS, acc[c - p0], sizeof acc[0]);
    }
}

static void r16y_gemm_unpacked(r16y_unpack_fn unpack, r16y_unpacked_tile_fn tile, size_t block_bytes, void *u,
                               r16y_tile_fn stream_tile, int n, const void *w, size_t w_stride, int n_w_rows,
                               const void *a, size_t a_stride, int n_a_rows, float *out, size_t out_stride) {
    if (n_a_rows < R16Y_MIN_UNPACKED) {
        r16y_gemm(stream_tile, n, w, w_stride, n_w_rows, a, a_stride, n_a_rows, out, out_stride);
        return;
    }
    /* panels of equal size (whole tiles): 35 rows are 20 + 15, not 32 and a
     * streamed tail of 3 */
    const int panels = (n_a_rows + R16Y_UNPACKED_PANEL - 1) / R16Y_UNPACKED_PANEL;
    const int size = ((n_a_rows + panels - 1) / panels + R16Y_COLS - 1) / R16Y_COLS * R16Y_COLS;
    for (int p0 = 0; p0 < n_a_rows; p0 += size)
        r16y_unpacked_panel(unpack, tile, block_bytes, u, n / QK_K, w, w_stride, n_w_rows, (const char *)a, a_stride,
                            p0, n_a_rows - p0 < size ? n_a_rows : p0 + size, out, out_stride);
}

/* Q4_K unpacked: per half, sub-block s, vector [i] the low nibbles (values
 * 32s+4i..), [4+i] the high ones (32s+16+4i..); the scale operands; the
 * mins as vpmaddwd pairs (sub-blocks 2k, 2k+1); the float scales. */
struct q4_unpacked {
    __m256i q[2][8][8];
    __m256i sc[2][8];
    __m256i mp[2][4];
    __m256 d[2], dmin[2];
};

static void q4_unpack(const uint8_t *blk, void *out) {
    struct q4_unpacked *u = out;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    for (int h = 0; h < 2; h++) {
        u->d[h] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * h)));
        u->dmin[h] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 32 + 16 * h)));
        __m256i sc03, sc47, mn03, mn47;
        q4_scales_mins(blk, h, &sc03, &sc47, &mn03, &mn47);
        for (int k = 0; k < 4; k++) {
            u->sc[h][k] = q4_scale(sc03, k);
            u->sc[h][4 + k] = q4_scale(sc47, k);
        }
        u->mp[h][0] = dword_pair(mn03, 0);
        u->mp[h][1] = dword_pair(mn03, 2);
        u->mp[h][2] = dword_pair(mn47, 0);
        u->mp[h][3] = dword_pair(mn47, 2);
        for (int s = 0; s < 8; s++)
            for (int i = 0; i < 4; i++) {
                const __m256i bits = _mm256_loadu_si256((const __m256i *)(blk + 256 + 256 * s + 64 * i + 32 * h));
                u->q[h][s][i] = _mm256_and_si256(bits, m4);
                u->q[h][s][4 + i] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
            }
    }
}

R16Y_INLINE void q4_unpacked_tile(const int nc, const struct q4_unpacked *u, const struct block_q8_K *const *y,
                                  float (*acc)[QUANT_R16_ROWS]) {
    int32_t bsp[R16Y_COLS][4]; /* as in q4_tile */
    for (int c = 0; c < nc; c++) {
        const __m256i b16 = _mm256_loadu_si256((const __m256i *)y[c]->bsums);
        _mm_storeu_si128((__m128i *)bsp[c], _mm_hadd_epi16(_mm256_castsi256_si128(b16), _mm256_extracti128_si256(b16, 1)));
    }
    for (int h = 0; h < 2; h++) {
        /* the mins' operands are broadcast from memory (loads), not moved
         * out of the hadd's register (3 vector ops each) */
        __asm__("" : "+m"(bsp));
        __m256i isum[R16Y_COLS];
        for (int c = 0; c < nc; c++) isum[c] = _mm256_setzero_si256();
        for (int s = 0; s < 8; s++) {
            __m256i sum[R16Y_COLS];
            for (int i = 0; i < 4; i++) {
                const __m256i wl = _mm256_load_si256(&u->q[h][s][i]), wh = _mm256_load_si256(&u->q[h][s][4 + i]);
                for (int c = 0; c < nc; c++) {
                    const int8_t *ys = y[c]->qs + 32 * s + 4 * i;
                    sum[c] = i ? q4_dot(sum[c], wl, ys) : q4_dot_first(wl, ys);
                    sum[c] = q4_dot(sum[c], wh, ys + 16);
                }
            }
            const __m256i sc = _mm256_load_si256(&u->sc[h][s]);
            for (int c = 0; c < nc; c++) isum[c] = _mm256_add_epi32(isum[c], q4_scaled(sum[c], sc));
        }
        for (int c = 0; c < nc; c++) {
            __m256i msum = dot_i16_add(_mm256_setzero_si256(), u->mp[h][0], _mm256_set1_epi32(bsp[c][0]));
            for (int k = 1; k < 4; k++) msum = dot_i16_add(msum, u->mp[h][k], _mm256_set1_epi32(bsp[c][k]));
            const __m256 dy = _mm256_set1_ps(y[c]->d);
            __m256 sum = _mm256_loadu_ps(acc[c] + 8 * h);
            sum = _mm256_fmadd_ps(_mm256_mul_ps(u->d[h], dy), _mm256_cvtepi32_ps(isum[c]), sum);
            sum = _mm256_fnmadd_ps(_mm256_mul_ps(u->dmin[h], dy), _mm256_cvtepi32_ps(msum), sum);
            _mm256_storeu_ps(acc[c] + 8 * h, sum);
        }
    }
}

static void q4_unpacked_tile_n(int nc, const void *u, const struct block_q8_K *const *y, float (*acc)[QUANT_R16_ROWS]) {
    R16Y_BY_WIDTH(nc, q4_unpacked_tile, u, y, acc);
}

void R16Y_NAME(gemm_q4_K_r16)(int n, const void *w, size_t w_stride, int n_w_rows, const void *a, size_t a_stride,
                              int n_a_rows, float *out, size_t out_stride) {
    struct q4_unpacked u __attribute__((aligned(32)));
    r16y_gemm_unpacked(q4_unpack, q4_unpacked_tile_n, R16Y_Q4_BLOCK, &u, q4_tile_n, n, w, w_stride, n_w_rows, a,
                       a_stride, n_a_rows, out, out_stride);
}
#endif

#if defined(R16Y_WITH_Q6)
/* int16 k of each dword copied to both halves: a Q6_K scale as the
 * vpmaddwd operand. */
R16Y_INLINE __m256i q6_scale(__m256i pair, int k) {
    const __m256i base = _mm256_setr_epi32(0, 0x04040404, 0x08080808, 0x0c0c0c0c, 0, 0x04040404, 0x08080808, 0x0c0c0c0c);
    return _mm256_shuffle_epi8(pair, _mm256_add_epi8(base, _mm256_set1_epi32(k ? 0x03020302 : 0x01000100)));
}

/* isum + per dword r: scale times the sum over i < 2, j < 4 of byte 4r+j
 * of w[i] (0..63) times ys[4i+j]. Two vpmaddubsw per int16 sum (2 x 2 x 63
 * x 128 < 32768), then vpmaddwd by the scale: faster than vpdpbusd and a
 * 32-bit multiply, with AVX-VNNI too. The empty asm keeps GCC from
 * re-associating the chain of adds (it would hoist every product and spill). */
R16Y_INLINE __m256i q6_quads_dot(__m256i isum, __m256i w0, __m256i w1, const int8_t *ys, __m256i scale) {
    const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(w0, bcast4(ys)), _mm256_maddubs_epi16(w1, bcast4(ys + 4)));
    isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, scale));
    __asm__("" : "+x"(isum));
    return isum;
}

/* The top 2 bits of quad i (bits 2i..2i+1 of each byte) moved to bits 4..5. */
R16Y_INLINE __m256i q6_top(__m256i hbits, int i) {
    const __m256i m = _mm256_set1_epi8(0x30);
    switch (i) {
    case 0: return _mm256_and_si256(_mm256_slli_epi16(hbits, 4), m);
    case 1: return _mm256_and_si256(_mm256_slli_epi16(hbits, 2), m);
    case 2: return _mm256_and_si256(hbits, m);
    default: return _mm256_and_si256(_mm256_srli_epi16(hbits, 2), m);
    }
}

#if defined(R16Y_Q6_DPBUSD)
/* isum[c] + the scaled sums of sub-blocks 2t and 2t+1 (values 0..63, q: their
 * 384 bytes, this half) against activation row c's values from ys0 on. AVX-VNNI:
 * one sub-block (4 quads) at a time, vpdpbusd sums in int32, then one vpmulld
 * by the sign-extended scale: 8 vpdpbusd + 2 vpmulld per 32 values, against
 * the AVX2 form's 8 vpmaddubsw + 4 vpmaddwd (bench_r16: 1.19x). */
R16Y_INLINE void q6_pair_dot(const int nc, __m256i *isum, const uint8_t *q, __m256i pair,
                             const struct block_q8_K *const *y, int ys0) {
    const __m256i m4 = _mm256_set1_epi8(0xF);
    const __m256i h0 = _mm256_loadu_si256((const __m256i *)(q + 256));
    const __m256i h1 = _mm256_loadu_si256((const __m256i *)(q + 320));
    const __m256i sc[2] = { _mm256_srai_epi32(_mm256_slli_epi32(pair, 16), 16), _mm256_srai_epi32(pair, 16) };
    for (int u = 0; u < 2; u++) {
        __m256i sum[R16Y_COLS];
        for (int i = 0; i < 4; i++) {
            const __m256i lo = _mm256_loadu_si256((const __m256i *)(q + 64 * i));
            const __m256i w = u ? _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo, 4), m4), q6_top(h1, i))
                                : _mm256_or_si256(_mm256_and_si256(lo, m4), q6_top(h0, i));
            for (int c = 0; c < nc; c++)
                sum[c] = _mm256_dpbusd_avx_epi32(i ? sum[c] : _mm256_setzero_si256(), w,
                                                 bcast4(y[c]->qs + ys0 + 16 * u + 4 * i));
        }
        for (int c = 0; c < nc; c++) isum[c] = _mm256_add_epi32(isum[c], _mm256_mullo_epi32(sum[c], sc[u]));
    }
}
#else
/* The same with vpmaddubsw: two quads of values at a time against every
 * activation row (2 unpacked registers live, not 8). */
R16Y_INLINE void q6_pair_dot(const int nc, __m256i *isum, const uint8_t *q, __m256i pair,
                             const struct block_q8_K *const *y, int ys0) {
    const __m256i m4 = _mm256_set1_epi8(0xF);
    const __m256i sc0 = q6_scale(pair, 0), sc1 = q6_scale(pair, 1);
    const __m256i h0 = _mm256_loadu_si256((const __m256i *)(q + 256));
    const __m256i h1 = _mm256_loadu_si256((const __m256i *)(q + 320));
    for (int i = 0; i < 4; i += 2) {
        const __m256i lo0 = _mm256_loadu_si256((const __m256i *)(q + 64 * i));
        const __m256i lo1 = _mm256_loadu_si256((const __m256i *)(q + 64 * i + 64));
        __m256i w0 = _mm256_or_si256(_mm256_and_si256(lo0, m4), q6_top(h0, i));
        __m256i w1 = _mm256_or_si256(_mm256_and_si256(lo1, m4), q6_top(h0, i + 1));
        for (int c = 0; c < nc; c++) isum[c] = q6_quads_dot(isum[c], w0, w1, y[c]->qs + ys0 + 4 * i, sc0);
        w0 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo0, 4), m4), q6_top(h1, i));
        w1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo1, 4), m4), q6_top(h1, i + 1));
        for (int c = 0; c < nc; c++) isum[c] = q6_quads_dot(isum[c], w0, w1, y[c]->qs + ys0 + 16 + 4 * i, sc1);
    }
}
#endif

/* The same for a Q6_K group. */
R16Y_INLINE void q6_tile(const int nc, int nb, const uint8_t *wg, const char *a, size_t a_stride, float *out,
                         size_t out_stride) {
    __m256 acc[2][R16Y_COLS];
    for (int h = 0; h < 2; h++)
        for (int c = 0; c < nc; c++) acc[h][c] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = wg + (size_t)b * R16Y_Q6_BLOCK;
        prefetch_block(blk, R16Y_Q6_BLOCK);
        for (int h = 0; h < 2; h++) {
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * h)));
        const struct block_q8_K *y[R16Y_COLS];
        __m256i isum[R16Y_COLS];
        for (int c = 0; c < nc; c++) {
            y[c] = (const struct block_q8_K *)(a + (size_t)c * a_stride) + b;
            isum[c] = _mm256_setzero_si256();
        }
        for (int t = 0; t < 8; t++) {
            /* dword r: the int16 scales of sub-blocks 2t and 2t+1 of row r */
            const __m256i pair = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 32 + 32 * t + 16 * h)));
            /* the -32 offset: -32 x scale against the activation sums, in the same sum */
            const __m256i offset = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(pair, 5));
            q6_pair_dot(nc, isum, blk + 288 + 384 * t + 32 * h, pair, y, 32 * t);
            for (int c = 0; c < nc; c++)
                isum[c] = dot_i16_add(isum[c], offset, bcast4((const int8_t *)(y[c]->bsums + 2 * t)));
        }
        for (int c = 0; c < nc; c++) {
            acc[h][c] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(y[c]->d)), _mm256_cvtepi32_ps(isum[c]), acc[h][c]);
        }
        }
    }
    for (int h = 0; h < 2; h++)
        for (int c = 0; c < nc; c++) _mm256_storeu_ps(out + (size_t)c * out_stride + 8 * h, acc[h][c]);
}

static void q6_tile_n(int nc, int nb, const uint8_t *wg, const char *a, size_t a_stride, float *out,
                      size_t out_stride) {
    R16Y_BY_WIDTH(nc, q6_tile, nb, wg, a, a_stride, out, out_stride);
}

#if defined(R16Y_STREAM_ONLY)
void R16Y_NAME(gemm_q6_K_r16)(int n, const void *w, size_t w_stride, int n_w_rows, const void *a, size_t a_stride,
                              int n_a_rows, float *out, size_t out_stride) {
    r16y_gemm(q6_tile_n, n, w, w_stride, n_w_rows, a, a_stride, n_a_rows, out, out_stride);
}
#else
/* Q6_K unpacked: per half and pair t, the values of sub-block 2t+u,
 * quad i, a byte each at [4u + i]; then the scale operands of 2t and 2t+1
 * (q6_scale) and the -32 offset (int16 pairs); the float scales. */
enum { Q6U_PAIR = 11 }; /* vectors per (half, pair) */
struct q6_unpacked {
    __m256i v[2][8][Q6U_PAIR];
    __m256 d[2];
};

static void q6_unpack(const uint8_t *blk, void *out) {
    struct q6_unpacked *u = out;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    for (int h = 0; h < 2; h++) {
        u->d[h] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * h)));
        for (int t = 0; t < 8; t++) {
            __m256i *v = u->v[h][t];
            const uint8_t *q = blk + 288 + 384 * t + 32 * h;
            const __m256i h0 = _mm256_loadu_si256((const __m256i *)(q + 256));
            const __m256i h1 = _mm256_loadu_si256((const __m256i *)(q + 320));
            for (int i = 0; i < 4; i++) {
                const __m256i lo = _mm256_loadu_si256((const __m256i *)(q + 64 * i));
                _mm256_store_si256(v + i, _mm256_or_si256(_mm256_and_si256(lo, m4), q6_top(h0, i)));
                _mm256_store_si256(v + 4 + i,
                                   _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo, 4), m4), q6_top(h1, i)));
            }
            const __m256i pair = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 32 + 32 * t + 16 * h)));
            _mm256_store_si256(v + 8, q6_scale(pair, 0));
            _mm256_store_si256(v + 9, q6_scale(pair, 1));
            _mm256_store_si256(v + 10, _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(pair, 5)));
        }
    }
}

R16Y_INLINE void q6_unpacked_tile(const int nc, const struct q6_unpacked *u, const struct block_q8_K *const *y,
                                  float (*acc)[QUANT_R16_ROWS]) {
    for (int h = 0; h < 2; h++) {
        __m256i isum[R16Y_COLS];
        for (int c = 0; c < nc; c++) isum[c] = _mm256_setzero_si256();
        for (int t = 0; t < 8; t++) {
            const __m256i *v = u->v[h][t];
            for (int i = 0; i < 4; i += 2) {
                __m256i w0 = _mm256_load_si256(v + i), w1 = _mm256_load_si256(v + i + 1);
                const __m256i sc0 = _mm256_load_si256(v + 8);
                for (int c = 0; c < nc; c++) isum[c] = q6_quads_dot(isum[c], w0, w1, y[c]->qs + 32 * t + 4 * i, sc0);
                w0 = _mm256_load_si256(v + 4 + i);
                w1 = _mm256_load_si256(v + 5 + i);
                const __m256i sc1 = _mm256_load_si256(v + 9);
                for (int c = 0; c < nc; c++)
                    isum[c] = q6_quads_dot(isum[c], w0, w1, y[c]->qs + 32 * t + 16 + 4 * i, sc1);
            }
            const __m256i offset = _mm256_load_si256(v + 10);
            for (int c = 0; c < nc; c++)
                isum[c] = dot_i16_add(isum[c], offset, bcast4((const int8_t *)(y[c]->bsums + 2 * t)));
        }
        for (int c = 0; c < nc; c++) {
            const __m256 sum = _mm256_loadu_ps(acc[c] + 8 * h);
            _mm256_storeu_ps(acc[c] + 8 * h, _mm256_fmadd_ps(_mm256_mul_ps(u->d[h], _mm256_set1_ps(y[c]->d)),
                                                            _mm256_cvtepi32_ps(isum[c]), sum));
        }
    }
}

static void q6_unpacked_tile_n(int nc, const void *u, const struct block_q8_K *const *y, float (*acc)[QUANT_R16_ROWS]) {
    R16Y_BY_WIDTH(nc, q6_unpacked_tile, u, y, acc);
}

void R16Y_NAME(gemm_q6_K_r16)(int n, const void *w, size_t w_stride, int n_w_rows, const void *a, size_t a_stride,
                              int n_a_rows, float *out, size_t out_stride) {
    struct q6_unpacked u __attribute__((aligned(32)));
    r16y_gemm_unpacked(q6_unpack, q6_unpacked_tile_n, R16Y_Q6_BLOCK, &u, q6_tile_n, n, w, w_stride, n_w_rows, a,
                       a_stride, n_a_rows, out, out_stride);
}
#endif

#endif

#endif
