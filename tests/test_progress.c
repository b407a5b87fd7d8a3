/* Progress on a file or pipe: whole lines (when it first shows, at most one
 * every 5 s, one at the end), never carriage-return frames that fill a log. */
#include "harness.h"

#include "progress.h" /* tools/ */

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int count(const char *s, const char *what) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

int main(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/progress.log", test_tmpdir());
    fflush(stderr);
    int saved = dup(2);
    if (!freopen(path, "w", stderr)) return 1;

    struct progress p;
    progress_begin(&p, "work", 100);
    progress_update(&p, 1); /* under a second: nothing */
    p.start_ns -= 2000000000ll; /* as if begun 2 s ago */
    progress_update(&p, 20); /* shows */
    for (int i = 21; i < 60; i++) progress_update(&p, (uint64_t)i); /* within 5 s of it: nothing */
    p.last_draw_ns -= 6000000000ll;
    progress_update(&p, 60); /* 6 s later: one more line */
    progress_end(&p);

    struct progress quiet;
    progress_begin(&quiet, "short", 10);
    progress_update(&quiet, 10);
    progress_end(&quiet); /* never shown, says nothing at the end either */

    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    size_t size = 0;
    char *log = read_whole_file(path, &size);
    CHECK(log != NULL);
    if (log) {
        fprintf(stdout, "%s", log);
        CHECKF(!strchr(log, '\r'), "carriage returns in a log");
        CHECKF(count(log, "\n") == 3, "%d lines, wanted 3", count(log, "\n"));
        CHECK(!strncmp(log, "work: 20.0%", 11));
        CHECK(strstr(log, "work: 60.0%") != NULL);
        CHECK(strstr(log, "work: done in") != NULL);
        CHECK(!strstr(log, "short"));
    }
    free(log);
    return test_finish();
}
