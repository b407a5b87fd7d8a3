/* The rknpu device: the RK3588 NPU through either kernel driver, the
 * upstream `rocket` accel driver or the vendor `rknpu` one (RKNPU.md), with
 * one program generator (rknpu_gen.h) and every ioctl through a call table
 * (rknpu_uapi.h), so that `fake=rocket` / `fake=rknpu` run it on the
 * register-level model instead of a board.
 *
 * Memory. The slot pool's codes are the only operand the NPU keeps: they
 * live in buffer objects of at most RK_BO_MAX bytes (whole slots), mapped
 * side by side into one host range (mmap MAP_FIXED), each in one window (an
 * fd under rocket, an IOMMU domain under rknpu; a window that fills moves
 * the next object to the next window, before the driver's EFAULT). Each
 * window in use gets its scratch objects once, at pool allocation: the
 * feature cubes, the int32 output partials, the command stream (and the
 * task descriptors under rknpu). Slot scales and staging buffers are host
 * pages: the host converts activations into feature cubes and partials
 * into the W8A8 output, out = (float)acc * act_scale * channel_scale, the
 * cpu device's rule, so results equal it bit for bit.
 *
 * Submission. A batch is split by rknpu_batch_plan (the jobs of one weight
 * object together, as a chain may read only one, and no more than the
 * scratch holds); each part is one SUBMIT: under rocket one job of one task
 * per program, under rknpu one PC-chained run of all programs. Parts go in
 * waves of one per window: under rocket with several fds (cores) a wave's
 * parts are all queued before the first is waited for. A failed
 * ioctl (a full window, a timeout, a wedge) is DEV_E_SUBMIT or DEV_E_DEVMEM,
 * which the executor turns into a CPU fallback. */
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

#include "dev/dev_rknpu_impl.h"

/* ---- options ---- */

struct rk_options {
    const char *fake;     /* "rocket", "rknpu" or NULL */
    const char *capture;  /* a directory: every submit is recorded there (rknpu_capture.h) */
    const char *provider; /* NULL: the first that serves */
    int cores, domains, fail_submit;
    int fail_errno;
    int fake_minor, fake_denied; /* the fake's node: an older rknpu, a node without permission */
    uint64_t window_mib, scratch_mib;
};

static int parse_int(const char *key, const char *v, int lo, int hi, int *out) {
    char *end;
    long x = strtol(v, &end, 10);
    if (!*v || *end || x < lo || x > hi)
        return moex_errorf("rknpu: option %s=%s (expected %d..%d)", key, v, lo, hi), DEV_E_OPTION;
    *out = (int)x;
    return DEV_OK;
}

