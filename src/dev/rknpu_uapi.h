/* The two kernel interfaces of the RK3588 NPU, written here from their public
 * descriptions (RKNPU.md 1 and 3) so that moex builds without kernel
 * headers: the upstream `rocket` accel driver (Linux >= 6.18,
 * include/uapi/drm/rocket_accel.h) and the vendor `rknpu` DRM driver
 * (rockchip-linux drivers/rknpu/include/rknpu_ioctl.h, 0.9.x). Both are DRM
 * devices: the ioctls are DRM_COMMAND_BASE + n on the DRM ioctl type 'd'.
 *
 * Every call goes through struct rknpu_sys, one small table: the real one
 * calls the kernel, the fake one (rknpu_fake.c) is the register-level model. */
#ifndef MOEX_RKNPU_UAPI_H
#define MOEX_RKNPU_UAPI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>

#define RKNPU_DRM_TYPE 'd'
#define RKNPU_DRM_COMMAND_BASE 0x40

/* DRM core: the driver's name and version, and closing a GEM object. */
struct rkdrm_version {
    int version_major, version_minor, version_patchlevel;
    size_t name_len;
    char *name;
    size_t date_len;
    char *date;
    size_t desc_len;
    char *desc;
};
struct rkdrm_gem_close {
    uint32_t handle, pad;
};
#define RKDRM_IOCTL_VERSION _IOWR(RKNPU_DRM_TYPE, 0x00, struct rkdrm_version)
#define RKDRM_IOCTL_GEM_CLOSE _IOW(RKNPU_DRM_TYPE, 0x09, struct rkdrm_gem_close)

/* ---- rocket (torvalds/linux f088104d, RKNPU.md 1) ---- */
struct rocket_create_bo {
    uint32_t size;        /* in */
    uint32_t handle;      /* out */
    uint64_t dma_address; /* out: the NPU VA, private to the fd */
    uint64_t offset;      /* out: for mmap on the fd */
};
struct rocket_task {
    uint32_t regcmd;       /* NPU VA of the first command word */
    uint32_t regcmd_count; /* words, the trailer included */
};
struct rocket_job {
    uint64_t tasks, in_bo_handles, out_bo_handles; /* user pointers */
    uint32_t task_count, task_struct_size, in_bo_handle_count, out_bo_handle_count;
};
struct rocket_submit {
    uint64_t jobs;
    uint32_t job_count, job_struct_size;
    uint64_t reserved;
};
struct rocket_prep_bo {
    uint32_t handle, reserved;
    int64_t timeout_ns; /* absolute, CLOCK_MONOTONIC */
};
struct rocket_fini_bo {
    uint32_t handle, reserved;
};
#define ROCKET_IOCTL_CREATE_BO _IOWR(RKNPU_DRM_TYPE, RKNPU_DRM_COMMAND_BASE + 0x00, struct rocket_create_bo)
#define ROCKET_IOCTL_SUBMIT _IOW(RKNPU_DRM_TYPE, RKNPU_DRM_COMMAND_BASE + 0x01, struct rocket_submit)
#define ROCKET_IOCTL_PREP_BO _IOW(RKNPU_DRM_TYPE, RKNPU_DRM_COMMAND_BASE + 0x02, struct rocket_prep_bo)
#define ROCKET_IOCTL_FINI_BO _IOW(RKNPU_DRM_TYPE, RKNPU_DRM_COMMAND_BASE + 0x03, struct rocket_fini_bo)

/* ---- rknpu (vendor 0.9.x, RKNPU.md 3 and 8) ---- */
enum {
    RKNPU_MEM_NON_CONTIGUOUS = 1 << 0,
    RKNPU_MEM_CACHEABLE = 1 << 1,
    RKNPU_MEM_KERNEL_MAPPING = 1 << 3,
    RKNPU_MEM_IOMMU_LIMIT_IOVA_ALIGNMENT = 1 << 10,
    RKNPU_MEM_DATA = 0x403, /* weights, features, outputs (ork-driver) */
    RKNPU_MEM_TASKS = 0x40b, /* task descriptors: the kernel reads them */
};
enum { RKNPU_SYNC_TO_DEVICE = 1 << 0, RKNPU_SYNC_FROM_DEVICE = 1 << 1 };
enum {
    RKNPU_JOB_PC = 1 << 0,
    RKNPU_JOB_NONBLOCK = 1 << 1,
    RKNPU_JOB_PINGPONG = 1 << 2,
    RKNPU_JOB_FENCE_IN = 1 << 3,
    RKNPU_JOB_FENCE_OUT = 1 << 4,
};
/* ACTION codes (vendor e_rknpu_action; not verified on every version:
 * bench/rknpu-check.sh prints what the board answers). */
