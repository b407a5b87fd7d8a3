/* The fake NPU kernels (rknpu_fake.h). Fds, handles and fences are numbers
 * of the fake's own, never real descriptors. */
#include "dev/rknpu_fake.h"

#include "dev/rknpu_gen.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FAKE_FD_BASE 1000
#define FAKE_FENCE_BASE 5000
#define FAKE_MAX_FDS 16
#define FAKE_MAX_BOS 4096
#define FAKE_IOVA_START 0x100000ull /* NPU VA 0 is the chain's terminator */
#define FAKE_PAGE 4096ull

struct fbo {
    bool used;
    int fd;           /* fake fd index that made it */
    int window;       /* rocket: the fd index; rknpu: the domain */
    uint64_t size, iova, offset, obj_addr;
    uint32_t flags;
    int memfd;
    int8_t *host;     /* the fake's own mapping */
    int sync;         /* rknpu: 0 fresh, 1 after TO|FROM, 2 ready (then TO) */
    bool device_owned; /* rocket: FINI_BO'd, not yet PREP_BO'd */
    bool warm;        /* rknpu: the NPU has written it once */
    int error;        /* rocket: the errno of the last job that wrote it (PREP_BO reports it) */
};

struct ffd {
    bool open;
    int node; /* 0: the NPU node, 1: the display node (rknpu fake's card0) */
};

struct rknpu_fake {
    struct rknpu_fake_options o;
    pthread_mutex_t lock;
    struct ffd fds[FAKE_MAX_FDS];
    struct fbo *bos; /* handle h is bos[h - 1] */
    struct rknpu_fake_stats st;
    bool reset_done, wedged, powered;
    int fences[64]; /* errno of fence i (0: signalled fine); -1: closed */
    int n_fences;
};

struct rknpu_fake *rknpu_fake_new(const struct rknpu_fake_options *o) {
    struct rknpu_fake *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->bos = calloc(FAKE_MAX_BOS, sizeof *f->bos);
    if (!f->bos) {
        free(f);
        return NULL;
    }
    f->o = *o;
    if (!f->o.window_bytes) f->o.window_bytes = 4ull << 30;
    if (!f->o.domains) f->o.domains = 4;
    pthread_mutex_init(&f->lock, NULL);
    return f;
}

static void bo_release(struct fbo *b) {
    if (b->host) munmap(b->host, b->size);
    if (b->memfd >= 0) close(b->memfd);
    memset(b, 0, sizeof *b);
}

void rknpu_fake_free(struct rknpu_fake *f) {
    if (!f) return;
    for (int i = 0; i < FAKE_MAX_BOS; i++)
        if (f->bos[i].used) bo_release(&f->bos[i]);
    pthread_mutex_destroy(&f->lock);
    free(f->bos);
    free(f);
}

void rknpu_fake_get_stats(const struct rknpu_fake *f, struct rknpu_fake_stats *s) {
    pthread_mutex_lock((pthread_mutex_t *)&f->lock);
    *s = f->st;
    pthread_mutex_unlock((pthread_mutex_t *)&f->lock);
}

static int fail(int err) {
    errno = err;
    return -1;
}

static void note_refusal(struct rknpu_fake *f, int code, const char *why) {
    f->st.refusals++;
    f->st.last_refusal = code;
    snprintf(f->st.why, sizeof f->st.why, "%s", why);
}

static struct ffd *fd_of(struct rknpu_fake *f, int fd) {
    int i = fd - FAKE_FD_BASE;
    return i >= 0 && i < FAKE_MAX_FDS && f->fds[i].open ? &f->fds[i] : NULL;
}

static struct fbo *bo_of(struct rknpu_fake *f, int fd, uint32_t handle) {
    if (handle == 0 || handle > FAKE_MAX_BOS) return NULL;
    struct fbo *b = &f->bos[handle - 1];
    return b->used && b->fd == fd - FAKE_FD_BASE ? b : NULL;
}

/* First fit in a window, page-aligned; 0 when it is full. */
static uint64_t iova_alloc(struct rknpu_fake *f, int window, uint64_t size) {
    uint64_t at = FAKE_IOVA_START, end = FAKE_IOVA_START + f->o.window_bytes;
    for (;;) {
        bool moved = false;
        for (int i = 0; i < FAKE_MAX_BOS; i++) {
            const struct fbo *b = &f->bos[i];
            if (b->used && b->window == window && b->iova < at + size && at < b->iova + b->size) {
                at = (b->iova + b->size + FAKE_PAGE - 1) / FAKE_PAGE * FAKE_PAGE;
                moved = true;
            }
        }
        if (!moved) break;
    }
    return at + size <= end && at + size <= 0x100000000ull ? at : 0;
}

