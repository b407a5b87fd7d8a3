/* The 256-bit K-quant pieces the AVX2 and the AVX-512 kernels share
 * (quant_avx2.c, quant_avx512.c include this, each under its own ISA
 * flags): horizontal sums, the Q4_K/Q5_K scales and mins, the Q6_K scale
 * pairs and unpacking, and one weight row's super-block unpacked for reuse
 * across activation rows (struct kblock, prep_*). */
#ifndef MOEX_QUANT_K256_X86_H
#define MOEX_QUANT_K256_X86_H

#include "quant/quant_blocks.h"

#include <immintrin.h>
#include <stdint.h>

static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

static inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline __m256i bcast_i16_lane(__m256i v, int k) {
    /* every int16 lane = lane k of the low 128 bits (v has both halves equal) */
    return _mm256_shuffle_epi8(v, _mm256_set1_epi16((short)((2 * k + 1) << 8 | (2 * k))));
}

/* Sub-block scales (low 128 bits, 8 x int16, duplicated in both halves) and
 * the mins (8 x int16) of a Q4_K/Q5_K block. */
static inline void k4_scales_mins(const uint8_t *scales12, __m256i *scales, __m128i *mins) {
    /* The 12 packed bytes to 8 scales then 8 mins, in registers (the 4
     * bytes loaded past them belong to the same block and are ignored). */
    const __m128i v = _mm_loadu_si128((const __m128i *)scales12);
    const __m128i lo = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m128i hi = _mm_shuffle_epi8(v, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    const __m128i low6 = _mm_and_si128(lo, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0));
    const __m128i nib = _mm_and_si128(_mm_srli_epi16(lo, 4), _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15));
    const __m128i top = _mm_and_si128(_mm_srli_epi16(hi, 2),
                                      _mm_setr_epi8(0, 0, 0, 0, 48, 48, 48, 48, 0, 0, 0, 0, 48, 48, 48, 48));
    const __m256i mins_and_scales = _mm256_cvtepu8_epi16(_mm_or_si128(_mm_or_si128(low6, nib), top));
    const __m128i sc = _mm256_castsi256_si128(mins_and_scales);
    *scales = _mm256_set_m128i(sc, sc);
    *mins = _mm256_extracti128_si256(mins_and_scales, 1);
}

/* Sums of Q8_K bsums in pairs: the activation sum of each 32-value sub-block. */
static inline __m128i q8k_sub_sums(const struct block_q8_K *y) {
    const __m256i bs = _mm256_loadu_si256((const __m256i *)y->bsums);
    return _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
}

/* Scale vector for 32 values starting at sub-block 2k: lanes 0-7 scale 2k,
 * lanes 8-15 scale 2k+1 (int16). */
static inline __m256i q6_scale_pair(__m128i scales8, int k) {
    const __m128i shuf = _mm_set_epi8((char)(2 * k + 1), (char)(2 * k + 1), (char)(2 * k + 1), (char)(2 * k + 1),
                                      (char)(2 * k + 1), (char)(2 * k + 1), (char)(2 * k + 1), (char)(2 * k + 1),
                                      (char)(2 * k), (char)(2 * k), (char)(2 * k), (char)(2 * k), (char)(2 * k),
                                      (char)(2 * k), (char)(2 * k), (char)(2 * k));
    return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales8, shuf));
}

/* The four 32-value groups of 6-bit quants (0..63) of one 128-value half. */
static inline void q6_unpack_half(const uint8_t *ql, const uint8_t *qh, __m256i q[4]) {
    const __m256i m4 = _mm256_set1_epi8(0xF), m3 = _mm256_set1_epi8(0x30);
    const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
    const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
    const __m256i h = _mm256_loadu_si256((const __m256i *)qh);
    q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m3));
    q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m3));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(h, m3));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(h, 2), m3));
}

/* One weight row's super-block, unpacked for reuse across activation rows. */
struct kblock {
    __m256i q[8];   /* unsigned quants, 32 per vector, in Q8_K value order */
    __m256i sc[8];  /* int16 scale of each lane pair for those 32 values */
    __m256 mins;    /* Q4_K/Q5_K: dmin * m_j, j = 0..7 */
    __m256i sc16;   /* Q6_K: the 16 scales as int16 (for the -32 offset) */
    float d;
};

static inline void prep_q4_K(const struct block_q4_K *b, struct kblock *p) {
    const __m256i m4 = _mm256_set1_epi8(0xF);
    __m256i scales;
    __m128i mins;
    k4_scales_mins(b->scales, &scales, &mins);
    for (int j = 0; j < 4; j++) {
        const __m256i bits = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * j));
        p->q[2 * j] = _mm256_and_si256(bits, m4);
        p->q[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
        p->sc[2 * j] = bcast_i16_lane(scales, 2 * j);
        p->sc[2 * j + 1] = bcast_i16_lane(scales, 2 * j + 1);
    }
    p->mins = _mm256_mul_ps(_mm256_set1_ps(h2f(b->dmin)), _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(mins)));
    p->d = h2f(b->d);
}

static inline void prep_q5_K(const struct block_q5_K *b, struct kblock *p) {
    const __m256i m4 = _mm256_set1_epi8(0xF), m16 = _mm256_set1_epi8(0x10);
    __m256i scales;
    __m128i mins;
    k4_scales_mins(b->scales, &scales, &mins);
    __m256i hbits = _mm256_loadu_si256((const __m256i *)b->qh);
    for (int j = 0; j < 4; j++) {
        const __m256i bits = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * j));
        const __m256i hl = _mm256_and_si256(_mm256_slli_epi16(hbits, 4), m16);
        const __m256i hh = _mm256_and_si256(_mm256_slli_epi16(hbits, 3), m16);
        hbits = _mm256_srli_epi16(hbits, 2);
        p->q[2 * j] = _mm256_or_si256(_mm256_and_si256(bits, m4), hl);
        p->q[2 * j + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m4), hh);
        p->sc[2 * j] = bcast_i16_lane(scales, 2 * j);
        p->sc[2 * j + 1] = bcast_i16_lane(scales, 2 * j + 1);
    }
    p->mins = _mm256_mul_ps(_mm256_set1_ps(h2f(b->dmin)), _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(mins)));
    p->d = h2f(b->d);
}

static inline void prep_q6_K(const struct block_q6_K *b, struct kblock *p) {
    const __m128i scales8 = _mm_loadu_si128((const __m128i *)b->scales);
    q6_unpack_half(b->ql, b->qh, &p->q[0]);
    q6_unpack_half(b->ql + 64, b->qh + 32, &p->q[4]);
    for (int k = 0; k < 8; k++) p->sc[k] = q6_scale_pair(scales8, k);
    p->sc16 = _mm256_cvtepi8_epi16(scales8);
    p->d = h2f(b->d);
}

#endif
