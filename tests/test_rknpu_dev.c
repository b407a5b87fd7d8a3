/* The rknpu device on the fakes of both kernel drivers against the cpu
 * device, bit for bit: Q4_K expert weights of the Qwen3 and LFM2 shapes,
 * many jobs and rows per submission, slots spread over several rocket fds
 * and rknpu domains; the submits and tasks the model counts against the
 * generator's cost of the same batch; injected ioctl failures (a timeout,
 * a wedge, EFAULT) and full windows as dev_status codes with the reason;
 * options; and without a device, the nodes it probed named. */
#include "dev_host.h"
#include "harness.h"

#include "core/error.h"
#include "dev/dev.h"
#include "dev/dev_rknpu.h"
#include "dev/rknpu_fake.h"
#include "dev/rknpu_gen.h"
#include "quant/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static enum qtype weight_type = QT_Q4_K;

/* A weight of N rows of K values in weight_type: random blocks whose
 * scales are small finite halves (fast to make at any size). */
static void *q4k_weight(int K, int N) {
    size_t row = quant_row_size(weight_type, K), block = weight_type == QT_Q4_K ? 144 : 34;
    uint8_t *q = malloc(row * (size_t)N);
    for (size_t i = 0; i < row * (size_t)N; i++) q[i] = (uint8_t)test_rand();
    for (size_t b = 0; b < row * (size_t)N; b += block) {
        uint16_t d = (uint16_t)(0x1c00 + test_rand() % 0x0c00); /* 2^-8 .. 2^-5 */
        memcpy(q + b, &d, 2);
        if (weight_type == QT_Q4_K) memcpy(q + b + 2, &d, 2); /* dmin */
    }
    return q;
}

struct setup {
    struct dev *npu, *cpu;
};

static int open_pair(const char *opts, int slots, int64_t slot_values, int max_n, struct setup *s) {
    memset(s, 0, sizeof *s);
    int rc = dev_open("rknpu", &(struct dev_options){.spec = opts}, &s->npu);
    if (rc != DEV_OK) return rc;
    rc = dev_open("cpu", NULL, &s->cpu);
    if (rc == DEV_OK) rc = dev_pool_alloc(s->npu, slots, slot_values, max_n);
    if (rc == DEV_OK) rc = dev_pool_alloc(s->cpu, slots, slot_values, max_n);
    return rc;
}

static void close_pair(struct setup *s) {
    dev_close(s->npu);
    dev_close(s->cpu);
}

struct batch {
    int n;
    struct dev_exec_job jobs[16];
    int8_t *act[16];
    float *scale[16], *out_npu[16], *out_cpu[16];
};

static void batch_make(struct batch *b, struct dev *d, const int *slots, const int *ms, int n) {
    b->n = n;
    for (int j = 0; j < n; j++) {
        int K, N;
        dev_slot_shape(d, slots[j], &K, &N);
        b->act[j] = malloc((size_t)ms[j] * K);
        b->scale[j] = malloc((size_t)ms[j] * sizeof(float));
        b->out_npu[j] = calloc((size_t)ms[j] * (N + 3), sizeof(float));
        b->out_cpu[j] = calloc((size_t)ms[j] * (N + 3), sizeof(float));
        for (size_t i = 0; i < (size_t)ms[j] * K; i++) b->act[j][i] = (int8_t)((int)(test_rand() % 255) - 127);
        for (int i = 0; i < ms[j]; i++) b->scale[j][i] = 0.001f * (float)(1 + test_rand() % 1000);
        b->jobs[j] = (struct dev_exec_job){slots[j], ms[j], b->act[j], b->scale[j], NULL, (size_t)N + 3};
    }
}

/* Runs the batch on both devices; the NPU's status. */
static int batch_run(struct batch *b, struct setup *s) {
    for (int j = 0; j < b->n; j++) b->jobs[j].out = b->out_cpu[j];
    CHECK(dev_run_host(s->cpu, b->jobs, b->n) == DEV_OK);
    for (int j = 0; j < b->n; j++) b->jobs[j].out = b->out_npu[j];
    return dev_run_host(s->npu, b->jobs, b->n);
}

static bool batch_equal(const struct batch *b, struct dev *d) {
    for (int j = 0; j < b->n; j++) {
        int K, N;
        dev_slot_shape(d, b->jobs[j].slot, &K, &N);
        if (memcmp(b->out_npu[j], b->out_cpu[j], (size_t)b->jobs[j].m * (N + 3) * sizeof(float))) return false;
    }
    return true;
}

