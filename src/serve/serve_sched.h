/* The scheduler of moex serve: N slots, each its own context on the one
 * model, and one thread that steps every active slot in turn (prefill, then
 * one token per step). Slots are interleaved, not batched: each step is its
 * own forward pass. A queued request takes the free slot whose context
 * shares the longest prefix with its prompt. */
#ifndef MOEX_SERVE_SCHED_H
#define MOEX_SERVE_SCHED_H

#include "moex.h"
#include "serve/serve_job.h"

#include <pthread.h>

struct scheduler;

/* NULL with moex_last_error() when a context cannot be made. */
struct scheduler *sched_new(moex_model *m, int n_slots, const struct moex_context_params *cp);
/* Stops the thread: jobs running or queued end with an error. */
void sched_stop(struct scheduler *s);
/* Stops (when not yet) and frees. */
void sched_free(struct scheduler *s);
/* The slots' context length. */
int sched_n_ctx(const struct scheduler *s);
/* Queues the job (the scheduler takes a reference). */
void sched_submit(struct scheduler *s, struct serve_job *j);
/* The mutex guarding the jobs' shared fields. */
pthread_mutex_t *sched_mutex(struct scheduler *s);

struct sched_stats {
    int slots, busy, queued;
    uint64_t prompt_tokens, reused_tokens, generated_tokens, requests_done, cancelled;
    double prompt_s, generate_s;       /* time spent in prefill and in decode steps */
    struct moex_counters experts;      /* summed over the slots' contexts */
};
void sched_stats(struct scheduler *s, struct sched_stats *out);

#endif
