/* A progress bar with ETA on stderr, shown only for work that takes longer
 * than a second. */
#ifndef MOEX_PROGRESS_H
#define MOEX_PROGRESS_H

#include <stdint.h>

struct progress {
    const char *label;
    uint64_t total;
    int64_t start_ns, last_draw_ns;
    int drawn;
};

void progress_begin(struct progress *p, const char *label, uint64_t total);
void progress_update(struct progress *p, uint64_t done);
void progress_end(struct progress *p);

#endif
