/* The machine's memory read bandwidth, measured: every thread of a pool
 * streams its share of a buffer far larger than the caches with the widest
 * loads the CPU has (AVX-512, AVX2, else 64-bit words); the best of several
 * passes is taken, since a shared host is only sometimes quiet. */
#ifndef MOEX_MEMBW_H
#define MOEX_MEMBW_H

#include <stddef.h>
#include <stdint.h>

struct threadpool;

struct membw_result {
    double best_gbps, worst_gbps; /* 1e9 bytes per second */
    int threads, tries;
    const char *loads;            /* "AVX-512", "AVX2" or "64-bit" */
};

/* Reads `bytes` (rounded down to 4 KiB; 0 = 512 MiB) `tries` times with all
 * of the pool's threads. -1 (moex_error) when the buffer cannot be had. */
int membw_measure(struct threadpool *pool, size_t bytes, int tries, struct membw_result *out);

/* Per-ISA read loops (membw_avx512.c, membw_avx2.c): a sum of the n bytes
 * at p (n a multiple of 256, p 64-byte aligned) so the loads are not
 * optimised away. */
uint64_t membw_read_avx512(const void *p, size_t n);
uint64_t membw_read_avx2(const void *p, size_t n);

#endif
