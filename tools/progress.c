#include "progress.h"

#include "cli.h"

#include <stdio.h>
#include <unistd.h>

/* Nothing is shown for work done within this, and a log gets a line at most
 * this often. */
#define SHOW_AFTER_NS 1000000000ll
#define TTY_EVERY_NS 200000000ll
#define LOG_EVERY_NS 5000000000ll

void progress_begin(struct progress *p, const char *label, uint64_t total) {
    p->label = label;
    p->total = total ? total : 1;
    p->start_ns = p->last_draw_ns = cli_time_ns();
    p->drawn = 0;
    p->tty = isatty(fileno(stderr));
}

static void draw(struct progress *p, uint64_t done, int64_t now) {
    double frac = (double)done / (double)p->total;
    if (frac > 1) frac = 1;
    double elapsed = (double)(now - p->start_ns) * 1e-9;
    double eta = frac > 0 ? elapsed * (1 - frac) / frac : 0;
    if (p->tty) {
        int width = 30, filled = (int)(frac * width);
        char bar[32];
        for (int i = 0; i < width; i++) bar[i] = i < filled ? '#' : '.';
        bar[width] = 0;
        fprintf(stderr, "\r%s [%s] %5.1f%%  %5.0fs elapsed  ETA %5.0fs ", p->label, bar, frac * 100, elapsed, eta);
    } else {
        /* A file or a pipe: whole lines, never carriage-return frames. */
        fprintf(stderr, "%s: %.1f%% after %.0f s, ETA %.0f s\n", p->label, frac * 100, elapsed, eta);
    }
    fflush(stderr);
    p->drawn = 1;
    p->last_draw_ns = now;
}

void progress_update(struct progress *p, uint64_t done) {
    int64_t now = cli_time_ns();
    if (now - p->start_ns < SHOW_AFTER_NS) return;
    if (p->drawn && now - p->last_draw_ns < (p->tty ? TTY_EVERY_NS : LOG_EVERY_NS)) return;
    draw(p, done, now);
}

void progress_end(struct progress *p) {
    if (!p->drawn) return;
    if (p->tty) {
        draw(p, p->total, cli_time_ns());
        fputc('\n', stderr);
    } else {
        fprintf(stderr, "%s: done in %.1f s\n", p->label, (double)(cli_time_ns() - p->start_ns) * 1e-9);
    }
    fflush(stderr);
}

void progress_report(void *user, const char *label, uint64_t done, uint64_t total) {
    struct progress *bar = user;
    if (done == 0) progress_begin(bar, label, total);
    bar->total = total; /* a better count than the first */
    if (done > 0) progress_update(bar, done);
    if (done == total) progress_end(bar);
}
