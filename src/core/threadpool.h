/* Persistent worker threads. The caller is thread 0 and takes part in the
 * work; every call returns only when all threads have finished (a barrier). */
#ifndef MOEX_THREADPOOL_H
#define MOEX_THREADPOOL_H

#include <stdbool.h>
#include <stdint.h>

struct threadpool;

/* n_threads <= 0 means one per physical core. With pin, thread i is bound
 * to the i-th CPU this process may run on. NULL on failure (moex_error). */
struct threadpool *threadpool_new(int n_threads, bool pin);
void threadpool_free(struct threadpool *pool);
int threadpool_size(const struct threadpool *pool);
/* Jobs that ran on more than one thread so far: each ends in a barrier. */
uint64_t threadpool_barriers(const struct threadpool *pool);

/* Runs fn(ctx, i, n) once on each of the n threads, i = 0..n-1. */
typedef void (*threadpool_fn)(void *ctx, int thread_index, int n_threads);
void threadpool_run(struct threadpool *pool, threadpool_fn fn, void *ctx);

/* Splits [0, n) into chunks of at least `grain` items handed out dynamically;
 * fn(ctx, begin, end, thread_index) for each chunk. pool may be NULL (serial). */
typedef void (*threadpool_range_fn)(void *ctx, int64_t begin, int64_t end, int thread_index);
/* The items of n a thread of threadpool_parallel_for takes at a time (at
 * least grain, at least 1), for jobs that hand out their own items. */
int64_t threadpool_chunk(const struct threadpool *pool, int64_t n, int64_t grain);
void threadpool_parallel_for(struct threadpool *pool, int64_t n, int64_t grain,
                             threadpool_range_fn fn, void *ctx);

#endif
