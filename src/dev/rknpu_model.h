/* A register-level model of one RK3588 NPU core running W8A8 1x1-convolution
 * programs: it decodes the command words, follows the PC chain, resolves
 * every address through the memory of the fd (or domain) that submitted
 * them, bounds-checks each read and write, computes int8 x int8 -> int32
 * exactly and writes the output cube. What the board would silently compute
 * wrong (RKNPU.md 5.7, 6, 8) it refuses by name instead. */
#ifndef MOEX_RKNPU_MODEL_H
#define MOEX_RKNPU_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum rknpu_refusal {
    RKNPU_RUN_OK = 0,
    RKNPU_R_M_MULTIPLE,   /* height M not a multiple of 4 (M = 1 is allowed) */
    RKNPU_R_K_MULTIPLE,   /* channels K not a multiple of 32 */
    RKNPU_R_N_MULTIPLE,   /* kernels N not a multiple of 32 */
    RKNPU_R_FIELD,        /* a field that wrapped: two registers that must agree do not, or reserved bits set */
    RKNPU_R_CBUF,         /* CBUF overrun: banks over 12, or too few data banks for M x K */
    RKNPU_R_S_POINTER,    /* CNA or CORE S_POINTER written inside a program (the job hangs) */
    RKNPU_R_TRAILER,      /* a missing or short trailer, or a length that does not match the words */
    RKNPU_R_BOUNDS,       /* an address outside the submitter's buffers (or a write outside its out list) */
    RKNPU_R_WEIGHT_BUFS,  /* one chain over more than one weight buffer (CDMA errno 110) */
    RKNPU_R_PRECISION,    /* not the int8 in, int32 out, bypassed-DPU program */
    RKNPU_R_RDMA,         /* DPU_RDMA enabled but not configured (the MRDMA trap) */
    RKNPU_R_INCOMPLETE,   /* a register the program must write is missing (ping-pong inherits stale geometry) */
    RKNPU_R_CHAIN,        /* the chain ends before the submitted programs, or links elsewhere */
    RKNPU_R_IN_OUT,       /* a buffer in both the in and the out list ("executed nothing") */
    RKNPU_R_UNSYNCED,     /* rknpu: a fresh buffer not synced TO|FROM then TO (the submit wedges) */
    RKNPU_R_SUBCORE,      /* rknpu: a subcore_task entry left empty (the kernel Oopses) */
    RKNPU_R_NOT_RESET,    /* rknpu: int8 entered without ACT_RESET (the first submit wedges) */
    RKNPU_R_FULL_DOMAIN,  /* a window (fd or domain) is full: EFAULT, and a soft reset on rknpu */
    RKNPU_N_REFUSALS
};

/* "m-multiple", "cbuf-overrun", ...: the name tests and messages use. */
const char *rknpu_refusal_name(int r);

/* The memory a submit sees: resolve returns the host address of NPU VA
 * range [va, va + bytes) when it lies inside one buffer the submitter may
 * read (or write), and that buffer's id; NULL otherwise. */
struct rknpu_mem_view {
    void *ctx;
    int8_t *(*resolve)(void *ctx, uint32_t va, uint64_t bytes, bool write, int *buffer);
};

struct rknpu_run_stats {
    uint64_t tasks, words, feature_bytes, weight_bytes, output_bytes;
};

/* Runs `programs` programs from NPU VA `start`, the first `words` words long
 * (the length the submit declared, trailer included), following the chain
 * from one to the next when follow_chain. *weight_buffer: in, -1 or the
 * weight buffer this submit already read; out, the one it reads. Counts into
 * *st. RKNPU_RUN_OK, or a refusal with the reason in why. */
int rknpu_model_run(const struct rknpu_mem_view *mem, uint32_t start, uint32_t words, int programs,
                    bool follow_chain, int *weight_buffer, struct rknpu_run_stats *st, char *why, size_t why_len);

#endif
