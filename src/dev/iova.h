/* A device address window (a 32-bit IOVA space): first-fit allocation of
 * aligned ranges. Bookkeeping only; no memory behind the addresses. */
#ifndef MOEX_IOVA_H
#define MOEX_IOVA_H

#include <stdbool.h>
#include <stdint.h>

struct iova_space;

/* A window of `size` bytes from address 0. Allocations are rounded up to
 * and aligned at `align` (a power of two). With reuse false a released
 * range is never handed out again (the board's behaviour under churn, see
 * sim.h). NULL when out of memory. */
struct iova_space *iova_new(uint64_t size, uint64_t align, bool reuse);
void iova_delete(struct iova_space *s);

/* The lowest free range that fits. 0, or -1 when none does (or out of memory). */
int iova_alloc(struct iova_space *s, uint64_t bytes, uint64_t *addr);
/* -1 when addr is not the start of a live allocation. */
int iova_release(struct iova_space *s, uint64_t addr);

uint64_t iova_used(const struct iova_space *s);    /* bytes in live allocations */
uint64_t iova_count(const struct iova_space *s);   /* live allocations */
uint64_t iova_largest_free(const struct iova_space *s);

#endif
