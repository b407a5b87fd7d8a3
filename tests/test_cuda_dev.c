/* The cuda device on a fake CUDA layer: host memory stands for VRAM (at
 * addresses the host cannot dereference, so that any access that bypasses
 * the layer faults), launches run by the kernels' host twins after their
 * descriptors are checked against the allocations. It proves: opening says
 * why it cannot (no driver or no CUDA build here, a W8A8 caller, an old
 * GPU); pools and buffers stay under the budget as the fake's allocations
 * show, and Q4_K slots hold over 1.6x the experts of int8 ones; a submission of
 * all routed experts is one descriptor copy and at most three launches;
 * results equal the CPU reference within the quantization's tolerance; an
 * injected fault comes back as DEV_E_SUBMIT, later work is refused with the
 * first reason and nothing leaks; the probe reports the device. */
#include "harness.h"

#include "core/error.h"
#include "dev/cuda/qblock.h"
#include "dev/dev.h"
#include "dev/dev_cuda.h"
#include "cuda_fake.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- test data ---- */

#define MIB (1ull << 20)

static float gauss(void) {
    double u1 = ((double)(test_rand() >> 11) + 1.0) * 0x1p-53, u2 = (double)(test_rand() >> 11) * 0x1p-53;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static void *make_weight(enum qtype t, int K, int N, float **deq) {
    float *src = malloc(sizeof(float) * (size_t)K * (size_t)N);
    size_t row = quant_row_size(t, K);
    uint8_t *w = malloc(row * (size_t)N);
    for (int64_t i = 0; i < (int64_t)K * N; i++) src[i] = gauss();
    for (int n = 0; n < N; n++) quant_traits(t)->from_float(src + (size_t)n * K, w + row * (size_t)n, K);
    for (int n = 0; n < N; n++) quant_traits(t)->to_float(w + row * (size_t)n, src + (size_t)n * K, K);
    *deq = src;
    return w;
}

/* ---- tests ---- */

static void test_open_reasons(void) {
    /* the real layer here: a build without kernels, or a machine without a
     * driver or a device, or (on a GPU machine) a W8A8 caller */
    cuda_layer_override(NULL);
    struct dev *d = (struct dev *)1;
    int rc = dev_open("cuda", NULL, &d);
    CHECKF(rc == DEV_E_UNAVAILABLE && d == NULL, "dev_open(cuda) on the driver layer: %d", rc);
    const char *why = moex_error();
    CHECKF(!strncmp(why, "cuda: ", 6) &&
               (strstr(why, "built without CUDA") || strstr(why, "no NVIDIA driver") || strstr(why, "no device") ||
                strstr(why, "compute capability") || strstr(why, "W8A8 devices only")),
           "the reason: %s", why);
    CHECK(strstr(dev_names(), "cuda") != NULL);

    cuda_layer_override(&fake_layer);
    fake_reset(256 * MIB);
    rc = dev_open("cuda", NULL, &d);
    CHECKF(rc == DEV_E_UNAVAILABLE && strstr(moex_error(), "W8A8 devices only"), "a W8A8 caller: %d %s", rc,
           moex_error());
    F.cc_major = 6;
    F.cc_minor = 1;
    rc = dev_open_blocks("cuda", NULL, QT_Q4_K, &d);
    CHECKF(rc == DEV_E_UNAVAILABLE && strstr(moex_error(), "compute capability 6.1"), "an old GPU: %d %s", rc,
           moex_error());
    fake_reset(256 * MIB);
    F.init_rc = DEV_E_UNAVAILABLE;
    rc = dev_open_blocks("cuda", NULL, QT_Q4_K, &d);
    CHECKF(rc == DEV_E_UNAVAILABLE && strstr(moex_error(), "no device"), "no device: %d %s", rc, moex_error());
    fake_reset(256 * MIB);
    rc = dev_open_blocks("cuda", NULL, QT_F16, &d);
    CHECKF(rc == DEV_E_OPTION, "slots for F16: %d", rc);
    CHECK(F.allocated == 0 && F.pinned == 0);
}

/* Pools and buffers under the budget: dev.c's count, the backend's and the
 * fake's allocations agree, and the budget holds Q4_K slots by their bytes. */
static void test_budget(void) {
    cuda_layer_override(&fake_layer);
    fake_reset(1024 * MIB);
    const uint64_t budget = 64 * MIB;
    const int K = 2048, N = 768;
    struct dev *d = NULL;
    int rc = dev_open_blocks("cuda", &(struct dev_options){.budget_bytes = budget}, QT_Q4_K, &d);
    CHECKF(rc == DEV_OK, "open: %s", moex_error());
    if (rc != DEV_OK) return;
    int buf;
    CHECK(dev_buffer_alloc(d, 3 * MIB, &buf) == DEV_OK);
    CHECK(dev_pool_alloc(d, 100000, (int64_t)K * N, N) == DEV_E_BUDGET); /* refused, nothing allocated */
    uint64_t before = F.allocated;
    CHECK(dev_pool_alloc(d, 0, (int64_t)K * N, N) == DEV_OK);            /* as many as fit */
    struct dev_counters c;
    dev_get_counters(d, &c);
    struct dev_cuda_info info;
    CHECK(dev_cuda_info(d, &info) == DEV_OK);
    int slots = dev_pool_slots(d);
    CHECKF(c.resident_bytes <= budget && info.vram_bytes <= budget && F.peak <= budget,
           "resident %llu, backend %llu, fake peak %llu, budget %llu", (unsigned long long)c.resident_bytes,
           (unsigned long long)info.vram_bytes, (unsigned long long)F.peak, (unsigned long long)budget);
    CHECKF(F.allocated > before && info.vram_bytes >= F.allocated, "the backend counts what it allocates");
    /* int8 slots of the same shape under the same budget, on the cpu device */
    struct dev *cpu = NULL;
    CHECK(dev_open("cpu", &(struct dev_options){.budget_bytes = budget}, &cpu) == DEV_OK);
    CHECK(dev_buffer_alloc(cpu, 3 * MIB, &buf) == DEV_OK);
    CHECK(dev_pool_alloc(cpu, 0, (int64_t)K * N, N) == DEV_OK);
    CHECKF(slots >= 16 * dev_pool_slots(cpu) / 10, "Q4_K slots %d, int8 slots %d", slots, dev_pool_slots(cpu));
    dev_close(cpu);
    /* a slot sized for Q4_K takes no Q8_0 weight of that shape */
    float *deq;
    void *w = make_weight(QT_Q8_0, K, 64, &deq);
    CHECK(dev_pack(d, 0, QT_Q8_0, w, K, 64) == DEV_OK); /* 64 rows fit */
    free(w);
    free(deq);
    w = make_weight(QT_Q8_0, K, N, &deq);
    CHECK(dev_pack(d, 0, QT_Q8_0, w, K, N) == DEV_E_SHAPE);
    CHECK(dev_pack(d, 0, QT_F32, deq, K, N) == DEV_E_TYPE);
    free(w);
    free(deq);
    dev_close(d);
    CHECKF(F.allocated == 0 && F.pinned == 0 && F.n_allocs == 0, "left after close: %llu bytes, %d pinned",
           (unsigned long long)F.allocated, F.pinned);
    /* no budget: the free VRAM less a reserve for the driver bounds it */
    fake_reset(512 * MIB);
    CHECK(dev_open_blocks("cuda", NULL, QT_Q4_K, &d) == DEV_OK);
    CHECK(dev_pool_alloc(d, 0, (int64_t)K * N, N) == DEV_OK);
    dev_get_counters(d, &c);
    CHECKF(dev_pool_slots(d) > 200 && c.resident_bytes <= 256 * MIB && F.peak <= 256 * MIB,
           "%d slots, %llu bytes resident", dev_pool_slots(d), (unsigned long long)c.resident_bytes);
    dev_close(d);
    fake_reset(200 * MIB); /* less than the reserve: nothing fits */
    CHECK(dev_open_blocks("cuda", NULL, QT_Q4_K, &d) == DEV_E_BUDGET && F.allocated == 0 && F.pinned == 0);
    /* an allocation the driver refuses */
    fake_reset(1024 * MIB);
    CHECK(dev_open_blocks("cuda", &(struct dev_options){.budget_bytes = budget}, QT_Q4_K, &d) == DEV_OK);
    F.fail_alloc = true;
    CHECK(dev_pool_alloc(d, 4, (int64_t)K * N, N) == DEV_E_DEVMEM);
    dev_get_counters(d, &c);
    CHECK(c.failed_allocs == 1);
    dev_close(d);
    CHECK(F.allocated == 0 && F.n_allocs == 0);
}

/* Bytes through the pinned staging halves (three and a bit of them), there
 * and back, at an odd offset. */
static void test_copies(void) {
    cuda_layer_override(&fake_layer);
    fake_reset(512 * MIB);
    struct dev *d = NULL;
    CHECK(dev_open_blocks("cuda", &(struct dev_options){.budget_bytes = 64 * MIB}, QT_Q4_K, &d) == DEV_OK);
    if (!d) return;
    const uint64_t n = 13 * MIB + 12345;
    int buf;
    CHECK(dev_buffer_alloc(d, n + 8, &buf) == DEV_OK);
    uint8_t *there = malloc(n), *back = malloc(n);
    for (uint64_t i = 0; i < n; i++) there[i] = (uint8_t)(test_rand() >> 24);
    CHECK(dev_write(d, (struct dev_ref){buf, 7}, there, n) == DEV_OK);
    CHECK(dev_read(d, (struct dev_ref){buf, 7}, back, n) == DEV_OK);
    CHECK(!memcmp(there, back, n));
    struct dev_cuda_info info;
    dev_cuda_info(d, &info);
    CHECKF(info.copies_in == 4 && info.copy_in_bytes == n, "%llu copies in", (unsigned long long)info.copies_in);
    free(there);
    free(back);
    dev_close(d);
}

struct job_data {
    enum qtype type;
    int K, N, m;
    void *w;
    float *deq; /* (N, K) the reference dequantization */
    float *x;   /* (m, K) */
};

static int view_rows(void *user, const int8_t *codes, size_t code_bytes, const float *scales, int K, int N) {
    (void)scales;
    (void)K;
    (void)N;
    const struct job_data *jd = user;
    return code_bytes == quant_row_size(jd->type, jd->K) * (size_t)jd->N && !memcmp(codes, jd->w, code_bytes) ? 0 : 1;
}

/* A layer's routed experts in one submission: results against the CPU
 * reference (exact dots of the dequantized weights), the launch plan, the
 * slots' rows read back as they went in. */
static void test_submission(void) {
    cuda_layer_override(&fake_layer);
    fake_reset(1024 * MIB);
    enum { N_JOBS = 12 };
    static const enum qtype types[] = {QT_Q4_K, QT_Q5_K, QT_Q6_K, QT_Q8_0, QT_Q4_0, QT_Q5_0, QT_Q4_1, QT_Q5_1};
    struct job_data jd[N_JOBS];
    const int K = 512, N = 80;
    uint64_t act_off = 0, q8_off = 0, out_off = 0;
    for (int j = 0; j < N_JOBS; j++) {
        jd[j].type = types[j % 8];
        jd[j].K = K;
        jd[j].N = N - 8 * (j % 3);
        jd[j].m = j < 9 ? 1 + j % 4 : 17 + 50 * (j - 9); /* 9 small-M jobs, 3 GEMM jobs (17, 67, 117 rows) */
        jd[j].w = make_weight(jd[j].type, K, jd[j].N, &jd[j].deq);
        jd[j].x = malloc(sizeof(float) * (size_t)jd[j].m * K);
        for (int i = 0; i < jd[j].m * K; i++) jd[j].x[i] = gauss();
        act_off += (uint64_t)jd[j].m * K * 4;
        q8_off += dev_act_q8_bytes(jd[j].m, K);
        out_off += (uint64_t)jd[j].m * (uint64_t)jd[j].N * 4 + 64;
    }
    uint64_t act_bytes = act_off, q8_bytes = q8_off, out_bytes = out_off;
    struct dev *d = NULL;
    int rc = dev_open_blocks("cuda", &(struct dev_options){.budget_bytes = 256 * MIB, .n_threads = 1}, QT_Q8_0, &d);
    CHECKF(rc == DEV_OK, "open: %s", moex_error());
    if (rc != DEV_OK) return;
    int buf;
    CHECK(dev_buffer_alloc(d, act_bytes + q8_bytes + out_bytes, &buf) == DEV_OK);
    CHECK(dev_pool_alloc(d, N_JOBS, (int64_t)K * N, N) == DEV_OK);
    struct dev_job jobs[N_JOBS];
    act_off = 0;
    q8_off = act_bytes;
    out_off = act_bytes + q8_bytes;
    for (int j = 0; j < N_JOBS; j++) {
        CHECKF(dev_pack(d, j, jd[j].type, jd[j].w, K, jd[j].N) == DEV_OK, "pack %d: %s", j, moex_error());
        CHECK(dev_write(d, (struct dev_ref){buf, act_off}, jd[j].x, (uint64_t)jd[j].m * K * 4) == DEV_OK);
        jobs[j] = (struct dev_job){j, jd[j].m, {buf, act_off}, {buf, q8_off}, {buf, out_off}, (size_t)jd[j].N};
        act_off += (uint64_t)jd[j].m * K * 4;
        q8_off += dev_act_q8_bytes(jd[j].m, K);
        out_off += (uint64_t)jd[j].m * (uint64_t)jd[j].N * 4 + 64;
    }
    int launches0 = F.launches, copies0 = F.copies_h2d;
    dev_fence fence;
    CHECK(dev_submit(d, jobs, N_JOBS, &fence) == DEV_OK);
    CHECKF(dev_wait(d, fence) == DEV_OK, "wait: %s", moex_error());
    CHECKF(F.launches - launches0 == 3 && F.copies_h2d - copies0 == 1,
           "one submission: %d launches, %d copies (3 and 1: the descriptors)", F.launches - launches0,
           F.copies_h2d - copies0);
    CHECK(F.kernels[0] == CUDA_K_QUANTIZE && F.kernel_jobs[0] == 9);
    CHECK(F.kernels[1] == CUDA_K_GEMV && F.kernel_jobs[1] == 9);
    CHECK(F.kernels[2] == CUDA_K_GEMM && F.kernel_jobs[2] == 3);
    CHECKF(F.bad == 0, "%d accesses outside the allocations or tile counts that disagree", F.bad);
    struct dev_cuda_info info;
    dev_cuda_info(d, &info);
    CHECK(info.launches == 3 && info.launch_jobs == 21 && info.faults == 0);
    out_off = act_bytes + q8_bytes;
    for (int j = 0; j < N_JOBS; j++) {
        size_t n_out = (size_t)jd[j].m * (size_t)jd[j].N;
        float *got = malloc(n_out * 4);
        double *want = malloc(n_out * 8);
        CHECK(dev_read(d, (struct dev_ref){buf, out_off}, got, n_out * 4) == DEV_OK);
        for (int i = 0; i < jd[j].m; i++)
            for (int n = 0; n < jd[j].N; n++) {
                double s = 0;
                for (int k = 0; k < K; k++) s += (double)jd[j].deq[(size_t)n * K + k] * jd[j].x[(size_t)i * K + k];
                want[(size_t)i * jd[j].N + n] = s;
            }
        double rel = rel_diff_f64(got, want, n_out);
        CHECKF(rel < (jd[j].m <= CUDA_GEMV_MAX_M ? 0.02 : 0.005), "job %d (%s, m %d): relative difference %g", j,
               quant_type_name(jd[j].type), jd[j].m, rel);
        out_off += n_out * 4 + 64;
        free(got);
        free(want);
    }
    /* what a slot holds is the rows that went in */
    for (int j = 0; j < N_JOBS; j += 5) CHECKF(dev_slot_view(d, j, view_rows, &jd[j]) == 0, "slot %d read back", j);
    /* a block device has no packed copy to load */
    float scales[4] = {1, 1, 1, 1};
    int8_t codes[4 * 256] = {0};
    CHECK(dev_load_packed(d, 0, PACK_ROWS, codes, scales, 256, 4) == DEV_E_LAYOUT);
    dev_close(d);
    CHECK(F.allocated == 0 && F.pinned == 0);
    for (int j = 0; j < N_JOBS; j++) {
        free(jd[j].w);
        free(jd[j].deq);
        free(jd[j].x);
    }
}

/* An injected launch failure: DEV_E_SUBMIT with the reason, every later
 * submission and copy refused with it (the caller runs them on the CPU),
 * the counters moved, nothing leaked at close. */
static void test_fault(void) {
    cuda_layer_override(&fake_layer);
    fake_reset(512 * MIB);
    const int K = 256, N = 32;
    struct job_data jd = {QT_Q4_K, K, N, 1, NULL, NULL, NULL};
    jd.w = make_weight(QT_Q4_K, K, N, &jd.deq);
    float x[256];
    for (int k = 0; k < K; k++) x[k] = gauss();
    struct dev *d = NULL;
    CHECK(dev_open_blocks("cuda", &(struct dev_options){.budget_bytes = 64 * MIB}, QT_Q4_K, &d) == DEV_OK);
    int buf;
    CHECK(dev_buffer_alloc(d, 1 * MIB, &buf) == DEV_OK);
    CHECK(dev_pool_alloc(d, 2, (int64_t)K * N, N) == DEV_OK);
    CHECK(dev_pack(d, 0, QT_Q4_K, jd.w, K, N) == DEV_OK);
    CHECK(dev_slot_view(d, 0, view_rows, &jd) == 0); /* the rows read back through the layer */
    CHECK(dev_write(d, (struct dev_ref){buf, 0}, x, sizeof x) == DEV_OK);
    struct dev_job job = {0, 1, {buf, 0}, {buf, 4096}, {buf, 8192}, N};
    CHECK(dev_run(d, &job, 1) == DEV_OK);
    CHECKF(F.launches == 2 && F.kernels[0] == CUDA_K_QUANTIZE && F.kernels[1] == CUDA_K_GEMV,
           "one decode row: the quantizer and the GEMV (%d launches)", F.launches);
    struct dev_job rows = {0, 40, {buf, 0}, {buf, 0x10000}, {buf, 0x20000}, N}; /* a prefill: the GEMM alone */
    CHECK(dev_run(d, &rows, 1) == DEV_OK);
    CHECKF(F.launches == 3 && F.kernels[2] == CUDA_K_GEMM, "%d launches", F.launches);
    F.fail_launch = F.launches + 2; /* the GEMV of the next submission */
    int rc = dev_run(d, &job, 1);
    CHECKF(rc == DEV_E_SUBMIT && strstr(moex_error(), "injected"), "the fault: %d %s", rc, moex_error());
    rc = dev_run(d, &job, 1);
    CHECKF(rc == DEV_E_SUBMIT && strstr(moex_error(), "failed earlier") && strstr(moex_error(), "injected"),
           "after the fault: %d %s", rc, moex_error());
    float out[32];
    CHECK(dev_read(d, (struct dev_ref){buf, 8192}, out, sizeof out) == DEV_E_SUBMIT);
    struct dev_counters c;
    dev_get_counters(d, &c);
    CHECK(c.failed_submissions == 2 && c.submissions == 2);
    struct dev_cuda_info info;
    dev_cuda_info(d, &info);
    CHECK(info.faults >= 1 && info.fault && strstr(info.fault, "injected"));
    dev_close(d);
    CHECK(F.allocated == 0 && F.pinned == 0 && F.bad == 0);
    free(jd.w);
    free(jd.deq);
}

/* The probe on the fake: the device's lines and a table row per shape and
 * M with the kernel the plan picks; a W8A8 device is left to the caller. */
static void test_probe(void) {
    cuda_layer_override(&fake_layer);
    fake_reset(1024 * MIB);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    const int shape_k[] = {256}, shape_n[] = {64};
    const int64_t ms[] = {1, 16};
    int rc = dev_cuda_probe(out, "cuda", shape_k, shape_n, 1, ms, 2);
    fclose(out);
    CHECKF(rc == 0, "probe: %d %s", rc, moex_error());
    static const char *want[] = {"Fake GPU", "compute capability 9.0", "host -> device", "| 256x64 | 1 | gemv |",
                                 "| 256x64 | 16 | gemm |"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECKF(text && strstr(text, want[i]), "the probe's report lacks '%s':\n%s", want[i], text ? text : "");
    free(text);
    CHECK(F.allocated == 0 && F.pinned == 0);
    out = fopen("/dev/null", "w");
    CHECK(dev_cuda_probe(out, "cpu", shape_k, shape_n, 1, ms, 2) == 1);
    fclose(out);
}

int main(void) {
    test_open_reasons();
    test_budget();
    test_copies();
    test_submission();
    test_fault();
    test_probe();
    cuda_layer_override(NULL);
    return test_finish();
}
