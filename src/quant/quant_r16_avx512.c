/* AVX-512 VNNI GEMMs on Q4_K and Q6_K rows interleaved by 16 (layouts:
 * quant_r16.c).
 * A 16-row group stays in L1 while tiles of up to R16_COLS activation rows
 * pass over it; per sub-block of 32 values and activation row, eight
 * vpdpbusd (16 rows x 4 values each, the activation's 4 bytes broadcast)
 * give the 16 rows' sums at once, then one multiply by the rows' 6-bit
 * scales. Integer sums are exact, so the float steps alone fix the result:
 * two fused multiply-adds per block (Q6_K: one), as the reference does. */
#include "quant/quant_impl.h"

#include <immintrin.h>
#include <string.h>

enum {
    R16_COLS = 16, R16_PANEL = 16, R16_BLOCK = QUANT_R16_ROWS * (int)sizeof(struct block_q4_K),
    Q6_COLS = 16, Q6_BLOCK = QUANT_R16_ROWS * (int)sizeof(struct block_q6_K),
};

/* 16 fp16 to f32 with F16C halves (the AVX-512 form is not in every
 * emulation header; both are exact). */
static inline __attribute__((always_inline)) __m512 load_f16x16(const uint8_t *p) {
    const __m256 lo = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    const __m256 hi = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16)));
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}

/* acc + vpdpbusd(w, the 4 bytes at p broadcast) and the same for vpdpwssd
 * (pairs of int16): the broadcast folded into the instruction's memory
 * operand, which compilers do not do for these intrinsics (a separate
 * vpbroadcastd per dot product otherwise: ~1.5x the time at 16 rows). */
#if defined(__AVX512VNNI__) && defined(__GNUC__)
static inline __attribute__((always_inline)) __m512i dot_bcast4(__m512i acc, __m512i w, const int8_t *p) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const struct { int8_t b[4]; } *)p));
    return acc;
}
static inline __attribute__((always_inline)) __m512i dot16_bcast4(__m512i acc, __m512i w, const int8_t *p) {
    __asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const struct { int8_t b[4]; } *)p));
    return acc;
}
#else /* emulated (SIMDe) */
static inline __attribute__((always_inline)) __m512i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}
static inline __attribute__((always_inline)) __m512i dot_bcast4(__m512i acc, __m512i w, const int8_t *p) {
    return _mm512_dpbusd_epi32(acc, w, bcast4(p));
}
static inline __attribute__((always_inline)) __m512i dot16_bcast4(__m512i acc, __m512i w, const int8_t *p) {
    return _mm512_dpwssd_epi32(acc, w, bcast4(p));
}
#endif

/* Block b of activation row c, from the tile's base: computed where it is
 * used (an array of the rows' pointers costs a load per row and sub-block,
 * ~15% at 16 rows). */
static inline __attribute__((always_inline)) const struct block_q8_K *act_block(const char *a, size_t a_stride, int c,
                                                                                int b) {
    return (const struct block_q8_K *)(a + (size_t)c * a_stride) + b;
}

/* Byte k of each dword, zero-extended to the dword. */
static inline __attribute__((always_inline)) __m512i dword_byte(__m512i v, int k) {
    const __m512i idx = _mm512_set1_epi32((int)(0x80808000u | (unsigned)k));
    /* vpshufb indexes within each 128-bit lane: add the dword's base */
    const __m512i base = _mm512_set_epi32(12, 8, 4, 0, 12, 8, 4, 0, 12, 8, 4, 0, 12, 8, 4, 0);
    return _mm512_shuffle_epi8(v, _mm512_add_epi32(idx, base));
}

