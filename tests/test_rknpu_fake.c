/* The fake kernels' own rules, through their UAPIs as a provider sees them:
 * what each driver refuses by name (a BO in the in and the out list, a BO
 * not handed to the device, a fresh rknpu buffer not synced TO|FROM then TO,
 * an empty subcore_task entry, int8 without a reset, a full window), its
 * windows and handles, and the warm-up of a fresh rknpu output buffer. */
#include "harness.h"

#include "dev/rknpu_fake.h"
#include "dev/rknpu_gen.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* One 8 x 64 x 64 matmul's buffers on a fake. */
struct rig {
    struct rknpu_fake *f;
    struct rknpu_sys sys;
    int fd;
    uint32_t h[5]; /* regcmd, feature, weights, output, tasks */
    uint64_t iova[5], obj[5];
    int8_t *host[5];
    int programs;
};

static const uint64_t sizes[5] = {4096, 8 * 64, 64 * 64, 8 * 64 * 4, 4096};

static int last_refusal(struct rig *r) {
    struct rknpu_fake_stats st;
    rknpu_fake_get_stats(r->f, &st);
    return st.last_refusal;
}

static void rig_program(struct rig *r) {
    struct rknpu_stream s = {.words = (uint64_t *)(void *)r->host[0], .cap = 4096 / 8, .base = (uint32_t)r->iova[0]};
    struct rknpu_matmul mm = {8, 64, 64, (uint32_t)r->iova[1], (uint32_t)r->iova[2], (uint32_t)r->iova[3]};
    for (int i = 0; i < 8 * 64; i++) r->host[1][i] = (int8_t)(i % 7 - 3);
    for (int i = 0; i < 64 * 64; i++) r->host[2][i] = (int8_t)(i % 5 - 2);
    CHECK(rknpu_emit_matmul(&s, &mm) == 0);
    rknpu_stream_link(&s, true);
    r->programs = s.programs;
}

static void rocket_rig(struct rig *r, uint64_t window) {
    memset(r, 0, sizeof *r);
    r->f = rknpu_fake_new(&(struct rknpu_fake_options){.driver = RKNPU_DRIVER_ROCKET, .window_bytes = window});
    r->sys = rknpu_fake_sys(r->f);
    CHECK(r->sys.open(r->sys.ctx, "/dev/accel/accel1", O_RDWR) < 0 && errno == ENOENT);
    r->fd = r->sys.open(r->sys.ctx, "/dev/accel/accel0", O_RDWR);
    char name[16] = "";
    struct rkdrm_version v = {.name = name, .name_len = sizeof name - 1};
    CHECK(r->sys.ioctl(r->sys.ctx, r->fd, RKDRM_IOCTL_VERSION, &v) == 0 && !strcmp(name, "rocket"));
    for (int i = 0; i < 4; i++) {
        struct rocket_create_bo c = {.size = (uint32_t)sizes[i]};
        CHECK(r->sys.ioctl(r->sys.ctx, r->fd, ROCKET_IOCTL_CREATE_BO, &c) == 0);
        r->h[i] = c.handle, r->iova[i] = c.dma_address;
        r->host[i] = r->sys.mmap(r->sys.ctx, NULL, sizes[i], PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, c.offset);
        CHECK(r->host[i] != MAP_FAILED && c.dma_address % 4096 == 0 && c.dma_address != 0);
    }
    rig_program(r);
}

static int rocket_run(struct rig *r, const uint32_t *in, uint32_t n_in, const uint32_t *out, uint32_t n_out) {
    struct rocket_task t = {(uint32_t)r->iova[0], RKNPU_PROGRAM_WORDS};
    struct rocket_job job = {(uintptr_t)&t, (uintptr_t)in, (uintptr_t)out, 1, sizeof t, n_in, n_out};
    struct rocket_submit s = {(uintptr_t)&job, 1, sizeof job, 0};
    int rc = r->sys.ioctl(r->sys.ctx, r->fd, ROCKET_IOCTL_SUBMIT, &s);
    struct rocket_prep_bo p = {.handle = out[0]};
    return rc != 0 ? -1 : r->sys.ioctl(r->sys.ctx, r->fd, ROCKET_IOCTL_PREP_BO, &p);
}