/* "fake=rocket,cores=3,..." (the device's option string). */
static int parse_options(const char *spec, struct rk_options *o, char *copy, size_t n) {
    *o = (struct rk_options){.cores = 1, .domains = 1, .window_mib = 4096, .scratch_mib = 16};
    if (!spec || !*spec) return DEV_OK;
    if (strlen(spec) >= n) return moex_errorf("rknpu: options too long"), DEV_E_OPTION;
    strcpy(copy, spec);
    for (char *save = NULL, *kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *v = strchr(kv, '=');
        if (!v) return moex_errorf("rknpu: option '%s' (expected key=value)", kv), DEV_E_OPTION;
        *v++ = 0;
        int x = 0, rc = DEV_OK;
        if (!strcmp(kv, "fake") || !strcmp(kv, "provider")) {
            if (strcmp(v, "rocket") && strcmp(v, "rknpu"))
                return moex_errorf("rknpu: %s=%s (expected rocket or rknpu)", kv, v), DEV_E_OPTION;
            if (!strcmp(kv, "fake")) o->fake = v;
            else o->provider = v;
        } else if (!strcmp(kv, "capture")) {
            o->capture = v;
        } else if (!strcmp(kv, "cores")) {
            rc = parse_int(kv, v, 1, 3, &o->cores);
        } else if (!strcmp(kv, "domains")) {
            rc = parse_int(kv, v, 1, RK_MAX_WINDOWS, &o->domains);
        } else if (!strcmp(kv, "window_mib")) {
            rc = parse_int(kv, v, 1, 4096, &x);
            o->window_mib = (uint64_t)x;
        } else if (!strcmp(kv, "scratch_mib")) {
            rc = parse_int(kv, v, 1, 1024, &x);
            o->scratch_mib = (uint64_t)x;
        } else if (!strcmp(kv, "fake_minor")) {
            rc = parse_int(kv, v, 1, 99, &o->fake_minor);
        } else if (!strcmp(kv, "fake_denied")) {
            rc = parse_int(kv, v, 0, 1, &o->fake_denied);
        } else if (!strcmp(kv, "fail_submit")) {
            rc = parse_int(kv, v, 1, 1 << 30, &o->fail_submit);
        } else if (!strcmp(kv, "fail")) {
            if (!strcmp(v, "timeout")) o->fail_errno = ETIMEDOUT;
            else if (!strcmp(v, "wedge")) o->fail_errno = EIO;
            else if (!strcmp(v, "efault")) o->fail_errno = EFAULT;
            else return moex_errorf("rknpu: fail=%s (expected timeout, wedge or efault)", v), DEV_E_OPTION;
        } else {
            return moex_errorf("rknpu: unknown option '%s' (expected fake, provider, cores, domains, window_mib, "
                               "scratch_mib, capture, fail_submit, fail, fake_minor, fake_denied)", kv),
                   DEV_E_OPTION;
        }
        if (rc != DEV_OK) return rc;
    }
    return DEV_OK;
}

int dev_rknpu_check_options(const char *spec) {
    struct rk_options o;
    char copy[512];
    return parse_options(spec, &o, copy, sizeof copy) == DEV_OK ? 0 : -1;
}

/* ---- finding the device ---- */

/* The driver behind an open DRM fd: its name, or "" when it does not say. */
static void driver_name(struct rk_dev *rk, int fd, char *name, size_t n, int v[3]) {
    struct rkdrm_version ver = {.name = name, .name_len = n - 1};
    memset(name, 0, n);
    if (rk->sys.ioctl(rk->sys.ctx, fd, RKDRM_IOCTL_VERSION, &ver) != 0) name[0] = 0;
    v[0] = ver.version_major, v[1] = ver.version_minor, v[2] = ver.version_patchlevel;
}

/* Probes the nodes of one driver; the fd of the first that serves, or -1
 * with each node's reason appended to why. */
static int probe_nodes(struct rk_dev *rk, enum rknpu_driver drv, char *why, size_t n) {
    static const char *const rocket_nodes[] = {"/dev/accel/accel0", "/dev/accel/accel1", "/dev/accel/accel2"};
    static const char *const vendor_nodes[] = {"/dev/dri/card0", "/dev/dri/card1", "/dev/dri/card2",
                                               "/dev/dri/renderD128", "/dev/dri/renderD129"};
    const char *const *nodes = drv == RKNPU_DRIVER_ROCKET ? rocket_nodes : vendor_nodes;
    int count = drv == RKNPU_DRIVER_ROCKET ? 3 : 5;
    const char *want = drv == RKNPU_DRIVER_ROCKET ? "rocket" : "rknpu";
    for (int i = 0; i < count; i++) {
        size_t at = strlen(why);
        int fd = rk->sys.open(rk->sys.ctx, nodes[i], O_RDWR);
        if (fd < 0) {
            int err = errno;
            snprintf(why + at, n - at, "%s%s: %s", at ? "; " : "", nodes[i],
                     err == ENOENT ? "absent" : err == EACCES || err == EPERM ? "permission denied" : strerror(err));
            continue;
        }
        char name[32];
        int v[3];
        driver_name(rk, fd, name, sizeof name, v);
        if (strcmp(name, want) != 0) {
            snprintf(why + at, n - at, "%s%s: driver '%s', not %s", at ? "; " : "", nodes[i], name, want);
            rk->sys.close(rk->sys.ctx, fd);
            continue;
        }
        if (drv == RKNPU_DRIVER_VENDOR && v[0] == 0 && v[1] < 9) { /* the flags and sync order are 0.9's */
            snprintf(why + at, n - at, "%s%s: rknpu %d.%d.%d, older than 0.9", at ? "; " : "", nodes[i], v[0], v[1],
                     v[2]);
            rk->sys.close(rk->sys.ctx, fd);
            continue;
        }
        snprintf(rk->version, sizeof rk->version, "%s %d.%d.%d", name, v[0], v[1], v[2]);
        return fd;
    }
    return -1;
}

