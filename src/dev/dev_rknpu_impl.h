/* Internal to the rknpu device (dev_rknpu.c: options, finding the device,
 * buffer objects, open, memory; dev_rknpu_submit.c: submissions). */
#ifndef MOEX_DEV_RKNPU_IMPL_H
#define MOEX_DEV_RKNPU_IMPL_H

#include "dev/dev_impl.h"
#include "core/error.h"
#include "dev/dev_rknpu.h"
#include "dev/rknpu_capture.h"
#include "dev/rknpu_fake.h"
#include "dev/rknpu_gen.h"
#include "dev/rknpu_uapi.h"
#include "pack/w8a8.h"
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define RK_BO_MAX (256ull << 20) /* a weight object: few mappings, none near the 4 GiB BO limit */
#define RK_MAX_BOS 256
#define RK_MAX_WINDOWS 4
#define RK_PAGE 4096ull
#define RK_SUBMIT_TIMEOUT_MS 6000

struct rk_bo {
    uint32_t handle;
    uint64_t size, iova, obj_addr, offset;
    int window;
    int8_t *host;
    bool dirty; /* written by the host since the device last saw it */
};

struct rk_scratch {
    bool ready, warm;
    struct rk_bo feature, output, regcmd, tasks;
};

struct rk_dev {
    enum rknpu_driver driver;
    struct rknpu_sys sys;
    struct rknpu_fake *fake;
    int fds[RK_MAX_WINDOWS]; /* rocket: one per window; rknpu: fds[0] */
    int n_windows;
    uint64_t window_bytes, window_used[RK_MAX_WINDOWS];
    int window_next;          /* where the next object goes */
    struct rknpu_limits limits;
    struct rk_bo bos[RK_MAX_BOS]; /* the pool's code objects, in host order */
    int n_bos;
    int8_t *codes_host;
    size_t codes_map;
    struct rk_scratch scratch[RK_MAX_WINDOWS];
    char description[256];
    char version[32];
    bool in_submit;
    char capture_dir[200]; /* "" when not recording */
};


/* Buffer objects (dev_rknpu.c). */
int bo_create(struct rk_dev *rk, int window, uint64_t size, bool tasks, void *at, struct rk_bo *bo);
void bo_destroy(struct rk_dev *rk, struct rk_bo *bo, bool unmap);
int bo_to_device(struct rk_dev *rk, struct rk_bo *bo, uint64_t bytes);
int bo_from_device(struct rk_dev *rk, struct rk_bo *bo, uint64_t bytes);
int vendor_action(struct rk_dev *rk, uint32_t what);
/* The scratch objects one window holds. */
uint64_t scratch_bytes(const struct rk_dev *rk);
/* Runs validated jobs as PC-chained programs (dev_rknpu_submit.c). */
int rk_submit(struct dev *d, const struct dev_exec_job *jobs, int n_jobs, uint64_t *modelled_ns);

#endif