static void batch_free(struct batch *b) {
    for (int j = 0; j < b->n; j++) free(b->act[j]), free(b->scale[j]), free(b->out_npu[j]), free(b->out_cpu[j]);
    b->n = 0;
}

/* Packs the same weights into both devices: slot s gets shapes[s % n]. */
static void pack_both(struct setup *s, const int (*shapes)[2], int n_shapes, int slots) {
    for (int slot = 0; slot < slots; slot++) {
        int K = shapes[slot % n_shapes][0], N = shapes[slot % n_shapes][1];
        void *w = q4k_weight(K, N);
        int a = dev_pack(s->npu, slot, weight_type, w, K, N), c = dev_pack(s->cpu, slot, weight_type, w, K, N);
        CHECKF(a == DEV_OK && c == DEV_OK, "pack %dx%d: %d %d %s", K, N, a, c, moex_error());
        free(w);
    }
}

/* The Qwen3-30B expert shapes, many rows and jobs, both drivers. */
static void test_exact(const char *opts, const int (*shapes)[2], int n_shapes, int64_t slot_values, int max_n) {
    struct setup s;
    int rc = open_pair(opts, 6, slot_values, max_n, &s);
    CHECKF(rc == DEV_OK, "%s: %s", opts, moex_error());
    if (rc != DEV_OK) return close_pair(&s);
    CHECK(dev_layout(s.npu) == PACK_RKNPU && strstr(dev_caps(s.npu)->description, "fake"));
    pack_both(&s, shapes, n_shapes, 6);
    static const int slots[] = {0, 1, 2, 3, 4, 5, 0, 3}, ms[] = {1, 8, 64, 37, 4, 13, 21, 2};
    struct batch b;
    batch_make(&b, s.npu, slots, ms, 8);
    rc = batch_run(&b, &s);
    CHECKF(rc == DEV_OK && batch_equal(&b, s.npu), "%s: %d %s", opts, rc, moex_error());
    batch_free(&b);
    /* re-packing a slot in place: the device sees the new tenant */
    void *w = q4k_weight(shapes[0][0], shapes[0][1]);
    CHECK(dev_pack(s.npu, 0, weight_type, w, shapes[0][0], shapes[0][1]) == DEV_OK &&
          dev_pack(s.cpu, 0, weight_type, w, shapes[0][0], shapes[0][1]) == DEV_OK);
    free(w);
    batch_make(&b, s.npu, slots, ms, 1);
    CHECK(batch_run(&b, &s) == DEV_OK && batch_equal(&b, s.npu));
    batch_free(&b);
    close_pair(&s);
}

/* The model's counts of a batch equal the generator's cost of it. */
static void test_counts(const char *fake) {
    static const int shapes[][2] = {{2048, 768}, {768, 2048}};
    char opts[64];
    snprintf(opts, sizeof opts, "fake=%s", fake);
    struct setup s;
    int rc = open_pair(opts, 4, 2048 * 768, 2048, &s);
    CHECKF(rc == DEV_OK, "%s", moex_error());
    if (rc != DEV_OK) return close_pair(&s);
    pack_both(&s, shapes, 2, 4);
    static const int slots[] = {0, 1, 2, 3}, ms[] = {8, 64, 330, 1};
    struct batch b;
    batch_make(&b, s.npu, slots, ms, 4);
    struct rknpu_job_shape js[4];
    for (int j = 0; j < 4; j++) js[j] = (struct rknpu_job_shape){ms[j], shapes[j % 2][0], shapes[j % 2][1], 0};
    struct rknpu_limits lim = {8 << 20, 16 << 20, (4 << 20) / 8}; /* the default scratch (16 MiB) */
    struct rknpu_cost cost;
    CHECK(rknpu_batch_cost(js, 4, &lim, &cost) == 0);
    struct rknpu_fake *f = dev_rknpu_fake(s.npu);
    struct rknpu_fake_stats before, after;
    CHECK(f != NULL);
    if (f) rknpu_fake_get_stats(f, &before);
    CHECK(batch_run(&b, &s) == DEV_OK && batch_equal(&b, s.npu));
    if (f) {
        rknpu_fake_get_stats(f, &after);
        /* rknpu warms a fresh output buffer with a first, discarded run */
        uint64_t runs = !strcmp(fake, "rknpu") ? 2 : 1;
        CHECKF(after.submits - before.submits == cost.submits * runs, "%s: %llu submits, generator %llu", fake,
               (unsigned long long)(after.submits - before.submits), (unsigned long long)cost.submits);
        CHECKF(after.run.tasks - before.run.tasks == cost.tasks * runs, "%s: %llu tasks, generator %llu", fake,
               (unsigned long long)(after.run.tasks - before.run.tasks), (unsigned long long)cost.tasks);
        CHECK(after.run.words - before.run.words == cost.words * runs);
        CHECK(after.run.feature_bytes - before.run.feature_bytes == cost.feature_bytes * runs);
        CHECK(after.run.weight_bytes - before.run.weight_bytes == cost.weight_bytes * runs);
        CHECK(after.run.output_bytes - before.run.output_bytes == cost.output_bytes * runs);
        rknpu_fake_get_stats(f, &before);
        CHECK(batch_run(&b, &s) == DEV_OK && batch_equal(&b, s.npu)); /* warm now: one run */
        rknpu_fake_get_stats(f, &after);
        CHECK(after.submits - before.submits == cost.submits && after.run.tasks - before.run.tasks == cost.tasks);
    }
    batch_free(&b);
    close_pair(&s);
}

