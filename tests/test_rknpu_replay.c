/* Golden captures replayed on the register-level model: the committed ones
 * (tests/data/rknpu: recorded by bench/rknpu-check.sh; board captures go
 * there too), fresh ones recorded through the device on both fakes, and
 * damaged ones (an output byte changed, a program changed, a file cut
 * short), which replay must refuse naming what differs. MOEX_RKNPU_CAPTURES
 * names one more directory to replay (a board's). */
#include "harness.h"

#include "core/error.h"
#include "dev/dev.h"
#include "dev/rknpu_capture.h"
#include "quant/quant.h"
#include "dev_host.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int replay_dir(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strstr(e->d_name, ".bin")) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        int rc = rknpu_capture_replay(path);
        CHECKF(rc == 0, "%s", moex_error());
        n++;
    }
    closedir(d);
    return n;
}

/* Records one submit of M rows on a K x N weight through the device. */
static void record(const char *fake, const char *dir, int M, int K, int N) {
    char opts[512];
    snprintf(opts, sizeof opts, "fake=%s,capture=%s", fake, dir);
    struct dev *d = NULL;
    int rc = dev_open("rknpu", &(struct dev_options){.spec = opts}, &d);
    if (rc == DEV_OK) rc = dev_pool_alloc(d, 1, (int64_t)K * N, N);
    size_t row = quant_row_size(QT_Q8_0, K);
    uint8_t *w = malloc(row * (size_t)N);
    for (size_t i = 0; i < row * (size_t)N; i++) w[i] = (uint8_t)test_rand();
    for (size_t b = 0; b < row * (size_t)N; b += 34) w[b] = 0, w[b + 1] = 0x20;
    if (rc == DEV_OK) rc = dev_pack(d, 0, QT_Q8_0, w, K, N);
    int8_t *act = malloc((size_t)M * K);
    float *scale = malloc((size_t)M * sizeof *scale), *out = malloc((size_t)M * N * sizeof *out);
    for (size_t i = 0; i < (size_t)M * K; i++) act[i] = (int8_t)((int)(test_rand() % 255) - 127);
    for (int i = 0; i < M; i++) scale[i] = 0.5f;
    struct dev_exec_job job = {0, M, act, scale, out, (size_t)N};
    if (rc == DEV_OK) rc = dev_run_host(d, &job, 1);
    CHECKF(rc == DEV_OK, "%s %dx%dx%d: %s", fake, M, K, N, moex_error());
    dev_close(d);
    free(w), free(act), free(scale), free(out);
}

static void *slurp(const char *path, size_t *n) { return read_whole_file(path, n); }

static void spit(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(p, 1, n, f) == n);
    if (f) fclose(f);
}

int main(void) {
    /* the committed captures, beside this file */
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", __FILE__);
    char *slash = strrchr(dir, '/');
    if (slash) snprintf(slash, sizeof dir - (size_t)(slash - dir), "/data/rknpu");
    int committed = replay_dir(dir);
    CHECKF(committed >= 2, "%d captures in %s", committed, dir);
    /* a board's (bench/rknpu-check.sh) */
    const char *more = getenv("MOEX_RKNPU_CAPTURES");
    if (more && *more) CHECKF(replay_dir(more) > 0, "no captures in %s", more);
    /* fresh ones: a partial K-slice, M = 1, a padded M, two K-slices */
    char fresh[1024];
    snprintf(fresh, sizeof fresh, "%s/captures", test_tmpdir());
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", fresh);
    CHECK(system(cmd) == 0);
    record("rocket", fresh, 1, 2048, 96);
    record("rknpu", fresh, 13, 1088, 128);
    record("rocket", fresh, 330, 64, 32);
    CHECK(replay_dir(fresh) == 3);
    /* damaged: one output byte, one program word, a cut */
    char path[1100], bad[1100];
    snprintf(path, sizeof path, "%s/capture-0000.bin", fresh);
    snprintf(bad, sizeof bad, "%s/damaged.cap", test_tmpdir());
    size_t n = 0;
    uint8_t *c = slurp(path, &n);
    CHECK(c && n > 1000);
    if (!c) return test_finish();
    c[n - 5] ^= 0x40; /* the output region is last */
    spit(bad, c, n);
    CHECK(rknpu_capture_replay(bad) != 0 && strstr(moex_error(), "the device wrote"));
    c[n - 5] ^= 0x40;
    /* the first word of the first program: DPU S_POINTER -> CNA S_POINTER */
    uint64_t word;
    size_t first = 24 + 16;
    memcpy(&word, c + first, 8);
    word = (uint64_t)0x0201 << 48 | (word & 0xffffffff0000ull) | 0x1004;
    memcpy(c + first, &word, 8);
    spit(bad, c, n);
    CHECK(rknpu_capture_replay(bad) != 0 && strstr(moex_error(), "s-pointer-in-program"));
    spit(bad, c, n / 2);
    CHECK(rknpu_capture_replay(bad) != 0 && strstr(moex_error(), "damaged"));
    spit(bad, "MOEXNPU0", 8);
    CHECK(rknpu_capture_replay(bad) != 0 && strstr(moex_error(), "not a capture"));
    free(c);
    return test_finish();
}