static int bo_create(struct rknpu_fake *f, int fd, int window, uint64_t size, uint32_t flags, uint32_t *handle) {
    size = (size + FAKE_PAGE - 1) / FAKE_PAGE * FAKE_PAGE;
    uint64_t iova = size ? iova_alloc(f, window, size) : 0;
    if (!iova) return -1; /* the caller says which errno */
    int h = 0;
    while (h < FAKE_MAX_BOS && f->bos[h].used) h++;
    if (h == FAKE_MAX_BOS) return -1;
    int memfd = memfd_create("moex-npu-bo", MFD_CLOEXEC);
    if (memfd < 0) return -1;
    void *host = MAP_FAILED;
    if (ftruncate(memfd, (off_t)size) == 0)
        host = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (host == MAP_FAILED) {
        close(memfd);
        return -1;
    }
    f->bos[h] = (struct fbo){.used = true, .fd = fd - FAKE_FD_BASE, .window = window, .size = size, .iova = iova,
                             .offset = (uint64_t)(h + 1) << 32, .obj_addr = 0xffffff8000000000ull + ((uint64_t)(h + 1) << 32),
                             .flags = flags, .memfd = memfd, .host = host};
    f->st.bos++;
    f->st.bo_bytes += size;
    *handle = (uint32_t)h + 1;
    return 0;
}

static int version(struct rknpu_fake *f, struct ffd *fd, struct rkdrm_version *v) {
    const char *name = fd->node == 1 ? "rockchip" : f->o.driver == RKNPU_DRIVER_ROCKET ? "rocket" : "rknpu";
    v->version_major = f->o.driver == RKNPU_DRIVER_ROCKET ? 1 : 0;
    v->version_minor = f->o.driver == RKNPU_DRIVER_ROCKET ? 0 : f->o.version_minor ? f->o.version_minor : 9;
    v->version_patchlevel = f->o.driver == RKNPU_DRIVER_ROCKET ? 0 : 8;
    size_t len = strlen(name);
    if (v->name && v->name_len) memcpy(v->name, name, len < v->name_len ? len : v->name_len);
    v->name_len = len;
    v->date_len = v->desc_len = 0;
    return 0;
}

/* ---- the memory a submit sees ---- */

struct view {
    struct rknpu_fake *f;
    int fd;          /* fake fd index */
    int window;
    const uint32_t *in, *out; /* rocket: the job's lists */
    uint32_t n_in, n_out;
    bool rknpu;
    int unsynced;    /* a BO that was not ready: its handle */
    void *discard;   /* first writes into a fresh rknpu buffer land here, kept nowhere */
    uint64_t discard_bytes;
};

static bool listed(const uint32_t *list, uint32_t n, uint32_t h) {
    for (uint32_t i = 0; i < n; i++)
        if (list[i] == h) return true;
    return false;
}

static int8_t *resolve(void *ctx, uint32_t va, uint64_t bytes, bool write, int *buffer) {
    struct view *v = ctx;
    for (int i = 0; i < FAKE_MAX_BOS; i++) {
        struct fbo *b = &v->f->bos[i];
        if (!b->used || b->window != v->window || (!v->rknpu && b->fd != v->fd)) continue;
        if (va < b->iova || va - b->iova > b->size || bytes > b->size - (va - b->iova)) continue;
        uint32_t h = (uint32_t)i + 1;
        if (!v->rknpu && !(write ? listed(v->out, v->n_out, h) : listed(v->in, v->n_in, h) || listed(v->out, v->n_out, h)))
            return NULL;
        if (v->rknpu && b->sync < 2) {
            v->unsynced = (int)h;
            return NULL;
        }
        *buffer = i;
        if (v->rknpu && write && !b->warm) { /* stale: the write goes nowhere */
            if (bytes > v->discard_bytes) {
                void *p = realloc(v->discard, bytes);
                if (!p) return NULL;
                v->discard = p;
                v->discard_bytes = bytes;
            }
            return v->discard;
        }
        return b->host + (va - b->iova);
    }
    return NULL;
}

static void view_done(struct view *v) { free(v->discard); }

/* ---- rocket ---- */

