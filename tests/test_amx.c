/* The amx device against a plain loop and the cpu reference, bit for bit,
 * where tiles make mistakes likely: M around the 16-row tile and the 32-row
 * block (1, 15, 16, 17, 31, 32, 33, ... 300), the Qwen3-30B-A3B expert
 * shapes, N an odd number of 16-column tiles, K from one tile to PACK_MAX_K,
 * extreme codes (-128 activations), unaligned activation rows, many jobs in
 * one submission, 1 to 3 threads, and a submission from another thread.
 * Outputs past M rows and N columns stay untouched.
 *
 * It runs where AMX does, and on any x86-64 in emulation builds
 * (tests/emulated-amx.sh), where it also checks the tile unit's state:
 * every configuration is released, no thread keeps one, and the count of
 * TDPBSSD is exactly one per 16 x 16 output tile and 64 K values.
 * Elsewhere it checks that the device refuses to open and is skipped. */
#include "dev_host.h"
#include "harness.h"

#include "core/cpu.h"
#include "core/error.h"
#include "core/threadpool.h"
#include "dev/dev.h"
#include "pack/pack.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(MOEX_EMULATED_AMX)
#include "emu/amx_emu.h"
#endif

static uint32_t rnd(void) { return (uint32_t)(test_rand() >> 16); }

static const float GUARD = -12345.0f;

/* A weight of N rows of K floats. extreme: every row is +-1 and +-127/127
 * apart from noise, so that its codes are mostly +-127. */
static float *make_weight(int K, int N, bool extreme) {
    float *w = malloc((size_t)K * N * sizeof *w);
    for (size_t i = 0; i < (size_t)K * N; i++) w[i] = extreme ? (rnd() & 1 ? 1.0f : -1.0f) : test_gauss() * 0.1f;
    return w;
}

/* M rows of K codes behind one byte of offset (rows not 64-byte aligned,
 * the buffer exactly as long as the rows), and per-row scales. */
struct act {
    char *base;
    const int8_t *codes;
    float *scales;
};
static struct act make_act(int M, int K, bool extreme) {
    struct act a = {malloc((size_t)M * K + 1), NULL, malloc((size_t)M * sizeof(float))};
    int8_t *q = (int8_t *)(a.base + 1);
    for (size_t i = 0; i < (size_t)M * K; i++) q[i] = extreme ? (rnd() & 3 ? -128 : 127) : (int8_t)rnd();
    for (int i = 0; i < M; i++) a.scales[i] = 0.001f * (float)(1 + rnd() % 1000);
    a.codes = q;
    return a;
}
static void free_act(struct act *a) {
    free(a->base);
    free(a->scales);
}

/* One weight in a slot of each device, and its codes and scales by rows. */
struct weight {
    int K, N, slot;
    int8_t *codes; /* (N, K) */
    float *scales;
};
static bool load_weight(struct dev *amx, struct dev *cpu, struct weight *w, int slot, int K, int N, bool extreme) {
    float *f = make_weight(K, N, extreme);
    *w = (struct weight){K, N, slot, malloc((size_t)K * N), malloc((size_t)N * sizeof(float))};
    bool ok = pack_matrix(NULL, PACK_PATH_GENERIC, QT_F32, f, K, N, PACK_ROWS, w->codes, w->scales) == PACK_OK;
    int rc_amx = dev_pack(amx, slot, QT_F32, f, K, N), rc_cpu = dev_pack(cpu, slot, QT_F32, f, K, N);
    CHECKF(ok && rc_amx == DEV_OK && rc_cpu == DEV_OK, "pack %dx%d: %d %d (%s)", K, N, rc_amx, rc_cpu, moex_error());
    free(f);
    return ok && rc_amx == DEV_OK && rc_cpu == DEV_OK;
}
static void free_weight(struct weight *w) {
    free(w->codes);
    free(w->scales);
}

/* Rows of M x stride floats plus a guard row, all GUARD. */
static float *make_out(int M, size_t stride) {
    float *o = malloc((size_t)(M + 1) * stride * sizeof *o);
    for (size_t i = 0; i < (size_t)(M + 1) * stride; i++) o[i] = GUARD;
    return o;
}

/* The plain loop: exact int32 dot, then the W8A8 expression. Counts
 * values that differ, and values written past N or M. */