/* ---- buffer objects ---- */

void bo_destroy(struct rk_dev *rk, struct rk_bo *bo, bool unmap) {
    if (!bo->handle) return;
    int fd = rk->driver == RKNPU_DRIVER_ROCKET ? rk->fds[bo->window] : rk->fds[0];
    if (unmap && bo->host) rk->sys.munmap(rk->sys.ctx, bo->host, bo->size);
    if (rk->driver == RKNPU_DRIVER_ROCKET) {
        struct rkdrm_gem_close g = {.handle = bo->handle};
        rk->sys.ioctl(rk->sys.ctx, fd, RKDRM_IOCTL_GEM_CLOSE, &g);
    } else {
        struct rknpu_mem_destroy dsy = {.handle = bo->handle, .obj_addr = bo->obj_addr};
        rk->sys.ioctl(rk->sys.ctx, fd, RKNPU_IOCTL_MEM_DESTROY, &dsy);
    }
    memset(bo, 0, sizeof *bo);
}

int bo_create(struct rk_dev *rk, int window, uint64_t size, bool tasks, void *at, struct rk_bo *bo) {
    *bo = (struct rk_bo){.window = window, .size = (size + RK_PAGE - 1) / RK_PAGE * RK_PAGE};
    int fd = rk->driver == RKNPU_DRIVER_ROCKET ? rk->fds[window] : rk->fds[0];
    if (rk->driver == RKNPU_DRIVER_ROCKET) {
        struct rocket_create_bo c = {.size = (uint32_t)bo->size};
        if (rk->sys.ioctl(rk->sys.ctx, fd, ROCKET_IOCTL_CREATE_BO, &c) != 0) return -1;
        bo->handle = c.handle, bo->iova = c.dma_address, bo->offset = c.offset;
    } else {
        struct rknpu_mem_create c = {.flags = tasks ? RKNPU_MEM_TASKS : RKNPU_MEM_DATA, .size = bo->size,
                                     .iommu_domain_id = window, .core_mask = 1};
        if (rk->sys.ioctl(rk->sys.ctx, fd, RKNPU_IOCTL_MEM_CREATE, &c) != 0) return -1;
        bo->handle = c.handle, bo->iova = c.dma_addr, bo->obj_addr = c.obj_addr;
        struct rknpu_mem_map m = {.handle = c.handle};
        if (rk->sys.ioctl(rk->sys.ctx, fd, RKNPU_IOCTL_MEM_MAP, &m) != 0) goto undo;
        bo->offset = m.offset;
    }
    void *p = rk->sys.mmap(rk->sys.ctx, at, bo->size, PROT_READ | PROT_WRITE, MAP_SHARED | (at ? MAP_FIXED : 0), fd,
                           bo->offset);
    if (p == MAP_FAILED) goto undo;
    bo->host = p;
    if (rk->driver == RKNPU_DRIVER_VENDOR) { /* a fresh object: TO|FROM, then TO, or the submit wedges */
        struct rknpu_mem_sync s = {.flags = RKNPU_SYNC_TO_DEVICE | RKNPU_SYNC_FROM_DEVICE, .obj_addr = bo->obj_addr,
                                   .size = bo->size};
        int rc = rk->sys.ioctl(rk->sys.ctx, fd, RKNPU_IOCTL_MEM_SYNC, &s);
        s.flags = RKNPU_SYNC_TO_DEVICE;
        if (rc == 0) rc = rk->sys.ioctl(rk->sys.ctx, fd, RKNPU_IOCTL_MEM_SYNC, &s);
        if (rc != 0) goto undo;
    }
    return 0;
undo: {
    int err = errno;
    bo_destroy(rk, bo, !at); /* a mapping inside the caller's range stays the caller's */
    errno = err;
    return -1;
}
}