static int rocket_submit(struct rknpu_fake *f, int fd, const struct rocket_submit *s) {
    if (s->job_struct_size != sizeof(struct rocket_job) || s->job_count == 0) return fail(EINVAL);
    f->st.submits++;
    bool inject = f->o.fail_submit_at && (int)f->st.submits == f->o.fail_submit_at;
    const struct rocket_job *jobs = (const struct rocket_job *)(uintptr_t)s->jobs;
    for (uint32_t j = 0; j < s->job_count; j++) {
        const struct rocket_job *job = &jobs[j];
        const uint32_t *in = (const uint32_t *)(uintptr_t)job->in_bo_handles;
        const uint32_t *out = (const uint32_t *)(uintptr_t)job->out_bo_handles;
        const struct rocket_task *tasks = (const struct rocket_task *)(uintptr_t)job->tasks;
        if (job->task_struct_size != sizeof(struct rocket_task)) return fail(EINVAL);
        for (uint32_t i = 0; i < job->in_bo_handle_count + job->out_bo_handle_count; i++) {
            uint32_t h = i < job->in_bo_handle_count ? in[i] : out[i - job->in_bo_handle_count];
            if (!bo_of(f, fd, h)) return fail(ENOENT); /* the lookup fails before the job is queued */
        }
        f->st.jobs++;
        int err = 0;
        char why[256] = "";
        for (uint32_t i = 0; i < job->in_bo_handle_count && !err; i++)
            if (listed(out, job->out_bo_handle_count, in[i])) {
                snprintf(why, sizeof why, "%s: BO %u is in the in and the out list (executed nothing)",
                         rknpu_refusal_name(RKNPU_R_IN_OUT), in[i]);
                note_refusal(f, RKNPU_R_IN_OUT, why);
                err = EIO;
            }
        for (uint32_t i = 0; i < job->in_bo_handle_count + job->out_bo_handle_count && !err; i++) {
            uint32_t h = i < job->in_bo_handle_count ? in[i] : out[i - job->in_bo_handle_count];
            if (!bo_of(f, fd, h)->device_owned) {
                snprintf(why, sizeof why, "%s: BO %u was not handed to the device with FINI_BO",
                         rknpu_refusal_name(RKNPU_R_UNSYNCED), h);
                note_refusal(f, RKNPU_R_UNSYNCED, why);
                err = EIO;
            }
        }
        if (!err && inject) err = f->o.fail_errno ? f->o.fail_errno : ETIMEDOUT;
        struct view v = {.f = f, .fd = fd - FAKE_FD_BASE, .window = fd - FAKE_FD_BASE, .in = in, .out = out,
                         .n_in = job->in_bo_handle_count, .n_out = job->out_bo_handle_count};
        struct rknpu_mem_view mem = {&v, resolve};
        for (uint32_t t = 0; t < job->task_count && !err; t++) {
            int wb = -1; /* each task is its own kick: no chain across tasks */
            int rc = rknpu_model_run(&mem, tasks[t].regcmd, tasks[t].regcmd_count, 1, false, &wb, &f->st.run, why,
                                     sizeof why);
            if (rc != RKNPU_RUN_OK) {
                note_refusal(f, rc, why);
                err = EIO; /* on the board: garbage, a hang and a reset at the 500 ms timeout */
            }
        }
        view_done(&v);
        /* the implicit fence carries the error to the out BOs (the ioctl itself drops it) */
        for (uint32_t i = 0; i < job->out_bo_handle_count; i++) bo_of(f, fd, out[i])->error = err;
        if (err == ETIMEDOUT) f->st.resets++;
    }
    return 0;
}

static int rocket_ioctl(struct rknpu_fake *f, int fd, unsigned long req, void *arg) {
    struct fbo *b;
    switch (req) {
    case ROCKET_IOCTL_CREATE_BO: {
        struct rocket_create_bo *c = arg;
        uint32_t h;
        if (c->size == 0) return fail(EINVAL);
        if (bo_create(f, fd, fd - FAKE_FD_BASE, c->size, 0, &h) != 0) {
            char why[128];
            snprintf(why, sizeof why, "%s: the fd's 4 GiB window has no room for %u bytes",
                     rknpu_refusal_name(RKNPU_R_FULL_DOMAIN), c->size);
            note_refusal(f, RKNPU_R_FULL_DOMAIN, why);
            return fail(ENOSPC);
        }
        b = &f->bos[h - 1];
        c->handle = h;
        c->dma_address = b->iova;
        c->offset = b->offset;
        return 0;
    }
    case ROCKET_IOCTL_SUBMIT: return rocket_submit(f, fd, arg);
    case ROCKET_IOCTL_PREP_BO: {
        struct rocket_prep_bo *p = arg;
        if (!(b = bo_of(f, fd, p->handle))) return fail(ENOENT);
        b->device_owned = false;
        int err = b->error;
        b->error = 0;
        return err ? fail(err) : 0;
    }
    case ROCKET_IOCTL_FINI_BO: {
        struct rocket_fini_bo *p = arg;
        if (!(b = bo_of(f, fd, p->handle))) return fail(ENOENT);
        b->device_owned = true;
        return 0;
    }
    default: return fail(ENOTTY);
    }
}