/* Injected failures: the submission fails with the reason, the output is
 * whatever the caller falls back to, and the next one succeeds. */
static void test_injected(const char *fake, const char *fail, const char *reason) {
    static const int shapes[][2] = {{512, 256}};
    char opts[96];
    /* rknpu runs its first batch twice (the warm-up): the second batch is submit 3 */
    snprintf(opts, sizeof opts, "fake=%s,fail_submit=%d,fail=%s", fake, !strcmp(fake, "rknpu") ? 3 : 2, fail);
    struct setup s;
    int rc = open_pair(opts, 2, 512 * 256, 256, &s);
    CHECKF(rc == DEV_OK, "%s", moex_error());
    if (rc != DEV_OK) return close_pair(&s);
    pack_both(&s, shapes, 1, 2);
    static const int slots[] = {0, 1}, ms[] = {8, 4};
    struct batch b;
    batch_make(&b, s.npu, slots, ms, 2);
    rc = batch_run(&b, &s);
    CHECKF(rc == DEV_OK && batch_equal(&b, s.npu), "%s", moex_error());
    rc = batch_run(&b, &s);
    CHECKF(rc == DEV_E_SUBMIT && strstr(moex_error(), reason), "%s %s: %d %s", fake, fail, rc, moex_error());
    rc = batch_run(&b, &s);
    CHECKF(rc == DEV_OK && batch_equal(&b, s.npu), "%s %s after the failure: %s", fake, fail, moex_error());
    struct dev_counters c;
    dev_get_counters(s.npu, &c);
    CHECK(c.failed_submissions == 1);
    batch_free(&b);
    close_pair(&s);
}

/* A first batch of many programs into fresh rknpu output objects (the
 * warm-up run writes nowhere, then the real one). */
static void test_first_batch(void) {
    static const int shapes[][2] = {{3072, 32}};
    struct setup s;
    int rc = open_pair("fake=rknpu", 2, 3072 * 32, 32, &s);
    CHECKF(rc == DEV_OK, "%s", moex_error());
    if (rc == DEV_OK) {
        pack_both(&s, shapes, 1, 2);
        int slots[16], ms[16];
        for (int j = 0; j < 16; j++) slots[j] = j % 2, ms[j] = 330; /* 3 K-slices x 2 M-tiles each: 96 programs */
        struct batch b;
        batch_make(&b, s.npu, slots, ms, 16);
        rc = batch_run(&b, &s);
        CHECKF(rc == DEV_OK && batch_equal(&b, s.npu), "%d %s", rc, moex_error());
        batch_free(&b);
    }
    close_pair(&s);
}

