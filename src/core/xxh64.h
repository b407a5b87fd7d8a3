/* XXH64, the 64-bit xxHash (its published specification, any seed): a fast
 * non-cryptographic checksum for detecting damaged or mismatched files, not
 * for security. One-shot and streaming forms give the same value for the
 * same bytes however they are split. */
#ifndef MOEX_XXH64_H
#define MOEX_XXH64_H

#include <stddef.h>
#include <stdint.h>

uint64_t xxh64(const void *data, size_t len, uint64_t seed);

struct xxh64_state {
    uint64_t v[4];          /* the four lanes */
    uint64_t total_len;
    uint64_t seed;
    uint8_t buf[32];        /* bytes not yet consumed by a lane round */
    unsigned buf_len;
};

void xxh64_init(struct xxh64_state *s, uint64_t seed);
void xxh64_update(struct xxh64_state *s, const void *data, size_t len);
uint64_t xxh64_digest(const struct xxh64_state *s);

#endif
