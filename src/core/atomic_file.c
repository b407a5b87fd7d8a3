#include "core/atomic_file.h"

#include "core/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { MAX_PENDING = 16, PENDING_PATH = 4096, NAME_TRIES = 100 };

/* Named temporaries in flight, for atomic_file_unlink_pending(): a slot is
 * claimed (1), filled, then published (2); a handler reads published ones. */
static _Atomic int pending_state[MAX_PENDING];
static char pending_path[MAX_PENDING][PENDING_PATH];
static atomic_bool tmpfile_allowed = true;
static atomic_uint name_counter;

struct atomic_file {
    char *path;     /* the destination as given (for messages) */
    char *target;   /* what is replaced: path, or the file a symlink at path names */
    char *dir;      /* target's directory */
    char *tmp;      /* the temporary's name; NULL while it has none */
    int fd, slot;   /* slot: pending_path index of tmp, -1 */
    FILE *stream;
    bool direct;    /* not a regular file: written in place */
};

static int pending_add(const char *name) {
    if (strlen(name) >= PENDING_PATH) return -1;
    for (int i = 0; i < MAX_PENDING; i++) {
        int free_slot = 0;
        if (!atomic_compare_exchange_strong(&pending_state[i], &free_slot, 1)) continue;
        memcpy(pending_path[i], name, strlen(name) + 1);
        atomic_store(&pending_state[i], 2);
        return i;
    }
    return -1; /* more outputs in flight than slots: only a signal's cleanup is lost */
}

static void pending_remove(int slot) {
    if (slot >= 0) atomic_store(&pending_state[slot], 0);
}

void atomic_file_unlink_pending(void) {
    for (int i = 0; i < MAX_PENDING; i++)
        if (atomic_load(&pending_state[i]) == 2) unlink(pending_path[i]);
}

void atomic_file_allow_tmpfile(bool allow) { atomic_store(&tmpfile_allowed, allow); }

/* Sets "PATH: what: <errno text>" from the errno of the failed call. */
static int fail(const struct atomic_file *f, const char *what) {
    int e = errno;
    return moex_errorf("%s: %s: %s", f->path, what, e ? strerror(e) : "unknown error");
}

/* DIR/.BASE.tmp.PID.N: hidden, unique in this process, and within NAME_MAX. */
static char *temp_name(const struct atomic_file *f) {
    const char *slash = strrchr(f->target, '/');
    const char *base = slash ? slash + 1 : f->target;
    size_t n = strlen(f->dir) + strlen(base) + 64;
    char *name = malloc(n);
    if (name)
        snprintf(name, n, "%s/.%.200s.tmp.%ld.%u", f->dir, base, (long)getpid(),
                 atomic_fetch_add(&name_counter, 1));
    return name;
}

/* Gives the temporary a fresh name: make(name) creates it, errno EEXIST on a clash. */
static int name_temp(struct atomic_file *f, int (*make)(struct atomic_file *, const char *)) {
    for (int tries = 0; tries < NAME_TRIES; tries++) {
        char *name = temp_name(f);
        if (!name) return moex_errorf("%s: out of memory", f->path);
        int slot = pending_add(name);
        if (make(f, name) == 0) {
            f->tmp = name;
            f->slot = slot;
            return 0;
        }
        int e = errno;
        pending_remove(slot);
        free(name);
        errno = e;
        if (e != EEXIST) return -1;
    }
    return -1;
}

static int make_named(struct atomic_file *f, const char *name) {
    f->fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    return f->fd < 0 ? -1 : 0;
}

static int link_unnamed(struct atomic_file *f, const char *name) {
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", f->fd);
    return linkat(AT_FDCWD, proc, AT_FDCWD, name, AT_SYMLINK_FOLLOW);
}

static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