/* ---- rknpu ---- */

static struct fbo *bo_by_obj(struct rknpu_fake *f, uint64_t obj_addr) {
    for (int i = 0; i < FAKE_MAX_BOS; i++)
        if (f->bos[i].used && f->bos[i].obj_addr == obj_addr) return &f->bos[i];
    return NULL;
}

static int vendor_submit(struct rknpu_fake *f, int fd, struct rknpu_submit *s) {
    char why[256];
    (void)fd;
    f->st.submits++;
    bool inject = f->o.fail_submit_at && (int)f->st.submits == f->o.fail_submit_at;
    if (f->wedged) return fail(EIO);
    int code = RKNPU_RUN_OK;
    if (!(s->flags & RKNPU_JOB_PC) || s->task_number == 0) return fail(EINVAL);
    for (int i = 0; i < 3 && !code; i++)
        if (s->subcore_task[i].task_number != s->task_number || s->subcore_task[i].task_start != s->task_start) {
            snprintf(why, sizeof why, "%s: subcore_task[%d] = {%u, %u} for %u tasks (the kernel Oopses)",
                     rknpu_refusal_name(RKNPU_R_SUBCORE), i, s->subcore_task[i].task_start,
                     s->subcore_task[i].task_number, s->task_number);
            code = RKNPU_R_SUBCORE;
        }
    if (!code && !f->reset_done) {
        snprintf(why, sizeof why, "%s: an int8 submit without ACT_RESET first (the first submit wedges)",
                 rknpu_refusal_name(RKNPU_R_NOT_RESET));
        code = RKNPU_R_NOT_RESET;
    }
    if (code) {
        note_refusal(f, code, why);
        f->wedged = code == RKNPU_R_NOT_RESET;
        return fail(code == RKNPU_R_SUBCORE ? EFAULT : ETIMEDOUT);
    }
    if (s->core_mask != 1 && s->core_mask != 2 && s->core_mask != 4) return fail(EINVAL);
    if ((int)s->iommu_domain_id >= f->o.domains) return fail(EINVAL);
    struct fbo *tb = bo_by_obj(f, s->task_obj_addr);
    if (!tb || !(tb->flags & RKNPU_MEM_KERNEL_MAPPING) || (int)s->iommu_domain_id != tb->window ||
        (uint64_t)(s->task_start + s->task_number) * sizeof(struct rknpu_task) > tb->size)
        return fail(EINVAL);
    if (inject) {
        int err = f->o.fail_errno ? f->o.fail_errno : ETIMEDOUT;
        f->st.resets += err != EFAULT;
        f->wedged = err == EIO;
        return fail(err);
    }
    f->st.jobs++;
    const struct rknpu_task *tasks = (const struct rknpu_task *)(const void *)tb->host + s->task_start;
    struct view v = {.f = f, .window = (int)s->iommu_domain_id, .rknpu = true};
    struct rknpu_mem_view mem = {&v, resolve};
    /* the PC follows the chain; each descriptor must name where it leads */
    for (uint32_t i = 0; i + 1 < s->task_number && !code; i++) {
        int buf;
        uint32_t words = tasks[i].regcfg_amount + RKNPU_TRAILER_WORDS;
        const uint64_t *w = (const uint64_t *)(const void *)resolve(&v, (uint32_t)tasks[i].regcmd_addr,
                                                                    (uint64_t)words * 8, false, &buf);
        if (!w || (rknpu_word_value(w[words - 4]) & ~0xfu) != (uint32_t)tasks[i + 1].regcmd_addr) {
            snprintf(why, sizeof why, "%s: task %u does not link to task %u's commands", rknpu_refusal_name(RKNPU_R_CHAIN),
                     i, i + 1);
            code = RKNPU_R_CHAIN;
        }
    }
    int wb = -1;
    if (!code)
        code = rknpu_model_run(&mem, (uint32_t)tasks[0].regcmd_addr, tasks[0].regcfg_amount + RKNPU_TRAILER_WORDS,
                               (int)s->task_number, true, &wb, &f->st.run, why, sizeof why);
    if (code == RKNPU_R_BOUNDS && v.unsynced) {
        snprintf(why, sizeof why, "%s: buffer %d was not synced TO|FROM then TO before the submit (it wedges)",
                 rknpu_refusal_name(RKNPU_R_UNSYNCED), v.unsynced);
        code = RKNPU_R_UNSYNCED;
    }
    view_done(&v);
    if (!code) /* written once: from now on its writes land */
        for (int i = 0; i < FAKE_MAX_BOS; i++)
            if (f->bos[i].used && f->bos[i].window == (int)s->iommu_domain_id && f->bos[i].sync == 2) f->bos[i].warm = true;
    if (code) {
        note_refusal(f, code, why);
        f->st.resets++; /* the driver's self-healing reset after a timeout */
        return fail(ETIMEDOUT);
    }
    if (s->flags & RKNPU_JOB_FENCE_OUT) {
        if (f->n_fences == 64) f->n_fences = 0;
        f->fences[f->n_fences] = 0;
        s->fence_fd = FAKE_FENCE_BASE + f->n_fences++;
    }
    s->task_counter = s->task_number;
    return 0;
}