/* Bytes k and k+1 of each dword as two int16 (the pair vpdpwssd takes). */
static inline __attribute__((always_inline)) __m512i dword_pair(__m512i v, int k) {
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
        /* decode streams the rows from DRAM: ask for the block after next */
        for (int off = 0; off < R16_BLOCK; off += 64) _mm_prefetch((const char *)blk + 2 * R16_BLOCK + off, _MM_HINT_T0);
        const __m512 d = load_f16x16(blk);
        const __m512 dmin = load_f16x16(blk + 32);
        const __m512i u0 = _mm512_loadu_si512(blk + 64), u1 = _mm512_loadu_si512(blk + 128);
        const __m512i u2 = _mm512_loadu_si512(blk + 192);
        /* unpack_scales_mins_k4, 16 rows at once */
        const __m512i sc03 = _mm512_and_si512(u0, m6);
        const __m512i sc47 = _mm512_or_si512(_mm512_and_si512(u2, lo4),
                                             _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u0, 6), lo2), 4));
        const __m512i mn03 = _mm512_and_si512(u1, m6);
        const __m512i mn47 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), lo4),
                                             _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u1, 6), lo2), 4));
        __m512i isum[R16_COLS];
        for (int c = 0; c < nc; c++) isum[c] = _mm512_setzero_si512();
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
                const int8_t *ys = act_block(a, a_stride, c, b)->qs + 32 * s;
                /* two chains: with one activation row (decode) the latency of
                 * dependent vpdpbusd would bound the speed */
                __m512i t0 = dot_bcast4(_mm512_setzero_si512(), w[0], ys);
                __m512i t1 = dot_bcast4(_mm512_setzero_si512(), w[4], ys + 16);
                for (int i = 1; i < 4; i++) {
                    t0 = dot_bcast4(t0, w[i], ys + 4 * i);
                    t1 = dot_bcast4(t1, w[i + 4], ys + 16 + 4 * i);
                }
                isum[c] = _mm512_add_epi32(isum[c], _mm512_mullo_epi32(_mm512_add_epi32(t0, t1), sc));
            }
        }
        const __m512i mp0 = dword_pair(mn03, 0), mp1 = dword_pair(mn03, 2);
        const __m512i mp2 = dword_pair(mn47, 0), mp3 = dword_pair(mn47, 2);
        for (int c = 0; c < nc; c++) {
            /* the sub-blocks' activation sums (pairs of bsums) as int16 pairs, in registers */
            const __m256i b16 = _mm256_loadu_si256((const __m256i *)act_block(a, a_stride, c, b)->bsums);
            const __m128i bs = _mm_hadd_epi16(_mm256_castsi256_si128(b16), _mm256_extracti128_si256(b16, 1));
            __m512i msum = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mp0, _mm512_broadcastd_epi32(bs));
            msum = _mm512_dpwssd_epi32(msum, mp1, _mm512_broadcastd_epi32(_mm_shuffle_epi32(bs, 1)));
            msum = _mm512_dpwssd_epi32(msum, mp2, _mm512_broadcastd_epi32(_mm_shuffle_epi32(bs, 2)));
            msum = _mm512_dpwssd_epi32(msum, mp3, _mm512_broadcastd_epi32(_mm_shuffle_epi32(bs, 3)));
            const __m512 dy = _mm512_set1_ps(act_block(a, a_stride, c, b)->d);
            acc[c] = _mm512_fmadd_ps(_mm512_mul_ps(d, dy), _mm512_cvtepi32_ps(isum[c]), acc[c]);
            acc[c] = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, dy), _mm512_cvtepi32_ps(msum), acc[c]);
        }
    }
    for (int c = 0; c < nc; c++) _mm512_storeu_ps(out + (size_t)c * out_stride, acc[c]);
}

/* One tile of nc (1..R16_COLS) activation rows against one 16-row group. */
typedef void (*tile_fn)(int nc, int nb, const uint8_t *wg, const char *a, size_t a_stride, float *out,
                        size_t out_stride);

/* fn(nc, ...) calling body with nc as a constant (1..16): the integer sums
 * stay in registers. */
#define TILE_CASE(body, c) case c: body(c, nb, wg, a, a_stride, out, out_stride); break;
#define TILE_WIDTHS(fn, body)                                                                                          \
    static void fn(int nc, int nb, const uint8_t *wg, const char *a, size_t a_stride, float *out, size_t out_stride) { \
        switch (nc) {                                                                                                  \
        TILE_CASE(body, 1) TILE_CASE(body, 2) TILE_CASE(body, 3) TILE_CASE(body, 4) TILE_CASE(body, 5)                 \
        TILE_CASE(body, 6) TILE_CASE(body, 7) TILE_CASE(body, 8) TILE_CASE(body, 9) TILE_CASE(body, 10)                \
        TILE_CASE(body, 11) TILE_CASE(body, 12) TILE_CASE(body, 13) TILE_CASE(body, 14) TILE_CASE(body, 15)            \
        default: body(16, nb, wg, a, a_stride, out, out_stride); break;                                                \
        }                                                                                                              \
    }
TILE_WIDTHS(q4_K_tile, r16_tile)

/* R16_PANEL activation rows (~37 KiB at n = 2048) stay in L1 while the
 * groups stream past them from L2; wider panels thrash L1 (3x slower). */
static void gemm_r16(tile_fn tile, int cols, int n, const void *w, size_t w_stride, int n_w_rows,
                     const void *a, size_t a_stride, int n_a_rows, float *out, size_t out_stride) {
    const int nb = n / QK_K;
    for (int p0 = 0; p0 < n_a_rows; p0 += R16_PANEL) {
        const int p1 = n_a_rows - p0 < R16_PANEL ? n_a_rows : p0 + R16_PANEL;
        for (int g = 0; g < n_w_rows / QUANT_R16_ROWS; g++) {
            const uint8_t *wg = (const uint8_t *)w + (size_t)g * QUANT_R16_ROWS * w_stride;
            for (int c0 = p0; c0 < p1; c0 += cols)
                tile(p1 - c0 < cols ? p1 - c0 : cols, nb, wg, (const char *)a + (size_t)c0 * a_stride, a_stride,
                     out + (size_t)c0 * out_stride + (size_t)g * QUANT_R16_ROWS, out_stride);
        }
    }
}