static void fini_all(struct rig *r) {
    for (int i = 0; i < 4; i++) {
        struct rocket_fini_bo f = {.handle = r->h[i]};
        CHECK(r->sys.ioctl(r->sys.ctx, r->fd, ROCKET_IOCTL_FINI_BO, &f) == 0);
    }
}

static int32_t expect_at(int m, int n) {
    int32_t acc = 0;
    for (int k = 0; k < 64; k++) acc += (int32_t)(((k / 16) * 8 * 16 + m * 16 + k % 16) % 7 - 3) * (int32_t)(pack_rknpu_offset(64, 64, n, k) % 5 - 2);
    return acc;
}

static bool output_right(struct rig *r) {
    for (int m = 0; m < 8; m++)
        for (int n = 0; n < 64; n++)
            if (rknpu_output_at((const int32_t *)(const void *)r->host[3], 8, 64, 64, m, n) != expect_at(m, n)) return false;
    return true;
}

static void test_rocket(void) {
    struct rig r;
    rocket_rig(&r, 0);
    uint32_t in[3] = {r.h[0], r.h[1], r.h[2]}, out[1] = {r.h[3]};
    /* not handed to the device */
    CHECK(rocket_run(&r, in, 3, out, 1) != 0 && errno == EIO && last_refusal(&r) == RKNPU_R_UNSYNCED);
    fini_all(&r);
    CHECK(rocket_run(&r, in, 3, out, 1) == 0 && output_right(&r));
    /* a BO in both lists */
    fini_all(&r);
    uint32_t in_out[4] = {r.h[0], r.h[1], r.h[2], r.h[3]};
    CHECK(rocket_run(&r, in_out, 4, out, 1) != 0 && last_refusal(&r) == RKNPU_R_IN_OUT);
    /* the weights left out of the in list: the model cannot read them */
    fini_all(&r);
    CHECK(rocket_run(&r, in, 2, out, 1) != 0 && last_refusal(&r) == RKNPU_R_BOUNDS);
    /* an unknown handle fails the ioctl itself */
    uint32_t bad[1] = {999};
    CHECK(rocket_run(&r, in, 3, bad, 1) != 0 && errno == ENOENT);
    /* a second fd has its own window: the same VAs, other BOs */
    int fd2 = r.sys.open(r.sys.ctx, "/dev/accel/accel0", O_RDWR);
    struct rocket_create_bo c = {.size = 4096};
    CHECK(fd2 >= 0 && r.sys.ioctl(r.sys.ctx, fd2, ROCKET_IOCTL_CREATE_BO, &c) == 0 && c.dma_address == r.iova[0]);
    struct rocket_fini_bo f = {.handle = r.h[0]};
    CHECK(r.sys.ioctl(r.sys.ctx, fd2, ROCKET_IOCTL_FINI_BO, &f) != 0 && errno == ENOENT);
    struct rkdrm_gem_close g = {.handle = c.handle};
    CHECK(r.sys.ioctl(r.sys.ctx, fd2, RKDRM_IOCTL_GEM_CLOSE, &g) == 0);
    CHECK(r.sys.close(r.sys.ctx, fd2) == 0);
    for (int i = 0; i < 4; i++) munmap(r.host[i], sizes[i]);
    r.sys.close(r.sys.ctx, r.fd);
    rknpu_fake_free(r.f);
    /* a full window */
    rocket_rig(&r, 64 << 10);
    struct rocket_create_bo big = {.size = 1 << 20};
    CHECK(r.sys.ioctl(r.sys.ctx, r.fd, ROCKET_IOCTL_CREATE_BO, &big) != 0 && errno == ENOSPC &&
          last_refusal(&r) == RKNPU_R_FULL_DOMAIN);
    for (int i = 0; i < 4; i++) munmap(r.host[i], sizes[i]);
    rknpu_fake_free(r.f);
}