static int vendor_ioctl(struct rknpu_fake *f, int fd, unsigned long req, void *arg) {
    struct fbo *b;
    switch (req) {
    case RKNPU_IOCTL_ACTION: {
        struct rknpu_action *a = arg;
        switch (a->flags) {
        case RKNPU_GET_HW_VERSION: a->value = 0x46495245; return 0;
        case RKNPU_GET_DRV_VERSION: a->value = 0x00090008; return 0;
        case RKNPU_ACT_RESET: f->reset_done = true; f->wedged = false; f->st.resets++; return 0;
        case RKNPU_POWER_ON: f->powered = true; return 0;
        case RKNPU_POWER_OFF: f->powered = false; return 0;
        default: return fail(EINVAL);
        }
    }
    case RKNPU_IOCTL_MEM_CREATE: {
        struct rknpu_mem_create *c = arg;
        uint32_t h;
        if (c->size == 0 || c->iommu_domain_id < 0 || c->iommu_domain_id >= f->o.domains) return fail(EINVAL);
        if (bo_create(f, fd, c->iommu_domain_id, c->size, c->flags, &h) != 0) {
            char why[128];
            snprintf(why, sizeof why, "%s: domain %d has no room for %llu bytes (the NPU soft-resets)",
                     rknpu_refusal_name(RKNPU_R_FULL_DOMAIN), c->iommu_domain_id, (unsigned long long)c->size);
            note_refusal(f, RKNPU_R_FULL_DOMAIN, why);
            f->reset_done = false; /* the soft reset leaves int8 mode */
            f->st.resets++;
            return fail(EFAULT);
        }
        b = &f->bos[h - 1];
        c->handle = h;
        c->obj_addr = b->obj_addr;
        c->dma_addr = b->iova;
        return 0;
    }
    case RKNPU_IOCTL_MEM_MAP: {
        struct rknpu_mem_map *m = arg;
        if (!(b = bo_of(f, fd, m->handle))) return fail(ENOENT);
        m->offset = b->offset;
        return 0;
    }
    case RKNPU_IOCTL_MEM_SYNC: {
        struct rknpu_mem_sync *s = arg;
        if (!(b = bo_by_obj(f, s->obj_addr)) || s->offset > b->size || s->size > b->size - s->offset) return fail(EINVAL);
        bool both = (s->flags & RKNPU_SYNC_TO_DEVICE) && (s->flags & RKNPU_SYNC_FROM_DEVICE);
        if (b->sync == 0 && both) b->sync = 1;
        else if (b->sync == 1 && s->flags == RKNPU_SYNC_TO_DEVICE) b->sync = 2;
        return 0;
    }
    case RKNPU_IOCTL_MEM_DESTROY: {
        struct rknpu_mem_destroy *d = arg;
        if (!(b = bo_of(f, fd, d->handle)) || b->obj_addr != d->obj_addr) return fail(EINVAL);
        f->st.bo_bytes -= b->size;
        bo_release(b);
        return 0;
    }
    case RKNPU_IOCTL_SUBMIT: return vendor_submit(f, fd, arg);
    default: return fail(ENOTTY);
    }
}

/* ---- the call table ---- */

