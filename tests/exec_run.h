/* One run of a model in a context of its own, for the executor's tests
 * (test_dense, test_executor, test_packfile): a prefill batch of ids with
 * every position's logits, then greedy decode steps, and what the executor
 * counted and holds at the end. */
#ifndef MOEX_TEST_EXEC_RUN_H
#define MOEX_TEST_EXEC_RUN_H

#include "model/model.h"
#include "moe/executor.h"

#include <stdbool.h>
#include <stdint.h>

enum { EXEC_RUN_MAX_STEPS = 8 };

struct exec_run_params {
    struct threadpool *pool;
    int n_ctx, n_batch;
    enum kv_type kv_type;
    int steps;                     /* greedy decode steps after the prefill, <= EXEC_RUN_MAX_STEPS */
};

struct exec_run {
    float *logits;                 /* (n_ids, n_vocab) of the prefill, malloc'd */
    int32_t greedy[EXEC_RUN_MAX_STEPS];
    struct moe_phase_counters pre, dec;
    uint64_t dense_dev[MOE_PHASES][DENSE_KINDS], dense_cpu[MOE_PHASES][DENSE_KINDS]; /* token rows */
    uint64_t dense_fallbacks;      /* all phases and kinds */
    uint64_t resident, staging, backbone;
    uint64_t window_used;          /* the sim device's IOVA window; 0 elsewhere */
    int pinned, slots;
    struct moe_pack_report report; /* its path left NULL (the executor's) */
    char note[512];
    char summary[1024];            /* what the device's budget holds */
    bool ok;                       /* the context was made and every evaluation ran */
};

struct exec_run exec_run(struct model *m, const struct moe_exec_options *o, const struct exec_run_params *p,
                         const int32_t *ids, int n_ids);
/* Token rows of the dense matmuls of a phase, all kinds summed. */
uint64_t exec_run_dense_dev(const struct exec_run *r, enum moe_phase phase);

#endif
