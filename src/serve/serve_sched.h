/* The scheduler of moex serve: N slots, each a sequence of one shared
 * multi-sequence context on the one model (one expert executor, one device
 * set-up), and one thread that steps them all together: each step is one
 * batch of every decoding slot's next token and the next prompt pieces of
 * slots in prefill (at most 128 prompt tokens a step while a slot decodes,
 * so that decode latency stays low; 512 while none does), evaluated as one
 * forward pass, then sampled
 * per slot (continuous batching). A queued request takes the free slot
 * whose sequence shares the longest prefix with its prompt. */
#ifndef MOEX_SERVE_SCHED_H
#define MOEX_SERVE_SCHED_H

#include "moex_tools.h"
#include "serve/serve_job.h"

#include <pthread.h>

struct scheduler;

/* NULL with the reason in why[0..size) (a context that cannot be made, out of memory). */
struct scheduler *sched_new(moex_model *m, int n_slots, const struct moex_context_params *cp, char *why, size_t size);
/* Stops the thread: jobs running or queued end with an error. */
void sched_stop(struct scheduler *s);
/* Stops (when not yet) and frees. */
void sched_free(struct scheduler *s);
/* The slots' context length. */
int sched_n_ctx(const struct scheduler *s);
/* Queues the jobs of one request together (the scheduler takes a reference
 * to each), so that it gives them slots in the same step. */
void sched_submit(struct scheduler *s, struct serve_job *const *jobs, int n);
/* The mutex guarding the jobs' shared fields. */
pthread_mutex_t *sched_mutex(struct scheduler *s);

/* Buckets of the batch-size histogram: at most 1, 2, 4, .. 256 tokens, more. */
#define SCHED_BATCH_BUCKETS 10

struct sched_stats {
    int slots, busy, queued;
    uint64_t prompt_tokens, reused_tokens, generated_tokens, requests_done, cancelled;
    double prompt_s, generate_s;       /* time of the batches, shared by their prompt and decode tokens */
    double generate_cpu_s;             /* the scheduler thread's CPU time in them, decode's share (with one
                                          worker thread, all of a pass's compute; unlike wall time it does
                                          not grow while other processes hold the cores) */
    uint64_t batches, batch_rows;      /* forward passes (steps) and the tokens they held */
    uint64_t decode_rows;              /* of those, decode tokens */
    uint64_t batch_hist[SCHED_BATCH_BUCKETS]; /* steps by tokens: <= 1, <= 2, <= 4, ... (not cumulative) */
    struct moex_counters experts;      /* the context's */
};
void sched_stats(struct scheduler *s, struct sched_stats *out);

/* What each slot does now (/slots). */
struct sched_slot {
    bool busy;
    int n_prompt, n_generated, max_tokens;
    struct moex_sampler_params sampler;
};
/* out: (slots) entries. */
void sched_slots(struct scheduler *s, struct sched_slot *out);

#endif
