/* The sim's guard: with guard=1 the device's memory (slots, staging) is
 * inaccessible to the host outside the device's own calls. A write into a
 * slot from outside faults (SIGSEGV, seen from a forked child), the same
 * write without the guard does not, and the device itself still packs,
 * loads, computes and reads back through its calls, with the results of the
 * cpu reference bit for bit. The sim here has its own worker (no pool), so
 * its submissions run on that thread. */
#include "dev_host.h"
#include "harness.h"

#include "core/error.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { K = 256, N = 64, M = 8 };

/* dev_slot_fn: where the slot's codes lie, kept past the call on purpose. */
static int grab(void *user, const int8_t *codes, size_t code_bytes, const float *scales, int k, int n) {
    (void)code_bytes, (void)scales, (void)k, (void)n;
    *(int8_t **)user = (int8_t *)codes;
    return DEV_OK;
}

/* The signal that ended a child writing one byte at p (0: it exited normally). */
static int child_write(int8_t *p) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        *(volatile int8_t *)p = 42;
        _exit(0);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
    return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

static struct dev *open_with(const char *name, const char *sim, float *w) {
    struct dev *d = NULL;
    int rc = dev_open(name, &(struct dev_options){.spec = sim}, &d);
    CHECKF(rc == DEV_OK, "open %s %s: %s", name, sim ? sim : "", moex_error());
    if (rc != DEV_OK) return NULL;
    CHECK(dev_pool_alloc(d, 2, (int64_t)K * N, N) == DEV_OK);
    CHECK(dev_pack(d, 0, QT_F32, w, K, N) == DEV_OK);
    return d;
}

int main(void) {
    float *w = malloc(sizeof(float) * K * N);
    for (int i = 0; i < K * N; i++) w[i] = (float)((i * 37) % 101 - 50) / 25.0f;
    int8_t act[M * K];
    float act_scale[M];
    for (int i = 0; i < M * K; i++) act[i] = (int8_t)((i * 13) % 255 - 127);
    for (int i = 0; i < M; i++) act_scale[i] = 0.01f * (float)(i + 1);

    struct dev *ref = open_with("cpu", NULL, w);
    struct dev *guarded = open_with("sim", "rk3588,guard=1", w);
    struct dev *open_sim = open_with("sim", "rk3588,guard=0", w);
    if (!ref || !guarded || !open_sim) return test_finish();

    /* The device computes through its own calls under the guard. */
    float out_ref[M * N], out[M * N];
    struct dev_exec_job job = {0, M, act, act_scale, out_ref, N};
    CHECK(dev_run_host(ref, &job, 1) == DEV_OK);
    job.out = out;
    CHECKF(dev_run_host(guarded, &job, 1) == DEV_OK, "%s", moex_error());
    CHECK(memcmp(out, out_ref, sizeof out) == 0);

    /* A slot's address, taken during a read-back and written after it. */
    int8_t *slot = NULL, *open_slot = NULL;
    CHECK(dev_slot_view(guarded, 0, grab, &slot) == DEV_OK && slot != NULL);
    CHECK(dev_slot_view(open_sim, 0, grab, &open_slot) == DEV_OK && open_slot != NULL);
    if (slot) CHECKF(child_write(slot) == SIGSEGV, "a write into a guarded slot from outside the device did not fault");
    if (open_slot) CHECK(child_write(open_slot) == 0); /* the same write without the guard: no fault */

    /* The stream's worker closes the memory when it goes idle
     * (dev_get_counters drains it), so the slot faults after a submission too. */
    struct dev_counters c;
    dev_get_counters(guarded, &c);
    CHECK(c.staging_bytes > 0 && c.uploads >= 3 && c.downloads == 1);
    if (slot) CHECK(child_write(slot + 1) == SIGSEGV);

    /* Loads and packs still work under the guard, and the slot holds them. */
    CHECK(dev_pack(guarded, 1, QT_F32, w, K, N) == DEV_OK);
    struct host_slot a, b;
    CHECK(dev_slot_read(guarded, 1, &a) == DEV_OK && dev_slot_read(ref, 0, &b) == DEV_OK);
    CHECK(a.code_bytes == b.code_bytes && memcmp(a.codes, b.codes, a.code_bytes) == 0 &&
          memcmp(a.scales, b.scales, sizeof(float) * N) == 0);
    CHECK(dev_load_packed(guarded, 0, PACK_ROWS, b.codes, b.scales, K, N) == DEV_OK);
    host_slot_free(&a);
    host_slot_free(&b);

    dev_close(ref);
    dev_close(guarded);
    dev_close(open_sim);
    free(w);
    return test_finish();
}