struct atomic_file *atomic_file_create(const char *path) {
    if (!path || !*path) {
        moex_errorf("empty output path");
        return NULL;
    }
    struct atomic_file *f = calloc(1, sizeof *f);
    if (!f) {
        moex_errorf("%s: out of memory", path);
        return NULL;
    }
    f->fd = -1;
    f->slot = -1;
    struct stat st;
    char *real = lstat(path, &st) == 0 && S_ISLNK(st.st_mode) ? realpath(path, NULL) : NULL;
    f->path = strdup(path);
    f->target = real ? real : strdup(path);
    f->dir = f->target ? dir_of(f->target) : NULL;
    if (!f->path || !f->target || !f->dir) {
        moex_errorf("%s: out of memory", path);
        atomic_file_discard(f);
        return NULL;
    }
    bool exists = stat(f->target, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
        moex_errorf("%s: is a directory", path);
        atomic_file_discard(f);
        return NULL;
    }
    if (exists && !S_ISREG(st.st_mode)) {
        f->direct = true;
        f->fd = open(f->target, O_WRONLY | O_TRUNC | O_CLOEXEC);
        if (f->fd < 0) {
            fail(f, "cannot open for writing");
            atomic_file_discard(f);
            return NULL;
        }
        return f;
    }
    if (atomic_load(&tmpfile_allowed) && access("/proc/self/fd", X_OK) == 0) {
        f->fd = open(f->dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
        /* Filesystems (and kernels) without O_TMPFILE say so with these. */
        if (f->fd < 0 && errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
            fail(f, "cannot create");
            atomic_file_discard(f);
            return NULL;
        }
    }
    if (f->fd < 0 && name_temp(f, make_named) != 0) {
        fail(f, "cannot create");
        atomic_file_discard(f);
        return NULL;
    }
    /* A replaced file keeps its permissions. */
    if (exists && fchmod(f->fd, st.st_mode & 07777) != 0) { /* the umask's mode stays */ }
    return f;
}

int atomic_file_fd(const struct atomic_file *f) { return f->fd; }

const char *atomic_file_path(const struct atomic_file *f) { return f->path; }

FILE *atomic_file_stream(struct atomic_file *f) {
    if (!f->stream && !(f->stream = fdopen(f->fd, "wb"))) fail(f, "cannot open a stream");
    return f->stream;
}

int atomic_file_write(struct atomic_file *f, const void *data, size_t n) {
    const char *p = data;
    while (n > 0) {
        ssize_t k = write(f->fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return fail(f, "write failed");
        if (k == 0) return errno = ENOSPC, fail(f, "write failed");
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

int atomic_file_commit(struct atomic_file *f) {
    if (!f) return moex_errorf("no output file");
    int rc = 0;
    errno = 0;
    if (f->stream && (fflush(f->stream) != 0 || ferror(f->stream))) rc = fail(f, "write failed");
    if (rc == 0 && !f->direct && fsync(f->fd) != 0) rc = fail(f, "cannot sync");
    if (rc == 0 && !f->direct && !f->tmp && name_temp(f, link_unnamed) != 0)
        rc = fail(f, "cannot name the temporary");
    int closed = f->stream ? fclose(f->stream) : close(f->fd);
    f->stream = NULL;
    f->fd = -1;
    if (closed != 0 && rc == 0) rc = fail(f, "write failed");
    if (rc == 0 && !f->direct) {
        if (rename(f->tmp, f->target) != 0) {
            rc = fail(f, "cannot rename the temporary into place");
        } else {
            pending_remove(f->slot);
            free(f->tmp);
            f->tmp = NULL;
            /* The rename itself survives a crash once the directory is synced. */
            int d = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (d >= 0) {
                if (fsync(d) != 0) { /* some filesystems cannot sync a directory */ }
                close(d);
            }
        }
    }
    atomic_file_discard(f);
    return rc;
}

void atomic_file_discard(struct atomic_file *f) {
    if (!f) return;
    if (f->stream) fclose(f->stream);
    else if (f->fd >= 0) close(f->fd);
    if (f->tmp) unlink(f->tmp);
    pending_remove(f->slot);
    free(f->tmp);
    free(f->dir);
    free(f->target);
    free(f->path);
    free(f);
}