static int check_out(const struct weight *w, const struct act *a, int M, const float *o, size_t stride,
                     int *touched) {
    int bad = 0;
    for (int i = 0; i < M; i++) {
        const int8_t *x = a->codes + (size_t)i * w->K;
        for (int n = 0; n < w->N; n++) {
            const int8_t *c = w->codes + (size_t)n * w->K;
            int32_t acc = 0;
            for (int k = 0; k < w->K; k++) acc += (int32_t)x[k] * c[k];
            float v = (float)acc * a->scales[i];
            v = v * w->scales[n];
            bad += memcmp(&v, &o[(size_t)i * stride + n], sizeof v) != 0;
        }
        for (size_t c = (size_t)w->N; c < stride; c++) *touched += o[(size_t)i * stride + c] != GUARD;
    }
    for (size_t c = 0; c < stride; c++) *touched += o[(size_t)M * stride + c] != GUARD;
    return bad;
}

#if defined(MOEX_EMULATED_AMX)
static void tiles_held(void *ctx, int thread_index, int n_threads) {
    (void)thread_index;
    (void)n_threads;
    if (amx_emu_configured()) __atomic_fetch_add((int *)ctx, 1, __ATOMIC_RELAXED);
}
#endif

/* Emulation only: since `before`, every configuration was released, no
 * thread of the pool holds one, and TDPBSSD ran `dpbssd` times. */
static void check_tile_unit(const void *before_counts, struct threadpool *pool, uint64_t dpbssd, const char *what) {
#if defined(MOEX_EMULATED_AMX)
    const struct amx_emu_counts *b = before_counts;
    struct amx_emu_counts c;
    amx_emu_get_counts(&c);
    int held = 0;
    threadpool_run(pool, tiles_held, &held);
    CHECKF(c.configs - b->configs == c.releases - b->releases && c.configs > b->configs,
           "%s: %llu configurations, %llu releases", what, (unsigned long long)(c.configs - b->configs),
           (unsigned long long)(c.releases - b->releases));
    CHECKF(held == 0, "%s: %d threads hold a tile configuration", what, held);
    CHECKF(c.dpbssd - b->dpbssd == dpbssd, "%s: %llu TDPBSSD, expected %llu", what,
           (unsigned long long)(c.dpbssd - b->dpbssd), (unsigned long long)dpbssd);
#else
    (void)before_counts, (void)pool, (void)dpbssd, (void)what;
#endif
}

struct counts_snapshot {
#if defined(MOEX_EMULATED_AMX)
    struct amx_emu_counts c;
#else
    int unused;
#endif
};
static struct counts_snapshot snapshot(void) {
    struct counts_snapshot s;
    memset(&s, 0, sizeof s);
#if defined(MOEX_EMULATED_AMX)
    amx_emu_get_counts(&s.c);
#endif
    return s;
}

static uint64_t tdpbssd_count(int M, int K, int N) { return (uint64_t)((M + 15) / 16) * (uint64_t)(N / 16) * (uint64_t)(K / 64); }

static bool open_pair(struct threadpool *pool, int64_t slot_values, int max_n, int n_slots, struct dev **amx,
                      struct dev **cpu) {
    *amx = *cpu = NULL;
    int rc = dev_open("amx", &(struct dev_options){.pool = pool}, amx);
    CHECKF(rc == DEV_OK, "open amx: %s", moex_error());
    int rc_cpu = dev_open("cpu", &(struct dev_options){.pool = pool}, cpu);
    CHECK(rc_cpu == DEV_OK);
    if (rc == DEV_OK) rc = dev_pool_alloc(*amx, n_slots, slot_values, max_n);
    CHECKF(rc == DEV_OK, "amx pool: %s", moex_error());
    if (rc_cpu == DEV_OK) rc_cpu = dev_pool_alloc(*cpu, n_slots, slot_values, max_n);
    CHECK(rc_cpu == DEV_OK);
    if (rc == DEV_OK && rc_cpu == DEV_OK) return true;
    dev_close(*amx);
    dev_close(*cpu);
    return false;
}

/* One job per M on one weight, on amx and cpu: both equal the plain loop. */
static void run_ms(struct dev *amx, struct dev *cpu, struct threadpool *pool, const struct weight *w, const int *Ms,
                   int n_m, bool extreme) {
    const size_t stride = (size_t)w->N + 3;
    for (int mi = 0; mi < n_m; mi++) {
        const int M = Ms[mi];
        struct act a = make_act(M, w->K, extreme);
        float *o = make_out(M, stride), *o_cpu = make_out(M, stride);
        struct dev_exec_job job = {.slot = w->slot, .m = M, .act = a.codes, .act_scale = a.scales, .out = o,
                              .out_stride = stride};
        struct counts_snapshot before = snapshot();
        int rc = dev_run_host(amx, &job, 1);
        CHECKF(rc == DEV_OK, "submit %dx%d M=%d: %s", w->K, w->N, M, moex_error());
        check_tile_unit(&before, pool, tdpbssd_count(M, w->K, w->N), "one job");
        job.out = o_cpu;
        CHECK(dev_run_host(cpu, &job, 1) == DEV_OK);
        int touched = 0, bad = check_out(w, &a, M, o, stride, &touched);
        CHECKF(bad == 0 && touched == 0, "amx %dx%d M=%d%s: %d values differ from the loop, %d written outside",
               w->K, w->N, M, extreme ? " (extreme)" : "", bad, touched);
        CHECKF(!memcmp(o, o_cpu, (size_t)(M + 1) * stride * sizeof *o), "amx %dx%d M=%d: differs from cpu", w->K,
               w->N, M);
        free(o);
        free(o_cpu);
        free_act(&a);
    }
}

