/* The kernel's side of the provider call table (rknpu_uapi.h). */
#include "dev/rknpu_uapi.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

static int sys_open(void *ctx, const char *path, int flags) {
    (void)ctx;
    return open(path, flags | O_CLOEXEC);
}

static int sys_close(void *ctx, int fd) {
    (void)ctx;
    return close(fd);
}

static int sys_ioctl(void *ctx, int fd, unsigned long request, void *arg) {
    (void)ctx;
    int rc;
    do rc = ioctl(fd, request, arg);
    while (rc == -1 && (errno == EINTR || errno == EAGAIN));
    return rc;
}

static void *sys_mmap(void *ctx, void *addr, size_t len, int prot, int flags, int fd, uint64_t offset) {
    (void)ctx;
    return mmap(addr, len, prot, flags, fd, (off_t)offset);
}

static int sys_munmap(void *ctx, void *addr, size_t len) {
    (void)ctx;
    return munmap(addr, len);
}

static int sys_wait_fence(void *ctx, int fence_fd, int timeout_ms) {
    (void)ctx;
    struct pollfd p = {.fd = fence_fd, .events = POLLIN};
    int rc;
    do rc = poll(&p, 1, timeout_ms);
    while (rc == -1 && errno == EINTR);
    if (rc == 0) errno = ETIMEDOUT;
    return rc > 0 && !(p.revents & (POLLERR | POLLNVAL)) ? 0 : -1;
}

const struct rknpu_sys rknpu_sys_kernel = {NULL, sys_open, sys_close, sys_ioctl, sys_mmap, sys_munmap, sys_wait_fence};
