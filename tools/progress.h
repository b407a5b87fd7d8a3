/* Progress with ETA on stderr, shown only for work that takes longer than a
 * second: a bar redrawn in place on a terminal; on a file or a pipe a line
 * when it first shows, at most one every 5 s, and one at the end. */
#ifndef MOEX_PROGRESS_H
#define MOEX_PROGRESS_H

#include <stdint.h>

struct progress {
    const char *label;
    uint64_t total;
    int64_t start_ns, last_draw_ns;
    int drawn;
    int tty; /* stderr is a terminal */
};

void progress_begin(struct progress *p, const char *label, uint64_t total);
void progress_update(struct progress *p, uint64_t done);
void progress_end(struct progress *p);
/* A moex_progress_fn drawing the bar (struct progress) user points to: done
 * 0 begins it, done == total ends it. */
void progress_report(void *user, const char *label, uint64_t done, uint64_t total);

#endif
