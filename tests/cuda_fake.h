/* A fake CUDA layer for tests (tests/cuda_fake.c): host memory stands for
 * VRAM, at addresses the host cannot dereference, so that any access that
 * bypasses the layer faults; launches run the kernels' host twins after
 * their descriptors are checked against the allocations. Its state is one
 * global the tests read (allocations, peak, launches) and steer (injected
 * failures, compute capability, no device). */
#ifndef MOEX_TESTS_CUDA_FAKE_H
#define MOEX_TESTS_CUDA_FAKE_H

#include "dev/dev_cuda.h"

#include <stdbool.h>
#include <stdint.h>

#define FAKE_MAX_ALLOCS 64

struct fake {
    uint64_t total;             /* pretend VRAM */
    uint64_t allocated, peak;   /* bytes of live allocations */
    int n_allocs;
    struct { int8_t *p; uint64_t bytes; } allocs[FAKE_MAX_ALLOCS];
    int pinned;                 /* live pinned allocations */
    int launches, copies_h2d, copies_d2h, syncs;
    int kernels[16], kernel_jobs[16]; /* the last launches, in order */
    int fail_launch;            /* the launch (1, 2, ...) that fails; 0: none */
    bool fail_alloc;
    bool faulted;               /* sticky, as a CUDA context's errors are */
    int bad;                    /* accesses outside every allocation, tile counts that disagree */
    int init_rc;
    int cc_major, cc_minor;
};

extern struct fake F;
extern const struct cuda_layer fake_layer;

/* A fresh fake GPU of `total` bytes, compute capability 9.0. */
void fake_reset(uint64_t total);
/* The host address of [p, p + bytes) of one allocation, or NULL. */
void *host_of(cuda_ptr p, uint64_t bytes);

#endif
