#include "harness.h"
#include "core/threadpool.h"

#include <stdatomic.h>
#include <string.h>

struct sum_ctx { _Atomic int64_t sum; int hits[1000]; };

static void add_range(void *arg, int64_t begin, int64_t end, int thread_index) {
    (void)thread_index;
    struct sum_ctx *c = arg;
    for (int64_t i = begin; i < end; i++) { atomic_fetch_add(&c->sum, i); c->hits[i]++; }
}

static void count_threads(void *arg, int index, int n) {
    _Atomic int *seen = arg;
    atomic_fetch_add(&seen[index], 1);
    (void)n;
}

int main(void) {
    for (int threads = 1; threads <= 4; threads++) {
        for (int pin = 0; pin <= 1; pin++) {
            struct threadpool *pool = threadpool_new(threads, pin);
            CHECK(pool != NULL);
            CHECK(threadpool_size(pool) == threads);
            /* about four chunks per thread, never under the grain or 1 */
            CHECK(threadpool_chunk(pool, 100, 1) == (100 + threads * 4 - 1) / (threads * 4));
            CHECK(threadpool_chunk(pool, 100, 50) == 50);
            CHECK(threadpool_chunk(pool, 0, 0) == 1);
            for (int rep = 0; rep < 60; rep++) {
                struct sum_ctx c;
                memset(&c, 0, sizeof c);
                int64_t n = 1 + rep * 5 % 1000;
                threadpool_parallel_for(pool, n, 1 + rep % 7, add_range, &c);
                CHECK(atomic_load(&c.sum) == n * (n - 1) / 2);
                int once = 1;
                for (int64_t i = 0; i < n; i++) once &= c.hits[i] == 1;
                CHECK(once);
            }
            _Atomic int seen[8] = {0};
            threadpool_run(pool, count_threads, (void *)seen);
            for (int i = 0; i < threads; i++) CHECK(atomic_load(&seen[i]) == 1);
            threadpool_free(pool);
        }
    }
    /* NULL pool runs serially. */
    struct sum_ctx c;
    memset(&c, 0, sizeof c);
    threadpool_parallel_for(NULL, 100, 1, add_range, &c);
    CHECK(atomic_load(&c.sum) == 4950);
    return test_finish();
}