/* Hands a range the host wrote to the device (rocket: FINI_BO; rknpu: a
 * clean to the device). */
int bo_to_device(struct rk_dev *rk, struct rk_bo *bo, uint64_t bytes) {
    if (rk->driver == RKNPU_DRIVER_ROCKET) {
        struct rocket_fini_bo f = {.handle = bo->handle};
        return rk->sys.ioctl(rk->sys.ctx, rk->fds[bo->window], ROCKET_IOCTL_FINI_BO, &f);
    }
    struct rknpu_mem_sync s = {.flags = RKNPU_SYNC_TO_DEVICE, .obj_addr = bo->obj_addr,
                               .size = bytes < bo->size ? (bytes + RK_PAGE - 1) / RK_PAGE * RK_PAGE : bo->size};
    return rk->sys.ioctl(rk->sys.ctx, rk->fds[0], RKNPU_IOCTL_MEM_SYNC, &s);
}

/* Waits for the device's writes and makes them the host's (rocket: PREP_BO,
 * which reports the job's failure; rknpu: an invalidate). */
int bo_from_device(struct rk_dev *rk, struct rk_bo *bo, uint64_t bytes) {
    if (rk->driver == RKNPU_DRIVER_ROCKET) {
        struct timespec now; /* the timeout is absolute (drm_timeout_abs_to_jiffies) */
        clock_gettime(CLOCK_MONOTONIC, &now);
        struct rocket_prep_bo p = {.handle = bo->handle,
                                   .timeout_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec +
                                                 (int64_t)RK_SUBMIT_TIMEOUT_MS * 1000000};
        return rk->sys.ioctl(rk->sys.ctx, rk->fds[bo->window], ROCKET_IOCTL_PREP_BO, &p);
    }
    struct rknpu_mem_sync s = {.flags = RKNPU_SYNC_FROM_DEVICE, .obj_addr = bo->obj_addr,
                               .size = bytes < bo->size ? (bytes + RK_PAGE - 1) / RK_PAGE * RK_PAGE : bo->size};
    return rk->sys.ioctl(rk->sys.ctx, rk->fds[0], RKNPU_IOCTL_MEM_SYNC, &s);
}

int vendor_action(struct rk_dev *rk, uint32_t what) {
    struct rknpu_action a = {.flags = what};
    return rk->sys.ioctl(rk->sys.ctx, rk->fds[0], RKNPU_IOCTL_ACTION, &a);
}

/* ---- open and close ---- */

static void rk_release(struct rk_dev *rk) {
    for (int w = 0; w < RK_MAX_WINDOWS; w++) {
        struct rk_scratch *s = &rk->scratch[w];
        bo_destroy(rk, &s->feature, true);
        bo_destroy(rk, &s->output, true);
        bo_destroy(rk, &s->regcmd, true);
        bo_destroy(rk, &s->tasks, true);
    }
    for (int w = 0; w < RK_MAX_WINDOWS; w++)
        if (rk->fds[w] >= 0) rk->sys.close(rk->sys.ctx, rk->fds[w]);
    rknpu_fake_free(rk->fake);
    free(rk);
}

uint64_t scratch_bytes(const struct rk_dev *rk);