static void vendor_rig(struct rig *r, bool sync) {
    memset(r, 0, sizeof *r);
    r->f = rknpu_fake_new(&(struct rknpu_fake_options){.driver = RKNPU_DRIVER_VENDOR, .window_bytes = 1 << 20, .domains = 2});
    r->sys = rknpu_fake_sys(r->f);
    int card0 = r->sys.open(r->sys.ctx, "/dev/dri/card0", O_RDWR);
    char name[16] = "";
    struct rkdrm_version v = {.name = name, .name_len = sizeof name - 1};
    CHECK(r->sys.ioctl(r->sys.ctx, card0, RKDRM_IOCTL_VERSION, &v) == 0 && !strcmp(name, "rockchip"));
    r->sys.close(r->sys.ctx, card0);
    r->fd = r->sys.open(r->sys.ctx, "/dev/dri/card1", O_RDWR);
    memset(name, 0, sizeof name);
    v = (struct rkdrm_version){.name = name, .name_len = sizeof name - 1};
    CHECK(r->sys.ioctl(r->sys.ctx, r->fd, RKDRM_IOCTL_VERSION, &v) == 0 && !strcmp(name, "rknpu") && v.version_minor == 9);
    for (int i = 0; i < 5; i++) {
        struct rknpu_mem_create c = {.flags = i == 4 ? RKNPU_MEM_TASKS : RKNPU_MEM_DATA, .size = sizes[i]};
        CHECK(r->sys.ioctl(r->sys.ctx, r->fd, RKNPU_IOCTL_MEM_CREATE, &c) == 0);
        struct rknpu_mem_map m = {.handle = c.handle};
        CHECK(r->sys.ioctl(r->sys.ctx, r->fd, RKNPU_IOCTL_MEM_MAP, &m) == 0);
        r->h[i] = c.handle, r->iova[i] = c.dma_addr, r->obj[i] = c.obj_addr;
        r->host[i] = r->sys.mmap(r->sys.ctx, NULL, sizes[i], PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, m.offset);
        struct rknpu_mem_sync s = {.flags = RKNPU_SYNC_TO_DEVICE | RKNPU_SYNC_FROM_DEVICE, .obj_addr = c.obj_addr,
                                   .size = sizes[i]};
        if (sync) CHECK(r->sys.ioctl(r->sys.ctx, r->fd, RKNPU_IOCTL_MEM_SYNC, &s) == 0);
        s.flags = RKNPU_SYNC_TO_DEVICE;
        CHECK(r->sys.ioctl(r->sys.ctx, r->fd, RKNPU_IOCTL_MEM_SYNC, &s) == 0); /* alone: not enough */
    }
    rig_program(r);
    struct rknpu_task *t = (struct rknpu_task *)(void *)r->host[4];
    t[0] = (struct rknpu_task){.enable_mask = 0xd, .int_mask = 0x300, .regcfg_amount = rknpu_regcfg_amount(RKNPU_PROGRAM_WORDS),
                               .regcmd_addr = r->iova[0]};
}

static int vendor_run(struct rig *r, int filled) {
    struct rknpu_submit s = {.flags = RKNPU_JOB_PC | RKNPU_JOB_PINGPONG | RKNPU_JOB_FENCE_OUT, .timeout = 6000,
                             .task_number = 1, .task_obj_addr = r->obj[4], .core_mask = 1, .fence_fd = -1};
    for (int i = 0; i < filled; i++) s.subcore_task[i] = (struct rknpu_subcore_task){0, 1};
    if (r->sys.ioctl(r->sys.ctx, r->fd, RKNPU_IOCTL_SUBMIT, &s) != 0) return -1;
    int rc = r->sys.wait_fence(r->sys.ctx, s.fence_fd, 1000);
    r->sys.close(r->sys.ctx, s.fence_fd);
    return rc;
}

