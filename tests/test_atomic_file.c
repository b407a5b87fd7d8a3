/* Output files (src/core/atomic_file.h): a commit replaces the file whole,
 * keeping a reader's old inode; a discard, a failed write (RLIMIT_FSIZE), a
 * signal or a kill leaves the old file byte for byte and no temporary, with
 * O_TMPFILE and with named temporaries; errors name the path and errno. */
#include "harness.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/trace.h"
#include "gguf/gguf.h"
#include "moe/routing_stats.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char old_text[] = "the old file, which must survive";

/* A fresh directory for one case, holding `name` with old_text when name is given. */
static const char *case_dir(const char *label, const char *name, char *file, size_t size) {
    static char dir[2048];
    snprintf(dir, sizeof dir, "%.1900s/%.100s", test_tmpdir(), label);
    mkdir(dir, 0755);
    snprintf(file, size, "%s/%s", dir, name ? name : "out");
    if (name) {
        FILE *f = fopen(file, "wb");
        if (f) { fputs(old_text, f); fclose(f); }
    }
    return dir;
}

static int dir_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static int has_temp(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));) n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

static int holds(const char *path, const char *text) {
    size_t n = 0;
    char *data = read_whole_file(path, &n);
    int same = data && n == strlen(text) && memcmp(data, text, n) == 0;
    free(data);
    return same;
}

static void test_commit_replaces(void) {
    char path[4096];
    const char *dir = case_dir("commit", "out", path, sizeof path);
    chmod(path, 0600);
    FILE *reader = fopen(path, "rb");
    struct atomic_file *f = atomic_file_create(path);
    CHECK(f != NULL);
    if (!f) return;
    CHECK(holds(path, old_text)); /* nothing changes before the commit */
    CHECK(atomic_file_write(f, "new ", 4) == 0);
    FILE *s = atomic_file_stream(f);
    CHECK(s && fputs("contents", s) >= 0);
    CHECK(atomic_file_commit(f) == 0);
    CHECK(holds(path, "new contents"));
    CHECK(dir_entries(dir) == 1);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600); /* a replaced file keeps its mode */
    /* A reader that had the old file open still reads the old bytes. */
    char buf[64] = {0};
    CHECK(reader && fread(buf, 1, sizeof buf - 1, reader) == strlen(old_text) && !strcmp(buf, old_text));
    if (reader) fclose(reader);
}

static void test_discard_and_errors(void) {
    char path[4096];
    const char *dir = case_dir("discard", "out", path, sizeof path);
    struct atomic_file *f = atomic_file_create(path);
    CHECK(f && atomic_file_write(f, "half", 4) == 0);
    atomic_file_discard(f);
    CHECK(holds(path, old_text) && dir_entries(dir) == 1);

    char missing[4200];
    snprintf(missing, sizeof missing, "%s/no/such/dir/out", dir);
    CHECK(atomic_file_create(missing) == NULL && strstr(moex_error(), missing) &&
          strstr(moex_error(), strerror(ENOENT)));
    CHECK(atomic_file_create(dir) == NULL && strstr(moex_error(), "is a directory"));
    CHECK(dir_entries(dir) == 1);

    /* Not a regular file: written in place, never renamed over. */
    f = atomic_file_create("/dev/null");
    CHECK(f && atomic_file_write(f, "x", 1) == 0 && atomic_file_commit(f) == 0);
    struct stat st;
    CHECK(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode));

    /* A symlink stays a symlink; the file it names is replaced. */
    char link[4200];
    snprintf(link, sizeof link, "%s/link", dir);
    CHECK(symlink(path, link) == 0);
    f = atomic_file_create(link);
    CHECK(f && atomic_file_write(f, "via link", 8) == 0 && atomic_file_commit(f) == 0);
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode) && holds(path, "via link"));
    CHECK(dir_entries(dir) == 2);
}

/* A reader's mapping of the old file stays valid when a shorter file replaces it. */
static void test_mapping_survives(void) {
    char path[4096];
    case_dir("mapped", NULL, path, sizeof path);
    static char big[1 << 16];
    memset(big, 7, sizeof big);
    struct atomic_file *f = atomic_file_create(path);
    CHECK(f && atomic_file_write(f, big, sizeof big) == 0 && atomic_file_commit(f) == 0);
    FILE *in = fopen(path, "rb");
    unsigned char *map = in ? mmap(NULL, sizeof big, PROT_READ, MAP_SHARED, fileno(in), 0) : MAP_FAILED;
    CHECK(map != MAP_FAILED);
    f = atomic_file_create(path);
    CHECK(f && atomic_file_write(f, "short", 5) == 0 && atomic_file_commit(f) == 0);
    if (map != MAP_FAILED) {
        CHECK(map[sizeof big - 1] == 7); /* truncated in place, this would be SIGBUS */
        munmap(map, sizeof big);
    }
    if (in) fclose(in);
}

