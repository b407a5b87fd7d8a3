#include "outputs.h"

#include "cli.h"
#include "session.h"

#include "moex_tools.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void on_fatal_signal(int sig) {
    moex_file_unlink_pending();
    raise(sig); /* SA_RESETHAND: the default action, once the handler returns */
}

void outputs_install_signal_handlers(void) {
    static const int fatal[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE }; /* SIGPIPE: `moex run --trace T | head` */
    for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++) {
        struct sigaction old, sa;
        if (sigaction(fatal[i], NULL, &old) != 0 || old.sa_handler != SIG_DFL) continue; /* nohup keeps its way */
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_fatal_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND;
        sigaction(fatal[i], &sa, NULL);
    }
    signal(SIGXFSZ, SIG_IGN);
}

int outputs_flush_stdout(int status) {
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return status;
    if (errno) cli_fail("standard output: write failed: %s", strerror(errno));
    else cli_fail("standard output: write failed");
    return status ? status : 1;
}

/* The directory resolved, the last name kept: one spelling per place. */
static void canonical(const char *path, char *out, size_t size) {
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX], real[PATH_MAX];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    if (realpath(dir, real)) snprintf(out, size, "%s/%s", real, slash ? slash + 1 : path);
    else snprintf(out, size, "%s", path);
}

static bool same_file(const char *a, const char *b) {
    struct stat sa, sb;
    bool has_a = stat(a, &sa) == 0, has_b = stat(b, &sb) == 0;
    if (has_a && has_b) return S_ISREG(sa.st_mode) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (has_a || has_b) return false;
    char ca[2 * PATH_MAX], cb[2 * PATH_MAX];
    canonical(a, ca, sizeof ca);
    canonical(b, cb, sizeof cb);
    return strcmp(ca, cb) == 0;
}

int outputs_check(const char *out_opt, const char *out, const char *in_opt, const char *in) {
    if (!out || !in || !same_file(out, in)) return 0;
    cli_fail("%s %s and %s %s are the same file: an output never overwrites an input", out_opt, out, in_opt, in);
    return 2;
}

int outputs_check_session(const struct session_opts *o, const char *out_opt, const char *out) {
    const char *model = o->model_path ? o->model_path : default_model_path();
    char next_to_model[4096];
    const char *pack = o->experts.pack_path;
    bool picks_pack = !o->experts.no_pack; /* as session_open would: for the device and the CPU's layout */
    if (!pack && picks_pack && moex_pack_path_for(model, next_to_model, sizeof next_to_model) == 0) pack = next_to_model;
    int rc = outputs_check(out_opt, out, o->model_path ? "-m" : "the default model", model);
    if (!rc) rc = outputs_check(out_opt, out, "--stats", o->experts.stats_path);
    if (!rc) rc = outputs_check(out_opt, out, o->experts.pack_path ? "--pack" : "the model's pack file", pack);
    if (!rc && out != o->trace_path) rc = outputs_check(out_opt, out, "--trace", o->trace_path);
    return rc;
}
