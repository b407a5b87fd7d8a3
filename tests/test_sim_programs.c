/* The sim prices exactly the programs the rknpu device runs (mode=programs):
 * for the same batches, the submits and tasks it counts equal the
 * generator's (rknpu_batch_cost), through the sim's model and through the
 * sim device; and its time grows with them. */
#include "harness.h"

#include "dev/dev.h"
#include "dev/rknpu_gen.h"
#include "dev/sim.h"

#include <stdlib.h>
#include <string.h>

/* The expert shapes of the earlier NPU experiments (K x N) and an lm head. */
static const int shapes[][2] = { { 2048, 768 }, { 768, 2048 }, { 2048, 512 }, { 512, 2048 }, { 2048, 1792 },
                                 { 1792, 2048 }, { 2048, 4096 } };
static const int rows[] = { 1, 4, 8, 64, 320, 321, 1000 };

static struct sim *programs_sim(void) {
    struct sim_figures f;
    CHECK(sim_figures_parse("rk3588,mode=programs", &f) == 0);
    return sim_new(&f);
}

int main(void) {
    struct sim *s = programs_sim();
    CHECK(s != NULL);
    if (!s) return test_finish();
    const struct rknpu_limits lim = rknpu_limits_for(16u << 20);
    uint64_t want_submits = 0, want_tasks = 0;
    double last_ns = 0;
    /* one job of each shape and M, then batches of 8 experts over 2 buffers */
    for (size_t a = 0; a < sizeof shapes / sizeof *shapes; a++)
        for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
            struct sim_shape job = { rows[r], shapes[a][0], shapes[a][1], 0 };
            struct rknpu_job_shape js = { rows[r], shapes[a][0], shapes[a][1], 0 };
            struct rknpu_cost c = { 0 };
            double ns = 0;
            if (rknpu_batch_cost(&js, 1, &lim, &c) != 0) { /* outside a submit's scratch: the sim refuses it too */
                CHECKF(sim_submit(s, &job, 1, &ns) == DEV_E_SHAPE, "%d x %d x %d", rows[r], shapes[a][0], shapes[a][1]);
                continue;
            }
            CHECK(sim_submit(s, &job, 1, &ns) == DEV_OK && ns > 0);
            want_submits += c.submits;
            want_tasks += c.tasks;
            if (shapes[a][1] == 4096 && ns > last_ns) last_ns = ns;
        }
    for (int m = 1; m <= 64; m *= 4) {
        struct sim_shape batch[16];
        struct rknpu_job_shape js[16];
        for (int e = 0; e < 16; e++) {
            int K = e % 2 ? 768 : 2048, N = e % 2 ? 2048 : 768;
            batch[e] = (struct sim_shape){ m + e, K, N, e / 8 };
            js[e] = (struct rknpu_job_shape){ m + e, K, N, e / 8 };
        }
        struct rknpu_cost c = { 0 };
        CHECK(rknpu_batch_cost(js, 16, &lim, &c) == 0 && c.submits >= 2); /* a chain reads one weight buffer */
        CHECK(sim_submit(s, batch, 16, NULL) == DEV_OK);
        want_submits += c.submits;
        want_tasks += c.tasks;
    }
    uint64_t submits, tasks;
    sim_program_counts(s, &submits, &tasks);
    CHECKF(submits == want_submits && tasks == want_tasks, "sim priced %llu submits and %llu tasks, the generator %llu and %llu",
           (unsigned long long)submits, (unsigned long long)tasks, (unsigned long long)want_submits,
           (unsigned long long)want_tasks);
    /* more tasks cost more: the lm head at 1000 rows against 1 row */
    struct sim_shape one = { 1, 2048, 4096, 0 };
    double ns1 = 0;
    CHECK(sim_submit(s, &one, 1, &ns1) == DEV_OK && last_ns > ns1);
    sim_delete(s);

    /* Through the device: jobs on packed slots, counted as the generator would. */
    struct dev *d = NULL;
    CHECK(dev_open("sim", &(struct dev_options){ .spec = "rk3588,mode=programs" }, &d) == DEV_OK);
    if (!d) return test_finish();
    const int K = 2048, N = 768, M = 9;
    CHECK(dev_pool_alloc(d, 4, (int64_t)K * N, 2048) == DEV_OK);
    float *w = malloc(sizeof(float) * (size_t)K * N);
    for (int i = 0; i < K * N; i++) w[i] = test_symmetric();
    for (int slot = 0; slot < 4; slot++) CHECK(dev_pack(d, slot, QT_F32, w, K, N) == DEV_OK);
    int act_buf, out_buf;
    CHECK(dev_buffer_alloc(d, (uint64_t)M * K + 64 + sizeof(float) * M, &act_buf) == DEV_OK);
    CHECK(dev_buffer_alloc(d, sizeof(float) * (uint64_t)M * N * 4, &out_buf) == DEV_OK);
    int8_t *act = calloc((size_t)M * K, 1);
    float *scales = malloc(sizeof(float) * M);
    for (int i = 0; i < M; i++) scales[i] = 1;
    CHECK(dev_write(d, (struct dev_ref){ act_buf, 0 }, act, (uint64_t)M * K) == DEV_OK);
    CHECK(dev_write(d, (struct dev_ref){ act_buf, (uint64_t)M * K + 64 - (uint64_t)M * K % 64 }, scales,
                    sizeof(float) * M) == DEV_OK);
    struct dev_job jobs[4];
    struct rknpu_job_shape js[4];
    for (int j = 0; j < 4; j++) {
        jobs[j] = (struct dev_job){ j, M, { act_buf, 0 }, { act_buf, (uint64_t)M * K + 64 - (uint64_t)M * K % 64 },
                                    { out_buf, sizeof(float) * (uint64_t)j * M * N }, (size_t)N };
        js[j] = (struct rknpu_job_shape){ M, K, N, 0 }; /* a small pool is one buffer */
    }
    CHECK(dev_run(d, jobs, 4) == DEV_OK);
    struct rknpu_cost c = { 0 };
    CHECK(rknpu_batch_cost(js, 4, &lim, &c) == 0);
    sim_program_counts(dev_sim(d), &submits, &tasks);
    CHECKF(submits == c.submits && tasks == c.tasks, "the device priced %llu submits, %llu tasks; the generator %llu, %llu",
           (unsigned long long)submits, (unsigned long long)tasks, (unsigned long long)c.submits,
           (unsigned long long)c.tasks);
    dev_close(d);
    free(w), free(act), free(scales);
    return test_finish();
}
