#include "core/membw.h"

#include "core/cpu.h"
#include "core/error.h"
#include "core/threadpool.h"
#include "core/timer.h"

#include <stdlib.h>
#include <string.h>

typedef uint64_t (*read_fn)(const void *p, size_t n);

static uint64_t read_words(const void *p, size_t n) {
    const uint64_t *w = p;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i < n / 8; i += 4) {
        s0 += w[i];
        s1 += w[i + 1];
        s2 += w[i + 2];
        s3 += w[i + 3];
    }
    return s0 + s1 + s2 + s3;
}

struct share {
    read_fn read;
    const char *buf;
    size_t per_thread;
    uint64_t sink[64];
};

/* Each thread reads one contiguous share: the DRAM pages of one thread
 * stream in order, as a weight matrix split by rows does. */
static void read_share(void *arg, int thread_index, int n_threads) {
    (void)n_threads;
    struct share *s = arg;
    s->sink[thread_index & 63] += s->read(s->buf + (size_t)thread_index * s->per_thread, s->per_thread);
}

int membw_measure(struct threadpool *pool, size_t bytes, int tries, struct membw_result *out) {
    memset(out, 0, sizeof *out);
    if (!bytes) bytes = (size_t)512 << 20;
    int threads = pool ? threadpool_size(pool) : 1;
    size_t per = bytes / (size_t)threads / 4096 * 4096;
    if (per < 4096) per = 4096;
    if (tries < 1) tries = 1;
    struct share s = { read_words, NULL, per, { 0 } };
    out->loads = "64-bit";
#if defined(__x86_64__)
    const struct cpu_features *f = cpu_features();
    if (f->avx512f) { s.read = membw_read_avx512; out->loads = "AVX-512"; }
    else if (f->avx2) { s.read = membw_read_avx2; out->loads = "AVX2"; }
#endif
    char *buf = aligned_alloc(4096, per * (size_t)threads);
    if (!buf) return moex_errorf("membw: cannot allocate %zu MiB", per * (size_t)threads >> 20);
    /* Fault the pages in before timing (and not as zero pages). */
    memset(buf, 1, per * (size_t)threads);
    s.buf = buf;
    double best = 0, worst = 0;
    for (int t = -1; t < tries; t++) { /* t = -1: warm-up */
        int64_t t0 = time_ns();
        if (pool) threadpool_run(pool, read_share, &s);
        else read_share(&s, 0, 1);
        double gbps = (double)(per * (size_t)threads) / (double)(time_ns() - t0);
        if (t < 0) continue;
        if (gbps > best) best = gbps;
        if (!worst || gbps < worst) worst = gbps;
    }
    free(buf);
    out->best_gbps = best;
    out->worst_gbps = worst;
    out->threads = threads;
    out->tries = tries;
    return 0;
}
