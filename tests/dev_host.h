/* Tests' bridge to a device's memory: jobs over host arrays, run through a
 * staging buffer of the device (written, submitted, waited on, read back),
 * and a slot's contents read back through the device. */
#ifndef MOEX_TEST_DEV_HOST_H
#define MOEX_TEST_DEV_HOST_H

#include "dev/dev_impl.h" /* struct dev_exec_job: a job over host arrays */

#include <stdlib.h>
#include <string.h>

static inline uint64_t host_round64(uint64_t x) { return (x + 63) / 64 * 64; }

/* A staging buffer of at least `bytes`: one the device has, or a new one. */
static inline int host_stage(struct dev *d, uint64_t bytes, int *buf) {
    for (int b = 0; b < dev_buffer_count(d); b++)
        if (dev_buffer_bytes(d, b) >= bytes) return *buf = b, DEV_OK;
    uint64_t size = 1 << 16;
    while (size < bytes) size *= 2;
    return dev_buffer_alloc(d, size, buf);
}

/* A staging buffer made now, so that a later dev_run_host allocates nothing. */
static inline int dev_host_reserve(struct dev *d, uint64_t bytes) {
    int buf;
    return host_stage(d, bytes, &buf);
}

/* Runs host jobs as one submission: DEV_OK, or the first failure. */
static inline int dev_run_host(struct dev *d, const struct dev_exec_job *jobs, int n) {
    if (n < 1 || n > 1024) return dev_run(d, NULL, n);
    struct dev_job dj[1024];
    uint64_t off[1024][3], total = 0;
    for (int j = 0; j < n; j++) {
        int K, N;
        dev_slot_shape(d, jobs[j].slot, &K, &N);
        if (K == 0) K = 1, N = 1; /* an empty slot: the device refuses the job */
        uint64_t m = jobs[j].m > 0 ? (uint64_t)jobs[j].m : 1;
        off[j][0] = total;
        total += host_round64(m * (uint64_t)K);
        off[j][1] = total;
        total += host_round64(m * sizeof(float));
        off[j][2] = total;
        total += host_round64(((m - 1) * jobs[j].out_stride + (uint64_t)N) * sizeof(float));
    }
    int buf, rc = host_stage(d, total, &buf);
    for (int j = 0; j < n && rc == DEV_OK; j++) {
        int K, N;
        dev_slot_shape(d, jobs[j].slot, &K, &N);
        uint64_t m = jobs[j].m > 0 ? (uint64_t)jobs[j].m : 0;
        dj[j] = (struct dev_job){jobs[j].slot, jobs[j].m, {buf, off[j][0]}, {buf, off[j][1]}, {buf, off[j][2]},
                                 jobs[j].out_stride};
        if (m && K && jobs[j].act) rc = dev_write(d, dj[j].act, jobs[j].act, m * (uint64_t)K);
        if (rc == DEV_OK && m && jobs[j].act_scale) rc = dev_write(d, dj[j].act_scale, jobs[j].act_scale, m * sizeof(float));
        /* the output's bytes between the columns written stay the caller's */
        if (rc == DEV_OK && m && N && jobs[j].out)
            rc = dev_write(d, dj[j].out, jobs[j].out, ((m - 1) * jobs[j].out_stride + (uint64_t)N) * sizeof(float));
    }
    if (rc != DEV_OK) return rc;
    rc = dev_run(d, dj, n);
    for (int j = 0; j < n && rc == DEV_OK; j++) {
        int K, N;
        dev_slot_shape(d, jobs[j].slot, &K, &N);
        uint64_t m = (uint64_t)jobs[j].m;
        rc = dev_read(d, dj[j].out, jobs[j].out, ((m - 1) * jobs[j].out_stride + (uint64_t)N) * sizeof(float));
    }
    return rc;
}

/* The device's estimate for host jobs (slots and rows are what it reads). */
static inline double host_estimate_ns(const struct dev *d, const struct dev_exec_job *jobs, int n) {
    struct dev_job dj[1024];
    if (n > 1024) n = 1024;
    for (int j = 0; j < n; j++) dj[j] = (struct dev_job){.slot = jobs[j].slot, .m = jobs[j].m};
    return dev_estimate_ns(d, dj, n);
}

/* A slot's codes and scales copied out (malloc'd, the caller frees them). */
struct host_slot {
    int8_t *codes;
    float *scales;
    size_t code_bytes;
    int K, N;
};

static inline int host_slot_copy(void *user, const int8_t *codes, size_t code_bytes, const float *scales, int K, int N) {
    struct host_slot *h = user;
    h->codes = malloc(code_bytes ? code_bytes : 1);
    h->scales = malloc(sizeof(float) * (size_t)N);
    if (!h->codes || !h->scales) return DEV_E_NOMEM;
    memcpy(h->codes, codes, code_bytes);
    memcpy(h->scales, scales, sizeof(float) * (size_t)N);
    h->code_bytes = code_bytes;
    h->K = K;
    h->N = N;
    return DEV_OK;
}

static inline int dev_slot_read(struct dev *d, int slot, struct host_slot *out) {
    memset(out, 0, sizeof *out);
    return dev_slot_view(d, slot, host_slot_copy, out);
}

static inline void host_slot_free(struct host_slot *h) {
    free(h->codes);
    free(h->scales);
    memset(h, 0, sizeof *h);
}

#endif