static void vendor_free(struct rig *r) {
    for (int i = 0; i < 5; i++) munmap(r->host[i], sizes[i]);
    r->sys.close(r->sys.ctx, r->fd);
    rknpu_fake_free(r->f);
}

static void test_vendor(void) {
    struct rig r;
    vendor_rig(&r, true);
    struct rknpu_action reset = {.flags = RKNPU_ACT_RESET};
    CHECK(vendor_run(&r, 3) != 0 && last_refusal(&r) == RKNPU_R_NOT_RESET);
    CHECK(vendor_run(&r, 3) != 0 && errno == EIO); /* wedged until a reset */
    CHECK(r.sys.ioctl(r.sys.ctx, r.fd, RKNPU_IOCTL_ACTION, &reset) == 0);
    CHECK(vendor_run(&r, 2) != 0 && last_refusal(&r) == RKNPU_R_SUBCORE);
    /* the first submit into fresh output leaves it stale; the second lands */
    CHECK(vendor_run(&r, 3) == 0 && !output_right(&r));
    CHECK(vendor_run(&r, 3) == 0 && output_right(&r));
    /* a chain whose descriptor does not follow the trailer */
    struct rknpu_task *t = (struct rknpu_task *)(void *)r.host[4];
    t[1] = t[0];
    struct rknpu_submit s = {.flags = RKNPU_JOB_PC, .task_number = 2, .task_obj_addr = r.obj[4], .core_mask = 1,
                             .fence_fd = -1};
    for (int i = 0; i < 3; i++) s.subcore_task[i] = (struct rknpu_subcore_task){0, 2};
    CHECK(r.sys.ioctl(r.sys.ctx, r.fd, RKNPU_IOCTL_SUBMIT, &s) != 0 && last_refusal(&r) == RKNPU_R_CHAIN);
    /* a full domain: EFAULT, and the soft reset leaves int8 mode */
    struct rknpu_mem_create c = {.flags = RKNPU_MEM_DATA, .size = 2 << 20};
    CHECK(r.sys.ioctl(r.sys.ctx, r.fd, RKNPU_IOCTL_MEM_CREATE, &c) != 0 && errno == EFAULT &&
          last_refusal(&r) == RKNPU_R_FULL_DOMAIN);
    CHECK(vendor_run(&r, 3) != 0 && last_refusal(&r) == RKNPU_R_NOT_RESET);
    CHECK(r.sys.ioctl(r.sys.ctx, r.fd, RKNPU_IOCTL_ACTION, &reset) == 0);
    CHECK(vendor_run(&r, 3) == 0 && output_right(&r));
    /* domain 1 is a window of its own; a domain that does not exist is refused */
    c = (struct rknpu_mem_create){.flags = RKNPU_MEM_DATA, .size = 4096, .iommu_domain_id = 1};
    CHECK(r.sys.ioctl(r.sys.ctx, r.fd, RKNPU_IOCTL_MEM_CREATE, &c) == 0 && c.dma_addr == r.iova[0]);
    c.iommu_domain_id = 2;
    CHECK(r.sys.ioctl(r.sys.ctx, r.fd, RKNPU_IOCTL_MEM_CREATE, &c) != 0 && errno == EINVAL);
    vendor_free(&r);
    /* buffers synced TO only: the submit wedges */
    vendor_rig(&r, false);
    CHECK(r.sys.ioctl(r.sys.ctx, r.fd, RKNPU_IOCTL_ACTION, &reset) == 0);
    CHECK(vendor_run(&r, 3) != 0);
    vendor_free(&r);
}

int main(void) {
    test_rocket();
    test_vendor();
    for (int c = 0; c < RKNPU_N_REFUSALS; c++) CHECK(strcmp(rknpu_refusal_name(c), "unknown") != 0);
    return test_finish();
}
