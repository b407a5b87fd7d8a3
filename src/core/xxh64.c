/* XXH64 as specified in xxHash's doc/xxhash_spec.md: four lanes of 64-bit
 * multiply-rotate rounds over 32-byte stripes, then a merge and an
 * avalanche. Reads are byte-wise little-endian (memcpy), so any alignment
 * works and compilers emit plain loads on little-endian hosts. */
#include "core/xxh64.h"

#include <string.h>

#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull
#define P4 0x85EBCA77C2B2AE63ull
#define P5 0x27D4EB2F165667C5ull

static inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t read64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline uint32_t read32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}

static inline uint64_t round64(uint64_t acc, uint64_t lane) {
    acc += lane * P2;
    acc = rotl(acc, 31);
    return acc * P1;
}

static inline uint64_t merge(uint64_t acc, uint64_t v) {
    acc ^= round64(0, v);
    return acc * P1 + P4;
}

/* Whole 32-byte stripes of p[0..len); returns the bytes consumed. */
static size_t stripes(uint64_t v[4], const uint8_t *p, size_t len) {
    size_t n = len & ~(size_t)31;
    uint64_t a = v[0], b = v[1], c = v[2], d = v[3];
    for (size_t i = 0; i < n; i += 32) {
        a = round64(a, read64(p + i));
        b = round64(b, read64(p + i + 8));
        c = round64(c, read64(p + i + 16));
        d = round64(d, read64(p + i + 24));
    }
    v[0] = a, v[1] = b, v[2] = c, v[3] = d;
    return n;
}

/* The tail (< 32 bytes) and the avalanche. */
static uint64_t finish(uint64_t acc, const uint8_t *p, size_t len) {
    while (len >= 8) {
        acc ^= round64(0, read64(p));
        acc = rotl(acc, 27) * P1 + P4;
        p += 8, len -= 8;
    }
    if (len >= 4) {
        acc ^= (uint64_t)read32(p) * P1;
        acc = rotl(acc, 23) * P2 + P3;
        p += 4, len -= 4;
    }
    while (len > 0) {
        acc ^= (uint64_t)*p * P5;
        acc = rotl(acc, 11) * P1;
        p++, len--;
    }
    acc ^= acc >> 33;
    acc *= P2;
    acc ^= acc >> 29;
    acc *= P3;
    acc ^= acc >> 32;
    return acc;
}

static uint64_t converge(const uint64_t v[4]) {
    uint64_t acc = rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18);
    for (int i = 0; i < 4; i++) acc = merge(acc, v[i]);
    return acc;
}

static void lanes_init(uint64_t v[4], uint64_t seed) {
    v[0] = seed + P1 + P2;
    v[1] = seed + P2;
    v[2] = seed;
    v[3] = seed - P1;
}

uint64_t xxh64(const void *data, size_t len, uint64_t seed) {
    const uint8_t *p = data;
    uint64_t acc;
    size_t done = 0;
    if (len >= 32) {
        uint64_t v[4];
        lanes_init(v, seed);
        done = stripes(v, p, len);
        acc = converge(v);
    } else {
        acc = seed + P5;
    }
    acc += (uint64_t)len;
    return finish(acc, p + done, len - done);
}

void xxh64_init(struct xxh64_state *s, uint64_t seed) {
    memset(s, 0, sizeof *s);
    s->seed = seed;
    lanes_init(s->v, seed);
}

void xxh64_update(struct xxh64_state *s, const void *data, size_t len) {
    const uint8_t *p = data;
    s->total_len += len;
    if (s->buf_len) {
        size_t take = 32 - s->buf_len < len ? 32 - s->buf_len : len;
        memcpy(s->buf + s->buf_len, p, take);
        s->buf_len += (unsigned)take;
        p += take, len -= take;
        if (s->buf_len < 32) return;
        stripes(s->v, s->buf, 32);
        s->buf_len = 0;
    }
    size_t done = stripes(s->v, p, len);
    memcpy(s->buf, p + done, len - done);
    s->buf_len = (unsigned)(len - done);
}

uint64_t xxh64_digest(const struct xxh64_state *s) {
    uint64_t acc = s->total_len >= 32 ? converge(s->v) : s->seed + P5;
    acc += s->total_len;
    return finish(acc, s->buf, s->buf_len);
}
