#ifndef MOEX_TIMER_H
#define MOEX_TIMER_H
#include <stdint.h>
#include <time.h>
/* Monotonic time in nanoseconds. */
static inline int64_t time_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
static inline double time_s(void) { return (double)time_ns() * 1e-9; }
#endif