static const int tile_ms[] = {1, 2, 15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64, 65, 300};
enum { N_TILE_MS = sizeof tile_ms / sizeof tile_ms[0] };

/* The Qwen3-30B-A3B expert shapes: gate/up 2048 -> 768, down 768 -> 2048. */
static void test_qwen_shapes(struct threadpool *pool) {
    struct dev *amx, *cpu;
    if (!open_pair(pool, 2048 * 768, 2048, 2, &amx, &cpu)) return;
    struct weight w[2];
    if (load_weight(amx, cpu, &w[0], 0, 2048, 768, false) && load_weight(amx, cpu, &w[1], 1, 768, 2048, false)) {
        run_ms(amx, cpu, pool, &w[0], tile_ms, N_TILE_MS, false);
        run_ms(amx, cpu, pool, &w[1], tile_ms, N_TILE_MS, false);
    }
    free_weight(&w[0]);
    free_weight(&w[1]);
    dev_close(amx);
    dev_close(cpu);
}

/* N an odd number of 16-column tiles (the last 32-column band half full),
 * K from one 64-value tile up, and extreme codes with K = PACK_MAX_K. */
static void test_odd_shapes(struct threadpool *pool) {
    struct dev *amx, *cpu;
    if (!open_pair(pool, 768 * 784, 784, 1, &amx, &cpu)) return;
    const int shapes[][2] = {{64, 16}, {128, 48}, {2048, 80}, {192, 208}, {768, 784}, {64, 784}};
    const int few[] = {1, 15, 16, 17, 33, 48};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        struct weight w;
        if (load_weight(amx, cpu, &w, 0, shapes[s][0], shapes[s][1], false))
            run_ms(amx, cpu, pool, &w, few, sizeof few / sizeof few[0], false);
        free_weight(&w);
    }
    /* |acc| up to 128 * 127 * 32768 = 2^29 - 2^22: still exact in int32 */
    const int ext[] = {1, 17, 32};
    const int ext_shapes[][2] = {{2048, 48}, {PACK_MAX_K, 16}};
    for (int s = 0; s < 2; s++) {
        struct weight w;
        if (load_weight(amx, cpu, &w, 0, ext_shapes[s][0], ext_shapes[s][1], true))
            run_ms(amx, cpu, pool, &w, ext, 3, true);
        free_weight(&w);
    }
    dev_close(amx);
    dev_close(cpu);
}

/* Many jobs of several shapes and every M class in one submission, then
 * DEV_MAX_JOBS one-row jobs. */