/* Runs fn(path) in a child; returns its wait status. */
static int in_child(void (*fn)(const char *), const char *path) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        fn(path);
        _exit(0);
    }
    int status = 0;
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    return status;
}

static bool child_named;
static int child_signal;

static void child_handler(int sig) {
    atomic_file_unlink_pending();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Writes half of a file, checks that its temporary is where it should be,
 * then dies of child_signal. Exit 3: the temporary was not as expected. */
static void die_mid_write(const char *path) {
    atomic_file_allow_tmpfile(!child_named);
    signal(SIGINT, child_handler);
    struct atomic_file *f = atomic_file_create(path);
    if (!f || atomic_file_write(f, "half of it", 10) != 0) _exit(2);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = 0;
    if (has_temp(dir) != (child_named ? 1 : 0)) _exit(3);
    raise(child_signal);
    _exit(4);
}

static void test_signals(void) {
    for (int named = 0; named < 2; named++) {
        int sigs[2] = { SIGINT, SIGKILL };
        for (int s = 0; s < 2; s++) {
            if (named && sigs[s] == SIGKILL) continue; /* a named temporary cannot outlive SIGKILL's cleanup */
            char label[64], path[4096];
            snprintf(label, sizeof label, "signal-%s-%d", named ? "named" : "tmpfile", sigs[s]);
            const char *dir = case_dir(label, "out", path, sizeof path);
            child_named = named;
            child_signal = sigs[s];
            int status = in_child(die_mid_write, path);
            CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == sigs[s], "%s: status %#x", label, status);
            CHECKF(holds(path, old_text) && dir_entries(dir) == 1, "%s: old file changed or temporary left", label);
        }
    }
}

/* Under RLIMIT_FSIZE with SIGXFSZ ignored, each writer fails with EFBIG. */
static void limit_size(void) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit r = { 16, 16 };
    setrlimit(RLIMIT_FSIZE, &r);
}

static char child_message[1024];

static void report(int ok) {
    /* The message goes back through the exit status: 0 when it named EFBIG. */
    _exit(ok && strstr(moex_error(), strerror(EFBIG)) ? 0 : 5);
}

static void starve_raw(const char *path) {
    limit_size();
    atomic_file_allow_tmpfile(!child_named);
    struct atomic_file *f = atomic_file_create(path);
    if (!f) _exit(2);
    int failed = atomic_file_write(f, child_message, sizeof child_message) != 0;
    atomic_file_discard(f);
    report(failed);
}

static void starve_stream(const char *path) {
    limit_size();
    struct atomic_file *f = atomic_file_create(path);
    FILE *s = f ? atomic_file_stream(f) : NULL;
    if (!s) _exit(2);
    fwrite(child_message, 1, 64, s); /* buffered: the failure comes at the commit */
    report(atomic_file_commit(f) != 0);
}

static void starve_gguf(const char *path) {
    limit_size();
    struct gguf_writer *w = gguf_writer_new();
    gguf_set_str(w, "general.name", "a name that does not fit in 16 bytes");
    int64_t ne[1] = { 32 };
    gguf_add_tensor(w, "t", 0 /* f32 */, 1, ne);
    float data[32] = {0};
    int failed = gguf_writer_begin(w, path) != 0 || gguf_writer_write_data(w, data, sizeof data) != 0 ||
                 gguf_writer_finish(w) != 0;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", moex_error());
    gguf_writer_free(w);
    moex_errorf("%s", msg);
    report(failed);
}

static void starve_stats(const char *path) {
    limit_size();
    struct routing_stats *s = routing_stats_new(2, 8, 2, "m");
    report(s && routing_stats_write(s, path) != 0);
}

static void starve_trace(const char *path) {
    limit_size();
    struct trace *t = trace_new(16);
    trace_lane(t, 0, "cpu 0");
    trace_event(t, 0, "an event", 0, 1000);
    report(t && trace_write(t, path) != 0);
}

static void test_starved(void) {
    memset(child_message, 'x', sizeof child_message);
    struct { const char *label; void (*fn)(const char *); bool named; } cases[] = {
        { "efbig-raw", starve_raw, false },     { "efbig-raw-named", starve_raw, true },
        { "efbig-stream", starve_stream, false }, { "efbig-gguf", starve_gguf, false },
        { "efbig-stats", starve_stats, false },   { "efbig-trace", starve_trace, false },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char path[4096];
        const char *dir = case_dir(cases[i].label, "out", path, sizeof path);
        child_named = cases[i].named;
        int status = in_child(cases[i].fn, path);
        CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: status %#x (5: no EFBIG message)", cases[i].label,
               status);
        CHECKF(holds(path, old_text) && dir_entries(dir) == 1, "%s: old file changed or temporary left",
               cases[i].label);
    }
}

int main(void) {
    test_commit_replaces();
    test_discard_and_errors();
    test_mapping_survives();
    test_signals();
    test_starved();
    return test_finish();
}
