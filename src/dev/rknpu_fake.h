/* An in-process fake of both NPU kernel drivers, the register-level model
 * (rknpu_model.h) underneath: what tests and `--rknpu fake=...` run on.
 *
 *   rocket  /dev/accel/accel0; each open fd its own IOVA window; CREATE_BO +
 *           mmap, SUBMIT of jobs of tasks with in/out BO lists (one kick per
 *           task), PREP_BO/FINI_BO ownership, GEM_CLOSE; implicit fences (a
 *           job's failure shows on PREP_BO of its out BOs)
 *   rknpu   /dev/dri/card1 (card0 is a display driver); MEM_CREATE/MAP/SYNC/
 *           DESTROY with several IOMMU domains, SUBMIT with core_mask and
 *           subcore_task, the PC chain, fence fds, ACTION reset/power; the
 *           vendor driver's traps: a fresh buffer must be synced TO|FROM then
 *           TO, int8 needs a reset first, a full domain answers EFAULT and
 *           soft-resets, the first submit into a fresh output buffer leaves
 *           it stale (warm-up), all subcore_task entries must be filled
 *
 * BOs are memfd pages, so a provider's mmap(MAP_FIXED) lays several BOs
 * side by side in one host range, as on the board. */
#ifndef MOEX_RKNPU_FAKE_H
#define MOEX_RKNPU_FAKE_H

#include "dev/rknpu_model.h"
#include "dev/rknpu_uapi.h"

#include <stdbool.h>
#include <stdint.h>

enum rknpu_driver { RKNPU_DRIVER_ROCKET = 1, RKNPU_DRIVER_VENDOR = 2 };

struct rknpu_fake_options {
    enum rknpu_driver driver;
    uint64_t window_bytes; /* per fd (rocket) or per domain (rknpu); 0: 4 GiB */
    int domains;           /* rknpu IOMMU domains; 0: 4 */
    int fail_submit_at;    /* the n-th submit (1, 2, ...) fails; 0: none */
    int fail_errno;        /* with ETIMEDOUT (a timeout), EIO (a wedge: until ACT_RESET) or EFAULT */
    int version_minor;     /* rknpu: 0.<minor>.8 (0: 9); an older driver for the probe to refuse */
    bool denied;           /* the NPU node answers EACCES, as without the render group */
};

struct rknpu_fake_stats {
    uint64_t submits, jobs, resets, bos, bo_bytes;
    struct rknpu_run_stats run; /* tasks, words, bytes as executed */
    uint64_t refusals;
    int last_refusal;           /* enum rknpu_refusal of the last refusal */
    char why[256];
};

struct rknpu_fake;
struct rknpu_fake *rknpu_fake_new(const struct rknpu_fake_options *o); /* NULL: out of memory */
void rknpu_fake_free(struct rknpu_fake *f);
/* Its call table (ctx = f). */
struct rknpu_sys rknpu_fake_sys(struct rknpu_fake *f);
void rknpu_fake_get_stats(const struct rknpu_fake *f, struct rknpu_fake_stats *s);

#endif
