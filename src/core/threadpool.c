#include "core/threadpool.h"

#include "core/cpu.h"
#include "core/error.h"
#include "core/spin.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

/* Workers spin this many rounds for the next job before sleeping: decode
 * issues hundreds of small jobs per token, and a futex wake costs ~5-50 us. */
enum { SPIN_ROUNDS = 1 << 16 };

struct worker {
    struct threadpool *pool;
    pthread_t thread;
    int index;
};

struct threadpool {
    int n_threads;
    struct worker *workers;          /* n_threads - 1 helpers */
    _Atomic uint64_t generation;     /* bumped for each job */
    _Atomic int pending;             /* helpers still running the current job */
    _Atomic int sleeping;
    uint64_t jobs;                   /* multi-threaded jobs run (each ends in a barrier) */
    threadpool_fn fn;
    void *ctx;
    bool stop;
    pthread_mutex_t lock;
    pthread_cond_t wake;
};

static void pin_to(int nth_allowed) {
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
    int seen = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed)) continue;
        if (seen++ == nth_allowed) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            pthread_setaffinity_np(pthread_self(), sizeof one, &one);
            return;
        }
    }
}

static void *worker_main(void *arg) {
    struct worker *w = arg;
    struct threadpool *pool = w->pool;
    uint64_t seen = 0;
    for (;;) {
        uint64_t gen;
        unsigned spins = 0;
        while ((gen = atomic_load_explicit(&pool->generation, memory_order_acquire)) == seen) {
            if (spins < SPIN_ROUNDS) {
                spin_pause(&spins); /* yields now and then: on a busy machine whoever holds our core runs */
                continue;
            }
            pthread_mutex_lock(&pool->lock);
            atomic_fetch_add(&pool->sleeping, 1);
            while (atomic_load(&pool->generation) == seen && !pool->stop)
                pthread_cond_wait(&pool->wake, &pool->lock);
            atomic_fetch_sub(&pool->sleeping, 1);
            pthread_mutex_unlock(&pool->lock);
            spins = 0;
        }
        seen = gen;
        if (pool->stop) return NULL;
        pool->fn(pool->ctx, w->index, pool->n_threads);
        atomic_fetch_sub_explicit(&pool->pending, 1, memory_order_release);
    }
}

static void pin_job(void *ctx, int index, int n) { (void)ctx; (void)n; pin_to(index); }

struct threadpool *threadpool_new(int n_threads, bool pin) {
    if (n_threads <= 0) n_threads = cpu_physical_cores();
    if (n_threads > 256) n_threads = 256;
    struct threadpool *pool = calloc(1, sizeof *pool);
    if (!pool) { moex_errorf("out of memory"); return NULL; }
    pool->n_threads = n_threads;
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pool->workers = calloc((size_t)n_threads, sizeof *pool->workers);
    if (!pool->workers) { free(pool); moex_errorf("out of memory"); return NULL; }
    for (int i = 1; i < n_threads; i++) {
        struct worker *w = &pool->workers[i];
        w->pool = pool;
        w->index = i;
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            pool->n_threads = i;  /* run with what we have */
            break;
        }
    }
    if (pin) threadpool_run(pool, NULL, NULL);  /* each helper pins itself */
    return pool;
}

void threadpool_run(struct threadpool *pool, threadpool_fn fn, void *ctx) {
    if (!fn) fn = pin_job;  /* NULL: each thread pins itself (threadpool_new) */
    if (!pool || pool->n_threads == 1) { fn(ctx, 0, 1); return; }
    pool->jobs++;
    pool->fn = fn;
    pool->ctx = ctx;
    atomic_store_explicit(&pool->pending, pool->n_threads - 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&pool->generation, 1, memory_order_release);
    if (atomic_load(&pool->sleeping) > 0) {
        pthread_mutex_lock(&pool->lock);
        pthread_cond_broadcast(&pool->wake);
        pthread_mutex_unlock(&pool->lock);
    }
    fn(ctx, 0, pool->n_threads);
    unsigned spins = 0;
    while (atomic_load_explicit(&pool->pending, memory_order_acquire) > 0) spin_pause(&spins);
}

uint64_t threadpool_barriers(const struct threadpool *pool) { return pool ? pool->jobs : 0; }

void threadpool_free(struct threadpool *pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->lock);
    pool->stop = true;
    atomic_fetch_add(&pool->generation, 1);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    for (int i = 1; i < pool->n_threads; i++) pthread_join(pool->workers[i].thread, NULL);
    pthread_mutex_destroy(&pool->lock);
    pthread_cond_destroy(&pool->wake);
    free(pool->workers);
    free(pool);
}

int threadpool_size(const struct threadpool *pool) { return pool ? pool->n_threads : 1; }

struct range_job {
    threadpool_range_fn fn;
    void *ctx;
    int64_t n, chunk;
    _Atomic int64_t next;
};

static void range_worker(void *arg, int index, int n_threads) {
    (void)n_threads;
    struct range_job *job = arg;
    for (;;) {
        int64_t begin = atomic_fetch_add_explicit(&job->next, job->chunk, memory_order_relaxed);
        if (begin >= job->n) break;
        int64_t end = begin + job->chunk < job->n ? begin + job->chunk : job->n;
        job->fn(job->ctx, begin, end, index);
    }
}

int64_t threadpool_chunk(const struct threadpool *pool, int64_t n, int64_t grain) {
    /* About four chunks per thread balances uneven work without much
     * contention on the counter. */
    int threads = threadpool_size(pool);
    int64_t chunk = (n + threads * 4 - 1) / (threads * 4);
    return chunk < grain ? grain : chunk < 1 ? 1 : chunk;
}

void threadpool_parallel_for(struct threadpool *pool, int64_t n, int64_t grain,
                             threadpool_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int threads = threadpool_size(pool);
    if (threads == 1 || n <= grain) { fn(ctx, 0, n, 0); return; }
    int64_t chunk = threadpool_chunk(pool, n, grain);
    struct range_job job = { .fn = fn, .ctx = ctx, .n = n, .chunk = chunk };
    atomic_init(&job.next, 0);
    threadpool_run(pool, range_worker, &job);
}
