/* The built-in default model: the `small` synth preset, made once and cached
 * (see default_model_path() in session.c). */
#include "cli.h"
#include "session.h"

#include "progress.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* mkdir -p of the directory part of path. */
static int make_parents(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return 0;
}

int make_default_model(const char *path) {
    struct moex_synth_params p;
    struct progress bar;
    moex_synth_params_default(&p);
    p.preset = "small";
    p.progress = progress_report;
    p.user = &bar;
    if (make_parents(path) != 0) return cli_fail("cannot create the directory of %s: %s", path, strerror(errno));
    /* moex_synth_write renames a finished file into place: an interrupted run
     * never leaves a half model where the next run would find it. */
    fprintf(stderr, "moex: making the built-in default model (synth preset 'small') in %s\n", path);
    if (moex_synth_write(&p, path) != 0) return cli_fail("%s", moex_last_error());
    return 0;
}