static int rk_open(struct dev *d, const struct dev_options *opt) {
    struct rk_options o;
    char copy[512];
    int rc = parse_options(opt->spec, &o, copy, sizeof copy);
    if (rc != DEV_OK) return rc;
    struct rk_dev *rk = calloc(1, sizeof *rk);
    if (!rk) return moex_errorf("rknpu: out of memory"), DEV_E_NOMEM;
    for (int w = 0; w < RK_MAX_WINDOWS; w++) rk->fds[w] = -1;
    rk->sys = rknpu_sys_kernel;
    if (o.fake) {
        struct rknpu_fake_options fo = {.driver = !strcmp(o.fake, "rocket") ? RKNPU_DRIVER_ROCKET : RKNPU_DRIVER_VENDOR,
                                        .window_bytes = o.window_mib << 20, .domains = o.domains,
                                        .fail_submit_at = o.fail_submit, .fail_errno = o.fail_errno,
                                        .version_minor = o.fake_minor, .denied = o.fake_denied != 0};
        if (!(rk->fake = rknpu_fake_new(&fo))) {
            free(rk);
            return moex_errorf("rknpu: out of memory"), DEV_E_NOMEM;
        }
        rk->sys = rknpu_fake_sys(rk->fake);
    } else if (o.fail_submit || o.fail_errno || o.fake_minor || o.fake_denied) {
        free(rk);
        return moex_errorf("rknpu: fail=, fail_submit=, fake_minor= and fake_denied= are the fake's (add fake=...)"),
               DEV_E_OPTION;
    }
    char why[1024] = "";
    bool try_rocket = !o.provider || !strcmp(o.provider, "rocket"), try_vendor = !o.provider || !strcmp(o.provider, "rknpu");
    if (o.fake) try_rocket = !strcmp(o.fake, "rocket"), try_vendor = !try_rocket;
    int fd = try_rocket ? probe_nodes(rk, RKNPU_DRIVER_ROCKET, why, sizeof why) : -1;
    rk->driver = RKNPU_DRIVER_ROCKET;
    if (fd < 0 && try_vendor) {
        fd = probe_nodes(rk, RKNPU_DRIVER_VENDOR, why, sizeof why);
        rk->driver = RKNPU_DRIVER_VENDOR;
    }
    if (fd < 0) {
        rk_release(rk);
        return moex_errorf("rknpu: no RK3588 NPU serves here (%s)", why), DEV_E_UNAVAILABLE;
    }
    rk->fds[0] = fd;
    rk->n_windows = 1;
    rk->window_bytes = o.window_mib << 20;
    if (rk->driver == RKNPU_DRIVER_ROCKET) { /* one fd per core, each its own window */
        for (int c = 1; c < o.cores; c++) {
            rk->fds[c] = rk->sys.open(rk->sys.ctx, "/dev/accel/accel0", O_RDWR); /* a new fd: a new window */
            if (rk->fds[c] < 0) break;
            rk->n_windows++;
        }
    } else {
        rk->n_windows = o.domains;
        if (vendor_action(rk, RKNPU_POWER_ON) != 0 || vendor_action(rk, RKNPU_ACT_RESET) != 0) {
            int err = errno;
            rk_release(rk);
            return moex_errorf("rknpu: power-on and reset: %s", strerror(err)), DEV_E_UNAVAILABLE;
        }
    }
    if (o.capture) snprintf(rk->capture_dir, sizeof rk->capture_dir, "%s", o.capture);
    uint64_t scratch = o.scratch_mib << 20;
    rk->limits = rknpu_limits_for(scratch);
    snprintf(rk->description, sizeof rk->description,
             "RK3588 NPU, %s%s driver (%s), windows: %d %s x %llu MiB, W8A8 1x1-conv programs", o.fake ? "fake " : "",
             rk->driver == RKNPU_DRIVER_ROCKET ? "rocket" : "rknpu", rk->version, rk->n_windows,
             rk->driver == RKNPU_DRIVER_ROCKET ? "fd (core)" : "IOMMU domain", (unsigned long long)o.window_mib);
    d->backend = rk;
    d->layout = PACK_RKNPU;
    d->caps = (struct dev_caps){
        .name = "rknpu",
        .description = rk->description,
        .compute = DEV_COMPUTE_W8A8,
        .min_m = 8, /* NPU-FACTS.md: ahead of NEON from M = 8 */
        .k_multiple = 32,
        .n_multiple = 32,
        .k_max = PACK_MAX_K,
        .n_max = 1 << 20,
        .max_jobs = DEV_MAX_JOBS,
        .modelled_time = false,
        /* NPU-FACTS.md: ~165 us per chained expert, ~280 us per single
         * submit at 2048 x 512; the 386-478 GOP/s of resident multicore int8
         * (RKNPU.md 4) is ~0.005 ns per MAC over 3 cores. */
        .submit_ns = 120e3,
        .job_ns = 20e3,
        .weight_ns_per_byte = 0.1,
        .ns_per_mac = 0.005,
        .pack_ns_per_value = 2.0,
        .maps_host_pages = false,
        .mem_granule = RK_PAGE,
        /* each window holds its scratch objects besides what the budget counts */
        .windows = { rk->n_windows, rk->window_bytes > scratch_bytes(rk) ? rk->window_bytes - scratch_bytes(rk) : 0 },
    };
    return DEV_OK;
}