static void test_windows(void) {
    struct setup s;
    /* 8 slots of 2 MiB in windows of 6 MiB: one domain cannot hold them */
    int rc = open_pair("fake=rknpu,window_mib=6,domains=1", 8, 2048 * 1024, 2048, &s);
    CHECKF(rc == DEV_E_DEVMEM && strstr(moex_error(), "full"), "%d %s", rc, moex_error());
    struct dev_counters c;
    dev_get_counters(s.npu, &c);
    CHECK(c.failed_allocs == 1);
    close_pair(&s);
    rc = open_pair("fake=rocket,window_mib=6,cores=1", 8, 2048 * 1024, 2048, &s);
    CHECKF(rc == DEV_E_DEVMEM, "%d %s", rc, moex_error());
    close_pair(&s);
    /* 12 slots of 512 KiB over windows of 4 MiB (1.3 of it scratch): three
     * domains or three rocket fds hold them, and compute alike */
    static const int shapes[][2] = {{512, 1024}, {1024, 512}};
    static const char *spread[] = {"fake=rknpu,window_mib=4,domains=4,scratch_mib=1",
                                   "fake=rocket,window_mib=4,cores=3,scratch_mib=1"};
    weight_type = QT_Q8_0;
    for (int i = 0; i < 2; i++) {
        rc = open_pair(spread[i], 12, 512 * 1024, 1024, &s);
        CHECKF(rc == DEV_OK, "%s: %s", spread[i], moex_error());
        if (rc == DEV_OK) {
            pack_both(&s, shapes, 2, 12);
            static const int slots[] = {0, 7, 9, 11, 5, 1}, ms[] = {8, 4, 1, 64, 16, 12};
            struct batch b;
            batch_make(&b, s.npu, slots, ms, 6);
            rc = batch_run(&b, &s);
            CHECKF(rc == DEV_OK && batch_equal(&b, s.npu), "%s: %s", spread[i], moex_error());
            batch_free(&b);
        }
        close_pair(&s);
    }
}

static void test_options(void) {
    struct dev *d = NULL;
    CHECK(dev_open("rknpu", &(struct dev_options){.spec = "fake=tpu"}, &d) == DEV_E_OPTION && !d);
    CHECK(dev_open("rknpu", &(struct dev_options){.spec = "fake=rocket,color=red"}, &d) == DEV_E_OPTION);
    CHECK(strstr(moex_error(), "unknown option 'color'"));
    CHECK(dev_open("rknpu", &(struct dev_options){.spec = "fake=rknpu,domains=9"}, &d) == DEV_E_OPTION);
    CHECK(dev_open("rknpu", &(struct dev_options){.spec = "fail=wedge"}, &d) == DEV_E_OPTION);
    /* no NPU on this machine (tests never run on a board): each node named */
    int rc = dev_open("rknpu", NULL, &d);
    if (rc == DEV_OK) {
        dev_close(d); /* a board after all: nothing to check here */
    } else {
        CHECKF(rc == DEV_E_UNAVAILABLE && strstr(moex_error(), "/dev/accel/accel0: ") &&
                   strstr(moex_error(), "/dev/dri/card0: ") && strstr(moex_error(), "/dev/dri/renderD128: "),
               "%s", moex_error());
    }
    CHECK(strstr(dev_names(), "rknpu"));
    /* the fake's nodes that do not serve, each with its reason */
    CHECK(dev_open("rknpu", &(struct dev_options){.spec = "fake=rknpu,fake_minor=8"}, &d) == DEV_E_UNAVAILABLE);
    CHECKF(strstr(moex_error(), "/dev/dri/card0: driver 'rockchip', not rknpu") &&
               strstr(moex_error(), "/dev/dri/card1: rknpu 0.8.8, older than 0.9") &&
               strstr(moex_error(), "/dev/dri/card2: absent"),
           "%s", moex_error());
    CHECK(dev_open("rknpu", &(struct dev_options){.spec = "fake=rocket,fake_denied=1"}, &d) == DEV_E_UNAVAILABLE);
    CHECKF(strstr(moex_error(), "/dev/accel/accel0: permission denied") && strstr(moex_error(), "accel1: absent"), "%s",
           moex_error());
    CHECK(dev_open("rknpu", &(struct dev_options){.spec = "fake_denied=1"}, &d) == DEV_E_OPTION);
    CHECK(dev_rknpu_check_options("fake=rknpu,domains=2,scratch_mib=8") == 0);
    CHECK(dev_rknpu_check_options("fake=rknpu,") == 0 && dev_rknpu_check_options("domains") != 0);
}

int main(void) {
    static const int qwen[][2] = {{2048, 768}, {768, 2048}};
    static const int lfm[][2] = {{2048, 1792}, {1792, 2048}};
    test_exact("fake=rocket", qwen, 2, 2048 * 768, 2048);
    test_exact("fake=rknpu", qwen, 2, 2048 * 768, 2048);
    test_exact("fake=rocket,cores=2", lfm, 2, 2048 * 1792, 2048);
    test_counts("rocket");
    test_counts("rknpu");
    test_injected("rocket", "timeout", "Connection timed out");
    test_injected("rknpu", "timeout", "Connection timed out");
    test_injected("rknpu", "wedge", "Input/output error");
    test_injected("rknpu", "efault", "Bad address");
    test_first_batch();
    test_windows();
    test_options();
    return test_finish();
}