static int fake_open(void *ctx, const char *path, int flags) {
    struct rknpu_fake *f = ctx;
    (void)flags;
    int node = -1;
    if (f->o.driver == RKNPU_DRIVER_ROCKET && !strcmp(path, "/dev/accel/accel0")) node = 0;
    if (f->o.driver == RKNPU_DRIVER_VENDOR && !strcmp(path, "/dev/dri/card1")) node = 0;
    if (f->o.driver == RKNPU_DRIVER_VENDOR && !strcmp(path, "/dev/dri/card0")) node = 1;
    if (node < 0) return fail(ENOENT);
    if (node == 0 && f->o.denied) return fail(EACCES);
    pthread_mutex_lock(&f->lock);
    int i = 0;
    while (i < FAKE_MAX_FDS && f->fds[i].open) i++;
    if (i < FAKE_MAX_FDS) f->fds[i] = (struct ffd){.open = true, .node = node};
    pthread_mutex_unlock(&f->lock);
    return i < FAKE_MAX_FDS ? FAKE_FD_BASE + i : fail(EMFILE);
}

static int fake_close(void *ctx, int fd) {
    struct rknpu_fake *f = ctx;
    pthread_mutex_lock(&f->lock);
    int rc = 0;
    if (fd >= FAKE_FENCE_BASE && fd < FAKE_FENCE_BASE + 64) {
        f->fences[fd - FAKE_FENCE_BASE] = -1;
    } else if (fd_of(f, fd)) {
        for (int i = 0; i < FAKE_MAX_BOS; i++) /* closing the fd frees its BOs */
            if (f->bos[i].used && f->bos[i].fd == fd - FAKE_FD_BASE) {
                f->st.bo_bytes -= f->bos[i].size;
                bo_release(&f->bos[i]);
            }
        f->fds[fd - FAKE_FD_BASE].open = false;
    } else {
        rc = fail(EBADF);
    }
    pthread_mutex_unlock(&f->lock);
    return rc;
}

static int fake_ioctl(void *ctx, int fd, unsigned long req, void *arg) {
    struct rknpu_fake *f = ctx;
    pthread_mutex_lock(&f->lock);
    struct ffd *d = fd_of(f, fd);
    int rc;
    if (!d) rc = fail(EBADF);
    else if (req == RKDRM_IOCTL_VERSION) rc = version(f, d, arg);
    else if (d->node != 0) rc = fail(ENOTTY);
    else if (req == RKDRM_IOCTL_GEM_CLOSE) {
        struct fbo *b = bo_of(f, fd, ((struct rkdrm_gem_close *)arg)->handle);
        if (b) f->st.bo_bytes -= b->size, bo_release(b);
        rc = b ? 0 : fail(EINVAL);
    } else if (f->o.driver == RKNPU_DRIVER_ROCKET) rc = rocket_ioctl(f, fd, req, arg);
    else rc = vendor_ioctl(f, fd, req, arg);
    int err = errno;
    pthread_mutex_unlock(&f->lock);
    errno = err;
    return rc;
}

static void *fake_mmap(void *ctx, void *addr, size_t len, int prot, int flags, int fd, uint64_t offset) {
    struct rknpu_fake *f = ctx;
    pthread_mutex_lock(&f->lock);
    void *p = MAP_FAILED;
    int err = EINVAL;
    for (int i = 0; fd_of(f, fd) && i < FAKE_MAX_BOS; i++) {
        struct fbo *b = &f->bos[i];
        if (b->used && b->fd == fd - FAKE_FD_BASE && b->offset == offset && len <= b->size) {
            p = mmap(addr, len, prot, (flags & MAP_FIXED) | MAP_SHARED, b->memfd, 0);
            err = errno;
        }
    }
    pthread_mutex_unlock(&f->lock);
    errno = err;
    return p;
}

static int fake_munmap(void *ctx, void *addr, size_t len) {
    (void)ctx;
    return munmap(addr, len);
}

static int fake_wait_fence(void *ctx, int fence_fd, int timeout_ms) {
    struct rknpu_fake *f = ctx;
    (void)timeout_ms;
    int i = fence_fd - FAKE_FENCE_BASE;
    if (i < 0 || i >= 64 || f->fences[i] < 0) return fail(EINVAL);
    return f->fences[i] ? fail(f->fences[i]) : 0; /* jobs run inside SUBMIT: signalled already */
}

struct rknpu_sys rknpu_fake_sys(struct rknpu_fake *f) {
    return (struct rknpu_sys){f, fake_open, fake_close, fake_ioctl, fake_mmap, fake_munmap, fake_wait_fence};
}