enum {
    RKNPU_GET_HW_VERSION = 0,
    RKNPU_GET_DRV_VERSION = 1,
    RKNPU_ACT_RESET = 6,
    RKNPU_POWER_ON = 20,
    RKNPU_POWER_OFF = 21,
};
struct rknpu_mem_create {
    uint32_t handle, flags;
    uint64_t size, obj_addr, dma_addr, sram_size;
    int32_t iommu_domain_id;
    uint32_t core_mask;
};
struct rknpu_mem_map {
    uint32_t handle, reserved;
    uint64_t offset;
};
struct rknpu_mem_destroy {
    uint32_t handle, reserved;
    uint64_t obj_addr;
};
struct rknpu_mem_sync {
    uint32_t flags, reserved;
    uint64_t obj_addr, offset, size;
};
struct rknpu_subcore_task {
    uint32_t task_start, task_number;
};
struct rknpu_submit {
    uint32_t flags, timeout, task_start, task_number, task_counter;
    int32_t priority;
    uint64_t task_obj_addr;
    uint32_t iommu_domain_id, reserved;
    uint64_t task_base_addr;
    int64_t hw_elapse_time;
    uint32_t core_mask;
    int32_t fence_fd;
    struct rknpu_subcore_task subcore_task[5];
};
/* One task descriptor, in a KERNEL_MAPPING buffer. */
struct rknpu_task {
    uint32_t flags, op_idx, enable_mask, int_mask, int_clear, int_status, regcfg_amount, regcfg_offset;
    uint64_t regcmd_addr;
} __attribute__((packed));
struct rknpu_action {
    uint32_t flags, value;
};
#define RKNPU_IOCTL_ACTION _IOWR(RKNPU_DRM_TYPE, RKNPU_DRM_COMMAND_BASE + 0x00, struct rknpu_action)
#define RKNPU_IOCTL_SUBMIT _IOWR(RKNPU_DRM_TYPE, RKNPU_DRM_COMMAND_BASE + 0x01, struct rknpu_submit)
#define RKNPU_IOCTL_MEM_CREATE _IOWR(RKNPU_DRM_TYPE, RKNPU_DRM_COMMAND_BASE + 0x02, struct rknpu_mem_create)
#define RKNPU_IOCTL_MEM_MAP _IOWR(RKNPU_DRM_TYPE, RKNPU_DRM_COMMAND_BASE + 0x03, struct rknpu_mem_map)
#define RKNPU_IOCTL_MEM_DESTROY _IOWR(RKNPU_DRM_TYPE, RKNPU_DRM_COMMAND_BASE + 0x04, struct rknpu_mem_destroy)
#define RKNPU_IOCTL_MEM_SYNC _IOWR(RKNPU_DRM_TYPE, RKNPU_DRM_COMMAND_BASE + 0x05, struct rknpu_mem_sync)

/* The system calls a provider makes: -1 with errno set on failure, as the
 * kernel's. */
struct rknpu_sys {
    void *ctx;
    int (*open)(void *ctx, const char *path, int flags);
    int (*close)(void *ctx, int fd);
    int (*ioctl)(void *ctx, int fd, unsigned long request, void *arg);
    void *(*mmap)(void *ctx, void *addr, size_t len, int prot, int flags, int fd, uint64_t offset);
    int (*munmap)(void *ctx, void *addr, size_t len);
    int (*wait_fence)(void *ctx, int fence_fd, int timeout_ms); /* 0 when signalled */
};

/* The kernel's. */
extern const struct rknpu_sys rknpu_sys_kernel;

#endif
