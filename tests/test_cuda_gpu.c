/* The cuda device's kernels on a real GPU against their host twins
 * (dev_cuda_ref.c, the same qblock.h arithmetic): the q8 activation blocks
 * byte for byte, the GEMV bit for bit, the GEMM within f32 accumulation
 * order of the twin's (operands rounded to f16 alike), for every block type
 * and odd shapes, many jobs in one submission; and the VRAM the driver
 * reports in use never above the device's budget. Without a GPU (or a CUDA
 * build, or a driver) it is skipped with the reason. */
#include "harness.h"

#include "core/error.h"
#include "dev/cuda/qblock.h"
#include "dev/dev.h"
#include "dev/dev_cuda.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1ull << 20)

static float gauss(void) {
    double u1 = ((double)(test_rand() >> 11) + 1.0) * 0x1p-53, u2 = (double)(test_rand() >> 11) * 0x1p-53;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

struct job_data {
    enum qtype type;
    int K, N, m;
    uint8_t *w;
    float *x;
    uint64_t act, q8, out; /* offsets in the staging buffer */
};

int main(void) {
    struct dev *d = NULL;
    const uint64_t budget = 512 * MIB;
    int rc = dev_open_blocks("cuda", &(struct dev_options){.budget_bytes = budget, .n_threads = 1}, QT_Q8_0, &d);
    if (rc != DEV_OK) {
        printf("SKIP: %s\n", moex_error());
        return 77;
    }
    struct dev_cuda_info info;
    dev_cuda_info(d, &info);
    printf("%s (%s layer)\n", dev_caps(d)->description, info.layer);
    uint64_t free_at_open = info.props.free_bytes;

    static const enum qtype types[] = {QT_Q4_K, QT_Q5_K, QT_Q6_K, QT_Q8_0, QT_Q4_0, QT_Q5_0, QT_Q4_1, QT_Q5_1};
    enum { N_JOBS = 20 };
    struct job_data jd[N_JOBS];
    uint64_t off = 0;
    for (int j = 0; j < N_JOBS; j++) {
        struct job_data *J = &jd[j];
        J->type = types[j % 8];
        J->K = j % 3 == 0 ? 2048 : j % 3 == 1 ? 768 : 1536;
        J->N = j % 3 == 0 ? 768 : j % 3 == 1 ? 2048 : 136 + j; /* 136 + j: a partial warp group and tile */
        J->m = j < 12 ? 1 + j % 8 : 9 + 37 * (j - 12);      /* 12 GEMV jobs, 8 GEMM jobs (9..268 rows) */
        size_t row = quant_row_size(J->type, J->K);
        float *src = malloc(sizeof(float) * (size_t)J->K);
        J->w = malloc(row * (size_t)J->N);
        for (int n = 0; n < J->N; n++) {
            for (int k = 0; k < J->K; k++) src[k] = gauss() * (1.0f + (float)(k % 5));
            quant_traits(J->type)->from_float(src, J->w + row * (size_t)n, J->K);
        }
        free(src);
        J->x = malloc(sizeof(float) * (size_t)J->m * (size_t)J->K);
        for (int i = 0; i < J->m * J->K; i++) J->x[i] = gauss();
        J->act = off;
        off += (uint64_t)J->m * (uint64_t)J->K * 4;
        J->q8 = off;
        off += dev_act_q8_bytes(J->m, J->K);
        J->out = off;
        off += (uint64_t)J->m * (uint64_t)J->N * 4 + 256;
    }
    int buf;
    CHECK(dev_buffer_alloc(d, off, &buf) == DEV_OK);
    CHECKF(dev_pool_alloc(d, N_JOBS, (int64_t)2048 * 768, 2048) == DEV_OK, "pool: %s", moex_error());
    struct dev_job jobs[N_JOBS];
    for (int j = 0; j < N_JOBS; j++) {
        struct job_data *J = &jd[j];
        CHECKF(dev_pack(d, j, J->type, J->w, J->K, J->N) == DEV_OK, "pack %d: %s", j, moex_error());
        CHECK(dev_write(d, (struct dev_ref){buf, J->act}, J->x, (uint64_t)J->m * J->K * 4) == DEV_OK);
        jobs[j] = (struct dev_job){j, J->m, {buf, J->act}, {buf, J->q8}, {buf, J->out}, (size_t)J->N};
    }
    rc = dev_run(d, jobs, N_JOBS);
    CHECKF(rc == DEV_OK, "the submission: %s", moex_error());
    dev_cuda_info(d, &info);
    CHECKF(info.launches == 3, "%llu launches for one submission", (unsigned long long)info.launches);
    uint64_t used = free_at_open > info.free_now ? free_at_open - info.free_now : 0;
    struct dev_counters c;
    dev_get_counters(d, &c);
    CHECKF(c.resident_bytes <= budget && used <= budget + 32 * MIB,
           "VRAM: %llu bytes counted, %llu in use by the driver's count, budget %llu",
           (unsigned long long)c.resident_bytes, (unsigned long long)used, (unsigned long long)budget);
    printf("VRAM in use %.1f MiB (driver), %.1f MiB counted, budget %.0f MiB\n", (double)used / MIB,
           (double)c.resident_bytes / MIB, (double)budget / MIB);
    for (int j = 0; j < N_JOBS && rc == DEV_OK; j++) {
        struct job_data *J = &jd[j];
        size_t n_out = (size_t)J->m * (size_t)J->N;
        float *got = malloc(n_out * 4), *want = malloc(n_out * 4);
        uint64_t q8_bytes = dev_act_q8_bytes(J->m, J->K);
        struct qb_q8 *q8_got = malloc((size_t)q8_bytes), *q8_want = malloc((size_t)q8_bytes);
        CHECK(dev_read(d, (struct dev_ref){buf, J->out}, got, n_out * 4) == DEV_OK);
        struct cuda_job_desc host = {(cuda_ptr)(uintptr_t)J->w, (cuda_ptr)(uintptr_t)J->x, (cuda_ptr)(uintptr_t)q8_want,
                                     (cuda_ptr)(uintptr_t)want, (uint32_t)J->N, J->type, J->K, J->N, J->m,
                                     (uint32_t)quant_row_size(J->type, J->K), 0, 0};
        if (J->m <= CUDA_GEMV_MAX_M) {
            CHECK(dev_read(d, (struct dev_ref){buf, J->q8}, q8_got, q8_bytes) == DEV_OK);
            cuda_ref_run(CUDA_K_QUANTIZE, &host);
            CHECKF(!memcmp(q8_got, q8_want, (size_t)q8_bytes), "job %d: q8 blocks differ from the host's", j);
            cuda_ref_run(CUDA_K_GEMV, &host);
            size_t same = 0;
            for (size_t i = 0; i < n_out; i++) same += !memcmp(&got[i], &want[i], 4);
            CHECKF(same == n_out, "job %d (%s %dx%d, m %d): GEMV %zu of %zu outputs bit for bit the host's (max diff %g)",
                   j, quant_type_name(J->type), J->K, J->N, J->m, same, n_out, max_abs_diff(got, want, n_out));
        } else {
            cuda_ref_run(CUDA_K_GEMM, &host);
            double rel = rel_diff(got, want, n_out);
            CHECKF(rel < 1e-4, "job %d (%s %dx%d, m %d): GEMM relative difference %g from the host's", j,
                   quant_type_name(J->type), J->K, J->N, J->m, rel);
        }
        free(got);
        free(want);
        free(q8_got);
        free(q8_want);
    }
    dev_close(d);
    for (int j = 0; j < N_JOBS; j++) {
        free(jd[j].w);
        free(jd[j].x);
    }
    return test_finish();
}