static void test_many_jobs(struct threadpool *pool) {
    struct dev *amx, *cpu;
    if (!open_pair(pool, 512 * 256, 512, 5, &amx, &cpu)) return;
    const int shapes[5][2] = {{512, 256}, {256, 512}, {512, 144}, {128, 16}, {64, 48}};
    struct weight w[5];
    bool ok = true;
    for (int s = 0; s < 5; s++) ok &= load_weight(amx, cpu, &w[s], s, shapes[s][0], shapes[s][1], false);
    enum { JOBS = 150 };
    struct dev_exec_job jobs[JOBS], jobs_cpu[JOBS];
    struct act acts[JOBS];
    float *outs[JOBS], *outs_cpu[JOBS];
    uint64_t dpbssd = 0;
    for (int j = 0; ok && j < JOBS; j++) {
        const struct weight *wj = &w[rnd() % 5];
        int M = j % 3 ? tile_ms[rnd() % (N_TILE_MS - 1)] : 1 + (int)(rnd() % 70);
        size_t stride = (size_t)wj->N + (size_t)(j % 4);
        acts[j] = make_act(M, wj->K, false);
        outs[j] = make_out(M, stride);
        outs_cpu[j] = make_out(M, stride);
        jobs[j] = (struct dev_exec_job){wj->slot, M, acts[j].codes, acts[j].scales, outs[j], stride};
        jobs_cpu[j] = jobs[j];
        jobs_cpu[j].out = outs_cpu[j];
        dpbssd += tdpbssd_count(M, wj->K, wj->N);
    }
    if (ok) {
        struct counts_snapshot before = snapshot();
        CHECKF(dev_run_host(amx, jobs, JOBS) == DEV_OK, "submit %d jobs: %s", JOBS, moex_error());
        check_tile_unit(&before, pool, dpbssd, "many jobs");
        CHECK(dev_run_host(cpu, jobs_cpu, JOBS) == DEV_OK);
        int bad_jobs = 0, bad_values = 0, touched = 0;
        for (int j = 0; j < JOBS; j++) {
            const struct weight *wj = &w[jobs[j].slot];
            int bad = check_out(wj, &acts[j], jobs[j].m, outs[j], jobs[j].out_stride, &touched);
            bad += memcmp(outs[j], outs_cpu[j], (size_t)(jobs[j].m + 1) * jobs[j].out_stride * sizeof(float)) != 0;
            bad_jobs += bad != 0;
            bad_values += bad;
            free_act(&acts[j]);
            free(outs[j]);
            free(outs_cpu[j]);
        }
        CHECKF(bad_jobs == 0 && touched == 0, "%d of %d jobs differ (%d values), %d values written outside",
               bad_jobs, JOBS, bad_values, touched);
    }
    /* as many one-row jobs as a submission takes, each on its own rows */
    const struct dev_caps *caps = dev_caps(amx);
    const int n = caps->max_jobs;
    const struct weight *ws = &w[4];
    struct act a = make_act(n, ws->K, false);
    float *o = make_out(n, (size_t)ws->N);
    struct dev_exec_job *many = malloc((size_t)n * sizeof *many);
    for (int j = 0; ok && j < n; j++)
        many[j] = (struct dev_exec_job){ws->slot, 1, a.codes + (size_t)j * ws->K, a.scales + j, o + (size_t)j * ws->N,
                                   (size_t)ws->N};
    if (ok) {
        struct counts_snapshot before = snapshot();
        CHECKF(dev_run_host(amx, many, n) == DEV_OK, "submit %d jobs: %s", n, moex_error());
        check_tile_unit(&before, pool, (uint64_t)n * tdpbssd_count(1, ws->K, ws->N), "max jobs");
        int touched = 0;
        CHECKF(check_out(ws, &a, n, o, (size_t)ws->N, &touched) == 0 && touched == 0, "%d one-row jobs", n);
    }
    free(many);
    free(o);
    free_act(&a);
    for (int s = 0; s < 5; s++) free_weight(&w[s]);
    dev_close(amx);
    dev_close(cpu);
}

/* The executor submits from a thread of its own: tile state is per thread. */
struct other_thread {
    struct dev *d;
    struct dev_exec_job job;
    int rc;
};
static void *submit_there(void *arg) {
    struct other_thread *t = arg;
    t->rc = dev_run_host(t->d, &t->job, 1);
    return NULL;
}
static void test_other_thread(struct threadpool *pool) {
    struct dev *amx, *cpu;
    if (!open_pair(pool, 256 * 96, 96, 1, &amx, &cpu)) return;
    struct weight w;
    if (load_weight(amx, cpu, &w, 0, 256, 96, false)) {
        const int M = 40;
        struct act a = make_act(M, w.K, false);
        float *o = make_out(M, (size_t)w.N);
        struct other_thread t = {amx, {0, M, a.codes, a.scales, o, (size_t)w.N}, -1};
        pthread_t th;
        CHECK(pthread_create(&th, NULL, submit_there, &t) == 0 && pthread_join(th, NULL) == 0);
        int touched = 0;
        CHECKF(t.rc == DEV_OK && check_out(&w, &a, M, o, (size_t)w.N, &touched) == 0 && touched == 0,
               "submit from another thread: %d %s", t.rc, moex_error());
        free(o);
        free_act(&a);
    }
    free_weight(&w);
    dev_close(amx);
    dev_close(cpu);
}

int main(void) {
    if (!cpu_features()->amx_int8) {
        struct dev *d = (struct dev *)1;
        int rc = dev_open("amx", NULL, &d);
        CHECKF(rc == DEV_E_UNAVAILABLE && d == NULL, "amx without AMX: %d", rc);
        CHECKF(strstr(moex_error(), "amx") != NULL, "message: '%s'", moex_error());
        printf("SKIP: no AMX on this CPU (%s): the amx device refuses to open\n", cpu_features_string());
        return test_failures ? test_finish() : 77;
    }
    test_qwen_shapes(NULL);
    for (int threads = 1; threads <= 3; threads++) {
        struct threadpool *pool = threads > 1 ? threadpool_new(threads, false) : NULL;
        CHECK(threads == 1 || pool != NULL);
        if (threads == 2) test_qwen_shapes(pool);
        test_odd_shapes(pool);
        test_many_jobs(pool);
        test_other_thread(pool);
        threadpool_free(pool);
    }
    return test_finish();
}