void gemm_q4_K_r16_avx512(int n, const void *w, size_t w_stride, int n_w_rows, const void *a, size_t a_stride,
                          int n_a_rows, float *out, size_t out_stride) {
    gemm_r16(q4_K_tile, R16_COLS, n, w, w_stride, n_w_rows, a, a_stride, n_a_rows, out, out_stride);
}

/* The top 2 bits of quad i (bits 2i..2i+1 of each byte) moved to bits 4..5. */
static inline __attribute__((always_inline)) __m512i q6_top(__m512i h, int i) {
    const __m512i m = _mm512_set1_epi8(0x30);
    switch (i) {
    case 0: return _mm512_and_si512(_mm512_slli_epi16(h, 4), m);
    case 1: return _mm512_and_si512(_mm512_slli_epi16(h, 2), m);
    case 2: return _mm512_and_si512(h, m);
    default: return _mm512_and_si512(_mm512_srli_epi16(h, 2), m);
    }
}

static inline __attribute__((always_inline)) void q6_tile(const int nc, int nb, const uint8_t *wg, const char *a,
                                                          size_t a_stride, float *out, size_t out_stride) {
    const __m512i m4 = _mm512_set1_epi8(0xF);
    __m512 acc[Q6_COLS];
    for (int c = 0; c < nc; c++) acc[c] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = wg + (size_t)b * Q6_BLOCK;
        for (int off = 0; off < Q6_BLOCK; off += 64) _mm_prefetch((const char *)blk + 2 * Q6_BLOCK + off, _MM_HINT_T0);
        const __m512 d = load_f16x16(blk);
        __m512i isum[Q6_COLS];
        for (int c = 0; c < nc; c++) isum[c] = _mm512_setzero_si512();
        for (int t = 0; t < 8; t++) {
            /* dword r: the int16 scales of sub-blocks 2t and 2t+1 of row r */
            const __m512i pair = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(blk + 32 + 32 * t)));
            /* each half sign-extended: a multiply-add by (1, 0) or (0, 1) */
            const __m512i sc0 = _mm512_dpwssd_epi32(_mm512_setzero_si512(), pair, _mm512_set1_epi32(1));
            const __m512i sc1 = _mm512_dpwssd_epi32(_mm512_setzero_si512(), pair, _mm512_set1_epi32(0x10000));
            /* the -32 offset as -32 x the scales against the activation sums,
             * in the same int32 sum: no second accumulator per row */
            const __m512i offset = _mm512_sub_epi16(_mm512_setzero_si512(), _mm512_slli_epi16(pair, 5));
            const uint8_t *q = blk + 288 + 384 * t;
            const __m512i h0 = _mm512_loadu_si512(q + 256), h1 = _mm512_loadu_si512(q + 320);
            __m512i w0[4], w1[4];
            for (int i = 0; i < 4; i++) {
                const __m512i lo = _mm512_loadu_si512(q + 64 * i);
                w0[i] = _mm512_or_si512(_mm512_and_si512(lo, m4), q6_top(h0, i));
                w1[i] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lo, 4), m4), q6_top(h1, i));
            }
            for (int c = 0; c < nc; c++) {
                const int8_t *ys = act_block(a, a_stride, c, b)->qs + 32 * t;
                __m512i t0 = dot_bcast4(_mm512_setzero_si512(), w0[0], ys);
                __m512i t1 = dot_bcast4(_mm512_setzero_si512(), w1[0], ys + 16);
                for (int i = 1; i < 4; i++) {
                    t0 = dot_bcast4(t0, w0[i], ys + 4 * i);
                    t1 = dot_bcast4(t1, w1[i], ys + 16 + 4 * i);
                }
                isum[c] = _mm512_add_epi32(isum[c], _mm512_add_epi32(_mm512_mullo_epi32(t0, sc0), _mm512_mullo_epi32(t1, sc1)));
                isum[c] = dot16_bcast4(isum[c], offset, (const int8_t *)(act_block(a, a_stride, c, b)->bsums + 2 * t));
            }
        }
        for (int c = 0; c < nc; c++) {
            acc[c] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(act_block(a, a_stride, c, b)->d)),
                                     _mm512_cvtepi32_ps(isum[c]), acc[c]);
        }
    }
    for (int c = 0; c < nc; c++) _mm512_storeu_ps(out + (size_t)c * out_stride, acc[c]);
}

TILE_WIDTHS(q6_K_tile, q6_tile)

void gemm_q6_K_r16_avx512(int n, const void *w, size_t w_stride, int n_w_rows, const void *a, size_t a_stride,
                          int n_a_rows, float *out, size_t out_stride) {
    gemm_r16(q6_K_tile, Q6_COLS, n, w, w_stride, n_w_rows, a, a_stride, n_a_rows, out, out_stride);
}