static void rk_close(struct dev *d) {
    struct rk_dev *rk = d->backend;
    if (rk) rk_release(rk);
}

/* ---- device memory ---- */

/* The scratch objects one window holds (rk_pool_alloc). */
uint64_t scratch_bytes(const struct rk_dev *rk) {
    uint64_t tasks = rk->driver == RKNPU_DRIVER_VENDOR
                         ? rk->limits.program_words / RKNPU_PROGRAM_WORDS * sizeof(struct rknpu_task) + 2 * RK_PAGE
                         : 0;
    return rk->limits.feature_bytes + rk->limits.output_bytes + rk->limits.program_words * 8 + tasks;
}

/* The first window from window_next with room for `bytes` and its scratch. */
static int window_room(struct rk_dev *rk, uint64_t bytes) {
    for (int tries = 0; tries < rk->n_windows; tries++) {
        int w = (rk->window_next + tries) % rk->n_windows;
        if (rk->window_used[w] + bytes + scratch_bytes(rk) <= rk->window_bytes) return w;
    }
    return -1;
}

static int rk_mem_alloc(struct dev *d, uint64_t bytes, struct dev_region *r) {
    struct rk_dev *rk = d->backend;
    size_t map = (size_t)((bytes + RK_PAGE - 1) / RK_PAGE * RK_PAGE);
    bool npu = r->unit && r->unit == d->slot_code_bytes && !rk->codes_host;
    if (!npu) { /* scales and staging: the host's (the NPU reads its scratch cubes) */
        void *p = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return moex_errorf("rknpu: out of memory for %llu bytes", (unsigned long long)bytes), DEV_E_NOMEM;
        r->host = p, r->bytes = bytes, r->handle = -1;
        return DEV_OK;
    }
    /* pieces of whole slots that also end on pages, so that they map side by
     * side; each as large as the window it goes to still holds, beside the
     * scratch that window will need */
    uint64_t unit = r->unit;
    while (unit % RK_PAGE) unit += r->unit;
    void *range = mmap(NULL, map, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (range == MAP_FAILED) return moex_errorf("rknpu: no address space for %zu bytes", map), DEV_E_NOMEM;
    rk->codes_host = range;
    rk->codes_map = map;
    for (uint64_t at = 0; at < bytes; rk->n_bos++) {
        uint64_t left = bytes - at, want = left < unit ? left : unit;
        int w = rk->n_bos < RK_MAX_BOS ? window_room(rk, (want + RK_PAGE - 1) / RK_PAGE * RK_PAGE) : -1;
        uint64_t size = 0;
        if (w >= 0) {
            uint64_t room = rk->window_bytes - rk->window_used[w] - scratch_bytes(rk);
            size = room / unit * unit;
            if (size > RK_BO_MAX / unit * unit) size = RK_BO_MAX / unit * unit;
            if (size == 0) size = unit;
            if (size > left) size = left;
        }
        int err = ENOSPC;
        if (w >= 0 && bo_create(rk, w, size, false, (int8_t *)range + at, &rk->bos[rk->n_bos]) == 0) {
            rk->window_used[w] += rk->bos[rk->n_bos].size;
            rk->window_next = (w + (rk->driver == RKNPU_DRIVER_ROCKET ? 1 : 0)) % rk->n_windows;
            at += size;
            continue;
        }
        if (w >= 0) err = errno;
        if (rk->driver == RKNPU_DRIVER_VENDOR && err == EFAULT) vendor_action(rk, RKNPU_ACT_RESET);
        moex_errorf("rknpu: %llu bytes of slots in %d %s of %llu MiB: object %d of %llu bytes: %s",
                    (unsigned long long)bytes, rk->n_windows, rk->driver == RKNPU_DRIVER_ROCKET ? "windows" : "domains",
                    (unsigned long long)(rk->window_bytes >> 20), rk->n_bos, (unsigned long long)(size ? size : want),
                    w < 0 ? "every window is full" : strerror(err));
        for (int b = 0; b < rk->n_bos; b++) bo_destroy(rk, &rk->bos[b], false);
        rk->n_bos = 0;
        munmap(range, map);
        rk->codes_host = NULL;
        memset(rk->window_used, 0, sizeof rk->window_used);
        return DEV_E_DEVMEM;
    }
    r->host = range, r->bytes = bytes, r->handle = 0;
    return DEV_OK;
}

static void rk_mem_free(struct dev *d, struct dev_region *r) {
    struct rk_dev *rk = d->backend;
    if (r->host && (int8_t *)r->host == rk->codes_host) {
        for (int b = 0; b < rk->n_bos; b++) bo_destroy(rk, &rk->bos[b], false);
        munmap(rk->codes_host, rk->codes_map);
        rk->n_bos = 0;
        rk->codes_host = NULL;
        return;
    }
    munmap(r->host, (size_t)((r->bytes + RK_PAGE - 1) / RK_PAGE * RK_PAGE));
}

/* After host access to device memory (a pack, a load, an import) the code
 * objects may have changed, so each goes to the device again before its
 * next use; the access around a submission is the device's own. */
static void rk_mem_close(struct dev *d) {
    struct rk_dev *rk = d->backend;
    if (rk->in_submit) {
        rk->in_submit = false;
        return;
    }
    for (int b = 0; b < rk->n_bos; b++) rk->bos[b].dirty = true;
}

static int rk_pool_alloc(struct dev *d) {
    struct rk_dev *rk = d->backend;
    for (int b = 0; b < rk->n_bos; b++) {
        struct rk_scratch *s = &rk->scratch[rk->bos[b].window];
        if (s->ready) continue;
        int w = rk->bos[b].window;
        if (bo_create(rk, w, rk->limits.feature_bytes, false, NULL, &s->feature) != 0 ||
            bo_create(rk, w, rk->limits.output_bytes, false, NULL, &s->output) != 0 ||
            bo_create(rk, w, rk->limits.program_words * 8, false, NULL, &s->regcmd) != 0 ||
            (rk->driver == RKNPU_DRIVER_VENDOR &&
             bo_create(rk, w, rk->limits.program_words / RKNPU_PROGRAM_WORDS * sizeof(struct rknpu_task) + RK_PAGE,
                       true, NULL, &s->tasks) != 0))
            return moex_errorf("rknpu: scratch buffers in window %d: %s", w, strerror(errno)), DEV_E_DEVMEM;
        s->ready = true;
    }
    return DEV_OK;
}

struct rknpu_fake *dev_rknpu_fake(struct dev *d) {
    return d && d->ops == &dev_rknpu_ops ? ((struct rk_dev *)d->backend)->fake : NULL;
}

const struct dev_ops dev_rknpu_ops = {
    .open = rk_open,
    .close = rk_close,
    .mem_alloc = rk_mem_alloc,
    .mem_free = rk_mem_free,
    .mem_close = rk_mem_close,
    .pool_alloc = rk_pool_alloc,
    .submit = rk_submit,
};
